package transport_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var (
	endpointIDPattern = regexp.MustCompile(`^we_[0-9a-f]{32}$`)
	whsecPattern      = regexp.MustCompile(`^whsec_[0-9a-f]{64}$`)
)

// Create, read, list, update, delete; the secret is shown once and never
// in an event; agent keys are refused; practice and live are apart.
func TestWebhookEndpointLifecycle(t *testing.T) {
	e := start(t)
	owner := e.owner.TestKey
	created := createEndpoint(t, e.srv, owner, "https://hooks.example.com/guard", "spend.*", "agent.paused", "spend.*")
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if !endpointIDPattern.MatchString(id) || !whsecPattern.MatchString(secret) {
		t.Fatalf("created %s", mustJSONString(created))
	}
	if created["status"] != "enabled" || created["livemode"] != false || fmt.Sprint(created["enabled_events"]) != "[spend.* agent.paused]" {
		t.Fatalf("created %s", mustJSONString(created))
	}

	got := call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints/"+id, owner, nil, nil)
	mustStatus(t, got, http.StatusOK)
	list := call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints", owner, nil, nil)
	mustStatus(t, list, http.StatusOK)
	events := call(t, e.srv, http.MethodGet, "/v1/events?type=webhook_endpoint.created", owner, nil, nil)
	mustStatus(t, events, http.StatusOK)
	for what, r := range map[string][]byte{"GET": got.Raw, "list": list.Raw, "events": events.Raw} {
		if strings.Contains(string(r), secret) || strings.Contains(string(r), `"secret"`) {
			t.Errorf("%s shows the secret: %s", what, r)
		}
	}
	if data := list.Body["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != id {
		t.Fatalf("list %s", list.Raw)
	}
	evs := events.Body["data"].([]any)
	if len(evs) != 1 || obj(t, obj(t, evs[0].(map[string]any), "data"), "object")["id"] != id {
		t.Fatalf("webhook_endpoint.created events: %s", events.Raw)
	}

	upd := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id, owner, nil,
		`{"url":"https://hooks.example.com/v2","enabled_events":["*"]}`)
	mustStatus(t, upd, http.StatusOK)
	if upd.Body["url"] != "https://hooks.example.com/v2" || fmt.Sprint(upd.Body["enabled_events"]) != "[*]" {
		t.Fatalf("update: %s", upd.Raw)
	}
	if g := getEndpoint(t, e.srv, owner, id); g["url"] != "https://hooks.example.com/v2" {
		t.Fatalf("the update did not stay: %v", g["url"])
	}

	// Agent keys never administer; the live environment does not see
	// practice endpoints, nor the other way round.
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints", e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", e.agentKey, nil,
		`{"url":"https://x.example.com","enabled_events":["*"]}`), 403, "permission_error", "key_kind_not_allowed", "")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints/"+id, e.owner.LiveKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	if ids, _ := listIDs(t, e.srv, e.owner.LiveKey, "/v1/webhook_endpoints"); len(ids) != 0 {
		t.Fatalf("live lists practice endpoints: %v", ids)
	}
	live := createEndpoint(t, e.srv, e.owner.LiveKey, "https://hooks.example.com/live", "*")
	if live["livemode"] != true {
		t.Fatalf("live endpoint %s", mustJSONString(live))
	}
	wantError(t, call(t, e.srv, http.MethodDelete, "/v1/webhook_endpoints/"+live["id"].(string), owner, nil, nil), 404, "not_found_error", "resource_missing", "")
	other := e.srv.NewOwner(t)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints/"+id, other.TestKey, nil, nil), 404, "not_found_error", "resource_missing", "")

	del := call(t, e.srv, http.MethodDelete, "/v1/webhook_endpoints/"+id, owner, nil, nil)
	mustStatus(t, del, http.StatusOK)
	if del.Body["deleted"] != true || del.Body["id"] != id {
		t.Fatalf("delete: %s", del.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints/"+id, owner, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodDelete, "/v1/webhook_endpoints/"+id, owner, nil, nil), 404, "not_found_error", "resource_missing", "")
	if ids, _ := listIDs(t, e.srv, owner, "/v1/webhook_endpoints"); len(ids) != 0 {
		t.Fatalf("after delete: %v", ids)
	}
}

// Ten endpoints per owner, practice and live together (spec 8.3); the
// eleventh is refused in either environment and changes nothing.
func TestWebhookEndpointQuota(t *testing.T) {
	e := start(t)
	var first string
	for i := range 9 {
		ep := createEndpoint(t, e.srv, e.owner.TestKey, fmt.Sprintf("https://hooks.example.com/%d", i), "*")
		if i == 0 {
			first = ep["id"].(string)
		}
	}
	createEndpoint(t, e.srv, e.owner.LiveKey, "https://hooks.example.com/live", "*")
	for _, key := range []string{e.owner.TestKey, e.owner.LiveKey} {
		r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", key, nil, `{"url":"https://hooks.example.com/11","enabled_events":["*"]}`)
		wantError(t, r, 409, "invalid_request_error", "quota_exceeded", "")
		if msg := errorOf(t, r)["message"].(string); !strings.Contains(msg, "10 webhook endpoints, practice and live together") {
			t.Errorf("quota message %q does not say the limit", msg)
		}
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/webhook_endpoints"); len(ids) != 9 || ids[0] != first {
		t.Fatalf("after the refusal: %d endpoints, %v", len(ids), ids)
	}
	mustStatus(t, call(t, e.srv, http.MethodDelete, "/v1/webhook_endpoints/"+first, e.owner.TestKey, nil, nil), http.StatusOK)
	createEndpoint(t, e.srv, e.owner.LiveKey, "https://hooks.example.com/again", "*")
}

// Bad input is a 400 naming the field, and creates or changes nothing.
func TestWebhookEndpointInput(t *testing.T) {
	e := start(t)
	owner := e.owner.TestKey
	for _, tc := range []struct {
		body        string
		code, param string
	}{
		{`{"enabled_events":["*"]}`, "parameter_missing", "url"},
		{`{"url":"https://a.example.com"}`, "parameter_missing", "enabled_events"},
		{`{"url":"http://hooks.example.com/x","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"http://10.0.0.5/x","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"https://user:pw@hooks.example.com/x","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"/relative","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"ftp://hooks.example.com","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"https://hooks.example.com/#frag","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"https://` + strings.Repeat("a", 2050) + `.com","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":5,"enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"https://a.example.com","enabled_events":[]}`, "parameter_invalid", "enabled_events"},
		{`{"url":"https://a.example.com","enabled_events":["spend.setled"]}`, "parameter_invalid", "enabled_events"},
		{`{"url":"https://a.example.com","enabled_events":["nothing.*"]}`, "parameter_invalid", "enabled_events"},
		{`{"url":"https://a.example.com","enabled_events":["spend*"]}`, "parameter_invalid", "enabled_events"},
		{`{"url":"https://a.example.com","enabled_events":"*"}`, "parameter_invalid", "enabled_events"},
		{`{"url":"https://a.example.com:99999/h","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"https://a.example.com:0/h","enabled_events":["*"]}`, "parameter_invalid", "url"},
		{`{"url":"https://a.example.com","enabled_events":["*"],"secret":"whsec_x"}`, "parameter_unknown", "secret"},
	} {
		r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", owner, nil, tc.body)
		if r.Status != 400 || errorOf(t, r)["code"] != tc.code || errorOf(t, r)["param"] != tc.param {
			t.Errorf("%s: %d %s", clipString(tc.body), r.Status, r.Raw)
		}
	}
	// A list sent as a string is told it must be an array of strings.
	r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", owner, nil, `{"url":"https://a.example.com","enabled_events":"*"}`)
	if msg := errorOf(t, r)["message"].(string); !strings.Contains(msg, "array of strings") {
		t.Errorf("enabled_events as a string: %q, want it to ask for an array of strings", msg)
	}
	// A null entry is called what it is, not the quoted empty text.
	r = call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", owner, nil, `{"url":"https://a.example.com","enabled_events":["*",null]}`)
	if msg := errorOf(t, r)["message"].(string); r.Status != 400 || !strings.Contains(msg, "enabled_events[1] is empty or null") {
		t.Errorf("enabled_events with a null: %d %q", r.Status, msg)
	}
	// The message says what plain http is allowed for.
	r = call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", owner, nil, `{"url":"http://hooks.example.com","enabled_events":["*"]}`)
	if msg := errorOf(t, r)["message"].(string); !strings.Contains(msg, "loopback") {
		t.Errorf("the url message does not explain plain http: %q", msg)
	}
	if ids, _ := listIDs(t, e.srv, owner, "/v1/webhook_endpoints"); len(ids) != 0 {
		t.Fatalf("refused requests created %v", ids)
	}
	// Loopback receivers may use plain http.
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::1]:9/x"} {
		createEndpoint(t, e.srv, owner, u, "spend.settled")
	}
	id, _ := listIDs(t, e.srv, owner, "/v1/webhook_endpoints")
	for _, tc := range []struct {
		body        string
		code, param string
	}{
		{`{}`, "parameter_missing", ""},
		{`{"status":"disabled"}`, "parameter_invalid", "status"},
		{`{"url":"http://example.com"}`, "parameter_invalid", "url"},
		{`{"enabled_events":["*","bogus"]}`, "parameter_invalid", "enabled_events"},
		{`{"enabled":true}`, "parameter_unknown", "enabled"},
		{`{"url":null}`, "parameter_invalid", "url"},
		{`{"enabled_events":null,"status":"enabled"}`, "parameter_invalid", "enabled_events"},
	} {
		r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id[0], owner, nil, tc.body)
		if r.Status != 400 || errorOf(t, r)["code"] != tc.code || errorOf(t, r)["param"] != nilIfEmpty(tc.param) {
			t.Errorf("update %s: %d %s", tc.body, r.Status, r.Raw)
		}
	}
	if g := getEndpoint(t, e.srv, owner, id[0]); g["url"] != "http://127.0.0.1:9/x" || fmt.Sprint(g["enabled_events"]) != "[spend.settled]" {
		t.Fatalf("refused updates changed the endpoint: %v", g)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id[0]+"/rotate_secret", owner, nil, `{"grace_period_hours":169}`),
		400, "invalid_request_error", "parameter_invalid", "grace_period_hours")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/we_00000000000000000000000000000000/test", owner, nil, nil),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id[0]+"/test", owner, nil, `{"event":"x"}`),
		400, "invalid_request_error", "parameter_unknown", "event")
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func clipString(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Live endpoints name only public hosts: an owner's URL must not reach
// what only the service can (cloud metadata, internal networks, its own
// ports). Practice endpoints may name local receivers.
func TestLiveWebhookEndpointsArePublic(t *testing.T) {
	e := start(t)
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost:9/x", "https://169.254.169.254/latest",
		"https://10.0.0.1/h", "https://[::ffff:127.0.0.1]/x", "https://[fd00::1]/x", "https://api.localhost/x",
		"https://127.1/h", "https://2130706433/h", "https://0177.0.0.1/h", "https://0x7f000001/h"} {
		r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", e.owner.LiveKey, nil,
			`{"url":"`+u+`","enabled_events":["*"]}`)
		if r.Status != 400 || errorOf(t, r)["param"] != "url" || !strings.Contains(errorOf(t, r)["message"].(string), "public") {
			t.Errorf("live endpoint %s: %d %s, want 400 naming url as not public", u, r.Status, r.Raw)
		}
	}
	live := createEndpoint(t, e.srv, e.owner.LiveKey, "https://hooks.example.com/x", "*")["id"].(string)
	r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+live, e.owner.LiveKey, nil, `{"url":"https://192.168.1.1/x"}`)
	if r.Status != 400 || errorOf(t, r)["param"] != "url" {
		t.Errorf("moving a live endpoint to a private address: %d %s", r.Status, r.Raw)
	}
	createEndpoint(t, e.srv, e.owner.TestKey, "http://127.0.0.1:9/x", "*")
	createEndpoint(t, e.srv, e.owner.TestKey, "https://10.0.0.1/h", "*")
	// Local receivers are fine in practice, but no receiver is link-local:
	// the cloud metadata endpoint is refused there too.
	for _, u := range []string{"https://169.254.169.254/latest", "https://[fe80::1]/x", "https://0.0.0.0/x"} {
		r := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints", e.owner.TestKey, nil, `{"url":"`+u+`","enabled_events":["*"]}`)
		if r.Status != 400 || errorOf(t, r)["param"] != "url" || !strings.Contains(errorOf(t, r)["message"].(string), "link-local") {
			t.Errorf("practice endpoint %s: %d %s, want 400 naming url as link-local", u, r.Status, r.Raw)
		}
	}
}
