package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/openapi"
)

var rateHeaders = []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}

// TestRateLimitHeadersDocumented ties the document's headers to the
// server's limits (spec 4 and 8.1): every answer of every route, keyed or
// public (those count per client IP), declares the RateLimit headers as
// required, except a 413 (answered before the route is known: none) and a
// 503 (absent when the key itself could not be checked: optional); every
// route documents 429 with a required Retry-After.
func TestRateLimitHeadersDocumented(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	if err != nil {
		t.Fatal(err)
	}
	byShape := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			byShape[method+" "+shape(path)] = op
		}
	}
	for _, r := range serverRoutes(t) {
		op := byShape[r.method+" "+shape(r.path)]
		if op == nil {
			continue // reported by TestEveryRouteIsDocumented
		}
		what := r.method + " " + r.path
		if op.Responses.Value("429") == nil {
			t.Errorf("%s: does not document 429 (access %s)", what, r.access)
		}
		for status, ref := range op.Responses.Map() {
			resp := ref.Value
			for _, name := range rateHeaders {
				h := resp.Headers[name]
				switch {
				case status == "413":
					if h != nil {
						t.Errorf("%s %s: declares %s, which this answer never carries", what, status, name)
					}
				case h == nil || h.Value == nil:
					t.Errorf("%s %s: does not declare %s", what, status, name)
				case status == "503":
					if h.Value.Required {
						t.Errorf("%s %s: %s is required, but a 503 before the key is checked has none", what, status, name)
					}
				case !h.Value.Required:
					t.Errorf("%s %s: %s is not required", what, status, name)
				}
			}
			if status == "429" {
				if h := resp.Headers["Retry-After"]; h == nil || h.Value == nil || !h.Value.Required {
					t.Errorf("%s 429: Retry-After is not a required header", what)
				}
			}
		}
	}
}

// TestRateLimitedAnswersMatchDocument runs the service with the limits of
// spec 8.1 on a clock that stands still, uses up every kind of limit and
// validates each answer, 429s included, against the document. Every
// operation, the public ones included, is seen answering 429.
func TestRateLimitedAnswersMatchDocument(t *testing.T) {
	h := startService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	oc, err := h.sys.CreateOwner(ctx, "Limited Owner", "limited@guard.test", "")
	if err != nil {
		t.Fatal(err)
	}
	owner, liveOwner := oc.Keys[actors.EnvTest], oc.Keys[actors.EnvLive]
	newAgent := func(ownerKey string) (id, key string) {
		ag := h.want(h.do("POST", "/v1/agents", ownerKey, nil, `{"name":"a","policy":{"trusted_destinations":["api.vendor.com"]}}`), 201, "")
		key = h.want(h.do("POST", "/v1/agents/"+ag.str("id")+"/keys", ownerKey, nil, ""), 201, "").str("secret")
		return ag.str("id"), key
	}
	agentID, agent := newAgent(owner)
	_, spender := newAgent(owner)
	wantHeaders := func(r response, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("answered %d, want %d: %s", r.status, status, clip(r.raw))
		}
		for _, name := range rateHeaders {
			if r.header.Get(name) == "" {
				t.Errorf("%d answer without %s", status, name)
			}
		}
	}

	// Payments: 25 at once per agent, then 429 (and nothing created).
	for i := range 25 {
		wantHeaders(h.spend(spender, fmt.Sprintf("rl-%d", i), fmt.Sprintf(vendorSpend, "0.10")), 201)
	}
	wantHeaders(h.want(h.spend(spender, "rl-refused", fmt.Sprintf(vendorSpend, "0.10")), 429, "rate_limited"), 429)
	// Simulations: 70 at once per agent.
	for range 70 {
		wantHeaders(h.do("POST", "/v1/spends/check", spender, nil, `{"destination":"api.vendor.com"}`), 200)
	}
	h.want(h.do("POST", "/v1/spends/check", spender, nil, `{"destination":"api.vendor.com"}`), 429, "rate_limited")

	// Key creations: 10 a day per live owner.
	var liveAgents []string
	for range 4 {
		liveAgents = append(liveAgents, h.want(h.do("POST", "/v1/agents", liveOwner, nil, `{"name":"l"}`), 201, "").str("id"))
	}
	for i := range 10 {
		h.want(h.do("POST", "/v1/agents/"+liveAgents[i/3]+"/keys", liveOwner, nil, ""), 201, "")
	}
	h.want(h.do("POST", "/v1/agents/"+liveAgents[3]+"/keys", liveOwner, nil, ""), 429, "rate_limited")

	// Administration writes: 40 at once per key; 4 used by newAgent.
	for range 36 {
		h.want(h.do("POST", "/v1/agents/"+agentID+"/policy", owner, nil, `{"trusted_destinations":["api.vendor.com"]}`), 200, "")
	}
	h.want(h.do("POST", "/v1/agents/"+agentID+"/policy", owner, nil, `{}`), 429, "rate_limited")

	// Every request with a key: 150 at once per key. Use up the agent's
	// and the owner's, then call every keyed route with them.
	for _, key := range []string{agent, owner} {
		for {
			r := h.do("GET", "/v1/me", key, nil, "")
			if r.status == 429 {
				h.want(r, 429, "rate_limited")
				break
			}
			wantHeaders(r, 200)
		}
	}
	const (
		spd = "spd_00000000000000000000000000000000"
		apr = "apr_00000000000000000000000000000000"
		rcp = "rcp_00000000000000000000000000000000"
		agt = "agt_00000000000000000000000000000000"
		we  = "we_00000000000000000000000000000000"
	)
	for _, c := range []struct{ method, path, key, body string }{
		{"POST", "/v1/spends", agent, fmt.Sprintf(vendorSpend, "0.10")},
		{"GET", "/v1/spends", agent, ""},
		{"POST", "/v1/spends/check", agent, `{"destination":"api.vendor.com"}`},
		{"GET", "/v1/spends/" + spd, agent, ""},
		{"POST", "/v1/spends/" + spd + "/cancel", agent, ""},
		{"GET", "/v1/balance", agent, ""},
		{"GET", "/v1/policy", agent, ""},
		{"GET", "/v1/me", agent, ""},
		{"GET", "/v1/events", agent, ""},
		{"GET", "/v1/approvals/" + apr, agent, ""},
		{"GET", "/v1/receipts/" + rcp, agent, ""},
		{"GET", "/v1/receipts", agent, ""},
		{"POST", "/v1/agents", owner, `{"name":"x"}`},
		{"GET", "/v1/agents/" + agt, owner, ""},
		{"POST", "/v1/agents/" + agt, owner, `{"name":"x"}`},
		{"POST", "/v1/agents/pause_all", owner, ""},
		{"POST", "/v1/agents/" + agt + "/keys", owner, ""},
		{"GET", "/v1/agents/" + agt + "/policy", owner, ""},
		{"POST", "/v1/agents/" + agt + "/policy", owner, `{}`},
		{"POST", "/v1/agents/" + agt + "/destinations", owner, `{"pattern":"x.example.org","list":"blocked"}`},
		{"DELETE", "/v1/agents/" + agt + "/destinations/blocked/x.example.org", owner, ""},
		{"GET", "/v1/agents", owner, ""},
		{"POST", "/v1/agents/" + agt + "/pause", owner, ""},
		{"POST", "/v1/agents/" + agt + "/resume", owner, ""},
		{"POST", "/v1/agents/" + agt + "/archive", owner, ""},
		{"POST", "/v1/policy_changes/pol_00000000000000000000000000000000/cancel", owner, ""},
		{"GET", "/v1/policy_changes/pol_00000000000000000000000000000000", owner, ""},
		{"GET", "/v1/agents/" + agt + "/policy_changes", owner, ""},
		{"GET", "/v1/keys", owner, ""},
		{"POST", "/v1/keys/key_00000000000000000000000000000000/revoke", owner, ""},
		{"POST", "/v1/keys/key_00000000000000000000000000000000/rotate", owner, ""},
		{"POST", "/v1/owner_keys", owner, ""},
		{"GET", "/v1/funding", owner, ""},
		{"POST", "/v1/funding", owner, `{}`},
		{"POST", "/v1/test/deposits", owner, `{"amount":"1.00"}`},
		{"GET", "/v1/test/clock", owner, ""},
		{"POST", "/v1/test/clock/advance", owner, `{"seconds":60}`},
		{"GET", "/v1/webhook_endpoints", owner, ""},
		{"POST", "/v1/webhook_endpoints", owner, `{"url":"https://hooks.example.com","enabled_events":["*"]}`},
		{"GET", "/v1/webhook_endpoints/" + we, owner, ""},
		{"POST", "/v1/webhook_endpoints/" + we, owner, `{"status":"enabled"}`},
		{"DELETE", "/v1/webhook_endpoints/" + we, owner, ""},
		{"POST", "/v1/webhook_endpoints/" + we + "/rotate_secret", owner, ""},
		{"POST", "/v1/webhook_endpoints/" + we + "/test", owner, ""},
		{"POST", "/v1/test/events/evt_00000000000000000000000000000000/redeliver", owner, ""},
		{"POST", "/v1/test/reset", owner, ""},
		{"POST", "/v1/notification_channels", owner, `{"type":"chat","target":"https://chat.example.com/hook"}`},
		{"GET", "/v1/notification_channels", owner, ""},
		{"GET", "/v1/notification_channels/ntc_00000000000000000000000000000000", owner, ""},
		{"POST", "/v1/notification_channels/ntc_00000000000000000000000000000000", owner, `{"target":"https://chat.example.com/hook2"}`},
		{"DELETE", "/v1/notification_channels/ntc_00000000000000000000000000000000", owner, ""},
	} {
		r := h.do(c.method, c.path, c.key, map[string]string{"Idempotency-Key": "rl-key"}, c.body)
		h.want(r, 429, "rate_limited")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 429 without Retry-After", c.method, c.path)
		}
	}

	// Missing or invalid keys: 30 per IP, then 429 instead of 401.
	for range 30 {
		wantHeaders(h.want(h.do("GET", "/v1/me", "svc_test_agent_nope", nil, ""), 401, "invalid_api_key"), 401)
	}
	h.want(h.do("GET", "/v1/balance", "", nil, ""), 429, "rate_limited")
	// Routes without a key: 700 at once per IP, shared by the three.
	for range 700 {
		wantHeaders(h.do("GET", "/healthz", "", nil, ""), 200)
	}
	for _, path := range []string{"/healthz", "/.well-known/jwks.json", "/v1/openapi.json"} {
		wantHeaders(h.want(h.do("GET", path, "", nil, ""), 429, "rate_limited"), 429)
	}

	for _, op := range documentedOperationIDs(t) {
		if !h.seen[op][http.StatusTooManyRequests] {
			t.Errorf("operation %s was never seen answering 429 (statuses %v)", op, statuses(h.seen[op]))
		}
	}
	t.Logf("%d exchanges validated", h.n)
}
