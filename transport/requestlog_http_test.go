package transport_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

// logLine is the one line of the service's log that carries all of want
// (logfmt pairs like request_id=req_...), failing the test when none or
// several do.
func logLine(t *testing.T, s *guardtest.Server, want ...string) string {
	t.Helper()
	var found []string
	for _, line := range strings.Split(s.Logs(), "\n") {
		all := true
		for _, w := range want {
			if !strings.Contains(line, w) {
				all = false
				break
			}
		}
		if all && line != "" {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d log lines carry %q, want 1; the log:\n%s", len(found), want, s.Logs())
	}
	return found[0]
}

// The request_id a caller reads in an answer finds the request in the
// log, with the route's pattern (not the path, which holds ids and, on
// console links, tokens), the status, and the key that called.
func TestRequestLogFindsARequestByItsID(t *testing.T) {
	e := start(t)
	sp := created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/report"))
	id := sp["id"].(string)

	r := call(t, e.srv, http.MethodGet, "/v1/spends/"+id, e.agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	line := logLine(t, e.srv, "request_id="+r.Header.Get("Request-Id"))
	for _, w := range []string{"level=INFO", "msg=request", "method=GET", "route=/v1/spends/{id}", "status=200",
		"agent=" + e.agentID, "key=key_"} {
		if !strings.Contains(line, w) {
			t.Errorf("the request's log line lacks %q:\n%s", w, line)
		}
	}
	if strings.Contains(line, id) {
		t.Errorf("the log line names the spend id of the path; it should name the route only:\n%s", line)
	}

	// A refusal is logged with its code.
	r = call(t, e.srv, http.MethodGet, "/v1/spends/spd_nope", e.agentKey, nil, nil)
	line = logLine(t, e.srv, "request_id="+r.Header.Get("Request-Id"))
	if !strings.Contains(line, "status=404") || !strings.Contains(line, "code=resource_missing") {
		t.Errorf("a 404's log line lacks its status or code:\n%s", line)
	}
	// An unknown key is logged without a key of the caller.
	r = call(t, e.srv, http.MethodGet, "/v1/balance", "svc_test_agent_unknown", nil, nil)
	line = logLine(t, e.srv, "request_id="+r.Header.Get("Request-Id"))
	if !strings.Contains(line, "status=401") || strings.Contains(line, "key=") {
		t.Errorf("a 401's log line: %s", line)
	}
}

// With the access log off, the service's own failures are still logged,
// at error level, with the request_id the caller was given; successes are
// not.
func TestRequestLogKeepsFailuresWhenTheAccessLogIsOff(t *testing.T) {
	var failing atomic.Bool
	e := start(t, guardtest.WithConfig(func(c *wire.Config) { c.AccessLog = false }),
		guardtest.WithCommitFault(func(int) error {
			if failing.Load() {
				return errors.New("injected: the disk refuses the write")
			}
			return nil
		}))
	ok := call(t, e.srv, http.MethodGet, "/v1/balance", e.agentKey, nil, nil)
	mustStatus(t, ok, http.StatusOK)
	if strings.Contains(e.srv.Logs(), ok.Header.Get("Request-Id")) {
		t.Errorf("a 200 was logged with the access log off:\n%s", e.srv.Logs())
	}
	failing.Store(true)
	r := spend(t, e.srv, e.agentKey, newKey(), spendBody("2.00", "api.vendor.com", "/report"))
	failing.Store(false)
	mustStatus(t, r, http.StatusServiceUnavailable)
	line := logLine(t, e.srv, "request_id="+r.Header.Get("Request-Id"))
	for _, w := range []string{"level=ERROR", `msg="request failed"`, "route=/v1/spends", "status=503", "code=service_unavailable"} {
		if !strings.Contains(line, w) {
			t.Errorf("the failed request's log line lacks %q:\n%s", w, line)
		}
	}
}

// The owner's actions that change who may spend are logged for the
// operator: an emergency pause, a key revoked.
func TestOwnerActionsAreLogged(t *testing.T) {
	e := start(t)
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/keys", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusCreated)
	keyID := r.Body["id"].(string)
	logLine(t, e.srv, "action=key_created", "key="+keyID, "agent="+e.agentID, "owner="+e.owner.ID)

	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+keyID+"/revoke", e.owner.TestKey, nil, nil), http.StatusOK)
	logLine(t, e.srv, "action=key_revoked", "key="+keyID, "env=test")

	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/pause_all", e.owner.TestKey, nil, nil), http.StatusOK)
	logLine(t, e.srv, "action=emergency_pause", "paused=1", "complete=true", "owner="+e.owner.ID)
	// Asked again, nothing changes and nothing more is logged as paused.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/pause_all", e.owner.TestKey, nil, nil), http.StatusOK)
	logLine(t, e.srv, "action=emergency_pause", "already_paused=1")
}
