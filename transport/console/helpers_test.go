package console_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport/console"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// epoch is where fake clocks start: midday UTC, far from a daily reset.
var epoch = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

const password = "a console test password"

// owner is an owner with a console password and its API keys.
type owner struct {
	id, email        string
	testKey, liveKey string
}

var owners atomic.Int64

func newOwner(t *testing.T, srv *guardtest.Server) owner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	email := fmt.Sprintf("console%d@guardtest.invalid", owners.Add(1))
	oc, err := srv.System().CreateOwner(ctx, "Console owner", email, console.QuickHash(password))
	if err != nil {
		t.Fatal(err)
	}
	return owner{id: oc.Owner.ID, email: email, testKey: oc.Keys[actors.EnvTest], liveKey: oc.Keys[actors.EnvLive]}
}

// client is a browser without a browser: a cookie jar, no redirects
// followed, and the Origin a page of the console sends.
type client struct {
	t    *testing.T
	base string // server URL
	http *http.Client
	jar  *cookiejar.Jar
}

func newClient(t *testing.T, srv *guardtest.Server) *client {
	jar, _ := cookiejar.New(nil)
	c := &client{t: t, base: srv.URL, jar: jar, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

// newClientAt is a client whose connections come from the loopback
// address ip (127.0.0.2, 127.0.0.3, ...): the address the server counts
// it by, as it counts a browser on another network.
func newClientAt(t *testing.T, srv *guardtest.Server, ip string) *client {
	c := newClient(t, srv)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c.http.Transport = &http.Transport{DialContext: d.DialContext}
	return c
}

// page is one answer.
type page struct {
	status int
	header http.Header
	body   string
}

func (p page) location() string { return p.header.Get("Location") }

func (c *client) do(req *http.Request) page {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (c *client) get(path string) page {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

// post sends a form as the console's own page would (same Origin), or
// with origin when it is not empty ("-" sends none).
func (c *client) post(path string, form url.Values, origin string) page {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switch origin {
	case "":
		req.Header.Set("Origin", c.base)
	case "-":
	default:
		req.Header.Set("Origin", origin)
	}
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the first form token on a page.
func csrf(t *testing.T, p page) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no csrf field on the page (%d):\n%s", p.status, p.body)
	}
	return m[1]
}

// signIn signs in through the form and returns the session's CSRF token.
func (c *client) signIn(email, pw string) page {
	c.t.Helper()
	form := c.get("/console/signin")
	return c.post("/console/signin", url.Values{"csrf": {csrf(c.t, form)}, "email": {email}, "password": {pw}}, "")
}

// mustSignIn signs in and returns the CSRF token of the session.
func (c *client) mustSignIn(o owner) string {
	c.t.Helper()
	p := c.signIn(o.email, password)
	if p.status != http.StatusSeeOther || !strings.HasSuffix(p.location(), "/console/approvals") {
		c.t.Fatalf("sign-in answered %d to %q:\n%s", p.status, p.location(), p.body)
	}
	inbox := c.get("/console/approvals")
	if inbox.status != http.StatusOK {
		c.t.Fatalf("inbox after sign-in: %d", inbox.status)
	}
	return csrf(c.t, inbox)
}

// spend asks for a payment as an agent.
func spend(t *testing.T, srv *guardtest.Server, agentKey, amount, idem string) map[string]any {
	t.Helper()
	r := srv.Do(t, http.MethodPost, "/v1/spends", agentKey, map[string]string{"Idempotency-Key": idem},
		map[string]any{"amount": amount, "destination": "api.vendor.com", "resource": map[string]string{"url": "https://api.vendor.com/x"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /v1/spends: %d %s", r.Status, r.Raw)
	}
	return r.Body
}

// approvalPolicy makes payments above 1.00 wait for the owner.
const approvalPolicy = `{"approval_over":"1.00","trusted_destinations":["api.vendor.com"]}`

func approvalOf(t *testing.T, sp map[string]any) map[string]any {
	t.Helper()
	a, ok := sp["approval"].(map[string]any)
	if !ok {
		t.Fatalf("spend has no approval: %v", sp)
	}
	return a
}
