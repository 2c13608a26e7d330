package transport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// snapshot is what an owner key lists of its environment.
func snapshot(t *testing.T, e *env, key string) string {
	t.Helper()
	var b strings.Builder
	for _, path := range []string{"/v1/agents?limit=50", "/v1/spends?limit=50", "/v1/events?limit=50"} {
		ids, more := listIDs(t, e.srv, key, path)
		fmt.Fprintf(&b, "%s %v %v\n", path, ids, more)
	}
	f := call(t, e.srv, http.MethodGet, "/v1/funding", key, nil, nil)
	delete(f.Body, "request_id")
	fmt.Fprintf(&b, "%v\n", f.Body)
	return b.String()
}

// A practice reset leaves a practice environment as fresh as a new one
// and everything else as it was: old agent keys get 401, old spends,
// approvals, receipts and policy changes 404, the lists are empty, the
// pool and the clock are back at the start, the funding settings and the
// owner keys stay as they were, the live environment
// is untouched, events continue their sequence, and the books balance.
func TestPracticeReset(t *testing.T) {
	e := start(t)
	owner := e.owner.TestKey
	settled := created(t, e.srv, e.agentKey, spendBody("2.00", "api.vendor.com", "/s"))
	waiting := created(t, e.srv, e.agentKey, spendBody("1.00", "untrusted.example.org", "/w"))
	declined := created(t, e.srv, e.agentKey, spendBody("500.00", "api.vendor.com", "/d"))
	if settled["status"] != "settled" || waiting["status"] != "pending_approval" || declined["status"] != "declined" {
		t.Fatalf("setup: %v %v %v", settled["status"], waiting["status"], declined["status"])
	}
	archived, archivedKey := e.srv.NewAgent(t, owner, "")
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+archived+"/archive", owner, nil, nil), http.StatusOK)
	loosen := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/policy", owner, nil, `{"daily_cap":"450.00"}`)
	mustStatus(t, loosen, http.StatusOK)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/deposits", owner, nil, `{"amount":"50.00"}`), http.StatusCreated)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/funding", owner, nil, `{"reserve_floor":"10.00","low_balance_threshold":"5.00"}`), http.StatusOK)
	advanceClock(t, e, 2*24*3600) // the waiting approval expires on the way
	// Owner keys changed on the advanced clock: one made and revoked, one
	// rotated (its old secret works 24 more hours).
	extra := call(t, e.srv, http.MethodPost, "/v1/owner_keys", owner, nil, nil)
	mustStatus(t, extra, http.StatusCreated)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+extra.Body["id"].(string)+"/revoke", owner, nil, nil), http.StatusOK)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", extra.Body["secret"].(string), nil, nil), 401, "authentication_error", "invalid_api_key", "")
	me := call(t, e.srv, http.MethodGet, "/v1/me", owner, nil, nil)
	rot := call(t, e.srv, http.MethodPost, "/v1/keys/"+obj(t, me.Body, "key")["id"].(string)+"/rotate", owner, nil, `{"grace_period_hours":24}`)
	mustStatus(t, rot, http.StatusCreated)
	newOwner := rot.Body["secret"].(string)
	// The live environment has its own agent and history.
	_, liveKey := e.srv.NewAgent(t, e.owner.LiveKey, `{"trusted_destinations":["api.vendor.com"]}`)
	created(t, e.srv, liveKey, spendBody("1.00", "api.vendor.com", "/l"))
	liveBefore := snapshot(t, e, e.owner.LiveKey)
	lastSeq := call(t, e.srv, http.MethodGet, "/v1/events?limit=1", newOwner, nil, nil).Body["data"].([]any)[0].(map[string]any)["sequence"].(float64)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/balance", e.agentKey, nil, nil), http.StatusOK) // the key and view are cached

	r := call(t, e.srv, http.MethodPost, "/v1/test/reset", newOwner, nil, nil)
	mustStatus(t, r, http.StatusOK)
	removed := obj(t, r.Body, "removed")
	if removed["agents"] != float64(2) || removed["api_keys"] != float64(2) || removed["spends"] != float64(3) ||
		// Versions: each agent's first, and the edit's two (what it
		// tightens, at once; the whole, waiting).
		removed["idempotency_keys"] != float64(3) || removed["policy_versions"] != float64(4) ||
		removed["events"] != lastSeq || r.Body["balance"] != "1000.00" || r.Body["last_sequence"] != lastSeq ||
		r.Body["clock_offset_seconds"] != float64(2*24*3600) || r.Body["object"] != "practice_reset" {
		t.Fatalf("the reset answered %s (last sequence %v)", r.Raw, lastSeq)
	}

	// Nothing old answers.
	for _, key := range []string{e.agentKey, archivedKey} {
		wantError(t, call(t, e.srv, http.MethodGet, "/v1/balance", key, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	}
	for _, path := range []string{
		"/v1/spends/" + settled["id"].(string),
		"/v1/spends/" + waiting["id"].(string),
		"/v1/approvals/" + obj(t, waiting, "approval")["id"].(string),
		"/v1/receipts/" + obj(t, settled, "settlement")["receipt_id"].(string),
		"/v1/agents/" + e.agentID,
		"/v1/agents/" + e.agentID + "/policy",
	} {
		wantError(t, call(t, e.srv, http.MethodGet, path, newOwner, nil, nil), 404, "not_found_error", "resource_missing", "")
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+loosen.Body["id"].(string)+"/cancel", newOwner, nil, nil),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/keys", newOwner, nil, nil), 404, "not_found_error", "resource_missing", "")
	for _, path := range []string{"/v1/agents", "/v1/spends", "/v1/events"} {
		if ids, more := listIDs(t, e.srv, newOwner, path); len(ids) != 0 || more {
			t.Errorf("GET %s after the reset lists %v", path, ids)
		}
	}
	f := call(t, e.srv, http.MethodGet, "/v1/funding", newOwner, nil, nil)
	if f.Body["balance"] != "1000.00" || f.Body["held"] != "0.00" || f.Body["reserve_floor"] != "10.00" || f.Body["low_balance_threshold"] != "5.00" {
		t.Errorf("funding after the reset: %s", f.Raw)
	}
	if c := call(t, e.srv, http.MethodGet, "/v1/test/clock", newOwner, nil, nil); c.Body["offset_seconds"] != float64(0) {
		t.Errorf("the practice clock after the reset: %s", c.Raw)
	}
	if got := snapshot(t, e, e.owner.LiveKey); got != liveBefore {
		t.Errorf("the live environment changed:\nbefore %s\nafter  %s", liveBefore, got)
	}
	created(t, e.srv, liveKey, spendBody("1.00", "api.vendor.com", "/l2")) // and still works

	// Owner keys are as they were: they age with the service clock, so
	// the rotated one works until its grace ends on that clock, and a
	// revoked one stays revoked.
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", extra.Body["secret"].(string), nil, nil), 401, "authentication_error", "invalid_api_key", "")
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", owner, nil, nil), http.StatusOK)
	advanceClock(t, e, 25*3600)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", owner, nil, nil), http.StatusOK)
	e.srv.Clock.Advance(25 * time.Hour)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", owner, nil, nil), 401, "authentication_error", "invalid_api_key", "")

	// The environment starts again: agents, spends, events after the old sequence.
	id, key := e.srv.NewAgent(t, newOwner, testPolicy)
	sp := created(t, e.srv, key, spendBody("3.00", "api.vendor.com", "/n"))
	if sp["status"] != "settled" {
		t.Fatalf("a spend after the reset: %v", sp["status"])
	}
	evs := call(t, e.srv, http.MethodGet, "/v1/events?limit=50", newOwner, nil, nil).Body["data"].([]any)
	for _, ev := range evs {
		if seq := ev.(map[string]any)["sequence"].(float64); seq <= lastSeq {
			t.Errorf("event %v has sequence %v, not after %v", ev.(map[string]any)["type"], seq, lastSeq)
		}
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.(map[string]any)["type"].(string))
	}
	// Newest first, and nothing of the old environment.
	if got := strings.Join(types, " "); got != "spend.settled api_key.created agent.created" {
		t.Errorf("events after the reset: %s", got)
	}
	if ids, _ := listIDs(t, e.srv, newOwner, "/v1/agents"); len(ids) != 1 || ids[0] != id {
		t.Errorf("agents after the reset: %v", ids)
	}

	// The books: the store holds nothing of the old agents, and balances.
	quiesce(t, e.srv)
	store := e.srv.Service().Store()
	for _, c := range []struct{ bucket, key string }{
		{"spends", settled["id"].(string)}, {"spends", declined["id"].(string)}, {"agents", e.agentID},
		{"agents", archived}, {"ledgers", e.agentID}, {"service_meta", "practice_reset|" + e.owner.ID},
	} {
		if v, err := store.Get(c.bucket, []byte(c.key)); err != nil || v != nil {
			t.Errorf("%s/%s is still stored (%v)", c.bucket, c.key, err)
		}
	}
	if err := store.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rep := actors.Audit(store, map[string]policy.Amount{e.owner.ID + "|test": policy.MustAmount("1000.00"),
		e.owner.ID + "|live": policy.MustAmount("0")})
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if rep.Agents != 2 { // the new practice agent and the live one
		t.Errorf("the audit found %d agents", rep.Agents)
	}
}

// While a practice payment's outcome is unknown, a reset is refused with
// 409 and changes nothing: the agent keeps paying. Once the payment
// settles, the reset goes through.
func TestPracticeResetRefusedWhilePaymentUnknown(t *testing.T) {
	e := start(t)
	unknown := created(t, e.srv, e.agentKey, spendBody("98.00", "api.vendor.com", "/u"))
	if unknown["status"] != "processing" {
		t.Fatalf("the 98.00 spend is %v, want processing", unknown["status"])
	}
	before := snapshot(t, e, e.owner.TestKey)
	r := call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil)
	er := wantError(t, r, 409, "invalid_request_error", "state_conflict", "")
	if msg, _ := er["message"].(string); !strings.Contains(msg, unknown["id"].(string)) || !strings.Contains(msg, "processing") {
		t.Errorf("the refusal does not name the payment: %q", msg)
	}
	if got := snapshot(t, e, e.owner.TestKey); got != before {
		t.Errorf("a refused reset changed the environment:\nbefore %s\nafter  %s", before, got)
	}
	// The refused reset let go of the agent: it pays again.
	if sp := created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/again")); sp["status"] != "settled" {
		t.Fatalf("a spend after the refused reset: %v %v", sp["status"], sp["message"])
	}
	e.srv.Clock.Advance(time.Minute) // the service verifies the payment
	if w := waitStatus(t, e.srv, e.agentKey, unknown["id"].(string), "settled"); w.Body["status"] != "settled" {
		t.Fatalf("the unknown payment did not settle: %s", w.Raw)
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil), http.StatusOK)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
}

// Practice control only: a live owner key gets 404 (and the live
// environment is untouched), an agent key 403, a body 400.
func TestPracticeResetAccess(t *testing.T) {
	e := start(t)
	_, liveKey := e.srv.NewAgent(t, e.owner.LiveKey, "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.LiveKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", liveKey, nil, nil), http.StatusOK)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, `{"agents":true}`), 400, "invalid_request_error", "parameter_unknown", "agents")
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK)
	// An empty JSON object is no change at all; a reset of a fresh
	// environment removes nothing and may run again.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, `{}`), http.StatusOK)
	again := call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil)
	mustStatus(t, again, http.StatusOK)
	if rm := obj(t, again.Body, "removed"); rm["agents"] != float64(0) || rm["spends"] != float64(0) || rm["events"] != float64(0) {
		t.Errorf("a second reset removed %v", rm)
	}
}

// Notification channels are the owner's configuration: a reset keeps them
// (and they keep working), while the marks of the notices sent for the
// removed approvals go with them.
func TestPracticeResetKeepsNotificationChannels(t *testing.T) {
	chat := guardtest.StartChatServer(t, nil)
	e := start(t)
	ch := addChannel(t, e.srv, e.owner.TestKey, "chat", chat.URL)
	_, agentKey := e.srv.NewAgent(t, e.owner.TestKey, askingPolicy)
	_, approval := pendingSpend(t, e.srv, agentKey)
	chat.Next(t, deliveryWait)
	e.srv.Quiesce(t, deliveryWait)
	if sent, _, err := e.srv.System().NotificationSent(approval["id"].(string), ch["id"].(string)); err != nil || !sent {
		t.Fatalf("the notice was not marked sent: %v %v", sent, err)
	}

	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil), http.StatusOK)
	if sent, _, err := e.srv.System().NotificationSent(approval["id"].(string), ch["id"].(string)); err != nil || sent {
		t.Errorf("the mark of a removed approval's notice is still stored: %v %v", sent, err)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, channelsPath); len(ids) != 1 || ids[0] != ch["id"] {
		t.Fatalf("channels after the reset: %v", ids)
	}
	_, agentKey = e.srv.NewAgent(t, e.owner.TestKey, askingPolicy)
	_, approval = pendingSpend(t, e.srv, agentKey)
	if req := chat.Next(t, deliveryWait); !strings.Contains(string(req.Body), approval["id"].(string)) {
		t.Errorf("the kept channel got %s", req.Body)
	}
}

// A long poll on a spend the reset removes answers 404 as the spend goes,
// not when its wait is over.
func TestPracticeResetEndsLongPolls(t *testing.T) {
	e := start(t)
	waiting := created(t, e.srv, e.agentKey, spendBody("1.00", "untrusted.example.org", "/w"))
	if waiting["status"] != "pending_approval" {
		t.Fatalf("setup: %v", waiting["status"])
	}
	type answer struct {
		r    guardtest.Response
		took time.Duration
	}
	polled := make(chan answer, 1)
	go func() {
		began := time.Now()
		r := call(t, e.srv, http.MethodGet, "/v1/spends/"+waiting["id"].(string)+"?wait_seconds=20", e.owner.TestKey, nil, nil)
		polled <- answer{r, time.Since(began)}
	}()
	// The poll is open once the hub watches the spend; a reset before
	// that would only make the poll's first read a 404, which proves less.
	for deadline := time.Now().Add(10 * time.Second); e.srv.System().LongPolls(waiting["id"].(string)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the long poll never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil), http.StatusOK)
	a := <-polled
	wantError(t, a.r, 404, "not_found_error", "resource_missing", "")
	if a.took >= 15*time.Second {
		t.Fatalf("the poll answered after %s: it waited out its 20 seconds", a.took)
	}
}
