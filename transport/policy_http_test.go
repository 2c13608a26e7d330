package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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

// An edit that lowers one limit and trusts a new destination is split:
// the lower limit applies at once (a version of its own, policy.updated),
// and the whole edit waits its hour (policy.change_requested), then
// applies. Waiting whole, the lowered cap would have let payments through
// for an hour.
func TestAnEditThatTightensAndLoosensAppliesTheTighteningAtOnce(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	path := "/v1/agents/" + e.agentID + "/policy"
	edit := `{"per_spend_limit":"100.00","daily_cap":"1.00","monthly_cap":"500.00","approval_over":"100.00",` +
		`"trusted_destinations":["api.vendor.com","*.shop.io","new.example.com"]}`
	r := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, edit)
	mustStatus(t, r, http.StatusOK)
	if r.Body["version"] != 3.0 || r.Body["effective_at"] == r.Body["created_at"] || r.Body["daily_cap"] != "1.00" {
		t.Fatalf("the whole edit must wait, as version 3: %s", r.Raw)
	}
	now := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil)
	if now.Body["version"] != 2.0 || now.Body["daily_cap"] != "1.00" || len(now.Body["trusted_destinations"].([]any)) != 2 {
		t.Fatalf("in effect right after the edit: %s; want version 2 with the lower cap alone", now.Raw)
	}
	if got := spend(t, e.srv, e.agentKey, newKey(), spendBody("2.00", "api.vendor.com", "/a")); got.Body["decline_reason"] != "daily_cap" {
		t.Fatalf("a payment over the lowered cap: %s", got.Raw)
	}
	if got := checkReason(t, e, "new.example.com"); got != "unknown_destination" {
		t.Fatalf("before the hour, the new destination is %s", got)
	}
	for typ, want := range map[string]int{"policy.updated": 1, "policy.change_requested": 1} {
		if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type="+typ); len(ids) != want {
			t.Errorf("%d %s events, want %d", len(ids), typ, want)
		}
	}
	clock.Advance(time.Hour + time.Second)
	quiesce(t, e.srv)
	after := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil)
	if after.Body["version"] != 3.0 || after.Body["daily_cap"] != "1.00" {
		t.Fatalf("after the hour: %s", after.Raw)
	}
	if got := checkReason(t, e, "new.example.com"); got != "allowed" {
		t.Fatalf("after the hour, the new destination is %s", got)
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

// addDestination puts a pattern on one of the agent's lists and returns
// the version it published.
func addDestination(t *testing.T, e *env, list, pattern string) map[string]any {
	t.Helper()
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/destinations", e.owner.TestKey, nil,
		`{"list":"`+list+`","pattern":"`+pattern+`"}`)
	mustStatus(t, r, http.StatusOK)
	return r.Body
}

// checkReason is what POST /v1/spends/check answers for a destination.
func checkReason(t *testing.T, e *env, dest string) string {
	t.Helper()
	r := call(t, e.srv, http.MethodPost, "/v1/spends/check", e.agentKey, nil, `{"destination":"`+dest+`","amount":"1.00"}`)
	mustStatus(t, r, http.StatusOK)
	return r.Body["reason"].(string)
}

// A block added while a loosening waits applies at once, and the waiting
// loosening still applies at its time, with the block in it: built on the
// waiting version alone, the block waited the loosening's hour; published
// alone, the loosening would have lifted it when it came due.
func TestATighteningDoesNotWaitForALoosening(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	trust := addDestination(t, e, "trusted", "new.example.com")
	if trust["effective_at"] == trust["created_at"] {
		t.Fatalf("trusting a destination must wait: %v", trust)
	}
	block := addDestination(t, e, "blocked", "shop.example.com")
	if block["effective_at"] != block["created_at"] {
		t.Fatalf("a block must apply at once: %v", block)
	}
	if got := checkReason(t, e, "shop.example.com"); got != "destination_not_allowed" {
		t.Fatalf("right after the block, a check to it says %s", got)
	}
	if got := checkReason(t, e, "new.example.com"); got != "unknown_destination" {
		t.Fatalf("before the loosening's time, the new destination is %s", got)
	}
	// The waiting change keeps its id, so the owner can still cancel it.
	pc := call(t, e.srv, http.MethodGet, "/v1/events?type=policy.change_requested&limit=1", e.owner.TestKey, nil, nil)
	latest := pc.Body["data"].([]any)[0].(map[string]any)["data"].(map[string]any)["object"].(map[string]any)
	if latest["object"] != "policy_change" || latest["status"] != "pending" || latest["cancelled_at"] != nil {
		t.Fatalf("policy.change_requested carries %v, want a pending policy_change (spec 6.2)", latest)
	}
	if latest["id"] != trust["id"] || latest["version"].(float64) <= block["version"].(float64) {
		t.Fatalf("the waiting change after the block: %v (trust %v, block version %v)", latest, trust["id"], block["version"])
	}
	clock.Advance(time.Hour + time.Second)
	quiesce(t, e.srv)
	if got := checkReason(t, e, "new.example.com"); got != "allowed" {
		t.Errorf("after the loosening's time, the trusted destination is %s", got)
	}
	if got := checkReason(t, e, "shop.example.com"); got != "destination_not_allowed" {
		t.Errorf("after the loosening applied, the blocked destination is %s: the loosening lifted the block", got)
	}
}

// A cancelled loosening never comes back: not through a version built on
// it while it waited, nor through an edit made after it was cancelled.
func TestACancelledLooseningStaysCancelled(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	cancel := func(id any) {
		t.Helper()
		mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+id.(string)+"/cancel", e.owner.TestKey, nil, nil), http.StatusOK)
	}
	// Cancelled, then a block: the block is not built on it.
	first := addDestination(t, e, "trusted", "sneaky.example.com")
	cancel(first["id"])
	addDestination(t, e, "blocked", "junk.example.com")
	// Waiting, a second loosening built on it, then cancelled: the second
	// carries it and goes too.
	second := addDestination(t, e, "trusted", "other.example.com")
	third := addDestination(t, e, "trusted", "third.example.com")
	cancel(second["id"])
	after := call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+third["id"].(string)+"/cancel", e.owner.TestKey, nil, nil)
	if after.Body["status"] != "cancelled" {
		t.Errorf("the change built on the cancelled one is %v", after.Body["status"])
	}
	clock.Advance(2 * time.Hour)
	quiesce(t, e.srv)
	for _, dest := range []string{"sneaky.example.com", "other.example.com", "third.example.com"} {
		if got := checkReason(t, e, dest); got != "unknown_destination" {
			t.Errorf("%s after the cancelled changes' time: %s", dest, got)
		}
	}
	if got := checkReason(t, e, "junk.example.com"); got != "destination_not_allowed" {
		t.Errorf("the block: %s", got)
	}
}

// A full policy body that does not loosen the rules in effect, sent while
// a loosening waits, replaces it: the waiting change is cancelled with its
// event (not left waiting for ever behind a newer version), and cancelling
// it again says so.
func TestAFullBodySupersedesAWaitingLoosening(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	path := "/v1/agents/" + e.agentID + "/policy"
	body := func(perSpend, daily string) string {
		return `{"per_spend_limit":"` + perSpend + `","daily_cap":"` + daily + `","monthly_cap":"500.00",` +
			`"approval_over":"100.00","trusted_destinations":["api.vendor.com","*.shop.io"]}`
	}
	loose := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, body("150.00", "400.00"))
	mustStatus(t, loose, http.StatusOK)
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.change_requested"); len(ids) != 1 {
		t.Fatalf("the loosening does not wait: %s", loose.Raw)
	}
	full := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, body("100.00", "300.00"))
	mustStatus(t, full, http.StatusOK)
	ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.change_cancelled")
	if len(ids) != 1 {
		t.Fatalf("%d policy.change_cancelled events, want 1 for the superseded loosening", len(ids))
	}
	again := call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+loose.Body["id"].(string)+"/cancel", e.owner.TestKey, nil, nil)
	if again.Status != http.StatusOK || again.Body["status"] != "cancelled" {
		t.Fatalf("cancelling the superseded loosening: %d %s", again.Status, again.Raw)
	}
	clock.Advance(2 * time.Hour)
	quiesce(t, e.srv)
	got := call(t, e.srv, http.MethodGet, path, e.owner.TestKey, nil, nil)
	if got.Body["per_spend_limit"] != "100.00" || got.Body["daily_cap"] != "300.00" || got.Body["version"] != full.Body["version"] {
		t.Fatalf("after the loosening's time: %s", got.Raw)
	}
}

// Rules that would end before they start are refused: a valid_until in the
// past would stop every payment at once, without a word.
func TestValidUntilInThePastIsRefused(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	path := "/v1/agents/" + e.agentID + "/policy"
	before := call(t, e.srv, http.MethodGet, path, e.owner.TestKey, nil, nil)
	r := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, `{"valid_until":"2020-01-01T00:00:00Z"}`)
	if msg := wantError(t, r, 400, "invalid_request_error", "parameter_invalid", "valid_until")["message"].(string); !strings.Contains(msg, "pause") {
		t.Errorf("the message does not say how to stop the agent now: %q", msg)
	}
	if after := call(t, e.srv, http.MethodGet, path, e.owner.TestKey, nil, nil); after.Body["version"] != before.Body["version"] {
		t.Fatalf("a refused publish made version %v", after.Body["version"])
	}
	future := epoch.Add(time.Hour).Format(time.RFC3339)
	mustStatus(t, call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, `{"valid_until":"`+future+`"}`), http.StatusOK)
	// Once it has passed, other edits still publish: the request did not
	// set it.
	clock.Advance(2 * time.Hour)
	quiesce(t, e.srv)
	addDestination(t, e, "blocked", "junk.example.com")
}

// An agent cannot be created with rules that already ended, as a publish
// cannot set them; and a policy field that takes no null is refused by
// name rather than read as "left out" (its default): "daily_cap": null
// would publish 50.00 where the owner meant no cap.
func TestPolicyBodiesRefuseWhatTheyCannotMean(t *testing.T) {
	e := start(t)
	owner := e.owner.TestKey
	before, _ := listIDs(t, e.srv, owner, "/v1/agents")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents", owner, nil, `{"name":"late","policy":{"valid_until":"2020-01-01T00:00:00Z"}}`),
		400, "invalid_request_error", "parameter_invalid", "policy.valid_until")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents", owner, nil, `{"name":"nulls","policy":{"per_spend_limit":null}}`),
		400, "invalid_request_error", "parameter_invalid", "policy.per_spend_limit")
	if after, _ := listIDs(t, e.srv, owner, "/v1/agents"); len(after) != len(before) {
		t.Fatalf("refused creations made %d agents", len(after)-len(before))
	}
	path := "/v1/agents/" + e.agentID + "/policy"
	version := call(t, e.srv, http.MethodGet, path, owner, nil, nil).Body["version"]
	for _, f := range []string{"daily_cap", "max_pending", "trusted_destinations", "unknown_destination"} {
		err := wantError(t, call(t, e.srv, http.MethodPost, path, owner, nil, `{"`+f+`":null}`), 400, "invalid_request_error", "parameter_invalid", f)
		if !strings.Contains(err["message"].(string), "leave it out for the default") {
			t.Errorf("%s: null refused without saying what to do: %q", f, err["message"])
		}
	}
	if v := call(t, e.srv, http.MethodGet, path, owner, nil, nil).Body["version"]; v != version {
		t.Fatalf("refused publishes moved the version from %v to %v", version, v)
	}
	// The fields that take null still do: no lifetime cap.
	mustStatus(t, call(t, e.srv, http.MethodPost, path, owner, nil, `{"lifetime_cap":null}`), http.StatusOK)
}

// Three loosenings waiting at once, each built on the one before, come due
// together when the practice clock moves past them: each is announced with
// its policy.updated, oldest first, so every policy.change_requested ends
// in an update or a cancellation.
func TestLooseningsThatComeDueTogetherAreEachAnnounced(t *testing.T) {
	e := start(t)
	var waiting []string
	for _, pattern := range []string{"a.example.com", "b.example.com", "c.example.com"} {
		v := addDestination(t, e, "trusted", pattern)
		if v["effective_at"] == v["created_at"] {
			t.Fatalf("trusting %s must wait: %v", pattern, v)
		}
		waiting = append(waiting, v["id"].(string))
	}
	advanceClock(t, e, 3601)
	if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil); len(got.Body["trusted_destinations"].([]any)) != 5 {
		t.Fatalf("after the hour: %s", got.Raw)
	}
	r := call(t, e.srv, http.MethodGet, "/v1/events?type=policy.updated&limit=10", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	data := r.Body["data"].([]any)
	var announced []string
	for i := len(data) - 1; i >= 0; i-- { // the list is newest first
		announced = append(announced, data[i].(map[string]any)["data"].(map[string]any)["object"].(map[string]any)["id"].(string))
	}
	if strings.Join(announced, ",") != strings.Join(waiting, ",") {
		t.Fatalf("policy.updated announced %v, want each waiting version in order %v", announced, waiting)
	}
	agent := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, nil)
	if agent.Body["policy_version"] != 4.0 {
		t.Fatalf("the agent reads policy_version %v, want 4", agent.Body["policy_version"])
	}
}

// Archiving an agent cancels the loosenings that wait for it, each with
// its policy.change_cancelled: an archived agent's rules are its last, and
// the version must not apply an hour later, unannounced.
func TestArchiveCancelsWaitingRules(t *testing.T) {
	e := start(t)
	v := addDestination(t, e, "trusted", "later.example.com")
	before := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy", e.owner.TestKey, nil, nil)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/archive", e.owner.TestKey, nil, nil), http.StatusOK)
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.change_cancelled"); len(ids) != 1 {
		t.Fatalf("%d policy.change_cancelled events after the archive, want 1", len(ids))
	}
	c := call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+v["id"].(string)+"/cancel", e.owner.TestKey, nil, nil)
	mustStatus(t, c, http.StatusOK)
	if c.Body["status"] != "cancelled" {
		t.Fatalf("the waiting change after the archive: %s", c.Raw)
	}
	advanceClock(t, e, 7200)
	after := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy", e.owner.TestKey, nil, nil)
	if after.Body["version"] != before.Body["version"] || len(after.Body["trusted_destinations"].([]any)) != len(before.Body["trusted_destinations"].([]any)) {
		t.Fatalf("the archived agent's rules changed: before %s, after %s", before.Raw, after.Raw)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.updated"); len(ids) != 0 {
		t.Fatalf("%d policy.updated events for an archived agent", len(ids))
	}
}

// The owner reads what waits: GET /v1/agents/{id}/policy_changes lists the
// waiting versions oldest first, and GET /v1/policy_changes/{id} reads one
// as pending, applied or cancelled.
func TestOwnerReadsWaitingPolicyChanges(t *testing.T) {
	e := start(t)
	list := func() []any {
		t.Helper()
		r := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy_changes", e.owner.TestKey, nil, nil)
		mustStatus(t, r, http.StatusOK)
		if r.Body["object"] != "list" || r.Body["url"] != "/v1/agents/"+e.agentID+"/policy_changes" {
			t.Fatalf("policy_changes answered %s", r.Raw)
		}
		return r.Body["data"].([]any)
	}
	status := func(id string) string {
		t.Helper()
		r := call(t, e.srv, http.MethodGet, "/v1/policy_changes/"+id, e.owner.TestKey, nil, nil)
		mustStatus(t, r, http.StatusOK)
		return r.Body["status"].(string)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("nothing waits yet, the list holds %v", got)
	}
	first := addDestination(t, e, "trusted", "one.example.com")["id"].(string)
	second := addDestination(t, e, "trusted", "two.example.com")["id"].(string)
	got := list()
	if len(got) != 2 || got[0].(map[string]any)["id"] != first || got[1].(map[string]any)["id"] != second ||
		got[0].(map[string]any)["status"] != "pending" {
		t.Fatalf("waiting changes %v, want %s then %s, pending", got, first, second)
	}
	if s := status(first); s != "pending" {
		t.Fatalf("the first change reads %s, want pending", s)
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+second+"/cancel", e.owner.TestKey, nil, nil), http.StatusOK)
	if got := list(); len(got) != 1 || got[0].(map[string]any)["id"] != first {
		t.Fatalf("after cancelling the second: %v", got)
	}
	if s := status(second); s != "cancelled" {
		t.Fatalf("the cancelled change reads %s", s)
	}
	advanceClock(t, e, 3601)
	if s := status(first); s != "applied" {
		t.Fatalf("after its hour the first change reads %s, want applied", s)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after the hour the list holds %v", got)
	}
	// Owner keys only, and only the owner's own.
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/policy_changes/"+first, e.agentKey, nil, nil),
		403, "permission_error", "key_kind_not_allowed", "")
	other := e.srv.NewOwner(t)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/policy_changes/"+first, other.TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy_changes", other.TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/policy_changes/pol_nothing", e.owner.TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
}

// An edit that takes back part of a waiting loosening (a trusted
// destination removed before it applied, a raised limit lowered again but
// still above the one in effect) waits its own hour, and the waiting
// versions it takes back from are cancelled: applied at their earlier time
// they would have let the agent pay what the owner's newest rules forbid.
func TestTakingBackAWaitingLooseningCancelsIt(t *testing.T) {
	t.Run("a trusted destination removed", func(t *testing.T) {
		clock := guardtest.NewFakeClock(epoch)
		e := start(t, guardtest.WithClock(clock))
		x := addDestination(t, e, "trusted", "x.example.com")
		y := addDestination(t, e, "trusted", "y.example.com")
		clock.Advance(30 * time.Minute)
		quiesce(t, e.srv)
		r := call(t, e.srv, http.MethodDelete, "/v1/agents/"+e.agentID+"/destinations/trusted/x.example.com", e.owner.TestKey, nil, nil)
		mustStatus(t, r, http.StatusOK)
		if r.Body["effective_at"] == r.Body["created_at"] {
			t.Fatalf("the newest rules still trust y.example.com, which is not in effect: they must wait: %s", r.Raw)
		}
		for _, id := range []any{x["id"], y["id"]} {
			got := call(t, e.srv, http.MethodGet, "/v1/policy_changes/"+id.(string), e.owner.TestKey, nil, nil)
			if got.Body["status"] != "cancelled" {
				t.Errorf("the waiting change %v that trusts x.example.com reads %s", id, got.Raw)
			}
		}
		if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=policy.change_cancelled"); len(ids) != 2 {
			t.Errorf("%d policy.change_cancelled events, want 2", len(ids))
		}
		clock.Advance(31 * time.Minute) // past the time of the cancelled changes
		quiesce(t, e.srv)
		if got := checkReason(t, e, "x.example.com"); got != "unknown_destination" {
			t.Fatalf("after the removal, x.example.com is %s when the older changes' time passes", got)
		}
		clock.Advance(30 * time.Minute) // past the newest version's hour
		quiesce(t, e.srv)
		if got := checkReason(t, e, "y.example.com"); got != "allowed" {
			t.Errorf("the newest rules trust y.example.com after their hour; a check says %s", got)
		}
		if got := checkReason(t, e, "x.example.com"); got != "unknown_destination" {
			t.Errorf("x.example.com after the newest rules applied: %s", got)
		}
	})
	t.Run("a raised limit lowered again", func(t *testing.T) {
		clock := guardtest.NewFakeClock(epoch)
		e := start(t, guardtest.WithClock(clock))
		path := "/v1/agents/" + e.agentID + "/policy"
		body := func(perSpend string) string {
			return `{"per_spend_limit":"` + perSpend + `","daily_cap":"400.00","monthly_cap":"500.00",` +
				`"approval_over":"200.00","trusted_destinations":["api.vendor.com","*.shop.io"]}`
		}
		first := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, body("150.00"))
		mustStatus(t, first, http.StatusOK)
		clock.Advance(10 * time.Minute)
		quiesce(t, e.srv)
		mustStatus(t, call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, body("120.00")), http.StatusOK)
		clock.Advance(51 * time.Minute) // past the first change's hour
		quiesce(t, e.srv)
		if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil).Body["per_spend_limit"]; got != "100.00" {
			t.Fatalf("per_spend_limit %v when the first raise's hour passed; the owner took it back to 120.00, which waits", got)
		}
		if got := spend(t, e.srv, e.agentKey, newKey(), spendBody("130.00", "api.vendor.com", "/a")); got.Body["decline_reason"] != "per_spend_limit" {
			t.Fatalf("a 130.00 payment after the raise to 150.00 was taken back: %s", got.Raw)
		}
		if got := call(t, e.srv, http.MethodGet, "/v1/policy_changes/"+first.Body["id"].(string), e.owner.TestKey, nil, nil); got.Body["status"] != "cancelled" {
			t.Errorf("the first raise reads %s", got.Raw)
		}
		clock.Advance(10 * time.Minute)
		quiesce(t, e.srv)
		if got := call(t, e.srv, http.MethodGet, "/v1/policy", e.agentKey, nil, nil).Body["per_spend_limit"]; got != "120.00" {
			t.Errorf("per_spend_limit %v after the second raise's hour, want 120.00", got)
		}
	})
}

// A policy change carries the rules it applies and when it was published,
// so the owner can read what waits before letting it apply; its list has
// the paged lists' field order.
func TestAPolicyChangeShowsItsRules(t *testing.T) {
	e := start(t)
	id := addDestination(t, e, "trusted", "later.example.com")["id"].(string)
	r := call(t, e.srv, http.MethodGet, "/v1/policy_changes/"+id, e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	rules, _ := r.Body["rules"].(map[string]any)
	trusted, _ := rules["trusted_destinations"].([]any)
	if len(trusted) == 0 || trusted[len(trusted)-1] != "later.example.com" || rules["per_spend_limit"] == nil || r.Body["created_at"] == nil {
		t.Fatalf("the waiting change does not show its rules: %s", r.Raw)
	}
	list := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy_changes", e.owner.TestKey, nil, nil)
	if !strings.HasPrefix(string(list.Raw), `{"object":"list","data":[{"id":"`+id+`"`) {
		t.Fatalf("the list of waiting changes: %s", list.Raw)
	}
}

// At most MaxWaitingPolicyChanges versions wait at once: one more is 409
// quota_exceeded, saying how to make room, and publishes nothing.
func TestWaitingPolicyChangesAreBounded(t *testing.T) {
	e := start(t)
	var first string
	for i := range 20 {
		v := addDestination(t, e, "trusted", fmt.Sprintf("v%d.example.com", i))
		if i == 0 {
			first = v["id"].(string)
		}
	}
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/destinations", e.owner.TestKey, nil,
		`{"list":"trusted","pattern":"one-more.example.com"}`)
	wantError(t, r, 409, "invalid_request_error", "quota_exceeded", "")
	if msg := r.Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "20 versions") || !strings.Contains(msg, "cancel one") {
		t.Errorf("the refusal says %q", msg)
	}
	if got := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy_changes", e.owner.TestKey, nil, nil); len(got.Body["data"].([]any)) != 20 {
		t.Fatalf("after the refusal %d changes wait, want 20", len(got.Body["data"].([]any)))
	}
	// A tightening still applies at once, and a cancel makes room.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/destinations", e.owner.TestKey, nil,
		`{"list":"blocked","pattern":"bad.example.com"}`), http.StatusOK)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/policy_changes/"+first+"/cancel", e.owner.TestKey, nil, nil), http.StatusOK)
	addDestination(t, e, "trusted", "one-more.example.com")
}
