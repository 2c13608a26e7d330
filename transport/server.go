package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/openapi"
	"github.com/agentpay/guard/transport/ratelimit"
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
	// Limits enforces the rate limits of spec 8.1 (see ratelimit_http.go).
	// Nil turns limiting off: no request is refused for its rate and no
	// RateLimit-* header is sent (for embedding and tools). The server
	// sweeps idle buckets from it every minute until Shutdown.
	Limits *ratelimit.Limiter
	// Pages, when set, are served beside the API (the owner console).
	Pages Pages
	// AccessLog logs a line for every answer at info level (see
	// requestlog.go). Answers of 5xx are logged, at error level, either way.
	AccessLog bool
	// AccessLogger, when set, takes the access log's info lines instead of
	// Logger (a logger that writes them in batches: see logbatch); the
	// 5xx lines go to Logger.
	AccessLogger *slog.Logger
	// Metrics, when set, counts every answer (the operator's metrics).
	Metrics RequestObserver
}

// RequestObserver counts answered requests. route is the pattern of the
// route that answered, "" when no route took the request.
type RequestObserver interface {
	ObserveRequest(method []byte, route string, status int, d time.Duration)
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
	// limits is Config.Limits; nil when limiting is off.
	limits *ratelimit.Limiter
	// sweeper is the goroutine that drops idle buckets from limits.
	sweeper *sweeper

	// lnMu guards stopping and listeners: what Shutdown needs to end a
	// Serve that fasthttp has not registered yet (see Serve).
	lnMu      sync.Mutex
	stopping  bool
	listeners []*closeOnceListener

	// waits is cancelled when Shutdown starts: a long poll then answers
	// at once with the spend as it is, instead of holding the stop for up
	// to its 20 seconds.
	waits       context.Context
	cancelWaits context.CancelFunc
}

// NewServer builds the API with its routes.
func NewServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AccessLogger == nil {
		cfg.AccessLogger = cfg.Logger
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 60 * time.Second // long polls wait up to 20 s
	}
	s := &Server{cfg: cfg, sys: cfg.System, log: cfg.Logger, ids: newRequestIDs(), limits: cfg.Limits}
	s.waits, s.cancelWaits = context.WithCancel(context.Background())
	r := router.New()
	// The request log names the route's pattern, never the raw path.
	r.SaveMatchedRoutePath = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// The spec has no 405: a method a path does not take is a route that
	// does not exist.
	r.HandleMethodNotAllowed = false
	// Nor does it have OPTIONS: the router would answer it by itself,
	// without the headers every answer carries. There is no browser
	// caller on another origin to preflight for.
	r.HandleOPTIONS = false
	s.routes(r)
	notFound := s.wrap(s.unlimited(func(c *call) *apiError {
		return badParam(codeRouteNotFound, "", "No route "+string(c.ctx.Method())+" "+string(c.ctx.Path())+" exists; see /v1/openapi.json.")
	}))
	r.NotFound = notFound
	if pages := cfg.Pages; pages != nil {
		pages.Register(r, s.page)
		pageNotFound := s.page(pages.NotFound)
		r.NotFound = func(ctx *fasthttp.RequestCtx) {
			if pages.Owns(ctx.Path()) {
				pageNotFound(ctx)
				return
			}
			notFound(ctx)
		}
	}
	headLikeGet(r)
	s.http = &fasthttp.Server{
		Handler:                       r.Handler,
		MaxRequestBodySize:            MaxBodyBytes,
		ReadTimeout:                   cfg.ReadTimeout,
		WriteTimeout:                  cfg.WriteTimeout,
		IdleTimeout:                   2 * time.Minute,
		DisableHeaderNamesNormalizing: false,
		// No Server header: it tells a caller nothing it needs, and it
		// is one header less to write on every answer.
		NoDefaultServerHeader: true,
		ErrorHandler:          s.transportError,
		ReadBufferSize:        16 << 10,
		CloseOnShutdown:       true,
		ConnState:             s.trackConn,
		Logger:                fasthttpLogger{cfg.Logger},
	}
	if s.limits != nil {
		s.sweeper = startSweeper(s.limits, sweepInterval)
	}
	return s
}

// routes registers every route. Public routes pass their rate limit and
// then check the version pin; keyed routes (authed, agentOnly, ownerOnly)
// authenticate and pass their rate limits before anything else. So every
// answer of either, a refused version pin included, carries the RateLimit
// headers. The limits after the handler are those a route passes on top
// of the per-key one (spec 8.1).
func (s *Server) routes(r *router.Router) {
	r.GET("/healthz", s.wrap(s.public(s.health)))
	r.GET("/.well-known/jwks.json", s.wrap(s.public(s.jwks)))
	r.GET("/v1/openapi.json", s.wrap(s.public(s.openapi)))

	r.POST("/v1/spends", s.wrap(s.agentOnly(s.spendsDaily(noQuery(s.createSpend)), ratelimit.Spends, ratelimit.SpendsDaily)))
	r.POST("/v1/spends/check", s.wrap(s.agentOnly(noQuery(s.checkSpend), ratelimit.Check)))
	r.GET("/v1/spends", s.wrap(s.authed(s.listSpends)))
	r.GET("/v1/events", s.wrap(s.authed(s.listEvents)))
	r.GET("/v1/spends/{id}", s.wrap(s.authed(s.getSpend)))
	r.POST("/v1/spends/{id}/cancel", s.wrap(s.agentOnly(noQuery(s.cancelSpend))))
	r.GET("/v1/balance", s.wrap(s.agentOnly(s.balance)))
	r.GET("/v1/policy", s.wrap(s.agentOnly(s.agentPolicy)))
	r.GET("/v1/me", s.wrap(s.authed(s.me)))
	r.GET("/v1/receipts", s.wrap(s.authed(s.listReceipts)))
	r.GET("/v1/receipts/{id}", s.wrap(s.authed(noQuery(s.receipt))))
	r.GET("/v1/approvals/{id}", s.wrap(s.authed(noQuery(s.getApproval))))

	r.POST("/v1/agents", s.wrap(s.ownerOnly(noQuery(s.createAgent), ratelimit.AdminWrites)))
	r.GET("/v1/agents", s.wrap(s.ownerOnly(s.listAgents)))
	r.GET("/v1/agents/{id}", s.wrap(s.ownerOnly(noQuery(s.getAgent))))
	r.POST("/v1/agents/{id}", s.wrap(s.ownerOnly(noQuery(s.renameAgent), ratelimit.AdminWrites)))
	// A static segment wins over {id} in this router, and agent ids never
	// look like it (agt_ + hex).
	r.POST("/v1/agents/pause_all", s.wrap(s.ownerOnly(noQuery(s.pauseAllAgents), ratelimit.AdminWrites)))
	r.POST("/v1/agents/{id}/pause", s.wrap(s.ownerOnly(noQuery(s.agentAction(actors.ActionPause)), ratelimit.AdminWrites)))
	r.POST("/v1/agents/{id}/resume", s.wrap(s.ownerOnly(noQuery(s.agentAction(actors.ActionResume)), ratelimit.AdminWrites)))
	r.POST("/v1/agents/{id}/archive", s.wrap(s.ownerOnly(noQuery(s.agentAction(actors.ActionArchive)), ratelimit.AdminWrites)))
	r.GET("/v1/keys", s.wrap(s.ownerOnly(s.listKeys)))
	r.POST("/v1/keys/{id}/revoke", s.wrap(s.ownerOnly(noQuery(s.revokeKey), ratelimit.AdminWrites)))
	r.POST("/v1/agents/{id}/keys", s.wrap(s.ownerOnly(s.keyChange(noQuery(s.createAgentKey)), ratelimit.AdminWrites, ratelimit.KeyChanges)))
	r.GET("/v1/agents/{id}/policy", s.wrap(s.ownerOnly(noQuery(s.ownerPolicy))))
	r.POST("/v1/agents/{id}/policy", s.wrap(s.ownerOnly(noQuery(s.publishPolicy), ratelimit.AdminWrites)))
	r.POST("/v1/agents/{id}/destinations", s.wrap(s.ownerOnly(noQuery(s.addDestination), ratelimit.AdminWrites)))
	r.DELETE("/v1/agents/{id}/destinations/{list}/{pattern}", s.wrap(s.ownerOnly(noQuery(s.removeDestination), ratelimit.AdminWrites)))
	r.POST("/v1/keys/{id}/rotate", s.wrap(s.ownerOnly(s.keyChange(noQuery(s.rotateKey)), ratelimit.AdminWrites, ratelimit.KeyChanges)))
	r.POST("/v1/owner_keys", s.wrap(s.ownerOnly(s.keyChange(noQuery(s.createOwnerKey)), ratelimit.AdminWrites, ratelimit.KeyChanges)))
	r.GET("/v1/funding", s.wrap(s.ownerOnly(s.getFunding)))
	r.POST("/v1/funding", s.wrap(s.ownerOnly(noQuery(s.updateFunding), ratelimit.AdminWrites)))
	r.POST("/v1/test/deposits", s.wrap(s.practiceControl(noQuery(s.testDeposit))))
	r.GET("/v1/test/clock", s.wrap(s.practiceControl(noQuery(s.getTestClock))))
	r.POST("/v1/test/clock/advance", s.wrap(s.practiceControl(noQuery(s.advanceTestClock))))
	r.POST("/v1/test/reset", s.wrap(s.practiceControl(noQuery(s.resetPractice))))
	r.GET("/v1/agents/{id}/policy_changes", s.wrap(s.ownerOnly(noQuery(s.listPolicyChanges))))
	r.GET("/v1/policy_changes/{id}", s.wrap(s.ownerOnly(noQuery(s.getPolicyChange))))
	r.POST("/v1/policy_changes/{id}/cancel", s.wrap(s.ownerOnly(noQuery(s.cancelPolicyChange), ratelimit.AdminWrites)))
	s.webhookRoutes(r)
	s.notificationRoutes(r)
}

// headLikeGet registers HEAD on every GET route, with the same handler:
// HTTP requires a general-purpose server to answer HEAD as it answers GET,
// headers included, and load balancers probe /healthz with it. fasthttp
// leaves the body out of the answer to a HEAD request.
func headLikeGet(r *router.Router) {
	for _, path := range r.List()[fasthttp.MethodGet] {
		// Lookup's second result is about trailing slashes; a miss is a
		// nil handler.
		h, _ := r.Lookup(fasthttp.MethodGet, path, &fasthttp.RequestCtx{})
		if h == nil {
			panic("transport: GET " + path + " is listed but not found")
		}
		r.HEAD(path, h)
	}
}

// Handler is the whole API as one fasthttp handler: what Serve runs for
// each request (in-process benchmarks call it without a connection).
func (s *Server) Handler() fasthttp.RequestHandler { return s.http.Handler }

// Serve serves on ln until Shutdown.
//
// Serve returns, having closed ln, when Shutdown is called before it or
// while it starts. fasthttp's own Shutdown closes only the listeners its
// Serve has registered, and returns at once when there are none, so a stop
// signal that came right after start would otherwise leave Serve accepting
// connections for a service that is gone, and its caller waiting forever.
func (s *Server) Serve(ln net.Listener) error {
	l := &closeOnceListener{Listener: ln}
	s.lnMu.Lock()
	if s.stopping {
		s.lnMu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, l)
	s.lnMu.Unlock()
	return s.http.Serve(l)
}

// closeOnceListener lets both Shutdown and fasthttp close a listener: the
// second Close is a no-op, so fasthttp's Shutdown sees no error and still
// waits for the connections in flight.
type closeOnceListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *closeOnceListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}

// Shutdown stops accepting connections and waits for in-flight requests.
// fasthttp closes idle keep-alive connections itself but waits for a
// connection that never carried a request until its read timeout (it
// counts such a connection as active), so a client that dialled a spare
// connection would hold the stop that long. Connections that never reached
// a handler are closed here: they have no request to finish.
//
// Shutdown also stops the sweeper of the rate limiter.
func (s *Server) Shutdown(ctx context.Context) error {
	defer s.sweeper.stop()
	// Stop accepting first, on every listener given to Serve, registered
	// with fasthttp or not (see Serve).
	s.lnMu.Lock()
	s.stopping = true
	listeners := s.listeners
	s.lnMu.Unlock()
	for _, l := range listeners {
		_ = l.Close()
	}
	s.cancelWaits()
	// Shortly before the deadline, payments still waiting for their vendor
	// are answered with what is recorded (approved, the payment on its
	// way; a restart sends the same authorization again or verifies it),
	// so no request is cut off without an answer.
	answerAt := time.Time{}
	if d, ok := ctx.Deadline(); ok {
		answerAt = d.Add(-min(2*time.Second, time.Until(d)/4))
	}
	done := make(chan error, 1)
	go func() { done <- s.http.ShutdownWithContext(ctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.closeUnused()
		if !answerAt.IsZero() && time.Now().After(answerAt) {
			answerAt = time.Time{}
			if s.sys != nil {
				s.sys.AnswerInFlight()
			}
		}
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

// markServed notes that a connection carried a request. Only its first
// request has anything to note.
func (s *Server) markServed(ctx *fasthttp.RequestCtx) {
	if ctx.ConnRequestNum() > 1 {
		return
	}
	if v, ok := s.conns.Load(ctx.Conn()); ok {
		if ci := v.(*connInfo); !ci.served.Load() {
			ci.served.Store(true)
		}
	}
}

// page wraps the console's handlers: it marks their connections as served
// (see Shutdown), and gives their answers the headers every answer of the
// server carries, Service-Version (spec 9.1) and a Request-Id.
func (s *Server) page(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		s.markServed(ctx)
		reqID := s.ids.next()
		defer s.recoverAnswer(ctx, reqID, start)
		ctx.Response.Header.SetCanonical(hdrRequestID, []byte(reqID))
		ctx.Response.Header.SetCanonical(hdrServiceVersion, apiVersionBytes)
		h(ctx)
		s.logAnswer(ctx, reqID, start, nil, nil)
		s.observe(ctx, start)
	}
}

// observe counts an answer in the operator's metrics, when they are on.
func (s *Server) observe(ctx *fasthttp.RequestCtx, start time.Time) {
	if m := s.cfg.Metrics; m != nil {
		route, _ := ctx.UserValue(router.MatchedRoutePathParam).(string)
		m.ObserveRequest(ctx.Method(), route, ctx.Response.StatusCode(), time.Since(start))
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
	// rate is the decision the RateLimit headers report, once a limit was
	// passed (see ratelimit_http.go).
	rate     ratelimit.Decision
	rateName ratelimit.Name
	hasRate  bool
}

type handler func(c *call) *apiError

// wrap sets the headers every response carries and turns a returned error
// into the error body. It checks nothing itself: h starts with public or
// one of the keyed wrappers, which check the version pin each at its place.
func (s *Server) wrap(h handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		s.markServed(ctx)
		c := &call{ctx: ctx, reqID: s.ids.next()}
		defer s.recoverAnswer(ctx, c.reqID, start)
		// The names are written as they go on the wire: no normalizing
		// per request.
		ctx.Response.Header.SetCanonical(hdrRequestID, []byte(c.reqID))
		ctx.Response.Header.SetCanonical(hdrServiceVersion, apiVersionBytes)
		err := h(c)
		if err != nil {
			writeError(ctx, c.reqID, err)
		}
		writeRate(c)
		var who *actors.Principal
		if c.who.KeyID != "" {
			who = &c.who
		}
		s.logAnswer(ctx, c.reqID, start, who, err)
		s.observe(ctx, start)
	}
}

var (
	hdrRequestID      = []byte("Request-Id")
	hdrServiceVersion = []byte("Service-Version")
	apiVersionBytes   = []byte(APIVersion)
)

// checkVersion refuses a Service-Version pin this server does not speak.
func checkVersion(c *call) *apiError {
	// PeekAll reuses the header's own buffer: no allocation per request.
	if n := len(c.ctx.Request.Header.PeekAll("Service-Version")); n > 1 {
		// Which one would count is the order they came in, which a proxy
		// may change: the caller says which version it speaks, once.
		return badParam(codeHeaderInvalid, "Service-Version",
			fmt.Sprintf("Send one Service-Version header; this request has %d.", n))
	}
	if v := c.ctx.Request.Header.Peek("Service-Version"); len(v) > 0 && string(v) != APIVersion {
		return badParam(codeUnknownVersion, "Service-Version",
			"Service-Version "+clip(string(v), 40)+" is not known; use "+APIVersion+" or omit the header.")
	}
	return nil
}

// public is a route that needs no key. It passes the Public limit, per
// client IP, before anything else, so that every answer of it carries the
// RateLimit headers (spec 4), a refused version pin included.
func (s *Server) public(h handler) handler {
	h = s.unlimited(h)
	return func(c *call) *apiError {
		if err := s.limitIP(c, ratelimit.Public); err != nil {
			return err
		}
		return h(c)
	}
}

// unlimited is public without a rate limit: the answer to a path that is
// no route, which names no route whose limit it could count against.
func (s *Server) unlimited(h handler) handler {
	return func(c *call) *apiError {
		if err := checkVersion(c); err != nil {
			return err
		}
		if bodyTooLarge(c) {
			return errBodyTooLarge
		}
		return h(c)
	}
}

// bodyTooLargeKey marks a request whose body went over MaxBodyBytes; see
// transportError.
const bodyTooLargeKey = "guard.body_too_large"

var errBodyTooLarge = badParam(codeBodyTooLarge, "", "The request body is larger than 16 KiB; send a smaller body.")

// bodyTooLarge reports whether the request's body was cut at MaxBodyBytes:
// its handler must not see it.
func bodyTooLarge(c *call) bool { return c.ctx.UserValue(bodyTooLargeKey) != nil }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// authed requires a valid key of any kind; limits are the route's rate
// limits on top of the per-key one.
func (s *Server) authed(h handler, limits ...ratelimit.Name) handler {
	return s.keyed("", "", h, limits)
}

// agentOnly requires an agent key.
func (s *Server) agentOnly(h handler, limits ...ratelimit.Name) handler {
	return s.keyed(actors.KindAgent, "This operation needs an agent key; owner keys administer and never pay.", h, limits)
}

// ownerOnly requires an owner key.
func (s *Server) ownerOnly(h handler, limits ...ratelimit.Name) handler {
	return s.keyed(actors.KindOwner, ownerKeyNeeded, h, limits)
}

const ownerKeyNeeded = "This operation needs an owner key; agent keys can never administer."

// practiceControl is a practice-environment control (/v1/test/*): it takes
// a practice owner key and has its own limit. For a live key of either kind
// the route does not exist (spec 4.1, 7.1): 404 comes before the key kind
// is looked at, since a 403 would tell a live agent key that it does.
func (s *Server) practiceControl(h handler) handler {
	return s.keyedIn(practiceOnly, actors.KindOwner, ownerKeyNeeded, h, []ratelimit.Name{ratelimit.PracticeControl})
}

// keyed runs the steps every keyed route shares, in this order:
// authenticate (a failure counts against the caller's IP), the per-key
// limit, the version pin, the key kind, the route's own limits, and only
// then h. Nothing of h's work happens for a refused request: a refused
// spend creates nothing and leaves its Idempotency-Key unused.
func (s *Server) keyed(kind, wrongKind string, h handler, limits []ratelimit.Name) handler {
	return s.keyedIn(nil, kind, wrongKind, h, limits)
}

// keyedIn is keyed with a check of the key's environment, when env is not
// nil, just before the key kind.
func (s *Server) keyedIn(env func(*call) *apiError, kind, wrongKind string, h handler, limits []ratelimit.Name) handler {
	return func(c *call) *apiError {
		p, err := s.authenticate(c)
		if err != nil {
			return err
		}
		c.who = p
		if err := s.limit(c, ratelimit.Key); err != nil {
			return err
		}
		if err := checkVersion(c); err != nil {
			return err
		}
		if env != nil {
			if err := env(c); err != nil {
				return err
			}
		}
		if kind != "" && p.Kind != kind {
			return badParam(codeKeyKindNotAllowed, "", wrongKind)
		}
		if err := s.limit(c, limits...); err != nil {
			return err
		}
		if bodyTooLarge(c) {
			return errBodyTooLarge
		}
		return h(c)
	}
}

// authenticate finds the key of the Authorization header. A missing or
// invalid key is counted against the client's IP (spec 5.6); once that
// IP's allowance is used up the answer is 429 instead of 401.
// hdrAuthorization is the header name in the form fasthttp stores it.
var hdrAuthorization = []byte("Authorization")

func (s *Server) authenticate(c *call) (actors.Principal, *apiError) {
	// Read in place: the secret is hashed, never kept.
	auth := c.ctx.Request.Header.PeekBytes(hdrAuthorization)
	if n := len(c.ctx.Request.Header.PeekAll("Authorization")); n > 1 {
		// A proxy and this service could each read a different one.
		return actors.Principal{}, badParam(codeHeaderInvalid, "Authorization",
			fmt.Sprintf("Send one Authorization header; this request has %d.", n))
	}
	// The scheme is case-insensitive (RFC 9110 11.1).
	scheme, secret, ok := bytes.Cut(auth, []byte(" "))
	if !ok || !bytes.EqualFold(scheme, []byte("Bearer")) || len(secret) > 200 {
		return actors.Principal{}, s.invalidKey(c, &apiError{code: codeInvalidAPIKey, message: actors.ErrInvalidKey.Message})
	}
	p, err := s.sys.AuthenticateBytes(secret)
	if err != nil {
		e := fromActors(err)
		if e.code == codeInvalidAPIKey {
			e = s.invalidKey(c, e)
		}
		return actors.Principal{}, e
	}
	return p, nil
}

// transportError answers errors fasthttp meets before a handler runs.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) && ctx.Request.Header.ContentLength() > MaxBodyBytes &&
		(s.cfg.Pages == nil || !s.cfg.Pages.Owns(ctx.Path())) {
		// A Content-Length over the limit is refused before any of the
		// body is read, with the headers kept whole. So the request takes
		// its route as far as its handler: authentication and rate limits
		// count it, and the 413 carries the route's RateLimit headers like
		// any other answer (spec 8.1). The handler never runs on the
		// missing body: public and keyedIn answer 413 in its place.
		// A chunked body found too long while being read has had its
		// request reset by then, so it gets the plain 413 below.
		ctx.SetUserValue(bodyTooLargeKey, true)
		s.http.Handler(ctx)
		return
	}
	start := time.Now()
	reqID := s.ids.next()
	ctx.Response.Header.Set("Request-Id", reqID)
	ctx.Response.Header.Set("Service-Version", APIVersion)
	answer := s.connectionError(ctx, err)
	writeError(ctx, reqID, answer)
	// Answered like any request, so logged and counted like one; but not
	// a connection closed for time before a request's headers arrived
	// (mostly a client's spare connection that never sent a byte): that
	// was no request at all.
	if answer.code == codeRequestTimeout && len(ctx.Request.Header.RawHeaders()) == 0 {
		return
	}
	s.logAnswer(ctx, reqID, start, nil, answer)
	s.observe(ctx, start)
}

// connectionError is the answer to a request fasthttp could not read.
func (s *Server) connectionError(ctx *fasthttp.RequestCtx, err error) *apiError {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		return errBodyTooLarge
	}
	// The read deadline passed: on a connection that never sent a byte
	// (a client's spare connection), or mid-request. That is no fault of
	// the request's form, so not a 400: 408 says the connection is closed
	// for time, which a client may send again on a new connection (Go's
	// client drops a 408 on an idle connection without a word). Nothing
	// of a request cut short was acted on.
	if errors.Is(err, os.ErrDeadlineExceeded) {
		ctx.SetConnectionClose()
		return &apiError{code: codeRequestTimeout, message: fmt.Sprintf(
			"The request was not received in full within %v; nothing was done. Send it again on a new connection.", s.cfg.ReadTimeout)}
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		return badParam(codeHeaderInvalid, "", "The request headers are too large; send shorter headers.")
	}
	// Anything else is a request that is not HTTP/1.1 as written: a header
	// line without a colon, a Content-Length that is not a number, a broken
	// chunk. fasthttp's error quotes the raw request, Authorization header
	// and all, so the answer names the fault in general terms only.
	return badParam(string(actors.CodeInvalidRequest), "",
		"The request is not well-formed HTTP/1.1: a header line, the Content-Length or the chunked body could not be parsed. Send a well-formed request.")
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
	// Public keys: any page may fetch them, and a verifier may keep them
	// a few minutes. The set changes only at a restart after a rotation,
	// and a verifier meeting an unknown kid fetches it again.
	c.ctx.Response.Header.Set("Access-Control-Allow-Origin", "*")
	c.ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
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
