package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/ratelimit"
)

// Cookie names.
const (
	sessionCookie = "guard_session"
	signInCookie  = "guard_signin" // nonce behind the sign-in form's token
	linkCookie    = "guard_link"   // nonce behind a link confirmation's token
	// deviceCookie marks a browser that signed in as an owner: its
	// attempts to sign in as that owner are not counted per account.
	deviceCookie = "guard_device"
)

// deviceLifetime is how long a browser stays known after its last
// sign-in.
const deviceLifetime = 365 * 24 * time.Hour

// deviceProof is the known-browser cookie of owner: random, then its MAC
// under a key that outlives restarts, bound to the owner and to the
// password's hash, so that a new password forgets every browser.
func (c *Console) deviceProof(owner actors.Owner, random string) string {
	h := hmac.New(sha256.New, c.deviceKey)
	h.Write([]byte(owner.ID + "|" + owner.PasswordHash + "|" + random))
	return random + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// knownDevice reports whether the browser signed in as owner before,
// since the owner's password was last set.
func (c *Console) knownDevice(r *request, owner actors.Owner) bool {
	v := string(r.ctx.Request.Header.Cookie(deviceCookie))
	random, _, ok := strings.Cut(v, ".")
	return ok && random != "" && owner.PasswordHash != "" && tokenEqual(v, c.deviceProof(owner, random))
}

// rememberDevice gives the browser a known-browser cookie for owner.
func (c *Console) rememberDevice(r *request, owner actors.Owner) {
	c.setCookie(r.ctx, deviceCookie, c.deviceProof(owner, randomToken()), c.cookiePath(), deviceLifetime)
}

// touchEvery is how stale a session's last-seen time may get before a
// request records a new one: the idle timeout is kept to within it, and
// a page view costs a journal write only once a minute.
const touchEvery = time.Minute

// session is a signed-in browser.
type session struct {
	actors.ConsoleSession
	digest string
	// ID is a public name of the session for the audit trail (the
	// reference of a decision); it reveals nothing of the cookie.
	ID string
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func digestOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func tokenEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// mac is the console's HMAC of the parts, for form tokens that need no
// stored state.
func (c *Console) mac(parts ...string) string {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(strings.Join(parts, "|")))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func (c *Console) setCookie(ctx *fasthttp.RequestCtx, name, value, path string, maxAge time.Duration) {
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	ck.SetKey(name)
	ck.SetValue(value)
	ck.SetPath(path)
	ck.SetHTTPOnly(true)
	ck.SetSecure(c.secure)
	ck.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	if maxAge < 0 {
		ck.SetExpire(fasthttp.CookieExpireDelete)
		ck.SetValue("")
	} else if maxAge > 0 {
		ck.SetMaxAge(int(maxAge / time.Second))
	}
	ctx.Response.Header.SetCookie(ck)
}

// formNonce is the nonce behind a form's token, kept in the cookie name
// at path. A nonce the browser already holds is kept, so that opening a
// form in one tab leaves the forms of its other tabs good; the cookie is
// set again to last an hour from this form. Keeping a value the browser
// sends helps no one able to plant a cookie: they could as well plant it
// after the page loaded, and a token still needs the console's key.
func (c *Console) formNonce(r *request, name, path string) string {
	nonce := string(r.ctx.Request.Header.Cookie(name))
	if b, err := base64.RawURLEncoding.DecodeString(nonce); err != nil || len(b) != 32 {
		nonce = randomToken()
	}
	c.setCookie(r.ctx, name, nonce, path, time.Hour)
	return nonce
}

func (c *Console) cookiePath() string {
	if c.base == "" {
		return "/"
	}
	return c.base
}

// loadSession finds the request's session and ends it when it timed out.
func (c *Console) loadSession(r *request) error {
	token := string(r.ctx.Request.Header.Cookie(sessionCookie))
	if token == "" {
		return nil
	}
	digest := digestOf(token)
	cs, found, err := c.sys.ConsoleSessionByDigest(digest)
	if err != nil {
		return err
	}
	if !found {
		c.setCookie(r.ctx, sessionCookie, "", c.cookiePath(), -1)
		r.ended = "gone"
		return nil
	}
	now := c.sys.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idle := now.Sub(cs.LastSeenAt) >= c.cfg.IdleTimeout
	if idle || now.Sub(cs.CreatedAt) >= c.cfg.SessionLifetime {
		if err := c.sys.DeleteConsoleSessions(ctx, digest); err != nil {
			return err
		}
		c.setCookie(r.ctx, sessionCookie, "", c.cookiePath(), -1)
		r.ended = "lifetime"
		if idle {
			r.ended = "idle"
		}
		return nil
	}
	owner, err := c.sys.OwnerByID(cs.OwnerID)
	if err != nil {
		return err
	}
	if now.Sub(cs.LastSeenAt) >= touchEvery {
		cs.LastSeenAt = now
		if err := c.sys.PutConsoleSession(ctx, digest, cs); err != nil {
			return err
		}
	}
	r.sess = &session{ConsoleSession: cs, digest: digest, ID: "cs_" + digest[:24]}
	r.owner = owner
	r.who = actors.OwnerPrincipal(cs.OwnerID, cs.Env)
	return nil
}

// endedText says why a session ended, from a fixed list.
func endedText(code string) string {
	return map[string]string{
		"gone":     "Your session has ended. Sign in again.",
		"lifetime": "Your session ended 12 hours after you signed in. Sign in again.",
		"idle":     "You were signed out after a time without activity. Sign in again.",
	}[code]
}

type signInData struct {
	Token  string
	Email  string
	Next   string
	Notice string
	Error  string
}

func (c *Console) signInPage(r *request) error {
	if r.sess != nil {
		return redirect(c.safeNext(query(r, "next")))
	}
	notice := endedText(query(r, "ended"))
	if query(r, "signed_out") != "" {
		notice = doneText("signedout")
	}
	return c.showSignIn(r, 200, signInData{Next: query(r, "next"), Notice: notice})
}

// showSignIn renders the form with the browser's nonce cookie and its
// token.
func (c *Console) showSignIn(r *request, status int, d signInData) error {
	d.Token = c.mac("signin", c.formNonce(r, signInCookie, c.cookiePath()))
	c.render(r, status, "signin", "Sign in", "", d)
	return nil
}

// errSignInFailed is the one answer to every wrong e-mail or password.
const errSignInFailed = "The e-mail or password is not right. Check both and try again."

func (c *Console) signIn(r *request) error {
	if err := c.checkOrigin(r); err != nil {
		return err
	}
	nonce := string(r.ctx.Request.Header.Cookie(signInCookie))
	if nonce == "" || !tokenEqual(form(r, "csrf"), c.mac("signin", nonce)) {
		return &pageError{status: 403, title: "Request refused",
			message: "The sign-in form expired or was not sent from this console. Reload the sign-in page and try again."}
	}
	email := strings.ToLower(strings.TrimSpace(form(r, "email")))
	pw := form(r, "password")
	next := form(r, "next")
	if len(email) > 254 || len(pw) > 1024 {
		return c.showSignIn(r, 400, signInData{Next: next, Error: errSignInFailed})
	}
	// Attempts are counted per client address, before any hashing, so one
	// address can neither guess quickly nor make the server hash much.
	if err := c.limit(r, ratelimit.SignIn, "ip|"+r.ctx.RemoteIP().String()); err != nil {
		return err
	}
	owner, err := c.sys.OwnerByEmail(email)
	// And per e-mail across addresses, but only from browsers that never
	// signed in as the owner: a stranger who fills that count with wrong
	// passwords keeps out new browsers, never the one the owner uses. The
	// count is kept for any e-mail, so it tells nothing of who exists.
	if err != nil || !c.knownDevice(r, owner) {
		if lerr := c.limitAccount(r, email); lerr != nil {
			return lerr
		}
	}
	hash := owner.PasswordHash
	if err != nil || hash == "" {
		hash = c.dummyHash()
	}
	if !VerifyPassword(hash, pw) || err != nil || owner.PasswordHash == "" {
		return c.showSignIn(r, 401, signInData{Email: email, Next: next, Error: errSignInFailed})
	}
	now := c.sys.Now()
	token := randomToken()
	cs := actors.ConsoleSession{OwnerID: owner.ID, Env: actors.EnvTest, CSRF: randomToken(), CreatedAt: now, LastSeenAt: now}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.sys.PutConsoleSession(ctx, digestOf(token), cs); err != nil {
		return err
	}
	// The browser holds one session cookie: a session it held before (a
	// sign-in from another tab) could never be used again.
	if r.sess != nil {
		if err := c.sys.DeleteConsoleSessions(ctx, r.sess.digest); err != nil {
			c.log.Warn("console: ending the replaced session", "err", err)
		}
	}
	c.sweep(ctx, now)
	// The nonce cookie stays: sign-in forms open in other tabs are bound
	// to it.
	c.setCookie(r.ctx, sessionCookie, token, c.cookiePath(), 0)
	c.rememberDevice(r, owner)
	return redirect(c.safeNext(next))
}

// sweep deletes sessions that timed out and were never used again. It
// runs at sign-in, which is rare, so it costs a scan of few records.
func (c *Console) sweep(ctx context.Context, now time.Time) {
	stale, err := c.sys.ConsoleSessionDigests(func(cs actors.ConsoleSession) bool {
		return now.Sub(cs.LastSeenAt) >= c.cfg.IdleTimeout || now.Sub(cs.CreatedAt) >= c.cfg.SessionLifetime
	})
	if err == nil && len(stale) > 0 {
		if err := c.sys.DeleteConsoleSessions(ctx, stale...); err != nil {
			c.log.Warn("console: sweeping ended sessions", "err", err)
		}
	}
}

// safeNext keeps a post-sign-in destination inside the console.
func (c *Console) safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || strings.HasPrefix(next, "//") ||
		strings.ContainsAny(next, "\\\r\n") || !strings.HasPrefix(u.Path, c.base+"/") {
		return c.base + "/approvals"
	}
	return next
}

func (c *Console) signOut(r *request) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.sys.DeleteConsoleSessions(ctx, r.sess.digest); err != nil {
		return err
	}
	c.setCookie(r.ctx, sessionCookie, "", c.cookiePath(), -1)
	return redirect(c.base + "/signin?signed_out=1")
}

// switchEnv moves the session between practice and live.
func (c *Console) switchEnv(r *request) error {
	env := actors.Env(form(r, "env"))
	if env != actors.EnvTest && env != actors.EnvLive {
		return &pageError{status: 400, title: "Unknown environment", message: `env must be "test" (practice) or "live".`}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := r.sess.ConsoleSession
	cs.Env = env
	if err := c.sys.PutConsoleSession(ctx, r.sess.digest, cs); err != nil {
		return err
	}
	return redirect(c.base + "/approvals")
}
