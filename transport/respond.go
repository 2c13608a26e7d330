package transport

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/internal/fastjson"
)

// requestIDs are "req_" + a per-process random prefix + a counter: unique,
// cheap, and never a secret.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return &requestIDs{prefix: "req_" + hex.EncodeToString(b[:])}
}

func (r *requestIDs) next() string {
	var b [40]byte
	return string(strconv.AppendUint(append(b[:0], r.prefix...), r.n.Add(1)+1<<40, 36))
}

// writeJSON encodes v with the per-response fields added.
func writeJSON(ctx *fasthttp.RequestCtx, status int, reqID string, v any) {
	b, err := fastjson.Marshal(v)
	if err != nil {
		writeError(ctx, reqID, &apiError{code: "internal_error", message: "The response could not be encoded."})
		return
	}
	writeObject(ctx, status, reqID, b, nil)
}

// writeObject writes a stored JSON object, splicing in request_id and any
// extra fields before its closing brace, so stored spends are served without
// decoding them again.
func writeObject(ctx *fasthttp.RequestCtx, status int, reqID string, obj []byte, extra []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	// Straight into the response's own (pooled) body buffer: no copy of
	// the object of our own.
	ctx.SetBody(obj[:len(obj)-1])
	if len(obj) > 2 {
		ctx.Response.AppendBodyString(",")
	}
	ctx.Response.AppendBody(extra)
	var tail [80]byte
	t := append(tail[:0], `"request_id":`...)
	t = fastjson.AppendString(t, reqID)
	ctx.Response.AppendBody(append(t, '}'))
}
