package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

const newPassword = "a brand new console password"

// changePassword sends the password form as the console's page would.
func (c *client) changePassword(token, current, pw, again string) page {
	c.t.Helper()
	return c.post("/console/password", url.Values{"csrf": {token}, "current_password": {current},
		"new_password": {pw}, "new_password_again": {again}}, "")
}

// signedOut checks that the client's session is over, as the console says
// of an ended session.
func (c *client) signedOut(what string) {
	c.t.Helper()
	p := c.get("/console/approvals")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), "/console/signin") {
		c.t.Fatalf("%s: the inbox answered %d to %q, want the sign-in page", what, p.status, p.location())
	}
	if s := c.get(p.location()); !strings.Contains(s.body, "Your session has ended.") {
		c.t.Fatalf("%s: the sign-in page does not say the session ended:\n%s", what, s.body)
	}
}

// sessionDigest is the stored name of the client's session.
func (c *client) sessionDigest() string {
	c.t.Helper()
	for _, ck := range c.jar.Cookies(mustURL(c.t, c.base+"/console/")) {
		if ck.Name == "guard_session" {
			sum := sha256.Sum256([]byte(ck.Value))
			return hex.EncodeToString(sum[:])
		}
	}
	c.t.Fatal("no session cookie")
	return ""
}

func TestPasswordChange(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c, other := newClient(t, srv), newClient(t, srv)
	c.mustSignIn(o)
	other.mustSignIn(o)

	form := c.get("/console/password")
	if form.status != http.StatusOK || !strings.Contains(form.body, `name="current_password"`) ||
		!strings.Contains(form.body, `href="/console/password" aria-current="page"`) {
		t.Fatalf("password page: %d\n%s", form.status, form.body)
	}
	p := c.changePassword(csrf(t, form), password, newPassword, newPassword)
	if p.status != http.StatusSeeOther || p.location() != "/console/password?done=1" {
		t.Fatalf("change: %d to %q\n%s", p.status, p.location(), p.body)
	}
	done := c.get(p.location())
	if done.status != http.StatusOK || !strings.Contains(done.body, "Your password is changed.") {
		t.Fatalf("after the change: %d\n%s", done.status, done.body)
	}
	// The browser that changed it stays signed in, with a session and a
	// form token of its own.
	if inbox := c.get("/console/approvals"); inbox.status != http.StatusOK || csrf(t, inbox) == csrf(t, form) {
		t.Fatalf("the changing browser after the change: %d", inbox.status)
	}
	other.signedOut("the other browser")

	if p := newClient(t, srv).signIn(o.email, password); p.status != http.StatusUnauthorized {
		t.Fatalf("the old password signs in: %d", p.status)
	}
	if p := newClient(t, srv).signIn(o.email, newPassword); p.status != http.StatusSeeOther {
		t.Fatalf("the new password does not sign in: %d\n%s", p.status, p.body)
	}
	want := "action=console_password_set owner=" + o.id + " by=console sessions_ended=1"
	if !strings.Contains(srv.Logs(), want) {
		t.Fatalf("the log lacks %q:\n%s", want, srv.Logs())
	}
}

// Each refusal says what to fix and changes nothing: the old password
// still signs in, and the other browser stays signed in.
func TestPasswordChangeRefusals(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	c, other := newClient(t, srv), newClient(t, srv)
	token := c.mustSignIn(o)
	other.mustSignIn(o)
	for _, tc := range []struct {
		name               string
		current, pw, again string
		status             int
		message            string
	}{
		{"wrong current password", "not the password at all", newPassword, newPassword, http.StatusUnauthorized, "the current password is not right"},
		{"no current password", "", newPassword, newPassword, http.StatusUnauthorized, "the current password is not right"},
		{"too short", password, "short one", "short one", http.StatusBadRequest, "at least 12 characters"},
		{"twelve bytes, fewer characters", password, "ééééééé", "ééééééé", http.StatusBadRequest, "at least 12 characters"},
		{"too long", password, strings.Repeat("x", 1025), strings.Repeat("x", 1025), http.StatusBadRequest, "at most 1024 characters"},
		{"the two differ", password, newPassword, newPassword + "!", http.StatusBadRequest, "the two new passwords differ"},
		{"same as the current one", password, password, password, http.StatusBadRequest, "the new password is the current one"},
	} {
		p := c.changePassword(token, tc.current, tc.pw, tc.again)
		if p.status != tc.status || !strings.Contains(p.body, `role="alert" id="password-error">The password was not changed: `) ||
			!strings.Contains(p.body, tc.message) {
			t.Errorf("%s: %d, want %d and %q:\n%s", tc.name, p.status, tc.status, tc.message, p.body)
		}
		if strings.Contains(p.body, tc.pw) || strings.Contains(p.body, "not the password at all") {
			t.Errorf("%s: the page shows a typed password", tc.name)
		}
	}
	// Without the form token, or from another site, the change is refused.
	for name, tc := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":     {url.Values{"current_password": {password}, "new_password": {newPassword}, "new_password_again": {newPassword}}, ""},
		"wrong token":  {url.Values{"csrf": {token + "x"}, "current_password": {password}, "new_password": {newPassword}, "new_password_again": {newPassword}}, ""},
		"other origin": {url.Values{"csrf": {token}, "current_password": {password}, "new_password": {newPassword}, "new_password_again": {newPassword}}, "https://evil.example"},
	} {
		if p := c.post("/console/password", tc.form, tc.origin); p.status != http.StatusForbidden {
			t.Errorf("%s: answered %d", name, p.status)
		}
	}
	if p := newClient(t, srv).post("/console/password", url.Values{"csrf": {token}, "current_password": {password},
		"new_password": {newPassword}, "new_password_again": {newPassword}}, ""); p.status != http.StatusForbidden {
		t.Errorf("signed out: answered %d", p.status)
	}
	if p := newClient(t, srv).get("/console/password"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), "/console/signin?next=") {
		t.Errorf("the page signed out: %d to %q", p.status, p.location())
	}

	if p := newClient(t, srv).signIn(o.email, password); p.status != http.StatusSeeOther {
		t.Fatalf("after the refusals the password no longer signs in: %d", p.status)
	}
	if p := newClient(t, srv).signIn(o.email, newPassword); p.status != http.StatusUnauthorized {
		t.Fatalf("a refused new password signs in: %d", p.status)
	}
	if p := other.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("a refused change signed the other browser out: %d", p.status)
	}
	if strings.Contains(srv.Logs(), "console_password_set") {
		t.Fatal("a refused change is logged as done")
	}
}

// Wrong current passwords count against the sign-in limit of the owner's
// e-mail: the form is no faster a way to guess than the sign-in page.
func TestPasswordChangeIsRateLimited(t *testing.T) {
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.RateLimitScale = 1 }))
	o := newOwner(t, srv)
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	// 10 per 15 minutes plus a burst of 5; the sign-in above took one.
	for i := range 14 {
		if p := c.changePassword(token, "wrong password here", newPassword, newPassword); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, p.status)
		}
	}
	p := c.changePassword(token, password, newPassword, newPassword)
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Fatalf("attempt 15 (right password): %d, Retry-After %q", p.status, p.header.Get("Retry-After"))
	}
	if p := newClient(t, srv).signIn(o.email, password); p.status != http.StatusTooManyRequests {
		t.Fatalf("sign-in after the guesses: %d, want the same limit", p.status)
	}
	if o2, err := srv.System().OwnerByEmail(o.email); err != nil || !strings.Contains(o2.PasswordHash, "m=64,t=1,p=1") {
		t.Fatalf("the limited request changed the password (%v)", err)
	}
}

// Sessions a change ended stay ended across a restart; the changing
// browser's new session survives it like any other.
func TestPasswordChangeOutlastsARestart(t *testing.T) {
	dir := t.TempDir()
	first := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.Data = dir }))
	o := newOwner(t, first)
	c, other := newClient(t, first), newClient(t, first)
	token := c.mustSignIn(o)
	other.mustSignIn(o)
	if p := c.changePassword(token, password, newPassword, newPassword); p.status != http.StatusSeeOther {
		t.Fatalf("change: %d\n%s", p.status, p.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c.http.CloseIdleConnections()
	other.http.CloseIdleConnections()
	if err := first.Service().Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	second := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.Data = dir }))
	c.base, other.base = second.URL, second.URL
	if p := c.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("after a restart the changing browser's session answered %d", p.status)
	}
	other.signedOut("the other browser after a restart")
	if p := newClient(t, second).signIn(o.email, newPassword); p.status != http.StatusSeeOther {
		t.Fatalf("after a restart the new password does not sign in: %d", p.status)
	}
}

// A request of another browser that read its session just before the
// change, and writes it back after (the last-seen update of a page view),
// does not bring the session back.
func TestPasswordChangeIsNotUndoneByALateSessionWrite(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	srv := guardtest.Start(t, guardtest.WithClock(clock))
	o := newOwner(t, srv)
	c, other := newClient(t, srv), newClient(t, srv)
	other.mustSignIn(o)
	digest := other.sessionDigest()
	clock.Advance(time.Minute)
	token := c.mustSignIn(o)
	cs, found, err := srv.System().ConsoleSessionByDigest(digest)
	if err != nil || !found {
		t.Fatalf("the other session: %v, %v", found, err)
	}
	if p := c.changePassword(token, password, newPassword, newPassword); p.status != http.StatusSeeOther {
		t.Fatalf("change: %d\n%s", p.status, p.body)
	}
	cs.LastSeenAt = clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.System().PutConsoleSession(ctx, digest, cs); err != nil {
		t.Fatal(err)
	}
	other.signedOut("the other browser after a late write of its session")
	if p := c.get("/console/approvals"); p.status != http.StatusOK {
		t.Fatalf("the changing browser: %d", p.status)
	}
}
