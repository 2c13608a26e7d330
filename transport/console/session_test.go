package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

func TestSignInSetsAStrictSessionCookie(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c := newClient(t, srv)
	if p := c.get("/console/approvals"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), "/console/signin?next=") {
		t.Fatalf("signed out, the inbox answered %d to %q", p.status, p.location())
	}
	p := c.signIn(o.email, password)
	if p.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d\n%s", p.status, p.body)
	}
	var cookie string
	for _, sc := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "guard_session=") {
			cookie = sc
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "path=/console"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	inbox := c.get("/console/approvals")
	if inbox.status != http.StatusOK || !strings.Contains(inbox.body, "PRACTICE") || !strings.Contains(inbox.body, o.email) {
		t.Fatalf("inbox: %d\n%s", inbox.status, inbox.body)
	}
	h := inbox.header
	for name, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'", "X-Frame-Options": "DENY", "Cache-Control": "no-store",
		"Referrer-Policy": "same-origin", "X-Content-Type-Options": "nosniff",
	} {
		if !strings.Contains(h.Get(name), want) {
			t.Errorf("%s = %q, want %q in it", name, h.Get(name), want)
		}
	}
	if csp := h.Get("Content-Security-Policy"); strings.Contains(csp, "script-src") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q must allow no script and no framing", csp)
	}
}

func TestSignInFailuresLookAlike(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	cases := []struct{ name, email, pw string }{
		{"wrong password", o.email, "not the password at all"},
		{"unknown e-mail", "nobody@guardtest.invalid", password},
		{"empty password", o.email, ""},
		{"e-mail in other case, wrong password", strings.ToUpper(o.email), "nope nope nope"},
	}
	var first string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv)
			p := c.signIn(tc.email, tc.pw)
			if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "The e-mail or password is not right") {
				t.Fatalf("answered %d:\n%s", p.status, p.body)
			}
			if strings.Contains(p.body, "guard_session") || len(p.header.Values("Set-Cookie")) != 1 {
				t.Fatalf("a failed sign-in set cookies %v", p.header.Values("Set-Cookie"))
			}
			msg := p.body[strings.Index(p.body, `role="alert"`):]
			msg = msg[:strings.Index(msg, "</p>")]
			if first == "" {
				first = msg
			} else if msg != first {
				t.Fatalf("message %q differs from %q", msg, first)
			}
		})
	}
	// Upper case e-mail with the right password signs in.
	if p := newClient(t, srv).signIn(strings.ToUpper(o.email), password); p.status != http.StatusSeeOther {
		t.Fatalf("upper-case e-mail: %d", p.status)
	}
}

func TestSignInNeedsItsFormToken(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c := newClient(t, srv)
	form := c.get("/console/signin")
	token := csrf(t, form)
	for name, tc := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":     {url.Values{"email": {o.email}, "password": {password}}, ""},
		"wrong token":  {url.Values{"csrf": {token + "x"}, "email": {o.email}, "password": {password}}, ""},
		"other origin": {url.Values{"csrf": {token}, "email": {o.email}, "password": {password}}, "https://evil.example"},
	} {
		if p := c.post("/console/signin", tc.form, tc.origin); p.status != http.StatusForbidden {
			t.Errorf("%s: answered %d", name, p.status)
		}
	}
	// Without the nonce cookie the form's token is worth nothing.
	fresh := newClient(t, srv)
	if p := fresh.post("/console/signin", url.Values{"csrf": {token}, "email": {o.email}, "password": {password}}, ""); p.status != http.StatusForbidden {
		t.Fatalf("token without its cookie: %d", p.status)
	}
	if p := c.post("/console/signin", url.Values{"csrf": {token}, "email": {o.email}, "password": {password}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("the right token: %d", p.status)
	}
}

func TestSignInIsRateLimited(t *testing.T) {
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.RateLimitScale = 1 }))
	o := newOwner(t, srv)
	c := newClient(t, srv)
	// 10 per 15 minutes plus a burst of 5, per client address.
	for i := range 15 {
		if p := c.signIn(o.email, "wrong password here"); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, p.status)
		}
	}
	p := c.signIn(o.email, password)
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Fatalf("attempt 16 (right password): %d, Retry-After %q", p.status, p.header.Get("Retry-After"))
	}
}

func TestSessionTimeouts(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	srv := guardtest.Start(t, guardtest.WithClock(clock))
	o := newOwner(t, srv)

	t.Run("idle", func(t *testing.T) {
		c := newClient(t, srv)
		c.mustSignIn(o)
		// Activity keeps the session: 29 minutes apart, three times.
		for range 3 {
			clock.Advance(29 * time.Minute)
			if p := c.get("/console/approvals"); p.status != http.StatusOK {
				t.Fatalf("after 29 idle minutes: %d", p.status)
			}
		}
		clock.Advance(30 * time.Minute)
		p := c.get("/console/approvals")
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), "/console/signin") {
			t.Fatalf("after 30 idle minutes: %d %q", p.status, p.location())
		}
		if s := c.get(p.location()); !strings.Contains(s.body, "without activity") {
			t.Fatalf("the sign-in page does not say why:\n%s", s.body)
		}
	})
	t.Run("absolute", func(t *testing.T) {
		c := newClient(t, srv)
		c.mustSignIn(o)
		for i := 0; ; i++ {
			clock.Advance(20 * time.Minute)
			p := c.get("/console/approvals")
			if p.status == http.StatusOK {
				if i > 36 {
					t.Fatalf("still signed in after %d minutes", (i+1)*20)
				}
				continue
			}
			if (i+1)*20 != 12*60 {
				t.Fatalf("signed out after %d minutes, want 720", (i+1)*20)
			}
			break
		}
	})
}

func TestSignOutEndsTheSession(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	stolen := c.jar.Cookies(mustURL(t, srv.URL+"/console/"))
	if p := c.post("/console/signout", url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", p.status)
	}
	if p := c.get("/console/approvals"); p.status != http.StatusSeeOther {
		t.Fatalf("after sign-out the inbox answered %d", p.status)
	}
	// The old cookie, kept by someone, opens nothing either.
	other := newClient(t, srv)
	other.jar.SetCookies(mustURL(t, srv.URL+"/console/"), stolen)
	if p := other.get("/console/approvals"); p.status != http.StatusSeeOther {
		t.Fatalf("the signed-out cookie answered %d", p.status)
	}
}

func TestSessionsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	first := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.Data = dir }))
	o := newOwner(t, first)
	c := newClient(t, first)
	c.mustSignIn(o)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c.http.CloseIdleConnections()
	if err := first.Service().Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	second := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.Data = dir }))
	c.base = second.URL // cookies are per host, not per port
	if p := c.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("after a restart the session answered %d", p.status)
	}
}

func TestStateChangesNeedTokenAndOrigin(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	agentID, _ := srv.NewAgent(t, o.testKey, "")
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	path := "/console/agents/" + agentID + "/pause"
	for name, tc := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":       {url.Values{}, ""},
		"wrong token":    {url.Values{"csrf": {token[:len(token)-1]}}, ""},
		"other origin":   {url.Values{"csrf": {token}}, "https://evil.example"},
		"opaque origin":  {url.Values{"csrf": {token}}, "null"},
		"token in query": {nil, ""},
	} {
		p := path
		if tc.form == nil {
			p += "?csrf=" + url.QueryEscape(token)
		}
		if got := c.post(p, tc.form, tc.origin); got.status != http.StatusForbidden {
			t.Errorf("%s: answered %d", name, got.status)
		}
	}
	if r := srv.Do(t, http.MethodGet, "/v1/agents/"+agentID, o.testKey, nil, nil); r.Body["status"] != "active" {
		t.Fatalf("a refused request paused the agent")
	}
	// Signed out, the same request is refused as well.
	if p := newClient(t, srv).post(path, url.Values{"csrf": {token}}, ""); p.status != http.StatusForbidden {
		t.Fatalf("without a session: %d", p.status)
	}
	if p := c.post(path, url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("with token and origin: %d\n%s", p.status, p.body)
	}
	if r := srv.Do(t, http.MethodGet, "/v1/agents/"+agentID, o.testKey, nil, nil); r.Body["status"] != "paused" {
		t.Fatalf("the agent is %v, want paused", r.Body["status"])
	}
}

func TestPracticeAndLiveLookDifferent(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	if p := c.get("/console/keys"); !strings.Contains(p.body, `<p class="envband"><strong>PRACTICE</strong>`) || !strings.Contains(p.body, "env-test") {
		t.Fatalf("practice page has no practice band:\n%s", p.body)
	}
	if p := c.post("/console/env", url.Values{"csrf": {token}, "env": {"live"}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("switching to live: %d", p.status)
	}
	p := c.get("/console/keys")
	if !strings.Contains(p.body, `<p class="envband"><strong>LIVE</strong>`) || strings.Contains(p.body, "PRACTICE") || !strings.Contains(p.body, "env-live") {
		t.Fatalf("live page:\n%s", p.body)
	}
	if !strings.Contains(p.body, "svc_live_owner") || strings.Contains(p.body, "svc_test_owner") {
		t.Fatalf("the live keys page lists practice keys:\n%s", p.body)
	}
}

func TestUnknownConsolePathIsAnHTMLPage(t *testing.T) {
	srv := guardtest.Start(t)
	c := newClient(t, srv)
	p := c.get("/console/nothing/here")
	if p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Fatalf("console 404: %d %s", p.status, p.header.Get("Content-Type"))
	}
	p = c.get("/v1/nothing")
	if p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") {
		t.Fatalf("API 404: %d %s", p.status, p.header.Get("Content-Type"))
	}
	if p := c.get("/console/static/console.css"); p.status != http.StatusOK || !strings.Contains(p.body, ".envband") {
		t.Fatalf("stylesheet: %d", p.status)
	}
	// The address the service prints at start is the console's home,
	// with or without the trailing slash.
	for _, path := range []string{"/console", "/console/"} {
		if p := c.get(path); p.status != http.StatusSeeOther || p.location() != "/console/signin" {
			t.Errorf("GET %s: %d to %q, want 303 to the sign-in page", path, p.status, p.location())
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// The console's answers carry the headers of every answer of the server
// (spec 9.1: Service-Version on every response), redirects and missing
// pages included, each with a Request-Id of its own.
func TestPagesCarryTheServerHeaders(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c := newClient(t, srv)
	seen := map[string]bool{}
	check := func(what string, p page) {
		t.Helper()
		id := p.header.Get("Request-Id")
		if p.header.Get("Service-Version") != "2026-10-01" || !strings.HasPrefix(id, "req_") || seen[id] {
			t.Errorf("%s (%d): Service-Version %q, Request-Id %q", what, p.status, p.header.Get("Service-Version"), id)
		}
		seen[id] = true
	}
	check("signed out", c.get("/console/approvals"))
	check("sign-in page", c.get("/console/signin"))
	check("missing page", c.get("/console/no-such-page"))
	check("sign-in", c.signIn(o.email, password))
	check("inbox", c.get("/console/approvals"))
}

// Wrong passwords sent from one address are refused there once they pass
// the limit, whatever comes from it next, and do not keep the owner out
// from another address.
func TestSignInGuessesDoNotLockTheOwnerOut(t *testing.T) {
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.RateLimitScale = 1 }))
	o := newOwner(t, srv)
	guesser := newClientAt(t, srv, "127.0.0.2")
	for i := range 15 {
		if p := guesser.signIn(o.email, "wrong password here"); p.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i+1, p.status)
		}
	}
	for _, tc := range []struct{ what, email, pw string }{
		{"another guess", o.email, "another wrong password"},
		{"the right password", o.email, password},
		{"another e-mail", "someone.else@guardtest.invalid", "wrong password here"},
	} {
		p := guesser.signIn(tc.email, tc.pw)
		if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
			t.Fatalf("from the guessing address, %s: %d, Retry-After %q", tc.what, p.status, p.header.Get("Retry-After"))
		}
	}
	owner := newClientAt(t, srv, "127.0.0.3")
	if p := owner.signIn(o.email, password); p.status != http.StatusSeeOther {
		t.Fatalf("the owner from another address: %d, Retry-After %q\n%s", p.status, p.header.Get("Retry-After"), p.body)
	}
	if p := owner.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("the owner's inbox: %d", p.status)
	}
}

// Sign-in forms open in several tabs of one browser can each be sent:
// opening one does not spoil the others, nor does signing in with one.
// Their tokens are still this browser's alone, and signing in again ends
// the session the browser held.
func TestSignInFormsInSeveralTabs(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c := newClient(t, srv)
	first, second := csrf(t, c.get("/console/signin")), csrf(t, c.get("/console/signin"))
	send := func(cl *client, token string) page {
		return cl.post("/console/signin", url.Values{"csrf": {token}, "email": {o.email}, "password": {password}}, "")
	}
	other := newClient(t, srv)
	csrf(t, other.get("/console/signin"))
	if p := send(other, first); p.status != http.StatusForbidden {
		t.Fatalf("another browser sent this one's token: %d", p.status)
	}
	if p := send(c, first); p.status != http.StatusSeeOther {
		t.Fatalf("the first tab: %d\n%s", p.status, p.body)
	}
	before := c.jar.Cookies(mustURL(t, srv.URL+"/console/"))
	if p := send(c, second); p.status != http.StatusSeeOther {
		t.Fatalf("the second tab, after the first signed in: %d\n%s", p.status, p.body)
	}
	if p := c.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("inbox: %d", p.status)
	}
	kept := newClient(t, srv)
	kept.jar.SetCookies(mustURL(t, srv.URL+"/console/"), before)
	if p := kept.get("/console/approvals"); p.status != http.StatusSeeOther {
		t.Fatalf("the session replaced by the second sign-in answered %d", p.status)
	}
}

// Link pages open in several tabs of one browser, for two approvals and
// for one of them twice, are each decided in turn: opening one does not
// spoil the others, nor does deciding one. Their tokens are still this
// browser's alone.
func TestLinkPagesInSeveralTabs(t *testing.T) {
	f := newLinkFixture(t)
	aprB := approvalOf(t, spend(t, f.srv, f.agentKey, "3.00", "second-"+t.Name()))
	exp, err := time.Parse(time.RFC3339Nano, aprB["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	claims := f.claims
	claims.ApprovalID, claims.ItemsHash, claims.ExpiresAt, claims.LinkID = aprB["id"].(string), aprB["items_hash"].(string), exp, ""
	linkB, _, err := f.srv.Service().Links().Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	pathA, pathB := f.path(), "/console/approvals/"+aprB["id"].(string)
	open := func(cl *client, path, link string) string {
		t.Helper()
		p := cl.get(path + "?link=" + url.QueryEscape(link))
		if p.status != http.StatusOK {
			t.Fatalf("link page %s: %d\n%s", path, p.status, p.body)
		}
		return csrf(t, p)
	}
	decide := func(cl *client, path, link, token, decision string) page {
		return cl.post(path+"/decide", url.Values{"decision": {decision}, "link": {link}, "csrf": {token}}, "")
	}
	c := newClient(t, f.srv)
	tabA := open(c, pathA, f.token)
	tabB := open(c, pathB, linkB)
	againA := open(c, pathA, f.token)
	other := newClient(t, f.srv)
	open(other, pathB, linkB)
	if p := decide(other, pathB, linkB, tabB, "approve"); p.status != http.StatusForbidden {
		t.Fatalf("another browser sent this one's token: %d", p.status)
	}
	if p := decide(c, pathA, f.token, tabA, "approve"); p.status != http.StatusOK || !strings.Contains(p.body, "Approved") {
		t.Fatalf("the first tab: %d\n%s", p.status, p.body)
	}
	if p := decide(c, pathB, linkB, tabB, "reject"); p.status != http.StatusOK || !strings.Contains(p.body, "Rejected") {
		t.Fatalf("the second tab, after the first decided: %d\n%s", p.status, p.body)
	}
	if p := decide(c, pathA, f.token, againA, "reject"); p.status != http.StatusConflict || !strings.Contains(p.body, "already approved") {
		t.Fatalf("the first approval's other tab: %d\n%s", p.status, p.body)
	}
}

// moveTo is the browser c on another network, its session over: its
// known-browser cookie, connecting from ip.
func (c *client) moveTo(t *testing.T, srv *guardtest.Server, ip string) *client {
	moved := newClientAt(t, srv, ip)
	u := mustURL(t, srv.URL+"/console/")
	for _, ck := range c.jar.Cookies(u) {
		if ck.Name == "guard_device" {
			moved.jar.SetCookies(u, []*http.Cookie{ck})
		}
	}
	return moved
}

// Guesses at one account from many addresses are counted together, but
// only those from browsers that never signed in as the owner: once they
// fill the count, new browsers wait, and the browser the owner signs in
// with does not. A new password forgets the browsers known before,
// except the one that set it.
func TestSignInGuessesFromManyAddresses(t *testing.T) {
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.RateLimitScale = 1 }))
	o := newOwner(t, srv)
	usual := newClientAt(t, srv, "127.0.0.3")
	usual.mustSignIn(o)
	stolenCopy := usual.moveTo(t, srv, "127.0.0.9") // the known-browser cookie as it is now
	// The count allows 30 (20 per 15 minutes and 10 at once); the owner's
	// first sign-in, from a browser new then, took one. 29 guesses from
	// three addresses, each within its address's limit.
	for i := range 29 {
		guesser := newClientAt(t, srv, fmt.Sprintf("127.0.1.%d", 1+i/10))
		if p := guesser.signIn(o.email, "wrong password here"); p.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i+1, p.status)
		}
	}
	for _, tc := range []struct{ what, pw string }{{"the next guess", "another wrong password"}, {"the right password", password}} {
		p := newClientAt(t, srv, "127.0.2.1").signIn(o.email, tc.pw)
		if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "browser you signed in with before") {
			t.Fatalf("%s from a new browser at a fresh address: %d, Retry-After %q", tc.what, p.status, p.header.Get("Retry-After"))
		}
	}
	// Another e-mail has a count of its own.
	if p := newClientAt(t, srv, "127.0.2.2").signIn("someone.else@guardtest.invalid", "wrong password here"); p.status != http.StatusUnauthorized {
		t.Fatalf("another e-mail: %d", p.status)
	}
	// The owner's own browser, from yet another network, signs in.
	travelling := usual.moveTo(t, srv, "127.0.2.3")
	if p := travelling.signIn(o.email, password); p.status != http.StatusSeeOther {
		t.Fatalf("the owner's usual browser: %d\n%s", p.status, p.body)
	}
	// A new password: the browser that set it stays known, the cookie
	// copied before is forgotten.
	if p := travelling.changePassword(csrf(t, travelling.get("/console/password")), password, newPassword, newPassword); p.status != http.StatusSeeOther {
		t.Fatalf("password change: %d\n%s", p.status, p.body)
	}
	if p := travelling.moveTo(t, srv, "127.0.2.4").signIn(o.email, newPassword); p.status != http.StatusSeeOther {
		t.Fatalf("the browser that set the password: %d\n%s", p.status, p.body)
	}
	if p := stolenCopy.signIn(o.email, newPassword); p.status != http.StatusTooManyRequests {
		t.Fatalf("a known-browser cookie from before the new password: %d", p.status)
	}
}
