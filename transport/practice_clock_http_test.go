package transport_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

func advanceClock(t *testing.T, e *env, seconds int) map[string]any {
	t.Helper()
	r := call(t, e.srv, http.MethodPost, "/v1/test/clock/advance", e.owner.TestKey, nil, `{"seconds":`+strconv.Itoa(seconds)+`}`)
	mustStatus(t, r, http.StatusOK)
	quiesce(t, e.srv) // the agents catch up with the new time
	return r.Body
}

// Moving the practice clock across 00:00 UTC resets the daily cap, and
// approvals whose lifetime ends under it expire with spend.expired.
func TestPracticeClockResetsDailyCapAndExpiresApprovals(t *testing.T) {
	e := start(t) // the service clock is frozen at 12:00 UTC
	_, key := e.srv.NewAgent(t, e.owner.TestKey,
		`{"per_spend_limit":"10.00","daily_cap":"10.00","monthly_cap":"100.00","approval_over":"10.00","trusted_destinations":["api.vendor.com"]}`)
	if sp := created(t, e.srv, key, spendBody("9.00", "api.vendor.com", "/a")); sp["status"] != "settled" {
		t.Fatalf("first spend: %v", sp["status"])
	}
	if sp := created(t, e.srv, key, spendBody("5.00", "api.vendor.com", "/b")); sp["decline_reason"] != "daily_cap" {
		t.Fatalf("over the cap: %v %v", sp["status"], sp["decline_reason"])
	}
	waiting := created(t, e.srv, key, spendBody("1.00", "untrusted.example.org", "/w"))
	if waiting["status"] != "pending_approval" {
		t.Fatalf("want a pending spend, got %v", waiting["status"])
	}

	clk := advanceClock(t, e, 16*60) // past the 15-minute approval lifetime
	if clk["offset_seconds"].(float64) != 960 {
		t.Fatalf("clock after the advance: %v", clk)
	}
	w := getSpend(t, e.srv, key, waiting["id"].(string), "")
	if w.Body["status"] != "expired" || w.Body["hold"] != nil {
		t.Fatalf("the approval did not expire under the practice clock: %s", w.Raw)
	}
	if ids, _ := listIDs(t, e.srv, key, "/v1/events?type=spend.expired"); len(ids) != 1 {
		t.Fatalf("%d spend.expired events, want 1", len(ids))
	}
	// Still the same UTC day: still capped.
	if sp := created(t, e.srv, key, spendBody("5.00", "api.vendor.com", "/c")); sp["decline_reason"] != "daily_cap" {
		t.Fatalf("before midnight: %v %v", sp["status"], sp["decline_reason"])
	}
	advanceClock(t, e, 12*3600) // now past 00:00 UTC
	if sp := created(t, e.srv, key, spendBody("5.00", "api.vendor.com", "/d")); sp["status"] != "settled" {
		t.Fatalf("after midnight the daily cap should have reset: %v %v", sp["status"], sp["decline_reason"])
	}
	b := balance(t, e.srv, key)
	if got := obj(t, b, "components")["daily_remaining"]; got == "1.00" || got == "0.00" {
		t.Fatalf("daily_remaining %v counts yesterday's spend", got)
	}
}

// A rotated practice key works until its grace ends on the practice clock
// and not after.
func TestPracticeClockEndsRotationGrace(t *testing.T) {
	e := start(t)
	me := call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil)
	keyID := obj(t, me.Body, "key")["id"].(string)
	r := call(t, e.srv, http.MethodPost, "/v1/keys/"+keyID+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":1}`)
	mustStatus(t, r, http.StatusCreated)
	advanceClock(t, e, 59*60)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK)
	advanceClock(t, e, 2*60)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", r.Body["secret"].(string), nil, nil), http.StatusOK)
}

// The practice clock ages agent keys, never owner keys: an advance past an
// owner key's life would lock the owner out of the controls, reset among
// them, that could undo it, with no key left to make another.
func TestPracticeClockNeverEndsOwnerKeys(t *testing.T) {
	e := start(t)
	advanceClock(t, e, 31622400) // a year: past every practice key's 90 days
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.owner.TestKey, nil, nil), http.StatusOK)
	// An owner key made now lives 90 days of the service clock.
	k := call(t, e.srv, http.MethodPost, "/v1/owner_keys", e.owner.TestKey, nil, nil)
	mustStatus(t, k, http.StatusCreated)
	if want := e.srv.Clock.Now().Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339); k.Body["expires_at"] != want {
		t.Fatalf("an owner key made on an advanced practice clock expires at %v, want %s", k.Body["expires_at"], want)
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil), http.StatusOK)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", k.Body["secret"].(string), nil, nil), http.StatusOK)
}

func TestPracticeClockInput(t *testing.T) {
	e := start(t)
	for _, body := range []string{`{}`, `{"seconds":0}`, `{"seconds":-5}`, `{"seconds":31622401}`, `{"seconds":"60"}`} {
		r := call(t, e.srv, http.MethodPost, "/v1/test/clock/advance", e.owner.TestKey, nil, body)
		if r.Status != http.StatusBadRequest || errorOf(t, r)["param"] != "seconds" {
			t.Fatalf("%s answered %d: %s", body, r.Status, r.Raw)
		}
	}
	if c := call(t, e.srv, http.MethodGet, "/v1/test/clock", e.owner.TestKey, nil, nil); c.Body["offset_seconds"].(float64) != 0 {
		t.Fatalf("a refused advance moved the clock: %s", c.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/clock/advance", e.owner.LiveKey, nil, `{"seconds":60}`),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/test/clock", e.agentKey, nil, nil),
		403, "permission_error", "key_kind_not_allowed", "")
}

// A payment whose outcome is unknown is verified again after a delay; on
// the practice clock an advance brings that verification forward, as it
// brings every other timer.
func TestPracticeClockBringsVerificationForward(t *testing.T) {
	e := start(t)
	sp := created(t, e.srv, e.agentKey, spendBody("98.00", "api.vendor.com", "/v1/data"))
	if sp["status"] != "processing" {
		t.Fatalf("98.00: status %v, want processing", sp["status"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Clock.WaitForTimers(ctx, 1); err != nil {
		t.Fatalf("the service scheduled no verification: %v", err)
	}
	// The service clock stays frozen: only the practice clock moves.
	r := call(t, e.srv, http.MethodPost, "/v1/test/clock/advance", e.owner.TestKey, nil, `{"seconds":60}`)
	mustStatus(t, r, http.StatusOK)
	if g := waitStatus(t, e.srv, e.agentKey, sp["id"].(string), "settled"); g.Body["status"] != "settled" {
		t.Fatalf("after the practice clock moved: %s", g.Raw)
	}
}

// A balance read twice with nothing changed in between may be answered
// from the first computation, but not once the service clock has crossed
// 00:00 UTC: the daily cap has reset even though no spend, funding or
// practice clock move announced it.
func TestBalanceFollowsMidnightWithoutAnyChange(t *testing.T) {
	clock := guardtest.NewFakeClock(time.Date(2026, 3, 31, 23, 58, 0, 0, time.UTC))
	e := start(t, guardtest.WithClock(clock))
	_, key := e.srv.NewAgent(t, e.owner.TestKey,
		`{"per_spend_limit":"10.00","daily_cap":"10.00","monthly_cap":"100.00","approval_over":"10.00","trusted_destinations":["api.vendor.com"]}`)
	if sp := created(t, e.srv, key, spendBody("9.00", "api.vendor.com", "/a")); sp["status"] != "settled" {
		t.Fatalf("spend: %v", sp["status"])
	}
	before := obj(t, balance(t, e.srv, key), "components")["daily_remaining"]
	if before == "10.00" {
		t.Fatalf("daily_remaining %v does not count the settled spend", before)
	}
	// The second read may come from the first.
	if again := obj(t, balance(t, e.srv, key), "components")["daily_remaining"]; again != before {
		t.Fatalf("daily_remaining moved from %v to %v with nothing changed", before, again)
	}
	clock.Advance(3 * time.Minute) // 00:01 on the 1st: a new day and a new month
	b := balance(t, e.srv, key)
	comp := obj(t, b, "components")
	if comp["daily_remaining"] != "10.00" || comp["monthly_remaining"] != "100.00" || b["spendable"] != "10.00" {
		t.Fatalf("after midnight the balance still counts yesterday's spend: %v", b)
	}
}

// The practice controls do not exist for live keys of either kind (spec
// 4.1, 7.1): a live agent key gets the same 404 as a live owner key, not a
// 403 that would tell it the route is there. A practice agent key gets 403.
func TestPracticeControlsDoNotExistForLiveKeys(t *testing.T) {
	e := start(t)
	_, liveAgentKey := e.srv.NewAgent(t, e.owner.LiveKey, testPolicy)
	if !strings.HasPrefix(liveAgentKey, "svc_live_") {
		t.Fatalf("not a live agent key: %s", liveAgentKey)
	}
	for _, rt := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/test/clock", ""},
		{http.MethodPost, "/v1/test/clock/advance", `{"seconds":60}`},
		{http.MethodPost, "/v1/test/deposits", `{"amount":"1.00"}`},
		{http.MethodPost, "/v1/test/reset", ""},
		{http.MethodPost, "/v1/test/events/evt_00000000000000000000000000000000/redeliver", ""},
	} {
		var body any
		if rt.body != "" {
			body = rt.body
		}
		for _, key := range []string{e.owner.LiveKey, liveAgentKey} {
			wantError(t, call(t, e.srv, rt.method, rt.path, key, nil, body), 404, "not_found_error", "resource_missing", "")
		}
		wantError(t, call(t, e.srv, rt.method, rt.path, e.agentKey, nil, body), 403, "permission_error", "key_kind_not_allowed", "")
	}
}
