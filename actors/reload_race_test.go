package actors_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// A reload of the agent's rules (a loosening coming due) that runs while
// the owner's pause is in the actor's memory but not yet on disk must not
// read the agent back from the store: it would find it active, and the
// pause the owner is about to be told of would be undone, with the agent
// paying on.
func TestAReloadDoesNotUndoAPauseNotYetDurable(t *testing.T) {
	sys, clock, gate, owner := gatedSystem(t)
	ctx := context.Background()
	agent := guardtest.AgentPrincipal(t, sys, owner, "payer", nil)
	loosened, err := sys.PublishPolicy(ctx, owner, agent.AgentID, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.PerSpendLimit = r.PerSpendLimit.Add(policy.MustAmount("1.00"))
		return r, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	gate.armed.Store(true)
	paused := make(chan error, 1)
	go func() {
		_, err := sys.ChangeAgent(ctx, owner, agent.AgentID, actors.ActionPause)
		paused <- err
	}()
	<-gate.entered            // the pause is in the actor's memory, its record not on disk
	clock.Advance(time.Hour)  // the loosening comes due: its timer asks the agent to reload
	sys.Reload(agent.AgentID) // more reloads wait with it (the practice clock moving)
	sys.Reload(agent.AgentID)
	_ = sys.PingAgent(ctx, agent.AgentID) // the reloads were handled, or held back
	close(gate.release)
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
	// The reloads held back run once, in turn: the actor answers again.
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sys.PingAgent(pingCtx, agent.AgentID); err != nil {
		t.Fatalf("the agent no longer answers after its held reloads: %v", err)
	}

	// The held reload runs once the pause is durable; the loosening
	// applies on top of it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := sys.Policy(owner, agent.AgentID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Version == loosened.Version {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loosening (version %d) never applied; in effect: %d", loosened.Version, p.Version)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = sys.PingAgent(ctx, agent.AgentID)
	if ag, err := sys.Agent(owner, agent.AgentID); err != nil || ag.Status != actors.AgentPaused {
		t.Fatalf("after the reload the agent is %q (%v), want paused", ag.Status, err)
	}
	r, err := sys.CreateSpend(ctx, agent, actors.SpendInput{Amount: policy.MustAmount("0.10"), Currency: "usdc",
		Destination: "api.vendor.com", URL: "https://api.vendor.com/x", IdempotencyKey: "after-pause",
		Resource: policy.Resource{Host: "api.vendor.com", Path: "/x", Method: "GET"}})
	if err != nil {
		t.Fatal(err)
	}
	var sp policy.Spend
	if err := json.Unmarshal(r.Body, &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Status != policy.StatusDeclined || sp.DeclineReason == nil || *sp.DeclineReason != policy.ReasonAgentPaused {
		t.Fatalf("a spend after the pause is %s (%v), want declined for agent_paused", sp.Status, sp.DeclineReason)
	}
}
