package actors_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// The same resource paid again within 60 s under another idempotency key
// still settles, with a warning that names the first spend and a
// suggestion to read its result (api-decisions: duplicate purchase).
func TestDuplicatePurchaseWarnsWithinTheWindow(t *testing.T) {
	f := newApprovalFixture(t)
	buy := func(key, path string) policy.Spend {
		t.Helper()
		sp := createSpend(t, f.h.sys, f.agent, vendorSpend("1.00", path, key))
		if sp.Status != policy.StatusSettled {
			t.Fatalf("spend %s is %s, want settled: the warning never stops a payment", key, sp.Status)
		}
		return sp
	}
	warned := func(sp policy.Spend, first string) bool {
		w := strings.Contains(sp.Message, "Warning: the same resource was bought") && strings.Contains(sp.Message, first)
		s := false
		for _, sug := range sp.NextAction.Suggestions {
			s = s || strings.Contains(sug, "GET /v1/spends/"+first)
		}
		if w != s {
			t.Fatalf("message and suggestions disagree: %q / %q", sp.Message, sp.NextAction.Suggestions)
		}
		return w
	}

	first := buy("k1", "/report")
	if warned(first, first.ID) {
		t.Fatalf("a first purchase is warned about: %q", first.Message)
	}
	f.h.clock.Advance(30 * time.Second)
	again := buy("k2", "/report")
	if !warned(again, first.ID) {
		t.Fatalf("the same resource 30 s later is not warned about: %q", again.Message)
	}
	if other := buy("k3", "/other"); warned(other, first.ID) || warned(other, again.ID) {
		t.Fatalf("another resource is warned about: %q", other.Message)
	}
	// The window runs from the newest purchase of the resource.
	f.h.clock.Advance(45 * time.Second)
	if third := buy("k4", "/report"); !warned(third, again.ID) {
		t.Fatalf("45 s after the second purchase: no warning: %q", third.Message)
	}
	f.h.clock.Advance(61 * time.Second)
	if late := buy("k5", "/report"); strings.Contains(late.Message, "Warning") {
		t.Fatalf("61 s after the last purchase: still warned: %q", late.Message)
	}
}

// The warning of a spend that waits for the owner survives a restart: the
// payment approved after it still says it repeats a purchase. The first
// purchase counts from the owner's approval, when it started paying.
func TestDuplicateWarningSurvivesRestart(t *testing.T) {
	f := newApprovalFixture(t)
	first := f.pending(t)
	f.h.clock.Advance(time.Minute) // the window counts from the approval
	if paid, err := f.decide(first, actors.DecisionApprove); err != nil || paid.Status != policy.StatusApproved {
		t.Fatalf("approving the first purchase: %v %v", paid.Status, err)
	}
	f.h.clock.Advance(10 * time.Second)
	again := f.pending(t) // the same resource, another idempotency key
	warning := "Warning: the same resource was bought 10s ago by spend " + first.ID + "."
	if !strings.Contains(again.Message, warning) {
		t.Fatalf("the repeat is not warned about: %q", again.Message)
	}

	f.h.close()
	f.h.open("100.00")

	if _, err := f.decide(again, actors.DecisionApprove); err != nil {
		t.Fatal(err)
	}
	done := f.read(t, again.ID)
	if done.Status != policy.StatusSettled {
		t.Fatalf("after approval the spend is %s, want settled: %s %v %v", done.Status, done.Message, done.FailureReason, done.RailError)
	}
	if strings.Count(done.Message, warning) != 1 {
		t.Fatalf("settled after a restart, the message is %q: want the warning once", done.Message)
	}
	n := 0
	for _, s := range done.NextAction.Suggestions {
		if strings.Contains(s, "GET /v1/spends/"+first.ID) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("suggestions after a restart: %q, want the one to read %s", done.NextAction.Suggestions, first.ID)
	}
	// The first one was not a repeat, and stays unwarned.
	if strings.Contains(f.read(t, first.ID).Message, "Warning") {
		t.Fatal("the first purchase is warned about")
	}
}

// A spend that ended without paying (failed at the rail, rejected by the
// owner) bought nothing: the next spend of the same resource is not
// warned about, and no suggestion points at a result that does not exist.
func TestNoWarningAfterAnUnpaidSpend(t *testing.T) {
	f := newApprovalFixture(t)
	// Room for the magic amount 99.00 (the practice rail fails it).
	trusted, big, over := []string{"api.vendor.com"}, "100.00", "100.00"
	payer := guardtest.AgentPrincipal(t, f.h.sys, f.owner, "payer", &policy.RulesInput{TrustedDestinations: &trusted,
		PerSpendLimit: &big, DailyCap: &big, MonthlyCap: &big, ApprovalOver: &over})
	failed := createSpend(t, f.h.sys, payer, vendorSpend("99.00", "/report", "k1"))
	if failed.Status != policy.StatusFailed {
		t.Fatalf("the magic amount gave %s, want failed", failed.Status)
	}
	f.h.clock.Advance(5 * time.Second)
	paid := createSpend(t, f.h.sys, payer, vendorSpend("1.00", "/report", "k2"))
	if paid.Status != policy.StatusSettled || strings.Contains(paid.Message, "Warning") || len(paid.NextAction.Suggestions) > 0 {
		t.Fatalf("after a failed spend: %s %q %q, want settled without a warning", paid.Status, paid.Message, paid.NextAction.Suggestions)
	}
	// A settled purchase is still warned about.
	f.h.clock.Advance(5 * time.Second)
	if again := createSpend(t, f.h.sys, payer, vendorSpend("1.00", "/report", "k3")); !strings.Contains(again.Message, paid.ID) {
		t.Fatalf("a repeat of the settled spend is not warned about: %q", again.Message)
	}

	rejected := f.pending(t)
	if _, err := f.decide(rejected, actors.DecisionReject); err != nil {
		t.Fatal(err)
	}
	f.h.clock.Advance(5 * time.Second)
	next := f.pending(t) // the same resource again
	if strings.Contains(next.Message, "Warning") {
		t.Fatalf("after a rejected spend: %q, want no warning", next.Message)
	}
	// A payment still waiting for the owner has bought nothing either.
	f.h.clock.Advance(5 * time.Second)
	if waits := f.pending(t); strings.Contains(waits.Message, "Warning") {
		t.Fatalf("beside a spend waiting for the owner: %q, want no warning", waits.Message)
	}
}
