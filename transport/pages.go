package transport

import (
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
)

// Pages are HTML pages for people (the owner console) served on the API's
// listener. They are not part of the JSON API: they authenticate with a
// session cookie rather than a key, answer HTML, and are left out of the
// OpenAPI document.
type Pages interface {
	// Register adds the pages' routes, each handler passed through
	// track, which lets a graceful stop know the connection is in use.
	Register(r *router.Router, track func(fasthttp.RequestHandler) fasthttp.RequestHandler)
	// Owns reports whether an unknown path lies under the pages, so that
	// it is answered by NotFound (an HTML page) rather than a JSON error.
	Owns(path []byte) bool
	// NotFound answers a path under the pages that no route matched.
	NotFound(ctx *fasthttp.RequestCtx)
}

// StatusOf is the HTTP status of an error from the actors, by the one
// code table of errors.go, so that pages answer what the API would.
func StatusOf(err error) int {
	if cls, ok := errorTable[string(actors.AsError(err).Code)]; ok {
		return cls.status
	}
	return 500
}
