package transport_test

import (
	"net/http"
	"testing"

	"github.com/agentpay/guard/internal/guardtest"
)

var fundingFields = []string{"object", "livemode", "balance", "held", "pool_available", "reserve_floor",
	"low_balance_threshold", "request_id"}

// funding reads GET /v1/funding and checks its shape.
func funding(t *testing.T, s *guardtest.Server, ownerKey string) map[string]any {
	t.Helper()
	r := call(t, s, http.MethodGet, "/v1/funding", ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	for _, f := range fundingFields {
		if _, ok := r.Body[f]; !ok {
			t.Fatalf("funding lacks %q: %s", f, r.Raw)
		}
	}
	if r.Body["object"] != "funding" {
		t.Fatalf("funding object %v", r.Body["object"])
	}
	return r.Body
}

func TestFundingReadAndUpdate(t *testing.T) {
	e := start(t)
	f := funding(t, e.srv, e.owner.TestKey)
	want := map[string]any{"livemode": false, "balance": "1000.00", "held": "0.00", "pool_available": "1000.00",
		"reserve_floor": "0.00", "low_balance_threshold": "0.00"}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("new practice funding %s = %v, want %v", k, f[k], v)
		}
	}
	live := funding(t, e.srv, e.owner.LiveKey)
	if live["livemode"] != true || live["balance"] != "0.00" {
		t.Errorf("live funding %v", live)
	}

	r := call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{"reserve_floor":"250.5","low_balance_threshold":"100"}`)
	mustStatus(t, r, http.StatusOK)
	if r.Body["reserve_floor"] != "250.50" || r.Body["low_balance_threshold"] != "100.00" || r.Body["balance"] != "1000.00" {
		t.Fatalf("update answered %s", r.Raw)
	}
	// Omitted fields stay.
	r = call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{"low_balance_threshold":"50.00"}`)
	mustStatus(t, r, http.StatusOK)
	if r.Body["reserve_floor"] != "250.50" || r.Body["low_balance_threshold"] != "50.00" {
		t.Fatalf("partial update answered %s", r.Raw)
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{}`), http.StatusOK)

	// Invalid input names the field and changes nothing.
	for _, c := range []struct{ body, code, param string }{
		{`{"reserve_floor":"-1.00"}`, "parameter_invalid", "reserve_floor"},
		{`{"reserve_floor":10}`, "parameter_invalid", "reserve_floor"},
		{`{"low_balance_threshold":"1e3"}`, "parameter_invalid", "low_balance_threshold"},
		{`{"low_balance_threshold":"1.0000001"}`, "parameter_invalid", "low_balance_threshold"},
		{`{"reserve_floor":"1000.01"}`, "parameter_invalid", "reserve_floor"}, // above pool_available
		{`{"reserve":"1.00"}`, "parameter_unknown", "reserve"},
		{`{"reserve_floor":"1.00","reserve_floor":"2.00"}`, "invalid_json", "reserve_floor"},
		{`{"reserve_floor":null}`, "parameter_invalid", "reserve_floor"}, // would read as left out
		{`{"reserve_floor":"0","low_balance_threshold":null}`, "parameter_invalid", "low_balance_threshold"},
	} {
		wantError(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, c.body), 400, "invalid_request_error", c.code, c.param)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, map[string]string{"Content-Type": "text/plain"}, `{}`),
		400, "invalid_request_error", "unsupported_content_type", "Content-Type")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/funding?expand=all", e.owner.TestKey, nil, nil), 400, "invalid_request_error", "parameter_unknown", "expand")
	if f := funding(t, e.srv, e.owner.TestKey); f["reserve_floor"] != "250.50" || f["low_balance_threshold"] != "50.00" {
		t.Fatalf("refused updates changed the funding: %v", f)
	}
	// Agent keys never see or change the pool settings.
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/funding", e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.agentKey, nil, `{}`), 403, "permission_error", "key_kind_not_allowed", "")
	// The live environment has its own settings.
	if f := funding(t, e.srv, e.owner.LiveKey); f["reserve_floor"] != "0.00" {
		t.Fatalf("a practice change reached live: %v", f)
	}
}

// The reserve floor is what agents can never spend: it shows in their
// balance and limits their payments at once.
func TestReserveFloorLimitsSpending(t *testing.T) {
	e := start(t)
	if b := balance(t, e.srv, e.agentKey); b["spendable"] != "100.00" {
		t.Fatalf("spendable before the floor: %v", b["spendable"])
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{"reserve_floor":"950.00"}`), http.StatusOK)
	b := balance(t, e.srv, e.agentKey)
	comp := obj(t, b, "components")
	if comp["reserve_floor"] != "950.00" || comp["pool_available"] != "1000.00" || b["spendable"] != "50.00" ||
		b["limiting_factor"] != "pool_available" {
		t.Fatalf("balance with a floor of 950.00: %v", b)
	}
	sp := created(t, e.srv, e.agentKey, spendBody("60.00", "api.vendor.com", "/over-floor"))
	if sp["status"] != "declined" || sp["decline_reason"] != "insufficient_funds" {
		t.Fatalf("a spend above pool minus floor: %v %v", sp["status"], sp["decline_reason"])
	}
	if sp := created(t, e.srv, e.agentKey, spendBody("50.00", "api.vendor.com", "/at-floor")); sp["status"] != "settled" {
		t.Fatalf("a spend of exactly pool minus floor: %v", sp["status"])
	}
	// Lowering the floor gives the room back. (The practice rail may
	// settle below the amount asked, so the pool is read, not assumed.)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{"reserve_floor":"0"}`), http.StatusOK)
	b = balance(t, e.srv, e.agentKey)
	comp = obj(t, b, "components")
	if b["spendable"] != "100.00" || comp["reserve_floor"] != "0.00" || dec(t, comp["pool_available"]).Cmp(dec(t, "1000.00")) >= 0 {
		t.Fatalf("balance after lowering the floor: %v", b)
	}
	if f := funding(t, e.srv, e.owner.TestKey); f["pool_available"] != comp["pool_available"] {
		t.Fatalf("funding pool %v, the agent's balance shows %v", f["pool_available"], comp["pool_available"])
	}
}

// A practice deposit raises the pool and emits awaiting_deposit,
// deposit_received and converted, in that order.
func TestPracticeDeposit(t *testing.T) {
	e := start(t)
	r := call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.owner.TestKey, nil, `{"amount":"250.25"}`)
	mustStatus(t, r, http.StatusCreated)
	depositID, _ := r.Body["deposit"].(string)
	if r.Body["object"] != "funding" || r.Body["balance"] != "1250.25" || r.Body["pool_available"] != "1250.25" || depositID == "" {
		t.Fatalf("deposit answered %s", r.Raw)
	}
	if f := funding(t, e.srv, e.owner.TestKey); f["pool_available"] != "1250.25" {
		t.Fatalf("pool after the deposit: %v", f["pool_available"])
	}
	if b := balance(t, e.srv, e.agentKey); obj(t, b, "components")["pool_available"] != "1250.25" {
		t.Fatalf("the agent's balance after the deposit: %v", b)
	}
	evs := ownerEvents(t, e.srv, e.owner.TestKey, "funding.*")
	if len(evs) != 3 {
		t.Fatalf("%d funding events, want 3", len(evs))
	}
	wantTypes := []string{"funding.awaiting_deposit", "funding.deposit_received", "funding.converted"}
	var last float64
	for i, typ := range wantTypes {
		ev := evs[len(evs)-1-i] // listed newest first
		o := obj(t, obj(t, ev, "data"), "object")
		if ev["type"] != typ || o["id"] != depositID || o["object"] != "funding" || o["amount"] != "250.25" ||
			o["status"] != typ[len("funding."):] {
			t.Fatalf("funding event %d: %v", i, ev)
		}
		seq := ev["sequence"].(float64)
		if seq <= last {
			t.Fatalf("%s has sequence %v after %v", typ, seq, last)
		}
		last = seq
	}
	// Agents do not see funding events.
	if evs := ownerEvents(t, e.srv, e.agentKey, "funding.*"); len(evs) != 0 {
		t.Fatalf("an agent sees %d funding events", len(evs))
	}
}

// Invalid deposits are 400 and change nothing; a deposit above the
// practice ceiling fails with funding.failed; live keys find no route.
func TestPracticeDepositRefusals(t *testing.T) {
	e := start(t)
	for _, c := range []struct{ body, code, param string }{
		{`{"amount":"0"}`, "amount_invalid", "amount"},
		{`{"amount":"-5"}`, "amount_invalid", "amount"},
		{`{"amount":"abc"}`, "amount_invalid", "amount"},
		{`{"amount":5}`, "parameter_invalid", "amount"},
		{`{}`, "parameter_missing", "amount"},
		{`{"amount":"5.00","currency":"usdc"}`, "parameter_unknown", "currency"},
	} {
		wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.owner.TestKey, nil, c.body), 400, "invalid_request_error", c.code, c.param)
	}
	if evs := ownerEvents(t, e.srv, e.owner.TestKey, "funding.*"); len(evs) != 0 {
		t.Fatalf("invalid deposits emitted %d events", len(evs))
	}
	// The ceiling: 1,000,000.00 in practice.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.owner.TestKey, nil, `{"amount":"999000.01"}`),
		409, "invalid_request_error", "deposit_failed", "amount")
	evs := ownerEvents(t, e.srv, e.owner.TestKey, "funding.*")
	if len(evs) != 1 || evs[0]["type"] != "funding.failed" || obj(t, obj(t, evs[0], "data"), "object")["status"] != "failed" {
		t.Fatalf("a failed deposit emitted %v", evs)
	}
	if f := funding(t, e.srv, e.owner.TestKey); f["balance"] != "1000.00" {
		t.Fatalf("a failed deposit changed the balance: %v", f["balance"])
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.owner.TestKey, nil, `{"amount":"999000.00"}`), http.StatusCreated)
	// A live key: the practice control does not exist for it.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.owner.LiveKey, nil, `{"amount":"1.00"}`),
		404, "not_found_error", "resource_missing", "")
	if f := funding(t, e.srv, e.owner.LiveKey); f["balance"] != "0.00" {
		t.Fatalf("a live deposit attempt changed the live balance: %v", f["balance"])
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.agentKey, nil, `{"amount":"1.00"}`),
		403, "permission_error", "key_kind_not_allowed", "")
}

// wallet.low_balance is sent once per crossing: when pool_available goes
// from at or above the threshold to below it, not again while it stays
// below, and again after it has risen back and fallen once more.
func TestLowBalanceOncePerCrossing(t *testing.T) {
	e := start(t)
	lows := func() []map[string]any { return ownerEvents(t, e.srv, e.owner.TestKey, "wallet.low_balance") }
	setThreshold := func(v string) {
		t.Helper()
		mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{"low_balance_threshold":"`+v+`"}`), http.StatusOK)
	}
	deposit := func(v string) {
		t.Helper()
		mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", e.owner.TestKey, nil, `{"amount":"`+v+`"}`), http.StatusCreated)
	}
	setThreshold("900.00") // pool 1000.00: above, nothing
	if n := len(lows()); n != 0 {
		t.Fatalf("%d warnings with the pool above the threshold", n)
	}
	setThreshold("1200") // below: the first crossing, shown as 1200.00
	got := lows()
	if len(got) != 1 {
		t.Fatalf("%d warnings after the first crossing, want 1", len(got))
	}
	o := obj(t, obj(t, got[0], "data"), "object")
	if o["object"] != "wallet" || o["pool_available"] != "1000.00" || o["low_balance_threshold"] != "1200.00" || got[0]["agent_id"] != "" {
		t.Fatalf("wallet.low_balance carries %v", got[0])
	}
	if evs := ownerEvents(t, e.srv, e.agentKey, "wallet.*"); len(evs) != 0 {
		t.Fatalf("an agent sees %d wallet events", len(evs))
	}
	// Still below: no new warning, whatever changes.
	setThreshold("1100.00")
	deposit("50.00") // 1050.00 < 1100.00
	if n := len(lows()); n != 1 {
		t.Fatalf("%d warnings while the pool stays below, want 1", n)
	}
	// Back above (1150.00 >= 1100.00), then below again: a second crossing.
	deposit("100.00")
	if n := len(lows()); n != 1 {
		t.Fatalf("%d warnings after rising above, want 1", n)
	}
	setThreshold("5000.00")
	if n := len(lows()); n != 2 {
		t.Fatalf("%d warnings after the second crossing, want 2", n)
	}
	setThreshold("6000.00")
	if n := len(lows()); n != 2 {
		t.Fatalf("%d warnings, want still 2", n)
	}
	// A zero threshold warns never and re-arms the warning.
	setThreshold("0")
	setThreshold("7000.00")
	if n := len(lows()); n != 3 {
		t.Fatalf("%d warnings after switching the warning off and on, want 3", n)
	}
}

// A settlement that takes the pool below the threshold is announced
// before the warning it causes: a receiver reading in sequence order sees
// the payment, then the balance it left.
func TestLowBalanceFollowsTheSettlementThatCausedIt(t *testing.T) {
	e := start(t)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/funding", e.owner.TestKey, nil, `{"low_balance_threshold":"1000.00"}`), http.StatusOK)
	created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/low"))
	lows := ownerEvents(t, e.srv, e.owner.TestKey, "wallet.low_balance")
	settled := ownerEvents(t, e.srv, e.owner.TestKey, "spend.settled")
	if len(lows) != 1 || len(settled) != 1 {
		t.Fatalf("%d warnings and %d settlements, want 1 each", len(lows), len(settled))
	}
	if lows[0]["sequence"].(float64) <= settled[0]["sequence"].(float64) {
		t.Fatalf("wallet.low_balance has sequence %v, before the spend.settled (%v) that caused it", lows[0]["sequence"], settled[0]["sequence"])
	}
}
