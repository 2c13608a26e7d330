package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// Pausing an agent declines its new spends with agent_paused (and a
// pause_detail), marks the payments waiting for the owner, and resuming
// lets it pay again. Both are idempotent.
func TestPauseAndResumeAgent(t *testing.T) {
	e := start(t)
	waitKey := newKey()
	first := spend(t, e.srv, e.agentKey, waitKey, spendBody("1.00", "untrusted.example.org", "/w"))
	mustStatus(t, first, http.StatusCreated)
	waiting := first.Body
	if waiting["status"] != "pending_approval" {
		t.Fatalf("want a pending spend, got %v", waiting["status"])
	}
	for i := 0; i < 2; i++ {
		r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/pause", e.owner.TestKey, nil, nil)
		mustStatus(t, r, http.StatusOK)
		if r.Body["status"] != "paused" || r.Body["paused_at"] == nil {
			t.Fatalf("pause answered %s", r.Raw)
		}
	}
	sp := created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/p"))
	if sp["status"] != "declined" || sp["decline_reason"] != "agent_paused" || sp["pause_detail"] == nil {
		t.Fatalf("a paused agent's spend: %v %v %v", sp["status"], sp["decline_reason"], sp["pause_detail"])
	}
	w := getSpend(t, e.srv, e.agentKey, waiting["id"].(string), "")
	if w.Body["status"] != "pending_approval" || w.Body["pause_detail"] == nil {
		t.Fatalf("the waiting spend after the pause: %s", w.Raw)
	}
	// A replay answers the same current state, straight after the pause.
	if r := spend(t, e.srv, e.agentKey, waitKey, spendBody("1.00", "untrusted.example.org", "/w")); r.Status != http.StatusOK || r.Body["pause_detail"] == nil {
		t.Fatalf("a replay of the waiting spend after the pause: %d %s", r.Status, r.Raw)
	}
	b := balance(t, e.srv, e.agentKey)
	if b["held"] != "1.00" {
		t.Fatalf("held %v: a pause must not release the waiting spend's hold", b["held"])
	}
	// spendable stays the formula of spec 2.7; the message says no
	// payment is made, not that the agent can spend now.
	if msg, _ := b["message"].(string); !strings.Contains(msg, "paused") || strings.Contains(msg, "can spend up to") ||
		!strings.Contains(msg, b["spendable"].(string)) {
		t.Errorf("balance of a paused agent: message %q (spendable %v)", msg, b["spendable"])
	}
	evs, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=agent.paused")
	if len(evs) != 1 {
		t.Fatalf("%d agent.paused events for two pause calls, want 1", len(evs))
	}
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/resume", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if r.Body["status"] != "active" || r.Body["paused_at"] != nil {
		t.Fatalf("resume answered %s", r.Raw)
	}
	if msg, _ := balance(t, e.srv, e.agentKey)["message"].(string); !strings.Contains(msg, "can spend up to") {
		t.Errorf("balance after resuming: message %q", msg)
	}
	// The waiting spend no longer says a pause holds it back.
	if w := getSpend(t, e.srv, e.agentKey, waiting["id"].(string), ""); w.Body["status"] != "pending_approval" || w.Body["pause_detail"] != nil {
		t.Fatalf("the waiting spend after the resume: %s", w.Raw)
	}
	if sp := created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/r")); sp["status"] != "settled" {
		t.Fatalf("after resuming: %v", sp["status"])
	}
	// An agent key can never pause anything.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/pause", e.agentKey, nil, nil),
		403, "permission_error", "key_kind_not_allowed", "")
}

// Archiving an agent revokes its keys (401 afterwards, the same 401 as any
// bad key), releases what waited for the owner, and is final.
func TestArchiveAgentRevokesKeys(t *testing.T) {
	e := start(t)
	waiting := created(t, e.srv, e.agentKey, spendBody("2.00", "untrusted.example.org", "/w"))
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK) // cached key
	// A payment whose key was checked just before the archive reaches the
	// agent just after it.
	before, err := e.srv.System().Authenticate(e.agentKey)
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/archive", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if r.Body["status"] != "archived" || r.Body["archived_at"] == nil {
		t.Fatalf("archive answered %s", r.Raw)
	}
	late, err := e.srv.System().CreateSpend(context.Background(), before, actors.SpendInput{Amount: policy.MustAmount("1.00"),
		Currency: "usdc", Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/late", Method: "GET"},
		URL: "https://api.vendor.com/late", IdempotencyKey: "late"})
	if !errors.Is(err, actors.ErrInvalidKey) || late.Body != nil {
		t.Fatalf("a payment reaching the archived agent: %v, body %s", err, late.Body)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/spends?limit=50"); len(ids) != 1 {
		t.Fatalf("after the archive the agent has spends %v, want the one before it", ids)
	}
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	w := call(t, e.srv, http.MethodGet, "/v1/spends/"+waiting["id"].(string), e.owner.TestKey, nil, nil)
	if w.Body["status"] != "cancelled" || w.Body["hold"] != nil {
		t.Fatalf("the waiting spend after archiving: %s", w.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/resume", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "state_conflict", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/keys", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "state_conflict", "")
	keys := call(t, e.srv, http.MethodGet, "/v1/keys", e.owner.TestKey, nil, nil)
	mustStatus(t, keys, http.StatusOK)
	for _, k := range keys.Body["data"].([]any) {
		km := k.(map[string]any)
		if km["agent_id"] == e.agentID && km["revoked_at"] == nil {
			t.Fatalf("key %v of the archived agent is not revoked", km["id"])
		}
		if _, leaked := km["digest"]; leaked {
			t.Fatal("a key listing shows the secret's digest")
		}
	}
	list := call(t, e.srv, http.MethodGet, "/v1/agents", e.owner.TestKey, nil, nil)
	mustStatus(t, list, http.StatusOK)
	if n := len(list.Body["data"].([]any)); n != 1 {
		t.Fatalf("GET /v1/agents lists %d agents, want 1", n)
	}
}

// Archiving an agent while one of its payments is with the vendor does not
// wait for it, nor refuse: the payment goes on to settle (it may already
// be paid), its allowance held until then and counted after, while what
// still waited for the owner is cancelled at once.
func TestArchiveWhileAPaymentIsWithTheVendor(t *testing.T) {
	e := start(t, guardtest.WithConfig(func(c *wire.Config) { c.SimulatedLatency = 700 * time.Millisecond }))
	s := e.srv
	waiting := created(t, s, e.agentKey, spendBody("2.00", "untrusted.example.org", "/w"))
	before := funding(t, s, e.owner.TestKey)
	id, done := payingSlowly(t, e, "3.00")
	r := call(t, s, http.MethodPost, "/v1/agents/"+e.agentID+"/archive", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if r.Body["status"] != "archived" {
		t.Fatalf("archive answered %s", r.Raw)
	}
	if w := call(t, s, http.MethodGet, "/v1/spends/"+waiting["id"].(string), e.owner.TestKey, nil, nil); w.Body["status"] != "cancelled" {
		t.Fatalf("the spend waiting for the owner after archiving: %s", w.Raw)
	}
	if p := <-done; p.Status != http.StatusCreated || p.Body["status"] != "settled" || p.Body["id"] != id {
		t.Fatalf("the payment with the vendor during the archive: %d %s", p.Status, p.Raw)
	}
	g := call(t, s, http.MethodGet, "/v1/spends/"+id, e.owner.TestKey, nil, nil)
	if g.Body["status"] != "settled" || g.Body["hold"] != nil {
		t.Fatalf("the payment after the archive: %s", g.Raw)
	}
	if ids, _ := listIDs(t, s, e.owner.TestKey, "/v1/events?type=spend.settled"); len(ids) != 1 {
		t.Fatalf("%d spend.settled events, want 1", len(ids))
	}
	// Only the settled price left the pool; nothing stays held.
	after := funding(t, s, e.owner.TestKey)
	price := dec(t, g.Body["amount_settled"])
	if got, want := dec(t, after["balance"]), sub(dec(t, before["balance"]), price); got.Cmp(want) != 0 {
		t.Errorf("balance %v after the payment, want %v", after["balance"], want.FloatString(2))
	}
	if after["held"] != "0.00" {
		t.Errorf("held %v after every spend ended, want 0.00", after["held"])
	}
}

// A revoked key stops working at once, even though it was cached by a
// request a moment before.
func TestRevokeKey(t *testing.T) {
	e := start(t)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK)
	me := call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil)
	keyID := obj(t, me.Body, "key")["id"].(string)
	r := call(t, e.srv, http.MethodPost, "/v1/keys/"+keyID+"/revoke", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if r.Body["revoked_at"] == nil {
		t.Fatalf("revoke answered %s", r.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	// Revoking again answers the same key; another owner's key is not found.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+keyID+"/revoke", e.owner.TestKey, nil, nil), http.StatusOK)
	other := e.srv.NewOwner(t)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+keyID+"/revoke", other.TestKey, nil, nil), 404, "not_found_error", "resource_missing", "")
}

// Adding and removing a destination publishes a policy version and says so
// with destination.added / destination.removed (canonical pattern). Adding
// a trusted pattern loosens, so it waits; removing it tightens at once.
// Adding a pattern already on the list publishes nothing.
func TestDestinationEvents(t *testing.T) {
	e := start(t)
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/destinations", e.owner.TestKey, nil,
		`{"pattern":"*.NEW-Vendor.com","list":"trusted"}`)
	mustStatus(t, r, http.StatusOK)
	if r.Body["effective_at"] == r.Body["created_at"] {
		t.Fatalf("a new trusted pattern must wait as a loosening: %s", r.Raw)
	}
	ev := call(t, e.srv, http.MethodGet, "/v1/events?type=destination.added", e.owner.TestKey, nil, nil)
	data := ev.Body["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("%d destination.added events, want 1: %s", len(data), ev.Raw)
	}
	got := obj(t, obj(t, data[0].(map[string]any), "data"), "object")
	if got["pattern"] != "*.new-vendor.com" || got["list"] != "trusted" {
		t.Fatalf("destination.added carries %v", got)
	}
	// Adding it again, in another spelling, changes nothing: the same
	// version answers and no event says otherwise.
	again := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/destinations", e.owner.TestKey, nil,
		`{"pattern":"*.new-vendor.COM","list":"trusted"}`)
	mustStatus(t, again, http.StatusOK)
	if again.Body["id"] != r.Body["id"] || again.Body["version"] != r.Body["version"] {
		t.Fatalf("re-adding a pattern answered version %v (%v), want %v (%v)", again.Body["version"], again.Body["id"], r.Body["version"], r.Body["id"])
	}
	for _, typ := range []string{"destination.added", "policy.change_requested"} {
		if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type="+typ); len(ids) != 1 {
			t.Fatalf("%d %s events after re-adding a pattern, want 1", len(ids), typ)
		}
	}
	// A removal takes no body: one sent is refused, and nothing is removed.
	wantError(t, call(t, e.srv, http.MethodDelete, "/v1/agents/"+e.agentID+"/destinations/trusted/api.vendor.com", e.owner.TestKey, nil, `{"unknown_field":1}`),
		400, "invalid_request_error", "parameter_invalid", "")
	mustStatus(t, call(t, e.srv, http.MethodDelete, "/v1/agents/"+e.agentID+"/destinations/trusted/api.vendor.com", e.owner.TestKey, nil, nil), http.StatusOK)
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=destination.removed"); len(ids) != 1 {
		t.Fatalf("%d destination.removed events, want 1", len(ids))
	}
	// The agent never sees these owner events.
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/events?type=destination.*"); len(ids) != 0 {
		t.Fatalf("the agent sees %d destination events", len(ids))
	}
}

// Past its policy's valid_until an agent's balance says its rules expired
// rather than what it can spend now: every spend would be declined.
func TestBalanceOfExpiredRules(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	until := clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	_, key := e.srv.NewAgent(t, e.owner.TestKey, `{"per_spend_limit":"10.00","valid_until":"`+until+`"}`)
	if msg, _ := balance(t, e.srv, key)["message"].(string); !strings.Contains(msg, "can spend up to") {
		t.Fatalf("balance before valid_until: %q", msg)
	}
	clock.Advance(2 * time.Hour)
	b := balance(t, e.srv, key)
	if msg, _ := b["message"].(string); !strings.Contains(msg, "expired at "+until) || strings.Contains(msg, "can spend") {
		t.Errorf("balance after valid_until: %q", msg)
	}
	if sp := created(t, e.srv, key, spendBody("1.00", "api.vendor.com", "/x")); sp["decline_reason"] != "policy_expired" {
		t.Errorf("a spend after valid_until: %v %v", sp["status"], sp["decline_reason"])
	}
}
