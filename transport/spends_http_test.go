package transport_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport"
)

func TestSpendSettled(t *testing.T) {
	e := start(t)
	s := e.srv
	before := balance(t, s, e.agentKey)
	body := `{"amount":"5.00","currency":"usdc","destination":"API.Vendor.com",` +
		`"resource":{"url":"https://api.vendor.com/v1/forecast?city=Oslo","method":"POST"},` +
		`"memo":"forecast for Oslo","client_reference":"job-42"}`
	r := call(t, s, http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": newKey(),
		"Content-Type": "application/json; charset=utf-8", "Service-Version": "2026-10-01"}, body)
	mustStatus(t, r, http.StatusCreated)
	checkSpend(t, r)
	sp := r.Body

	for k, want := range map[string]any{
		"status": "settled", "amount": "5.00", "currency": "usdc", "destination": "api.vendor.com",
		"destination_rule": "api.vendor.com", "memo": "forecast for Oslo", "client_reference": "job-42",
		"livemode": false, "agent_id": e.agentID, "idempotent_replay": false, "retryable": false,
		"hold": nil, "decline_reason": nil, "rail_error": nil, "processing_detail": nil, "approval": nil,
		"policy_version": float64(1),
	} {
		if !reflect.DeepEqual(sp[k], want) {
			t.Errorf("%s = %v, want %v", k, sp[k], want)
		}
	}
	if res := obj(t, sp, "resource"); res["host"] != "api.vendor.com" || res["path"] != "/v1/forecast?city=Oslo" || res["method"] != "POST" {
		t.Errorf("resource %v", res)
	}
	paid := dec(t, sp["amount_settled"])
	if paid.Sign() <= 0 || paid.Cmp(dec(t, "5.00")) > 0 {
		t.Errorf("amount_settled %v, want in (0, 5.00]", sp["amount_settled"])
	}
	set := obj(t, sp, "settlement")
	if set["mode"] != "service_executes_x402" || set["status"] != "settled" || set["network"] == nil || set["reference"] == nil {
		t.Errorf("settlement %v", set)
	}
	if id, _ := set["receipt_id"].(string); !receiptIDPattern.MatchString(id) {
		t.Errorf("receipt_id %v", set["receipt_id"])
	}
	res := obj(t, set, "result")
	if res["http_status"] != float64(200) || res["body_truncated"] != false {
		t.Errorf("result %v", res)
	}
	resultBody, _ := res["body"].(string)
	sum := sha256.Sum256([]byte(resultBody))
	if res["body_sha256"] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("body_sha256 %v does not hash the body %q", res["body_sha256"], res["body"])
	}
	if sb := obj(t, sp, "sandbox"); sb["simulated_vendor"] != true || sb["forced"] != nil {
		t.Errorf("sandbox %v", sb)
	}
	if obj(t, sp, "next_action")["code"] != "none" {
		t.Errorf("next_action %v", sp["next_action"])
	}

	// The read answers the same payment.
	g := getSpend(t, s, e.agentKey, sp["id"].(string), "")
	mustStatus(t, g, http.StatusOK)
	checkSpend(t, g)
	if g.Body["status"] != "settled" || g.Body["amount_settled"] != sp["amount_settled"] || g.Body["idempotent_replay"] != false {
		t.Errorf("GET answers %s", g.Raw)
	}
	// The owner reads it too.
	if g := getSpend(t, s, e.owner.TestKey, sp["id"].(string), ""); g.Status != http.StatusOK || g.Body["id"] != sp["id"] {
		t.Errorf("owner GET: %d %s", g.Status, g.Raw)
	}

	// The daily allowance went down by what was paid, not by the maximum.
	after := balance(t, s, e.agentKey)
	spent := sub(dec(t, obj(t, before, "components")["daily_remaining"]), dec(t, obj(t, after, "components")["daily_remaining"]))
	if spent.Cmp(paid) != 0 || after["held"] != "0.00" {
		t.Errorf("daily_remaining fell by %s, paid %s; held %v", spent.FloatString(6), paid.FloatString(6), after["held"])
	}
}

func TestSpendDeclinedWithRule(t *testing.T) {
	e := start(t)
	s := e.srv
	_, key := s.NewAgent(t, e.owner.TestKey,
		`{"per_spend_limit":"10.00","daily_cap":"5.00","trusted_destinations":["api.vendor.com"]}`)
	before := balance(t, s, key)
	sp := created(t, s, key, spendBody("6.00", "api.vendor.com", "/v1/data"))
	for k, want := range map[string]any{
		"status": "declined", "decline_reason": "daily_cap", "declined_at_gate": "create",
		"amount_settled": nil, "hold": nil, "settlement": nil, "retryable": false,
	} {
		if !reflect.DeepEqual(sp[k], want) {
			t.Errorf("%s = %v, want %v", k, sp[k], want)
		}
	}
	rule := obj(t, sp, "rule")
	want := map[string]any{"name": "daily_cap", "scope": "agent", "limit": "5.00", "spent": "0.00",
		"requested": "6.00", "remaining": "5.00", "resets_at": "2026-10-02T00:00:00Z"}
	if !reflect.DeepEqual(rule, want) {
		t.Errorf("rule %v, want %v", rule, want)
	}
	if obj(t, sp, "next_action")["code"] != "do_not_retry" {
		t.Errorf("next_action %v", sp["next_action"])
	}
	if after := balance(t, s, key); !reflect.DeepEqual(before, after) {
		t.Errorf("a decline changed the balance:\n%v\n%v", before, after)
	}

	// A destination that is not a public host is a rule decline, not a 400.
	for _, dest := range []string{"localhost", "10.0.0.1", "vendor.com:8443", "intranet"} {
		sp := created(t, s, key, fmt.Sprintf(`{"amount":"1.00","destination":%q}`, dest))
		if sp["status"] != "declined" || sp["decline_reason"] != "destination_not_allowed" {
			t.Errorf("destination %q: %v / %v, want declined / destination_not_allowed", dest, sp["status"], sp["decline_reason"])
		}
	}
}

func TestSpendPendingApproval(t *testing.T) {
	e := start(t)
	s := e.srv
	clock := s.Clock
	check := func(sp map[string]any, reason, amount string) {
		t.Helper()
		if sp["status"] != "pending_approval" || sp["approval_reason"] != reason {
			t.Fatalf("status %v approval_reason %v, want pending_approval / %s", sp["status"], sp["approval_reason"], reason)
		}
		apr := obj(t, sp, "approval")
		id, _ := apr["id"].(string)
		if !approvalPattern.MatchString(id) || apr["status"] != "pending" {
			t.Errorf("approval %v", apr)
		}
		if h, _ := apr["items_hash"].(string); !sha256Pattern.MatchString(h) {
			t.Errorf("items_hash %v", apr["items_hash"])
		}
		if c, _ := apr["short_code"].(string); !shortCodePattern.MatchString(c) {
			t.Errorf("short_code %v", apr["short_code"])
		}
		if apr["owner_url"] != consoleURL+"/approvals/"+id {
			t.Errorf("owner_url %v, want %s/approvals/%s", apr["owner_url"], consoleURL, id)
		}
		if exp := epoch.Add(15 * time.Minute).Format(time.RFC3339); apr["expires_at"] != exp {
			t.Errorf("approval expires_at %v, want %s (15 minutes)", apr["expires_at"], exp)
		}
		hold := obj(t, sp, "hold")
		if hold["amount"] != amount || hold["expires_at"] != apr["expires_at"] {
			t.Errorf("hold %v, want %s until %v", hold, amount, apr["expires_at"])
		}
		na := obj(t, sp, "next_action")
		if na["code"] != "wait_for_owner" || na["owner_url"] != apr["owner_url"] || na["check_with"] != "service_get_spend" {
			t.Errorf("next_action %v", na)
		}
		if sp["amount_settled"] != nil || sp["settlement"] != nil {
			t.Errorf("a pending spend shows a settlement: %v", sp)
		}
	}

	unknown := created(t, s, e.agentKey, spendBody("2.00", "new.vendor.io", "/v1/data"))
	check(unknown, "unknown_destination", "2.00")
	_, careful := s.NewAgent(t, e.owner.TestKey, `{"approval_over":"5.00","trusted_destinations":["api.vendor.com"]}`)
	over := created(t, s, careful, spendBody("5.01", "api.vendor.com", "/v1/report"))
	check(over, "approval_over", "5.01")
	if unknown["approval"].(map[string]any)["id"] == over["approval"].(map[string]any)["id"] {
		t.Error("two spends share an approval id")
	}

	// The approval reads back (read-only) for its agent and the owner only.
	aprPath := "/v1/approvals/" + over["approval"].(map[string]any)["id"].(string)
	for _, key := range []string{careful, e.owner.TestKey} {
		r := call(t, s, http.MethodGet, aprPath, key, nil, nil)
		mustStatus(t, r, http.StatusOK)
		if r.Body["status"] != "pending" || r.Body["spend_id"] != over["id"] || r.Body["items_hash"] != over["approval"].(map[string]any)["items_hash"] {
			t.Errorf("GET %s: %s", aprPath, r.Raw)
		}
	}
	wantError(t, call(t, s, http.MethodGet, aprPath, e.agentKey, nil, nil), http.StatusNotFound, "not_found_error", "resource_missing", "")

	b := balance(t, s, e.agentKey)
	if b["held"] != "2.00" || b["pending_count"] != float64(1) {
		t.Errorf("held %v pending_count %v, want 2.00 and 1", b["held"], b["pending_count"])
	}
	if under := created(t, s, careful, spendBody("5.00", "api.vendor.com", "/v1/report")); under["status"] != "settled" {
		t.Errorf("5.00 with approval_over 5.00: %v, want settled", under["status"])
	}

	// Unanswered, the approval expires after its lifetime and the hold goes.
	clock.Advance(15 * time.Minute)
	for _, c := range []struct {
		key string
		sp  map[string]any
	}{{e.agentKey, unknown}, {careful, over}} {
		g := waitStatus(t, s, c.key, c.sp["id"].(string), "expired")
		if g.Body["status"] != "expired" || g.Body["hold"] != nil {
			t.Errorf("after the approval lifetime: status %v hold %v, want expired without hold", g.Body["status"], g.Body["hold"])
		}
	}
	for _, key := range []string{e.agentKey, careful} {
		if b := balance(t, s, key); b["held"] != "0.00" || b["pending_count"] != float64(0) {
			t.Errorf("after expiry held %v pending_count %v", b["held"], b["pending_count"])
		}
	}
}

func TestSpendFailedMagicAmount(t *testing.T) {
	e := start(t)
	s := e.srv
	before := balance(t, s, e.agentKey)
	key := newKey()
	r := spend(t, s, e.agentKey, key, spendBody("99.00", "api.vendor.com", "/v1/data"))
	mustStatus(t, r, http.StatusCreated)
	checkSpend(t, r)
	sp := r.Body
	for k, want := range map[string]any{
		"status": "failed", "failure_reason": "rail_error", "amount_settled": nil, "hold": nil, "retryable": true,
	} {
		if !reflect.DeepEqual(sp[k], want) {
			t.Errorf("%s = %v, want %v", k, sp[k], want)
		}
	}
	if re := obj(t, sp, "rail_error"); re["code"] != "insufficient_funds" || re["message"] == "" {
		t.Errorf("rail_error %v", re)
	}
	if sb := obj(t, sp, "sandbox"); sb["forced"] != "magic_amount" || sb["simulated_vendor"] != true {
		t.Errorf("sandbox %v", sb)
	}
	if obj(t, sp, "next_action")["code"] != "new_attempt_needs_new_key" {
		t.Errorf("next_action %v", sp["next_action"])
	}
	if after := balance(t, s, e.agentKey); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed payment changed the balance:\n%v\n%v", before, after)
	}
	// The same key answers the same failed payment.
	again := spend(t, s, e.agentKey, key, spendBody("99.00", "api.vendor.com", "/v1/data"))
	mustStatus(t, again, http.StatusOK)
	if again.Body["id"] != sp["id"] || again.Body["status"] != "failed" || again.Body["idempotent_replay"] != true {
		t.Errorf("replay after failed: %s", again.Raw)
	}
}

func TestSpendProcessingThenVerified(t *testing.T) {
	e := start(t)
	s := e.srv
	key := newKey()
	body := spendBody("98.00", "api.vendor.com", "/v1/data")
	r := spend(t, s, e.agentKey, key, body)
	mustStatus(t, r, http.StatusCreated)
	checkSpend(t, r)
	sp := r.Body
	id := sp["id"].(string)
	if sp["status"] != "processing" || sp["amount_settled"] != nil {
		t.Fatalf("98.00: status %v amount_settled %v, want processing and null", sp["status"], sp["amount_settled"])
	}
	pd := obj(t, sp, "processing_detail")
	if pd["code"] != "outcome_unknown" || pd["since"] != epoch.Format(time.RFC3339) || pd["message"] == "" {
		t.Errorf("processing_detail %v", pd)
	}
	if h := obj(t, sp, "hold"); h["amount"] != "98.00" {
		t.Errorf("hold %v, want 98.00 (the hold stays while unknown)", h)
	}
	if sb := obj(t, sp, "sandbox"); sb["forced"] != "magic_amount" {
		t.Errorf("sandbox %v", sb)
	}
	if b := balance(t, s, e.agentKey); b["held"] != "98.00" {
		t.Errorf("held %v while processing, want 98.00", b["held"])
	}

	// Already sent: it cannot be cancelled, and it did not change.
	c := call(t, s, http.MethodPost, "/v1/spends/"+id+"/cancel", e.agentKey, nil, nil)
	wantError(t, c, http.StatusConflict, "invalid_request_error", "cancel_too_late", "")
	if g := getSpend(t, s, e.agentKey, id, ""); g.Body["status"] != "processing" || g.Body["updated_at"] != sp["updated_at"] {
		t.Errorf("a refused cancel changed the spend: %s", g.Raw)
	}
	// A replay answers the current state.
	again := spend(t, s, e.agentKey, key, body)
	mustStatus(t, again, http.StatusOK)
	if again.Body["status"] != "processing" || again.Body["idempotent_replay"] != true {
		t.Errorf("replay while processing: %s", again.Raw)
	}

	// Release the verification the service scheduled, while a reader waits.
	released := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Clock.WaitForTimers(ctx, 1); err != nil {
			released <- fmt.Errorf("the service scheduled no verification: %w", err)
			return
		}
		s.Clock.Advance(time.Minute)
		released <- nil
	}()
	g := waitStatus(t, s, e.agentKey, id, "settled")
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	checkSpend(t, g)
	if g.Body["status"] != "settled" {
		t.Fatalf("after verification: status %v, want settled: %s", g.Body["status"], g.Raw)
	}
	if g.Body["processing_detail"] != nil || g.Body["hold"] != nil {
		t.Errorf("settled spend keeps processing_detail %v / hold %v", g.Body["processing_detail"], g.Body["hold"])
	}
	if paid := dec(t, g.Body["amount_settled"]); paid.Sign() <= 0 || paid.Cmp(dec(t, "98.00")) > 0 {
		t.Errorf("amount_settled %v", g.Body["amount_settled"])
	}
	if rid, _ := obj(t, g.Body, "settlement")["receipt_id"].(string); !receiptIDPattern.MatchString(rid) {
		t.Errorf("verified spend has receipt_id %v", rid)
	}
	if b := balance(t, s, e.agentKey); b["held"] != "0.00" {
		t.Errorf("held %v after settlement", b["held"])
	}
	// The replay now answers settled.
	again = spend(t, s, e.agentKey, key, body)
	if again.Status != http.StatusOK || again.Body["status"] != "settled" || again.Body["idempotent_replay"] != true {
		t.Errorf("replay after verification: %d %s", again.Status, again.Raw)
	}
}

func TestReplayAnswersCurrentState(t *testing.T) {
	e := start(t)
	s := e.srv
	key := newKey()
	body := `{"amount":"3.00","destination":"new.vendor.io","resource":{"url":"https://new.vendor.io/v1/item"},"memo":"first"}`
	first := spend(t, s, e.agentKey, key, body)
	mustStatus(t, first, http.StatusCreated)
	id := first.Body["id"]
	if first.Body["status"] != "pending_approval" {
		t.Fatalf("status %v", first.Body["status"])
	}
	count := spendCount(t, s, e.agentID)

	// memo is outside the fingerprint, and "3" is the same amount as "3.00".
	for _, b := range []string{
		body,
		`{"amount":"3.00","destination":"new.vendor.io","resource":{"url":"https://new.vendor.io/v1/item"},"memo":"changed"}`,
		`{"amount":"3","destination":"new.vendor.io","resource":{"url":"https://new.vendor.io/v1/item","method":"GET"}}`,
	} {
		r := spend(t, s, e.agentKey, key, b)
		mustStatus(t, r, http.StatusOK)
		checkSpend(t, r)
		if r.Body["id"] != id || r.Body["status"] != "pending_approval" || r.Body["idempotent_replay"] != true || r.Body["memo"] != "first" {
			t.Errorf("replay of %s: %s", b, r.Raw)
		}
		if r.Body["request_id"] == first.Body["request_id"] {
			t.Error("a replay carries the request_id of the first answer")
		}
	}

	c := call(t, s, http.MethodPost, fmt.Sprintf("/v1/spends/%s/cancel", id), e.agentKey, nil, nil)
	mustStatus(t, c, http.StatusOK)
	r := spend(t, s, e.agentKey, key, body)
	mustStatus(t, r, http.StatusOK)
	if r.Body["id"] != id || r.Body["status"] != "cancelled" || r.Body["idempotent_replay"] != true {
		t.Errorf("replay after cancel answers %s, want the cancelled spend", r.Raw)
	}
	if n := spendCount(t, s, e.agentID); n != count {
		t.Errorf("replays created %d spends", n-count)
	}

	// Keys are scoped per agent: another agent's identical request is its own.
	_, keyB := s.NewAgent(t, e.owner.TestKey, testPolicy)
	other := spend(t, s, keyB, key, body)
	if other.Status != http.StatusCreated || other.Body["id"] == id {
		t.Errorf("another agent with the same Idempotency-Key: %d %s", other.Status, other.Raw)
	}
	// The longest key allowed works like any other.
	long := strings.Repeat("k", 255)
	a := spend(t, s, e.agentKey, long, transport.ValidSpendBody)
	b := spend(t, s, e.agentKey, long, transport.ValidSpendBody)
	if a.Status != http.StatusCreated || b.Status != http.StatusOK || a.Body["id"] != b.Body["id"] {
		t.Errorf("a 255-character key: %d then %d", a.Status, b.Status)
	}
}

func TestIdempotencyConflict(t *testing.T) {
	e := start(t)
	s := e.srv
	key := newKey()
	orig := spend(t, s, e.agentKey, key, spendBody("1.00", "api.vendor.com", "/v1/data"))
	mustStatus(t, orig, http.StatusCreated)
	for _, c := range []struct {
		body    string
		changed []any
	}{
		{spendBody("2.00", "api.vendor.com", "/v1/data"), []any{"amount"}},
		{spendBody("1.00", "data.shop.io", "/v1/data"), []any{"destination", "resource"}},
		{spendBody("1.00", "api.vendor.com", "/v1/other"), []any{"resource"}},
		{`{"amount":"1.00","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/v1/data","method":"POST"}}`, []any{"resource"}},
		{spendBody("1.50", "data.shop.io", "/v1/data"), []any{"amount", "destination", "resource"}},
	} {
		r := spend(t, s, e.agentKey, key, c.body)
		er := wantError(t, r, http.StatusConflict, "idempotency_error", "idempotency_conflict", c.changed[0].(string))
		if !reflect.DeepEqual(er["changed_fields"], c.changed) {
			t.Errorf("%s: changed_fields %v, want %v", c.body, er["changed_fields"], c.changed)
		}
		if msg, _ := er["message"].(string); !strings.Contains(msg, "new Idempotency-Key") {
			t.Errorf("message %q does not say to use a new key", msg)
		}
	}
	g := getSpend(t, s, e.agentKey, orig.Body["id"].(string), "")
	if g.Body["amount"] != "1.00" || g.Body["status"] != orig.Body["status"] || g.Body["updated_at"] != orig.Body["updated_at"] {
		t.Errorf("a conflict changed the original spend: %s", g.Raw)
	}
}

func TestCancel(t *testing.T) {
	e := start(t)
	s := e.srv
	before := balance(t, s, e.agentKey)
	sp := created(t, s, e.agentKey, spendBody("4.00", "new.vendor.io", "/v1/data"))
	id := sp["id"].(string)
	path := "/v1/spends/" + id + "/cancel"

	c := call(t, s, http.MethodPost, path, e.agentKey, nil, nil)
	mustStatus(t, c, http.StatusOK)
	checkSpend(t, c)
	if c.Body["status"] != "cancelled" || c.Body["hold"] != nil || c.Body["id"] != id {
		t.Errorf("cancel answers %s", c.Raw)
	}
	if after := balance(t, s, e.agentKey); !reflect.DeepEqual(before, after) {
		t.Errorf("the allowance was not released:\nbefore %v\nafter  %v", before, after)
	}
	again := call(t, s, http.MethodPost, path, e.agentKey, nil, nil)
	mustStatus(t, again, http.StatusOK)
	if again.Body["status"] != "cancelled" || again.Body["updated_at"] != c.Body["updated_at"] {
		t.Errorf("second cancel answers %s, want the same cancelled spend", again.Raw)
	}
	if g := getSpend(t, s, e.agentKey, id, ""); g.Body["status"] != "cancelled" {
		t.Errorf("GET after cancel: %s", g.Raw)
	}

	// Cancel takes no body, or an empty object; a field is refused, named.
	other := created(t, s, e.agentKey, spendBody("4.00", "new.vendor.io", "/v1/other"))
	r := call(t, s, http.MethodPost, "/v1/spends/"+other["id"].(string)+"/cancel", e.agentKey, nil, `{"reason":"x"}`)
	wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "reason")
	r = call(t, s, http.MethodPost, "/v1/spends/"+other["id"].(string)+"/cancel", e.agentKey, nil, `{}`)
	if r.Status != http.StatusOK || r.Body["status"] != "cancelled" {
		t.Fatalf("cancel with {}: %d %s", r.Status, r.Raw)
	}
	// A settled payment is too late to cancel.
	settled := created(t, s, e.agentKey, spendBody("1.00", "api.vendor.com", "/v1/data"))
	r = call(t, s, http.MethodPost, "/v1/spends/"+settled["id"].(string)+"/cancel", e.agentKey, nil, nil)
	wantError(t, r, http.StatusConflict, "invalid_request_error", "cancel_too_late", "")
	// A declined one is not cancellable either.
	declined := created(t, s, e.agentKey, spendBody("100.01", "api.vendor.com", "/v1/data"))
	if declined["status"] != "declined" {
		t.Fatalf("100.01 above per_spend_limit: %v", declined["status"])
	}
	r = call(t, s, http.MethodPost, "/v1/spends/"+declined["id"].(string)+"/cancel", e.agentKey, nil, nil)
	if r.Status != http.StatusConflict {
		t.Errorf("cancel of a declined spend: %d, want 409: %s", r.Status, r.Raw)
	}
}

func TestAuthentication(t *testing.T) {
	e := start(t)
	s := e.srv
	unknown := "svc_test_agent_" + strings.Repeat("A", 43)
	var first map[string]any
	ids := map[string]bool{}
	for _, c := range []struct{ name, auth string }{
		{"missing", ""},
		{"not bearer", "Basic " + e.agentKey},
		{"malformed", "Bearer not-a-key"},
		{"too long", "Bearer " + strings.Repeat("x", 300)},
		{"unknown", "Bearer " + unknown},
		{"wrong kind prefix", "Bearer " + strings.Replace(e.agentKey, "_agent_", "_owner_", 1)},
		{"wrong environment prefix", "Bearer " + strings.Replace(e.agentKey, "_test_", "_live_", 1)},
	} {
		for _, route := range []struct{ method, path string }{
			{http.MethodPost, "/v1/spends"}, {http.MethodGet, "/v1/balance"}, {http.MethodGet, "/v1/spends/spd_" + strings.Repeat("0", 32)},
			{http.MethodPost, "/v1/agents"},
		} {
			headers := map[string]string{"Authorization": c.auth, "Idempotency-Key": newKey()}
			r := call(t, s, route.method, route.path, "", headers, transport.ValidSpendBody)
			wantError(t, r, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
			body := map[string]any{"error": r.Body["error"]}
			if first == nil {
				first = body
			} else if !reflect.DeepEqual(first, body) {
				t.Errorf("%s on %s %s: body %v differs from %v", c.name, route.method, route.path, body, first)
			}
			if id := r.Header.Get("Request-Id"); ids[id] {
				t.Errorf("Request-Id %s given twice", id)
			} else {
				ids[id] = true
			}
		}
	}

	// A practice key lives 90 days; then it gets the same 401.
	mustStatus(t, call(t, s, http.MethodGet, "/v1/balance", e.agentKey, nil, nil), http.StatusOK)
	s.Clock.Advance(90*24*time.Hour + time.Second)
	for _, key := range []string{e.agentKey, e.owner.TestKey} {
		r := call(t, s, http.MethodGet, "/v1/me", key, nil, nil)
		wantError(t, r, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
		if body := map[string]any{"error": r.Body["error"]}; !reflect.DeepEqual(first, body) {
			t.Errorf("expired key: body %v differs from %v", body, first)
		}
	}
	// A live key lives 30 days: the live owner key expired long ago.
	wantError(t, call(t, s, http.MethodGet, "/v1/me", e.owner.LiveKey, nil, nil), http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
}

func TestPermissions(t *testing.T) {
	e := start(t)
	s := e.srv
	sp := created(t, s, e.agentKey, spendBody("2.00", "new.vendor.io", "/v1/data"))
	for _, c := range []struct {
		name, method, path, key string
		body                    any
	}{
		{"owner key pays", http.MethodPost, "/v1/spends", e.owner.TestKey, transport.ValidSpendBody},
		{"owner key checks", http.MethodPost, "/v1/spends/check", e.owner.TestKey, `{"destination":"api.vendor.com"}`},
		{"owner key cancels", http.MethodPost, "/v1/spends/" + sp["id"].(string) + "/cancel", e.owner.TestKey, nil},
		{"owner key reads a balance", http.MethodGet, "/v1/balance", e.owner.TestKey, nil},
		{"owner key reads the agent policy route", http.MethodGet, "/v1/policy", e.owner.TestKey, nil},
		{"agent key creates an agent", http.MethodPost, "/v1/agents", e.agentKey, `{"name":"rogue"}`},
		{"agent key creates a key", http.MethodPost, "/v1/agents/" + e.agentID + "/keys", e.agentKey, nil},
		{"agent key edits its policy", http.MethodPost, "/v1/agents/" + e.agentID + "/policy", e.agentKey, `{"per_spend_limit":"1000.00"}`},
	} {
		r := call(t, s, c.method, c.path, c.key, map[string]string{"Idempotency-Key": newKey()}, c.body)
		if r.Status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403: %s", c.name, r.Status, r.Raw)
			continue
		}
		wantError(t, r, http.StatusForbidden, "permission_error", "key_kind_not_allowed", "")
	}
	if g := getSpend(t, s, e.agentKey, sp["id"].(string), ""); g.Body["status"] != "pending_approval" {
		t.Errorf("a refused owner cancel changed the spend: %s", g.Raw)
	}
	if n := spendCount(t, s, e.agentID); n != 1 {
		t.Errorf("the agent has %d spends; the owner key created some", n)
	}
}

func TestNotFound(t *testing.T) {
	e := start(t)
	s := e.srv
	_, keyB := s.NewAgent(t, e.owner.TestKey, testPolicy)
	spB := created(t, s, keyB, spendBody("2.00", "new.vendor.io", "/v1/data"))
	idB := spB["id"].(string)

	for _, id := range []string{"spd_" + strings.Repeat("a", 32), "spd_123", "nope", idB[:len(idB)-1] + "x"} {
		wantError(t, getSpend(t, s, e.agentKey, id, ""), http.StatusNotFound, "not_found_error", "resource_missing", "")
		wantError(t, call(t, s, http.MethodPost, "/v1/spends/"+id+"/cancel", e.agentKey, nil, nil),
			http.StatusNotFound, "not_found_error", "resource_missing", "")
	}
	// Agent A can neither read nor cancel agent B's spend; B still can.
	wantError(t, getSpend(t, s, e.agentKey, idB, ""), http.StatusNotFound, "not_found_error", "resource_missing", "")
	wantError(t, getSpend(t, s, e.agentKey, idB, "?wait_seconds=1"), http.StatusNotFound, "not_found_error", "resource_missing", "")
	wantError(t, call(t, s, http.MethodPost, "/v1/spends/"+idB+"/cancel", e.agentKey, nil, nil),
		http.StatusNotFound, "not_found_error", "resource_missing", "")
	if g := getSpend(t, s, keyB, idB, ""); g.Status != http.StatusOK || g.Body["status"] != "pending_approval" {
		t.Errorf("agent B's spend after A's attempts: %d %s", g.Status, g.Raw)
	}
	// Another owner sees nothing of this owner's spends.
	other := s.NewOwner(t)
	wantError(t, getSpend(t, s, other.TestKey, idB, ""), http.StatusNotFound, "not_found_error", "resource_missing", "")

	// A practice key never reads a live object.
	liveAgent, liveKey := s.NewAgent(t, e.owner.LiveKey, testPolicy)
	live := created(t, s, liveKey, spendBody("1.00", "api.vendor.com", "/v1/data"))
	if live["livemode"] != true {
		t.Fatalf("live spend livemode %v", live["livemode"])
	}
	liveID := live["id"].(string)
	if g := getSpend(t, s, e.owner.LiveKey, liveID, ""); g.Status != http.StatusOK {
		t.Fatalf("the live owner key cannot read its live spend: %d %s", g.Status, g.Raw)
	}
	for name, key := range map[string]string{"practice owner key": e.owner.TestKey, "practice agent key": e.agentKey} {
		if r := getSpend(t, s, key, liveID, ""); r.Status != http.StatusNotFound {
			t.Errorf("%s reads a live spend: %d %s", name, r.Status, r.Raw)
		}
	}
	if r := call(t, s, http.MethodGet, "/v1/agents/"+liveAgent, e.owner.TestKey, nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("practice owner key reads a live agent: %d %s", r.Status, r.Raw)
	}
	// Unknown routes are 404 too, with the same error envelope.
	wantError(t, call(t, s, http.MethodGet, "/v1/nothing", e.agentKey, nil, nil), http.StatusNotFound, "not_found_error", "route_not_found", "")
	// A POST-only path under a path that reads one object by id is named
	// as the route it is, not as an object that does not exist.
	for _, c := range []struct{ path, key, want string }{
		{"/v1/spends/check", e.agentKey, "the check is POST /v1/spends/check"},
		{"/v1/agents/pause_all", e.owner.TestKey, "is POST /v1/agents/pause_all"},
	} {
		r := call(t, s, http.MethodGet, c.path, c.key, nil, nil)
		if msg, _ := wantError(t, r, http.StatusNotFound, "not_found_error", "route_not_found", "")["message"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("GET %s: message %q lacks %q", c.path, msg, c.want)
		}
	}
}

// padSpendBody is a valid spend body of exactly n bytes: whitespace inside
// the object keeps the JSON valid at any length.
func padSpendBody(n int) string {
	b := transport.ValidSpendBody
	return b[:1] + strings.Repeat(" ", n-len(b)) + b[1:]
}

// oversizeSpendBody is a valid spend body one byte over the 16 KiB limit.
func oversizeSpendBody() string { return padSpendBody(16<<10 + 1) }

func TestBodyLimit(t *testing.T) {
	e := start(t)
	s := e.srv
	const limit = 16 << 10
	pad := padSpendBody
	exact := pad(limit)
	if len(exact) != limit {
		t.Fatalf("built %d bytes", len(exact))
	}
	r := spend(t, s, e.agentKey, newKey(), exact)
	if r.Status != http.StatusCreated {
		t.Errorf("a body of exactly 16 KiB: %d, want 201: %s", r.Status, r.Raw)
	}
	count := spendCount(t, s, e.agentID)
	before := balance(t, s, e.agentKey)
	r = spend(t, s, e.agentKey, newKey(), pad(limit+1))
	wantError(t, r, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "")
	if n := spendCount(t, s, e.agentID); n != count {
		t.Error("a body above 16 KiB created a spend")
	}
	if after := balance(t, s, e.agentKey); !reflect.DeepEqual(before, after) {
		t.Errorf("a body above 16 KiB changed the balance")
	}

	// The same limit holds for a body sent in chunks, without a length.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, c := range []struct {
		size int
		want int
	}{{limit + 1, http.StatusRequestEntityTooLarge}, {limit, http.StatusCreated}} {
		// A reader of unknown length makes the client send chunks.
		req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/spends", io.MultiReader(strings.NewReader(pad(c.size))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.agentKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", newKey())
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("chunked body of %d bytes: %v", c.size, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("chunked body of %d bytes: %d, want %d: %s", c.size, resp.StatusCode, c.want, raw)
		}
	}
	if n := spendCount(t, s, e.agentID); n != count+1 {
		t.Errorf("chunked bodies created %d spends, want 1", n-count)
	}
}

func TestWaitSeconds(t *testing.T) {
	e := start(t)
	s := e.srv
	sp := created(t, s, e.agentKey, spendBody("1.00", "api.vendor.com", "/v1/data"))
	id := sp["id"].(string)
	for _, q := range []string{"21", "100", "-1", "abc", "1.5", "", "+3", "1e1"} {
		r := getSpend(t, s, e.agentKey, id, "?wait_seconds="+url.QueryEscape(q))
		wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "wait_seconds")
	}
	// A misspelt wait is refused, not an answer that did not wait.
	r := getSpend(t, s, e.agentKey, id, "?wait=20")
	if e := wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "wait"); !strings.Contains(e["message"].(string), "wait_seconds") {
		t.Errorf("the message does not name the parameter meant: %v", e["message"])
	}
	// A finished spend answers at once, whatever the wait.
	for _, q := range []string{"0", "20"} {
		start := time.Now()
		r := getSpend(t, s, e.agentKey, id, "?wait_seconds="+q)
		mustStatus(t, r, http.StatusOK)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("wait_seconds=%s on a settled spend took %v", q, d)
		}
	}
}

func TestCheck(t *testing.T) {
	e := start(t)
	s := e.srv
	created(t, s, e.agentKey, spendBody("3.00", "new.vendor.io", "/v1/data")) // a hold to keep
	before := balance(t, s, e.agentKey)
	count := spendCount(t, s, e.agentID)

	for _, c := range []struct {
		body     string
		allowed  bool
		decision any
		reason   string
	}{
		{`{"destination":"api.vendor.com","amount":"3.00"}`, true, nil, "allowed"},
		{`{"destination":"api.vendor.com"}`, true, nil, "allowed"},
		{`{"destination":"deep.shop.io"}`, true, nil, "allowed"},
		{`{"destination":"new.vendor.io"}`, false, "pending_approval", "unknown_destination"},
		{`{"destination":"another.vendor.io","amount":"0.01"}`, false, "pending_approval", "unknown_destination"},
		// spec 4.6 rule 2: whatever the amount
		{`{"destination":"another.vendor.io","amount":"100.01"}`, false, "pending_approval", "unknown_destination"},
		{`{"destination":"api.vendor.com","amount":"100.01"}`, false, "declined", "per_spend_limit"},
		{`{"destination":"api.vendor.com","amount":"100.00"}`, true, nil, "allowed"},
		{`{"destination":"localhost"}`, false, nil, "destination_not_allowed"},
		{`{"destination":"10.0.0.1","amount":"1.00"}`, false, nil, "destination_not_allowed"},
	} {
		r := call(t, s, http.MethodPost, "/v1/spends/check", e.agentKey, nil, c.body)
		mustStatus(t, r, http.StatusOK)
		b := r.Body
		if b["object"] != "spend_check" || b["allowed"] != c.allowed || b["decision"] != c.decision || b["reason"] != c.reason {
			t.Errorf("%s: allowed %v decision %v reason %v, want %v %v %s", c.body, b["allowed"], b["decision"], b["reason"], c.allowed, c.decision, c.reason)
		}
		if b["reserves_nothing"] != true || b["livemode"] != false || b["message"] == "" || b["next_action"] == nil {
			t.Errorf("%s: %s", c.body, r.Raw)
		}
	}
	if after := balance(t, s, e.agentKey); !reflect.DeepEqual(before, after) {
		t.Errorf("checks changed the balance:\nbefore %v\nafter  %v", before, after)
	}
	if n := spendCount(t, s, e.agentID); n != count {
		t.Errorf("checks created %d spends", n-count)
	}

	for _, c := range []struct{ body, code, param string }{
		{`{"amount":"1.00"}`, "parameter_missing", "destination"},
		{`{"destination":"api.vendor.com","amount":"1e2"}`, "amount_invalid", "amount"},
		{`{"destination":"api.vendor.com","amount":"0"}`, "amount_invalid", "amount"},
		{`{"destination":"api.vendor.com","amount":2}`, "parameter_invalid", "amount"},
		{`{"destination":"api.vendor.com","currency":"eur"}`, "currency_not_supported", "currency"},
		{`{"destination":"api.vendor.com","destination":"new.vendor.io"}`, "invalid_json", "destination"},
		{`{"destination":"api.vendor.com","extra":1}`, "parameter_unknown", "extra"},
		{"{\"destination\":\"api.vendor.com\xff\"}", "invalid_json", ""},
		{`{"destination":7}`, "parameter_invalid", "destination"},
	} {
		r := call(t, s, http.MethodPost, "/v1/spends/check", e.agentKey, nil, c.body)
		wantError(t, r, http.StatusBadRequest, "invalid_request_error", c.code, c.param)
	}
	r := call(t, s, http.MethodPost, "/v1/spends/check", e.agentKey, map[string]string{"Content-Type": "text/plain"}, `{"destination":"api.vendor.com"}`)
	wantError(t, r, http.StatusBadRequest, "invalid_request_error", "unsupported_content_type", "Content-Type")
}

// TestCheckDestinationWindow: with destination_window_over set, a check
// counts what was sent to the same destination in the last 24 h (the
// settled price, then holds), as a spend does, and forgets it after 24 h;
// other destinations are not counted.
func TestCheckDestinationWindow(t *testing.T) {
	e := start(t)
	s := e.srv
	_, key := s.NewAgent(t, e.owner.TestKey,
		`{"destination_window_over":"5.00","approval_over":"50.00","trusted_destinations":["api.vendor.com","other.vendor.com"]}`)
	first := created(t, s, key, spendBody("3.00", "api.vendor.com", "/v1/data"))
	if first["status"] != "settled" {
		t.Fatalf("first spend: %v", first["status"])
	}
	// What is left under the window: 5.00 less the price the vendor took.
	left := sub(big.NewRat(5, 1), dec(t, first["amount_settled"]))
	oneMicro := big.NewRat(1, 1_000_000)
	over := new(big.Rat).Add(left, oneMicro).FloatString(6)
	checkIs := func(dest, amount string, allowed bool, reason string) {
		t.Helper()
		body := `{"destination":"` + dest + `"}`
		if amount != "" {
			body = `{"destination":"` + dest + `","amount":"` + amount + `"}`
		}
		r := call(t, s, http.MethodPost, "/v1/spends/check", key, nil, body)
		mustStatus(t, r, http.StatusOK)
		if r.Body["allowed"] != allowed || r.Body["reason"] != reason {
			t.Errorf("check %s: allowed %v reason %v, want %v %s (%s)", body, r.Body["allowed"], r.Body["reason"], allowed, reason, r.Raw)
		}
	}
	checkIs("api.vendor.com", left.FloatString(6), true, "allowed")
	checkIs("api.vendor.com", over, false, "destination_window_over")
	checkIs("other.vendor.com", "4.00", true, "allowed")
	checkIs("api.vendor.com", "", true, "allowed") // no amount: the window is not asked

	// A spend decides as the check said, and its hold counts at once.
	if sp := created(t, s, key, spendBody(over, "api.vendor.com", "/v1/more")); sp["status"] != "pending_approval" ||
		sp["approval_reason"] != "destination_window_over" {
		t.Errorf("spend over the window: %v / %v", sp["status"], sp["approval_reason"])
	}
	checkIs("api.vendor.com", "0.01", false, "destination_window_over")

	// 24 h after the first spend it no longer counts, and the pending one
	// expired long before, its hold released.
	s.Clock.Advance(24*time.Hour + time.Second)
	checkIs("api.vendor.com", "5.00", true, "allowed")
	checkIs("api.vendor.com", "5.01", false, "destination_window_over")
}

// TestNewDestinationsPerDay: after asking about 10 new destinations in a
// day, the 11th is declined with unknown_destination_limit, by the check
// (with or without an amount) and by a spend; one already asked about
// still waits for the owner.
func TestNewDestinationsPerDay(t *testing.T) {
	e := start(t)
	s := e.srv
	_, key := s.NewAgent(t, e.owner.TestKey, `{"max_pending":20}`)
	for i := range 10 {
		sp := created(t, s, key, spendBody("0.50", fmt.Sprintf("new%d.vendor.io", i), "/v1/data"))
		if sp["status"] != "pending_approval" {
			t.Fatalf("new destination %d: %v", i, sp["status"])
		}
	}
	for _, body := range []string{`{"destination":"new10.vendor.io"}`, `{"destination":"new10.vendor.io","amount":"0.50"}`} {
		r := call(t, s, http.MethodPost, "/v1/spends/check", key, nil, body)
		mustStatus(t, r, http.StatusOK)
		if r.Body["decision"] != "declined" || r.Body["reason"] != "unknown_destination_limit" || r.Body["allowed"] != false {
			t.Errorf("check %s: %s", body, r.Raw)
		}
	}
	r := call(t, s, http.MethodPost, "/v1/spends/check", key, nil, `{"destination":"new3.vendor.io"}`)
	if r.Body["decision"] != "pending_approval" || r.Body["reason"] != "unknown_destination" {
		t.Errorf("check of a destination already asked about: %s", r.Raw)
	}
	sp := created(t, s, key, spendBody("0.50", "new10.vendor.io", "/v1/data"))
	if sp["status"] != "declined" || sp["decline_reason"] != "unknown_destination_limit" {
		t.Errorf("11th new destination: %v / %v", sp["status"], sp["decline_reason"])
	}
	// The count resets at 00:00 UTC.
	s.Clock.Advance(12 * time.Hour)
	if sp := created(t, s, key, spendBody("0.50", "new11.vendor.io", "/v1/data")); sp["status"] != "pending_approval" {
		t.Errorf("a new destination the next day: %v / %v", sp["status"], sp["decline_reason"])
	}
}

// TestAllowedDestinationWaitsForTheOwner: only a trusted destination is
// paid without approval (spec 3, 4.6 rule 2). An allowed one waits for the
// owner, whatever the amount, with its pattern as destination_rule; a
// non-empty allowed list does not decline a destination on no list, which
// waits for the owner too.
func TestAllowedDestinationWaitsForTheOwner(t *testing.T) {
	e := start(t)
	s := e.srv
	_, key := s.NewAgent(t, e.owner.TestKey, `{"allowed_destinations":["*.store.com"],"trusted_destinations":["api.vendor.com"],"approval_over":"5.00"}`)
	sp := created(t, s, key, spendBody("0.50", "shop.store.com", "/v1/data"))
	if sp["status"] != "pending_approval" || sp["approval_reason"] != "unknown_destination" || sp["destination_rule"] != "*.store.com" {
		t.Errorf("allowed destination: status %v, approval_reason %v, destination_rule %v; want pending_approval, unknown_destination, *.store.com",
			sp["status"], sp["approval_reason"], sp["destination_rule"])
	}
	r := call(t, s, http.MethodPost, "/v1/spends/check", key, nil, `{"destination":"shop.store.com","amount":"0.50"}`)
	mustStatus(t, r, http.StatusOK)
	if r.Body["decision"] != "pending_approval" || r.Body["reason"] != "unknown_destination" || r.Body["matched_rule"] != "*.store.com" || r.Body["allowed"] != false {
		t.Errorf("check of an allowed destination: %s", r.Raw)
	}
	if sp := created(t, s, key, spendBody("0.50", "other.com", "/v1/data")); sp["status"] != "pending_approval" || sp["decline_reason"] != nil {
		t.Errorf("destination on no list beside an allowed list: %v / %v, want pending_approval", sp["status"], sp["decline_reason"])
	}
	if sp := created(t, s, key, spendBody("0.50", "api.vendor.com", "/v1/data")); sp["status"] != "settled" {
		t.Errorf("trusted destination: %v / %v, want settled", sp["status"], sp["decline_reason"])
	}
}

func TestBalance(t *testing.T) {
	e := start(t)
	s := e.srv
	_, capped := s.NewAgent(t, e.owner.TestKey, `{"per_spend_limit":"100.00","daily_cap":"50.00","monthly_cap":"500.00",`+
		`"approval_over":"20.00","trusted_destinations":["api.vendor.com"]}`)
	_, lifetime := s.NewAgent(t, e.owner.TestKey, `{"per_spend_limit":"100.00","daily_cap":"20.00","monthly_cap":"20.00",`+
		`"lifetime_cap":"21.00","approval_over":"100.00","trusted_destinations":["api.vendor.com"]}`)

	check := func(name string, b map[string]any, wantFactor string) {
		t.Helper()
		comp := obj(t, b, "components")
		terms := map[string]*big.Rat{"pool_available": sub(dec(t, comp["pool_available"]), dec(t, comp["reserve_floor"]))}
		for _, k := range []string{"daily_remaining", "monthly_remaining", "per_spend_limit"} {
			terms[k] = dec(t, comp[k])
		}
		if lr := comp["lifetime_remaining"]; lr != nil {
			terms["lifetime_remaining"] = dec(t, lr)
		}
		var min *big.Rat
		for _, v := range terms {
			if min == nil || v.Cmp(min) < 0 {
				min = v
			}
		}
		if dec(t, b["spendable"]).Cmp(min) != 0 {
			t.Errorf("%s: spendable %v is not the smallest component (%s) of %v", name, b["spendable"], min.FloatString(6), comp)
		}
		if f, _ := b["limiting_factor"].(string); f != wantFactor || terms[f] == nil || terms[f].Cmp(min) != 0 {
			t.Errorf("%s: limiting_factor %v, want %s", name, b["limiting_factor"], wantFactor)
		}
		if b["object"] != "balance" || b["currency"] != "usdc" || b["livemode"] != false || b["message"] == "" {
			t.Errorf("%s: %v", name, b)
		}
	}

	b := balance(t, s, e.agentKey)
	check("fresh test agent", b, "per_spend_limit")
	if c := obj(t, b, "components"); c["pool_available"] != "1000.00" || c["per_spend_limit"] != "100.00" ||
		c["daily_remaining"] != "400.00" || c["monthly_remaining"] != "500.00" || c["lifetime_remaining"] != nil {
		t.Errorf("fresh components %v", c)
	}
	if b["held"] != "0.00" || b["pending_count"] != float64(0) {
		t.Errorf("fresh held %v pending %v", b["held"], b["pending_count"])
	}
	check("daily cap", balance(t, s, capped), "daily_remaining")
	check("lifetime cap before spending", balance(t, s, lifetime), "daily_remaining")
	paidLife := dec(t, created(t, s, lifetime, spendBody("10.00", "api.vendor.com", "/v1/data"))["amount_settled"])

	// A settled payment lowers the caps and the pool by its price; a pending
	// one holds its amount in both until it ends.
	paid := dec(t, created(t, s, capped, spendBody("10.00", "api.vendor.com", "/v1/data"))["amount_settled"])
	created(t, s, capped, spendBody("25.00", "api.vendor.com", "/v1/big"))
	b = balance(t, s, capped)
	check("after spending", b, "daily_remaining")
	comp := obj(t, b, "components")
	used := new(big.Rat).Add(paid, dec(t, "25.00"))
	if got := sub(dec(t, "50.00"), dec(t, comp["daily_remaining"])); got.Cmp(used) != 0 {
		t.Errorf("daily_remaining %v, want 50.00 - %s - 25.00", comp["daily_remaining"], paid.FloatString(6))
	}
	// The pool is the owner's: it pays for every agent, and each agent sees
	// what the others used.
	pool := sub(sub(dec(t, "1000.00"), used), paidLife)
	if got := dec(t, comp["pool_available"]); got.Cmp(pool) != 0 {
		t.Errorf("pool_available %v, want 1000.00 - %s - 25.00 - %s", comp["pool_available"], paid.FloatString(6), paidLife.FloatString(6))
	}
	if b["held"] != "25.00" || b["pending_count"] != float64(1) {
		t.Errorf("held %v pending_count %v, want 25.00 and 1", b["held"], b["pending_count"])
	}
	if c := obj(t, balance(t, s, e.agentKey), "components"); dec(t, c["pool_available"]).Cmp(pool) != 0 {
		t.Errorf("another agent sees pool_available %v, want %v", c["pool_available"], comp["pool_available"])
	}

	// Next month the daily and monthly caps are fresh, the lifetime cap is
	// not: it becomes the limit.
	s.Clock.Advance(31 * 24 * time.Hour)
	b = balance(t, s, lifetime)
	check("lifetime cap next month", b, "lifetime_remaining")
	if got := dec(t, obj(t, b, "components")["lifetime_remaining"]); got.Cmp(sub(dec(t, "21.00"), paidLife)) != 0 {
		t.Errorf("lifetime_remaining %v, want 21.00 - %s", got.FloatString(6), paidLife.FloatString(6))
	}
}

// A cancel that arrives while the payment is with the vendor, and still
// reads approved, waits for the vendor's answer and answers from the
// state the spend then has: never "too late" beside a spend that reads
// approved (spec 3: approved can be cancelled; processing cannot).
func TestCancelDuringTheSendAnswersFromTheOutcome(t *testing.T) {
	e := start(t, guardtest.WithConfig(func(c *wire.Config) { c.SimulatedLatency = 700 * time.Millisecond }))
	s := e.srv
	id, done := payingSlowly(t, e, "1.00")
	c := call(t, s, http.MethodPost, "/v1/spends/"+id+"/cancel", e.agentKey, nil, nil)
	wantError(t, c, http.StatusConflict, "invalid_request_error", "cancel_too_late", "")
	// The answer came after the vendor's: the spend reads settled now.
	if g := getSpend(t, s, e.agentKey, id, ""); g.Body["status"] != "settled" {
		t.Fatalf("right after the cancel's 409 the spend reads %v, want settled", g.Body["status"])
	}
	if r := <-done; r.Status != http.StatusCreated || r.Body["status"] != "settled" {
		t.Fatalf("the payment: %d %s", r.Status, r.Raw)
	}
}

// A vendor slower than processing_after: the request is answered with
// processing once the wait is over, not when the vendor answers; the spend
// reads processing, so a cancel is too late (it was sent); the vendor's
// answer settles it, and the events say approved, processing, settled in
// that order (T3, T9, T14).
func TestAVendorSlowerThanTheWaitMakesThePaymentReadProcessing(t *testing.T) {
	e := start(t, guardtest.WithConfig(func(c *wire.Config) {
		c.SimulatedLatency = 1500 * time.Millisecond
		c.ProcessingAfter = 150 * time.Millisecond
	}))
	s := e.srv
	key := newKey()
	begun := time.Now()
	r := spend(t, s, e.agentKey, key, spendBody("1.00", "api.vendor.com", "/slow"))
	mustStatus(t, r, http.StatusCreated)
	checkSpend(t, r)
	if took := time.Since(begun); took >= 1500*time.Millisecond {
		t.Errorf("the request waited %s, as long as the vendor; want it answered after the processing wait", took)
	}
	sp := r.Body
	if sp["status"] != "processing" {
		t.Fatalf("status %v, want processing: %s", sp["status"], r.Raw)
	}
	if d := obj(t, sp, "processing_detail"); d["code"] != "outcome_unknown" {
		t.Errorf("processing_detail %v, want code outcome_unknown", d)
	}
	if h := obj(t, sp, "hold"); h["amount"] != "1.00" {
		t.Errorf("hold %v, want the 1.00 still held", h)
	}
	if st := obj(t, sp, "settlement"); st["status"] != "processing" {
		t.Errorf("settlement %v, want status processing", st)
	}
	id := sp["id"].(string)
	c := call(t, s, http.MethodPost, "/v1/spends/"+id+"/cancel", e.agentKey, nil, nil)
	wantError(t, c, http.StatusConflict, "invalid_request_error", "cancel_too_late", "")
	// The same request again replays the spend as it is now.
	if rr := spend(t, s, e.agentKey, key, spendBody("1.00", "api.vendor.com", "/slow")); rr.Status != http.StatusOK ||
		rr.Body["idempotent_replay"] != true || (rr.Body["status"] != "processing" && rr.Body["status"] != "settled") {
		t.Errorf("replay: %d %s", rr.Status, rr.Raw)
	}
	g := waitStatus(t, s, e.agentKey, id, "settled")
	if g.Body["status"] != "settled" || g.Body["processing_detail"] != nil {
		t.Fatalf("after the vendor answered: status %v processing_detail %v", g.Body["status"], g.Body["processing_detail"])
	}
	if got := strings.Join(spendEvents(t, s, e.owner.TestKey, id), " "); got != "spend.approved spend.processing spend.settled" {
		t.Errorf("events %q, want approved, processing, settled", got)
	}
}

// spendEvents lists the types of the events of one spend, oldest first.
func spendEvents(t *testing.T, s *guardtest.Server, key, id string) []string {
	t.Helper()
	var types []string
	for _, raw := range listedEvents(t, s, key, "/v1/events?type=spend.*&limit=50") {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Object struct {
					ID string `json:"id"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Data.Object.ID == id {
			types = append(types, ev.Type)
		}
	}
	return types
}

// Spec 3's table: a payment the rules pass goes from new straight to
// settled, failed or processing, with that state's event only, when the
// vendor answers within the request (the practice vendor does). A vendor
// that takes its time makes the payment approved first, announced by
// spend.approved (allowance reserved, not yet sent).
func TestSpendEventsFollowTheTransitionTable(t *testing.T) {
	e := start(t)
	s := e.srv
	for _, c := range []struct{ amount, status, events string }{
		{"1.00", "settled", "spend.settled"},
		{"99.00", "failed", "spend.failed"},
		{"98.00", "processing", "spend.processing"},
		{"150.00", "declined", "spend.declined"},
	} {
		sp := created(t, s, e.agentKey, spendBody(c.amount, "api.vendor.com", "/t/"+c.amount))
		if sp["status"] != c.status {
			t.Fatalf("%s: status %v, want %s", c.amount, sp["status"], c.status)
		}
		if got := strings.Join(spendEvents(t, s, e.owner.TestKey, sp["id"].(string)), " "); got != c.events {
			t.Errorf("%s (%s): events %q, want %q", c.amount, c.status, got, c.events)
		}
	}

	slow := start(t, guardtest.WithConfig(func(c *wire.Config) { c.SimulatedLatency = 20 * time.Millisecond }))
	sp := created(t, slow.srv, slow.agentKey, spendBody("1.00", "api.vendor.com", "/slow"))
	if sp["status"] != "settled" {
		t.Fatalf("with a slow vendor: status %v", sp["status"])
	}
	if got := strings.Join(spendEvents(t, slow.srv, slow.owner.TestKey, sp["id"].(string)), " "); got != "spend.approved spend.settled" {
		t.Errorf("with a slow vendor: events %q, want approved, then settled", got)
	}
}

// The sizes of spec 8.2 are characters, not bytes: a URL of 2048
// characters and a destination of 135 (207 in its ASCII form) are taken
// even though their UTF-8 is longer; one character more is refused.
func TestSizesCountCharacters(t *testing.T) {
	e := start(t)
	prefix := "https://api.vendor.com/"
	url := prefix + strings.Repeat("é", 2048-len(prefix))
	r := spend(t, e.srv, e.agentKey, newKey(), fmt.Sprintf(`{"amount":"1.00","destination":"api.vendor.com","resource":{"url":%q}}`, url))
	mustStatus(t, r, http.StatusCreated)
	r = spend(t, e.srv, e.agentKey, newKey(), fmt.Sprintf(`{"amount":"1.00","destination":"api.vendor.com","resource":{"url":%q}}`, url+"é"))
	wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "resource.url")

	label := strings.Repeat("ü", 10)
	host := strings.Repeat(label+".", 12) + "com"
	r = spend(t, e.srv, e.agentKey, newKey(), spendBody("1.00", host, "/a"))
	mustStatus(t, r, http.StatusCreated)
	if r.Body["status"] == "declined" && r.Body["decline_reason"] == "invalid_destination" {
		t.Fatalf("an internationalized host of %d characters was declined as invalid: %s", len([]rune(host)), r.Raw)
	}
	c := call(t, e.srv, http.MethodPost, "/v1/spends/check", e.agentKey, nil, fmt.Sprintf(`{"destination":%q}`, host))
	mustStatus(t, c, http.StatusOK)
}
