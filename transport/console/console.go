package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport"
	"github.com/agentpay/guard/transport/approvallink"
	"github.com/agentpay/guard/transport/ratelimit"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Default session timeouts.
const (
	DefaultIdleTimeout     = 30 * time.Minute
	DefaultSessionLifetime = 12 * time.Hour
)

// Config wires the console.
type Config struct {
	System *actors.System
	// Links verifies the signed approval links sent by notifications.
	Links *approvallink.Signer
	// Limits is the service's rate limiter; nil turns limiting off.
	Limits *ratelimit.Limiter
	// JWKS returns the public receipt keys, to verify receipts.
	JWKS func() []byte
	// URL is console_url: its path is where the pages live; an https URL
	// makes the cookies Secure.
	URL    string
	Logger *slog.Logger
	// IdleTimeout ends a session unused this long; SessionLifetime ends
	// any session this long after sign-in. Both on the service clock.
	IdleTimeout     time.Duration
	SessionLifetime time.Duration
}

// Console serves the owner console pages.
type Console struct {
	cfg    Config
	sys    *actors.System
	log    *slog.Logger
	base   string // URL path prefix, like "/console"
	secure bool   // cookies only over https
	origin string // scheme://host of console_url
	pages  map[string]*template.Template
	// key signs the sign-in and link form tokens. It is made at start and
	// kept in memory only: a restart merely makes an open sign-in form or
	// link confirmation page ask to be reloaded.
	key []byte
	// deviceKey signs the known-browser cookie. It comes from the
	// approval link key, which is kept, so browsers stay known across
	// restarts.
	deviceKey []byte
	// dummyHash is verified against when an e-mail is unknown, so that a
	// sign-in takes as long whether the owner exists or not. Made on first
	// need: hashing costs 64 MiB and tens of milliseconds.
	dummyHash func() string
}

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.System == nil || cfg.Links == nil || cfg.JWKS == nil {
		return nil, errors.New("console: Config.System, Links and JWKS are required")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("console: console_url %q must be an absolute http(s) URL", cfg.URL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = DefaultSessionLifetime
	}
	c := &Console{cfg: cfg, sys: cfg.System, log: cfg.Logger, base: strings.TrimSuffix(u.Path, "/"),
		secure: u.Scheme == "https", origin: u.Scheme + "://" + u.Host, key: make([]byte, 32),
		deviceKey: cfg.Links.Derive("console known browser")}
	if _, err := rand.Read(c.key); err != nil {
		return nil, err
	}
	if c.base == "/v1" || strings.HasPrefix(c.base, "/v1/") {
		return nil, fmt.Errorf("console: console_url path %q would shadow the API", u.Path)
	}
	if c.pages, err = parsePages(c.base); err != nil {
		return nil, err
	}
	c.dummyHash = sync.OnceValue(func() string { return HashPassword("unknown e-mails are compared against this") })
	return c, nil
}

var _ transport.Pages = (*Console)(nil)

// Register adds the console routes.
func (c *Console) Register(r *router.Router, track func(fasthttp.RequestHandler) fasthttp.RequestHandler) {
	b := c.base
	get := func(path string, h handler) { r.GET(b+path, track(c.serve(h))) }
	post := func(path string, h handler) { r.POST(b+path, track(c.serve(h))) }
	r.GET(b+"/static/console.css", track(c.stylesheet))
	// The base itself ("/console", the address the service prints at
	// start) is answered by NotFound: this router takes "/console" and
	// "/console/" for one path with a trailing-slash variant, and keeps a
	// handler for only one of them.
	get("/", c.home)
	get("/signin", c.signInPage)
	post("/signin", c.signIn)
	post("/signout", c.changes(c.signOut))
	post("/env", c.changes(c.switchEnv))
	get("/password", c.signedIn(c.passwordPage))
	post("/password", c.changes(c.passwordSet))
	get("/approvals", c.signedIn(c.inbox))
	get("/approvals/{id}", c.approvalPage)
	post("/approvals/{id}/decide", c.decide)
	get("/spends", c.signedIn(c.spendList))
	get("/spends/{id}", c.signedIn(c.spendPage))
	get("/agents", c.signedIn(c.agentList))
	get("/agents/{id}", c.signedIn(c.agentPage))
	post("/agents/{id}/pause", c.changes(c.agentAction(actors.ActionPause)))
	post("/agents/{id}/resume", c.changes(c.agentAction(actors.ActionResume)))
	post("/agents/{id}/policy/preview", c.changes(c.policyPreview))
	post("/agents/{id}/policy", c.changes(c.policyPublish))
	post("/policy_changes/{id}/cancel", c.changes(c.policyCancel))
	get("/keys", c.signedIn(c.keyList))
	post("/keys", c.changes(c.keyCreate))
	post("/owner_keys", c.changes(c.ownerKeyCreate))
	get("/keys/{id}/revoke", c.signedIn(c.keyRevokeConfirm))
	post("/keys/{id}/revoke", c.changes(c.keyRevoke))
	post("/keys/{id}/rotate", c.changes(c.keyRotate))
	get("/balance", c.signedIn(c.balancePage))
	get("/channels", c.signedIn(c.channelList))
	post("/channels/{id}/confirm", c.changes(c.channelConfirm))
	post("/channels/{id}/remove", c.changes(c.channelRemove))
}

// Owns reports whether path lies under the console.
func (c *Console) Owns(path []byte) bool {
	if c.base == "" {
		return false // the API's own not-found answers every path then
	}
	return string(path) == c.base || bytes.HasPrefix(path, []byte(c.base+"/"))
}

// NotFound answers an unknown path under the console.
func (c *Console) NotFound(ctx *fasthttp.RequestCtx) {
	if c.base != "" && string(ctx.Path()) == c.base && (ctx.IsGet() || ctx.IsHead()) {
		c.serve(c.home)(ctx)
		return
	}
	c.serve(func(r *request) error {
		return &pageError{status: 404, title: "Page not found", message: "There is no console page at this address."}
	})(ctx)
}

func (c *Console) stylesheet(ctx *fasthttp.RequestCtx) {
	b, _ := assets.ReadFile("static/console.css")
	ctx.SetContentType("text/css; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "private, max-age=300")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBody(b)
}

// request is one page request.
type request struct {
	ctx  *fasthttp.RequestCtx
	sess *session // nil when not signed in
	// who is the signed-in owner acting in the session's environment.
	who   actors.Principal
	owner actors.Owner
	// ended says why a session cookie no longer works ("idle",
	// "lifetime", "gone"), for the sign-in page.
	ended string
}

type handler func(r *request) error

// pageError is an answer other than the page: a status and a message for
// the person.
type pageError struct {
	status  int
	title   string
	message string
	env     actors.Env // the band to show, when known
}

// errorData is what the error page shows.
type errorData struct{ Title, Message string }

func (e *pageError) Error() string { return e.title + ": " + e.message }

// fromActors turns an actors error into a page error with the status the
// API would answer.
func fromActors(err error, title string) *pageError {
	return &pageError{status: transport.StatusOf(err), title: title, message: actors.AsError(err).Message}
}

// redirect is an answer that sends the browser elsewhere (303 See Other).
type redirect string

func (r redirect) Error() string { return "redirect to " + string(r) }

// serve sets the headers every console answer carries, finds the session,
// runs h, and renders an error or redirect it returns.
func (c *Console) serve(h handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		hdr := &ctx.Response.Header
		hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "same-origin")
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
		r := &request{ctx: ctx}
		err := c.loadSession(r)
		if err == nil {
			err = h(r)
		}
		var rd redirect
		var pe *pageError
		switch {
		case err == nil:
		case errors.As(err, &rd):
			ctx.Response.Header.Set("Location", string(rd))
			ctx.SetStatusCode(fasthttp.StatusSeeOther)
		case errors.As(err, &pe):
			c.render(r, pe.status, "error", pe.title, pe.env, errorData{Title: pe.title, Message: pe.message})
		default:
			c.log.Error("console page failed", "path", string(ctx.Path()), "err", err)
			c.render(r, 500, "error", "Something went wrong", "", errorData{Title: "Something went wrong",
				Message: "The page could not be shown; nothing was changed. Try again."})
		}
	}
}

// signedIn requires a session; a GET without one is sent to sign in and
// back.
func (c *Console) signedIn(h handler) handler {
	return func(r *request) error {
		if r.sess == nil {
			return c.toSignIn(r)
		}
		return h(r)
	}
}

// toSignIn sends the browser to sign in and come back.
func (c *Console) toSignIn(r *request) error {
	q := url.Values{"next": {string(r.ctx.RequestURI())}}
	if r.ended != "" {
		q.Set("ended", r.ended)
	}
	return redirect(c.base + "/signin?" + q.Encode())
}

// changes guards a state change: a session, a same-origin request and the
// session's CSRF token, then the administration write limit.
func (c *Console) changes(h handler) handler {
	return func(r *request) error {
		if r.sess == nil {
			return errSignInFirst
		}
		if err := c.checkOrigin(r); err != nil {
			return err
		}
		if !tokenEqual(string(r.ctx.PostArgs().Peek("csrf")), r.sess.CSRF) {
			return errForgery
		}
		if err := c.limit(r, ratelimit.AdminWrites, "console|"+r.sess.ID); err != nil {
			return err
		}
		return h(r)
	}
}

var (
	errSignInFirst = &pageError{status: 403, title: "Sign in first",
		message: "This action needs a signed-in owner. Sign in to the console and try again."}
	errForgery = &pageError{status: 403, title: "Request refused",
		message: "The form was not sent from this console page, or the page is too old. Go back, reload the page and try again."}
)

// checkOrigin refuses a POST whose Origin names another site. Browsers
// send Origin on every form POST; a request without one is not a
// browser's cross-site form and is left to the token check.
func (c *Console) checkOrigin(r *request) error {
	o := string(r.ctx.Request.Header.Peek("Origin"))
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err == nil && (o == c.origin || u.Host == string(r.ctx.Host())) && (u.Scheme == "http" || u.Scheme == "https") {
		return nil
	}
	return errForgery
}

// limit takes one token of limit n for subject; nil limiter: no limits.
func (c *Console) limit(r *request, n ratelimit.Name, subject string) error {
	if c.cfg.Limits == nil {
		return nil
	}
	d := c.cfg.Limits.Allow(n, r.who.Livemode, subject)
	if d.Allowed || d.Disabled {
		return nil
	}
	_, _, _, retry := d.Headers()
	r.ctx.Response.Header.Set("Retry-After", retry)
	return &pageError{status: 429, title: "Too many attempts",
		message: "Too many requests in a short time. Wait " + retry + " seconds and try again."}
}

// limitAccount takes one token of the per-e-mail sign-in limit, which
// only browsers the owner never signed in with spend. Its refusal says
// how the owner gets in all the same.
func (c *Console) limitAccount(r *request, email string) error {
	err := c.limit(r, ratelimit.SignInAccount, "email|"+email)
	if pe, ok := err.(*pageError); ok {
		retry := string(r.ctx.Response.Header.Peek("Retry-After"))
		pe.message = "Too many sign-in attempts for this e-mail from browsers it was not used with before. " +
			"Sign in from a browser you signed in with before, or wait " + retry + " seconds and try again."
	}
	return err
}

// view is what every page template gets.
type view struct {
	Title    string
	Base     string
	Env      actors.Env // "" on pages of no environment (sign-in)
	SignedIn bool
	Owner    string
	CSRF     string
	Nav      string
	Data     any
}

func (c *Console) render(r *request, status int, page, title string, env actors.Env, data any) {
	v := view{Title: title, Base: c.base, Env: env, Nav: page, Data: data}
	if r.sess != nil {
		v.SignedIn, v.CSRF = true, r.sess.CSRF
		v.Owner = r.owner.Email
		if env == "" && page != "signin" {
			v.Env = r.sess.Env
		}
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.Error("console template", "page", page, "err", err)
		r.ctx.SetStatusCode(500)
		r.ctx.SetContentType("text/plain; charset=utf-8")
		r.ctx.SetBodyString("The page could not be shown.")
		return
	}
	r.ctx.SetStatusCode(status)
	r.ctx.SetContentType("text/html; charset=utf-8")
	r.ctx.SetBody(buf.Bytes())
}

// ok renders a page with 200 in the session's environment.
func (c *Console) ok(r *request, page, title string, data any) error {
	c.render(r, 200, page, title, "", data)
	return nil
}

func (c *Console) home(r *request) error {
	if r.sess == nil {
		return redirect(c.base + "/signin")
	}
	return redirect(c.base + "/approvals")
}

// param is a path parameter.
func param(r *request, name string) string {
	v, _ := r.ctx.UserValue(name).(string)
	return v
}

// form is a POST form field.
func form(r *request, name string) string { return string(r.ctx.PostArgs().Peek(name)) }

// query is a query parameter.
func query(r *request, name string) string { return string(r.ctx.QueryArgs().Peek(name)) }
