package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// MemoryReport is what an idle activated agent costs.
type MemoryReport struct {
	Agents int `json:"agents"`
	// BaselineHeap is HeapAlloc with the agents created but none
	// activated; ActiveHeap with all of them activated and idle;
	// PassivatedHeap once they passivated again. Each is read after two
	// forced collections.
	BaselineHeap   uint64 `json:"baseline_heap_bytes"`
	ActiveHeap     uint64 `json:"active_heap_bytes"`
	PassivatedHeap uint64 `json:"passivated_heap_bytes"`
	// PerAgent is (ActiveHeap - BaselineHeap) / Agents.
	PerAgent float64 `json:"per_agent_bytes"`
	// Before is the number of live agent actors at the baseline: zero
	// unless agents of the load never passivated. Activated counts them
	// after activation, Remaining after passivation (every agent of the
	// service, so Remaining == Before means all the idle agents left).
	Before    int `json:"active_before"`
	Activated int `json:"activated"`
	Remaining int `json:"remaining"`
	// PassivationSeconds is how long the agents took to passivate.
	PassivationSeconds float64 `json:"passivation_seconds"`
	// ResidueBytes is PassivatedHeap - BaselineHeap (negative when the
	// heap ended smaller than it started).
	ResidueBytes int64 `json:"residue_bytes"`
}

// heapAfterGC is HeapAlloc once two collections ran: the first frees what
// is unreachable, the second what finalizers released.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitActive waits until at most want agent actors are live.
func waitActive(ctx context.Context, sys *actors.System, want int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		n := sys.ActiveAgents()
		if n <= want {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("%d agents still active after %s (want at most %d)", n, limit, want)
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// measureIdleAgents creates m agents through the System API (as many
// owners as the practice quota needs), lets every actor passivate, then
// activates each agent with one Balance call and compares the heap. It
// finally waits for them to passivate and reads the heap once more.
func measureIdleAgents(ctx context.Context, p *inProcess, m int, idle time.Duration, progress func(string, ...any)) (MemoryReport, error) {
	r := MemoryReport{Agents: m}
	sys := p.svc.System()
	per := actors.MaxActiveAgentsPractice
	owners, err := bootstrapOwners(ctx, sys, "idle", (m+per-1)/per)
	if err != nil {
		return r, fmt.Errorf("bootstrapping owners: %w", err)
	}
	principals := make([]actors.Principal, m)
	trusted := []string{Destination}
	perSpend, capDay, capMonth := "10.00", "1000000.00", "1000000.00"
	rules := &policy.RulesInput{TrustedDestinations: &trusted, PerSpendLimit: &perSpend, ApprovalOver: &perSpend,
		DailyCap: &capDay, MonthlyCap: &capMonth}
	err = parallel(ctx, m, 32, func(i int) error {
		owner, err := sys.Authenticate(owners[i/per].Keys[actors.EnvTest])
		if err != nil {
			return err
		}
		ag, _, err := sys.CreateAgent(ctx, owner, fmt.Sprintf("idle-%d", i), rules)
		if err != nil {
			return err
		}
		principals[i] = actors.Principal{Kind: actors.KindAgent, OwnerID: owner.OwnerID, AgentID: ag.ID}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("creating idle agents: %w", err)
	}
	progress("created %d idle agents; waiting for every actor to passivate", m)
	// Fold the creations into the store's buckets so the journal overlay
	// does not count against the baseline.
	if err := p.svc.Store().Checkpoint(); err != nil {
		return r, fmt.Errorf("checkpoint: %w", err)
	}
	limit := 3*idle + 10*time.Second
	before, err := waitActive(ctx, sys, 0, limit)
	if err != nil && ctx.Err() != nil {
		return r, err
	}
	if err != nil {
		// Agents that never passivate are a finding, not a reason to
		// skip the measurement: they are part of the baseline.
		progress("%v; measuring with them in the baseline", err)
	}
	r.Before = before
	r.BaselineHeap = heapAfterGC()

	err = parallel(ctx, m, 32, func(i int) error {
		_, err := sys.Balance(ctx, principals[i])
		return err
	})
	if err != nil {
		return r, fmt.Errorf("activating idle agents: %w", err)
	}
	r.Activated = sys.ActiveAgents()
	r.ActiveHeap = heapAfterGC()
	r.PerAgent = (float64(r.ActiveHeap) - float64(r.BaselineHeap)) / float64(m)
	progress("activated %d agents: %.0f B each; waiting for them to passivate", r.Activated-before, r.PerAgent)

	t0 := time.Now()
	r.Remaining, err = waitActive(ctx, sys, before, limit)
	r.PassivationSeconds = time.Since(t0).Seconds()
	if err != nil {
		return r, err
	}
	r.PassivatedHeap = heapAfterGC()
	r.ResidueBytes = int64(r.PassivatedHeap) - int64(r.BaselineHeap)
	return r, nil
}
