package openapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
)

// roomyLimits lets a test send a request to every route with one key: the
// limits are not what it is about.
func roomyLimits(c *wire.Config) { c.RateLimitScale = 100 }

// keysFor creates a practice owner and returns its key and the key of an
// agent of that owner.
func keysFor(t *testing.T, h *harness) (owner, agent string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	oc, err := h.sys.CreateOwner(ctx, "Route Owner", "routes@guard.test", "")
	if err != nil {
		t.Fatal(err)
	}
	owner = oc.Keys[actors.EnvTest]
	ag := h.want(h.do("POST", "/v1/agents", owner, nil, `{"name":"routes"}`), 201, "")
	return owner, h.want(h.do("POST", "/v1/agents/"+ag.str("id")+"/keys", owner, nil, ""), 201, "").str("secret")
}

// raw sends a request outside the document's checks (these requests are
// wrong on purpose) and returns the status, headers and body.
func (h *harness) raw(method, path, key, body string) (int, http.Header, []byte) {
	h.t.Helper()
	req := h.request(method, path, key, body)
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return res.StatusCode, res.Header, b
}

// keyFor is the key a route takes: the agent's for agent routes, the
// owner's for the rest.
func keyFor(r serverRoute, owner, agent string) string {
	if r.access == "agentOnly" {
		return agent
	}
	return owner
}

// concrete fills a route's path parameters with ids of the right shape
// that name nothing.
func concrete(path string) string {
	return paramSegment.ReplaceAllStringFunc(path, func(string) string { return "x_00000000000000000000000000000000" })
}

// TestEveryRouteRefusesUnknownQueryParameters: a query parameter a route
// does not take is refused with 400 parameter_unknown naming it, on every
// keyed route of the table. Ignored, it would carry out a request the
// caller did not make: POST /v1/spends?dry_run=true paid.
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	h := startService(t, roomyLimits)
	owner, agent := keysFor(t, h)
	n := 0
	for _, r := range serverRoutes(t) {
		if r.access == "public" {
			continue
		}
		n++
		path := concrete(r.path) + "?dry_run=true"
		status, _, body := h.raw(r.method, path, keyFor(r, owner, agent), "")
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":"parameter_unknown"`) ||
			!strings.Contains(string(body), `"param":"dry_run"`) {
			t.Errorf("%s %s: %d %s, want 400 parameter_unknown naming dry_run", r.method, path, status, body)
		}
	}
	if n < 30 {
		t.Fatalf("only %d keyed routes found", n)
	}
	// The query parameters a route does take still work.
	for _, path := range []string{"/v1/spends?limit=1", "/v1/events?limit=1&type=spend.*"} {
		if status, _, body := h.raw("GET", path, agent, ""); status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
}

// TestHeadAnswersLikeGet: every GET route answers HEAD with the status and
// the headers of GET and no body (RFC 9110 9.3.2).
func TestHeadAnswersLikeGet(t *testing.T) {
	h := startService(t, roomyLimits)
	owner, agent := keysFor(t, h)
	n := 0
	for _, r := range serverRoutes(t) {
		if r.method != "GET" {
			continue
		}
		n++
		key := ""
		if r.access != "public" {
			key = keyFor(r, owner, agent)
		}
		path := concrete(r.path)
		getStatus, getHeader, getBody := h.raw("GET", path, key, "")
		headStatus, headHeader, headBody := h.raw("HEAD", path, key, "")
		if headStatus != getStatus || len(headBody) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes; GET answered %d", path, headStatus, len(headBody), getStatus)
		}
		for _, name := range []string{"Content-Type", "Service-Version"} {
			if headHeader.Get(name) != getHeader.Get(name) {
				t.Errorf("HEAD %s: %s %q, GET's %q", path, name, headHeader.Get(name), getHeader.Get(name))
			}
		}
		if headHeader.Get("Request-Id") == "" {
			t.Errorf("HEAD %s: no Request-Id", path)
		}
		if key != "" && headHeader.Get("RateLimit-Limit") == "" {
			t.Errorf("HEAD %s: no RateLimit headers", path)
		}
		if len(getBody) == 0 {
			t.Errorf("GET %s: empty body", path)
		}
	}
	if n < 15 {
		t.Fatalf("only %d GET routes found", n)
	}
}

// TestOptionsIsNotARoute: OPTIONS gets the 404 route_not_found of any
// method a path does not take, with the headers every answer carries; the
// router must not answer it by itself.
func TestOptionsIsNotARoute(t *testing.T) {
	h := startService(t)
	_, agent := keysFor(t, h)
	for _, path := range []string{"/v1/spends", "/v1/me", "/healthz", "*"} {
		req := h.request("OPTIONS", "/", agent, "")
		if path == "*" {
			req.URL.Opaque = "*" // the asterisk-form: OPTIONS * HTTP/1.1
		} else {
			req.URL.Path = path
		}
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"code":"route_not_found"`) {
			t.Errorf("OPTIONS %s: %d %s, want 404 route_not_found", path, res.StatusCode, body)
		}
		if res.Header.Get("Request-Id") == "" || res.Header.Get("Service-Version") == "" || res.Header.Get("Allow") != "" {
			t.Errorf("OPTIONS %s: headers %v", path, res.Header)
		}
	}
}

// GET /v1/spends/check falls on the route of GET /v1/spends/{id}; it must
// say that the check is a POST, not that no spend "check" exists.
func TestGetOnTheCheckNamesTheMethod(t *testing.T) {
	h := startService(t)
	_, agent := keysFor(t, h)
	res, err := h.client.Do(h.request("GET", "/v1/spends/check", agent, ""))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"code":"route_not_found"`) ||
		!strings.Contains(string(body), "POST /v1/spends/check") {
		t.Errorf("GET /v1/spends/check: %d %s, want 404 route_not_found naming POST", res.StatusCode, body)
	}
}
