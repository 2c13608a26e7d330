package actors_test

import (
	"context"
	"testing"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// An agent activates without reading its last day of spends while no rule
// needs them; when destination_window_over arrives, the spends settled
// before the activation count at once, and again after a restart, when the
// activation itself loads them.
func TestDestinationWindowLoadsWhenTheRuleArrives(t *testing.T) {
	f := newApprovalFixture(t)
	ctx := context.Background()
	buy := func(key, amount string) policy.Spend {
		t.Helper()
		return createSpend(t, f.h.sys, f.agent, vendorSpend(amount, "/"+key, key))
	}
	first := buy("k1", "3.00")
	if first.Status != policy.StatusSettled {
		t.Fatalf("first spend %s", first.Status)
	}
	// What is left under a window of 5.00 after the price the vendor took.
	left := policy.MustAmount("5.00").Sub(*first.AmountSettled)

	f.h.close() // the next activation starts without the window
	f.h.open("100.00")
	over := policy.MustAmount("5.00")
	if _, err := f.h.sys.PublishPolicy(ctx, f.owner, f.agent.AgentID, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.DestinationWindowOver = &over
		return r, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	check := func(amount policy.Amount) policy.CheckResult {
		t.Helper()
		c, err := f.h.sys.Check(ctx, f.agent, "api.vendor.com", &amount)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	justOver := left.Add(policy.MustAmount("0.000001"))
	if c := check(left); !c.Allowed {
		t.Fatalf("%s on top of %s is within the window: %s", left.Display(), first.AmountSettled.Display(), c.Message)
	}
	if c := check(justOver); c.Allowed || c.Reason != policy.DestinationWindowReason {
		t.Fatalf("%s on top of %s: allowed %v (%s), want %s", justOver.Display(), first.AmountSettled.Display(), c.Allowed, c.Reason, policy.DestinationWindowReason)
	}
	if sp := buy("k2", justOver.Display()); sp.Status != policy.StatusPendingApproval || *sp.ApprovalReason != policy.DestinationWindowReason {
		t.Fatalf("a spend over the window after the rule arrived: %s", sp.Status)
	}

	f.h.close() // activated with the rule: the window is loaded as it starts
	f.h.open("100.00")
	if c := check(policy.MustAmount("0.01")); c.Allowed || c.Reason != policy.DestinationWindowReason {
		t.Fatalf("after a restart, the window forgot the settled spend or the hold: allowed %v (%s)", c.Allowed, c.Reason)
	}
}
