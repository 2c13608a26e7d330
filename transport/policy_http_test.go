package transport_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// A loosening waits an hour (policy.change_requested), then applies by
// itself with policy.updated; a tightening applies at once.
func TestLooseningWaitsThenApplies(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	path := "/v1/agents/" + e.agentID + "/policy"
	loose := `{"per_spend_limit":"100.00","daily_cap":"450.00","monthly_cap":"500.00","approval_over":"100.00","trusted_destinations":["api.vendor.com","*.shop.io"]}`
	r := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, loose)
	mustStatus(t, r, http.StatusOK)
	if r.Body["version"].(float64) != 2 || r.Body["effective_at"] == r.Body["created_at"] {
		t.Fatalf("a loosening must wait: %s", r.Raw)
	}
	if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil).Body["daily_cap"]; got != "400.00" {
		t.Fatalf("daily_cap %v before the loosening applies, want 400.00", got)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.change_requested"); len(ids) != 1 {
		t.Fatalf("%d policy.change_requested events, want 1", len(ids))
	}
	clock.Advance(time.Hour + time.Second)
	quiesce(t, e.srv)
	if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil).Body["daily_cap"]; got != "450.00" {
		t.Fatalf("daily_cap %v an hour after the loosening, want 450.00", got)
	}
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/events?type=policy.updated"); len(ids) != 1 {
		t.Fatalf("%d policy.updated events seen by the agent, want 1", len(ids))
	}
	tight := `{"per_spend_limit":"50.00","daily_cap":"300.00","monthly_cap":"500.00","approval_over":"100.00","trusted_destinations":["api.vendor.com"]}`
	r = call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, tight)
	mustStatus(t, r, http.StatusOK)
	if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil).Body["per_spend_limit"]; got != "50.00" {
		t.Fatalf("a tightening applies at once; per_spend_limit is %v", got)
	}
}

// A loosening cancelled before its time never applies.
func TestCancelledLooseningNeverApplies(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	loose := `{"per_spend_limit":"100.00","daily_cap":"450.00","monthly_cap":"500.00","approval_over":"100.00","trusted_destinations":["api.vendor.com","*.shop.io"]}`
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/policy", e.owner.TestKey, nil, loose)
	mustStatus(t, r, http.StatusOK)
	polID := r.Body["id"].(string)
	for i := 0; i < 2; i++ { // cancelling twice answers the same cancelled change
		c := call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+polID+"/cancel", e.owner.TestKey, nil, nil)
		mustStatus(t, c, http.StatusOK)
		if c.Body["status"] != "cancelled" || c.Body["cancelled_at"] == nil {
			t.Fatalf("cancel answered %s", c.Raw)
		}
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+polID+"/cancel", e.agentKey, nil, nil),
		403, "permission_error", "key_kind_not_allowed", "")
	other := e.srv.NewOwner(t)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+polID+"/cancel", other.TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
	clock.Advance(2 * time.Hour)
	quiesce(t, e.srv)
	if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil).Body["daily_cap"]; got != "400.00" {
		t.Fatalf("daily_cap %v after the cancelled loosening's time, want 400.00", got)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.updated"); len(ids) != 0 {
		t.Fatalf("%d policy.updated events for a cancelled change", len(ids))
	}
}

// quiesce waits until the service has handled everything the fake clock
// set off (timers only send messages; this waits for them to be handled
// and made durable).
func quiesce(t *testing.T, s *guardtest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Service().System().Quiesce(ctx); err != nil {
		t.Fatalf("the service did not come to rest: %v", err)
	}
}
