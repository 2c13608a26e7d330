package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/openapi"
)

// APIVersion is the version this server speaks (spec part 9).
const APIVersion = actors.APIVersion

// MaxBodyBytes is the request body limit (spec 8.2).
const MaxBodyBytes = 16 << 10

// Config configures the HTTP API.
type Config struct {
	System *actors.System
	// JWKS returns the public receipt keys document.
	JWKS   func() []byte
	Logger *slog.Logger
	// Practice allows http:// resource URLs for practice keys.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
}

// Server is the REST API.
type Server struct {
	cfg  Config
	sys  *actors.System
	log  *slog.Logger
	ids  *requestIDs
	http *fasthttp.Server
	// conns maps each open connection to its state (for Shutdown).
	conns sync.Map
}

// NewServer builds the API with its routes.
func NewServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 60 * time.Second // long polls wait up to 20 s
	}
	s := &Server{cfg: cfg, sys: cfg.System, log: cfg.Logger, ids: newRequestIDs()}
	r := router.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// The spec has no 405: a method a path does not take is a route that
	// does not exist.
	r.HandleMethodNotAllowed = false
	s.routes(r)
	r.NotFound = s.wrap(func(c *call) *apiError {
		return badParam(codeRouteNotFound, "", "No route "+string(c.ctx.Method())+" "+string(c.ctx.Path())+" exists; see /v1/openapi.json.")
	})
	s.http = &fasthttp.Server{
		Handler:                       r.Handler,
		Name:                          "guard",
		MaxRequestBodySize:            MaxBodyBytes,
		ReadTimeout:                   cfg.ReadTimeout,
		WriteTimeout:                  cfg.WriteTimeout,
		IdleTimeout:                   2 * time.Minute,
		DisableHeaderNamesNormalizing: false,
		NoDefaultServerHeader:         false,
		ErrorHandler:                  s.transportError,
		ReadBufferSize:                16 << 10,
		CloseOnShutdown:               true,
		ConnState:                     s.trackConn,
		Logger:                        fasthttpLogger{cfg.Logger},
	}
	return s
}

func (s *Server) routes(r *router.Router) {
	r.GET("/healthz", s.wrap(s.health))
	r.GET("/.well-known/jwks.json", s.wrap(s.jwks))
	r.GET("/v1/openapi.json", s.wrap(s.openapi))

	r.POST("/v1/spends", s.wrap(s.agentOnly(s.createSpend)))
	r.POST("/v1/spends/check", s.wrap(s.agentOnly(s.checkSpend)))
	r.GET("/v1/spends", s.wrap(s.authed(s.listSpends)))
	r.GET("/v1/events", s.wrap(s.authed(s.listEvents)))
	r.GET("/v1/spends/{id}", s.wrap(s.authed(s.getSpend)))
	r.POST("/v1/spends/{id}/cancel", s.wrap(s.agentOnly(s.cancelSpend)))
	r.GET("/v1/balance", s.wrap(s.agentOnly(s.balance)))
	r.GET("/v1/policy", s.wrap(s.agentOnly(s.agentPolicy)))
	r.GET("/v1/me", s.wrap(s.authed(s.me)))
	r.GET("/v1/receipts/{id}", s.wrap(s.authed(s.receipt)))
	r.GET("/v1/approvals/{id}", s.wrap(s.authed(s.getApproval)))

	r.POST("/v1/agents", s.wrap(s.ownerOnly(s.createAgent)))
	r.GET("/v1/agents/{id}", s.wrap(s.ownerOnly(s.getAgent)))
	r.POST("/v1/agents/{id}/keys", s.wrap(s.ownerOnly(s.createAgentKey)))
	r.GET("/v1/agents/{id}/policy", s.wrap(s.ownerOnly(s.ownerPolicy)))
	r.POST("/v1/agents/{id}/policy", s.wrap(s.ownerOnly(s.publishPolicy)))
	r.POST("/v1/agents/{id}/destinations", s.wrap(s.ownerOnly(s.addDestination)))
	r.DELETE("/v1/agents/{id}/destinations/{list}/{pattern}", s.wrap(s.ownerOnly(s.removeDestination)))
}

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.http.Serve(ln) }

// Shutdown stops accepting connections and waits for in-flight requests.
// fasthttp closes idle keep-alive connections itself but waits for a
// connection that never carried a request until its read timeout (it
// counts such a connection as active), so a client that dialled a spare
// connection would hold the stop that long. Connections that never reached
// a handler are closed here: they have no request to finish.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.http.ShutdownWithContext(ctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.closeUnused()
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}

// connInfo is what Shutdown needs to know of an open connection.
type connInfo struct{ served atomic.Bool }

// trackConn follows connections so Shutdown can find unused ones.
func (s *Server) trackConn(c net.Conn, st fasthttp.ConnState) {
	switch st {
	case fasthttp.StateNew:
		s.conns.Store(c, &connInfo{})
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		s.conns.Delete(c)
	}
}

// markServed notes that a connection carried a request.
func (s *Server) markServed(ctx *fasthttp.RequestCtx) {
	if v, ok := s.conns.Load(ctx.Conn()); ok {
		if ci := v.(*connInfo); !ci.served.Load() {
			ci.served.Store(true)
		}
	}
}

func (s *Server) closeUnused() {
	s.conns.Range(func(k, v any) bool {
		if !v.(*connInfo).served.Load() {
			_ = k.(net.Conn).Close()
		}
		return true
	})
}

// call is one request in flight.
type call struct {
	ctx   *fasthttp.RequestCtx
	reqID string
	who   actors.Principal
}

type handler func(c *call) *apiError

// wrap sets the headers every response carries and turns a returned error
// into the error body.
func (s *Server) wrap(h handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		s.markServed(ctx)
		c := &call{ctx: ctx, reqID: s.ids.next()}
		ctx.Response.Header.Set("Request-Id", c.reqID)
		ctx.Response.Header.Set("Service-Version", APIVersion)
		if v := ctx.Request.Header.Peek("Service-Version"); len(v) > 0 && string(v) != APIVersion {
			writeError(ctx, c.reqID, badParam(codeUnknownVersion, "Service-Version",
				"Service-Version "+clip(string(v), 40)+" is not known; use "+APIVersion+" or omit the header."))
			return
		}
		if err := h(c); err != nil {
			writeError(ctx, c.reqID, err)
		}
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// authed requires a valid key of any kind.
func (s *Server) authed(h handler) handler {
	return func(c *call) *apiError {
		auth := string(c.ctx.Request.Header.Peek("Authorization"))
		// The scheme is case-insensitive (RFC 9110 11.1).
		scheme, secret, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || len(secret) > 200 {
			return &apiError{code: codeInvalidAPIKey, message: actors.ErrInvalidKey.Message}
		}
		p, err := s.sys.Authenticate(secret)
		if err != nil {
			return fromActors(err)
		}
		c.who = p
		return h(c)
	}
}

func (s *Server) agentOnly(h handler) handler {
	return s.authed(func(c *call) *apiError {
		if c.who.Kind != actors.KindAgent {
			return badParam(codeKeyKindNotAllowed, "", "This operation needs an agent key; owner keys administer and never pay.")
		}
		return h(c)
	})
}

func (s *Server) ownerOnly(h handler) handler {
	return s.authed(func(c *call) *apiError {
		if c.who.Kind != actors.KindOwner {
			return badParam(codeKeyKindNotAllowed, "", "This operation needs an owner key; agent keys can never administer.")
		}
		return h(c)
	})
}

// transportError answers errors fasthttp meets before a handler runs.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	reqID := s.ids.next()
	ctx.Response.Header.Set("Request-Id", reqID)
	ctx.Response.Header.Set("Service-Version", APIVersion)
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(ctx, reqID, badParam(codeBodyTooLarge, "", "The request body is larger than 16 KiB; send a smaller body."))
		return
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		writeError(ctx, reqID, badParam(codeHeaderInvalid, "", "The request headers are too large; send shorter headers."))
		return
	}
	writeError(ctx, reqID, badParam(codeInvalidJSON, "", "The request could not be read: "+err.Error()))
}

func (s *Server) health(c *call) *apiError {
	c.ctx.SetStatusCode(200)
	c.ctx.SetContentType("application/json")
	c.ctx.SetBodyString(`{"status":"ok"}`)
	return nil
}

func (s *Server) openapi(c *call) *apiError {
	c.ctx.SetStatusCode(200)
	c.ctx.SetContentType("application/json")
	c.ctx.SetBody(openapi.Document())
	return nil
}

func (s *Server) jwks(c *call) *apiError {
	c.ctx.SetStatusCode(200)
	c.ctx.SetContentType("application/json")
	c.ctx.SetBody(s.cfg.JWKS())
	return nil
}

// requestContext bounds a handler's wait on the actors.
func requestContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// fasthttpLogger sends fasthttp's own messages (a client that sent a body
// over the limit, a reset connection) to the service log at debug level:
// they are about clients, already answered, and would flood stderr.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "http")
}
