package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
)

// keyBenchOwners is how many other owners share the service with the one
// measured: each has two owner keys and a practice agent with a key, so
// the service holds four keys for each.
const keyBenchOwners = 1000

// keyBench is one owner with an agent, on a service many other owners
// share: what the owner's key operations cost must not grow with them.
func keyBench(b *testing.B) (h *harness, owner actors.Principal, agentID string) {
	b.Helper()
	clock := guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	h = newHarness(b, clock, "100.00")
	ctx := context.Background()
	for i := range keyBenchOwners + 1 {
		oc, err := h.sys.CreateOwner(ctx, fmt.Sprintf("o%d", i), fmt.Sprintf("o%d@owner.invalid", i), "")
		if err != nil {
			b.Fatal(err)
		}
		if owner, err = h.sys.Authenticate(oc.Keys[actors.EnvTest]); err != nil {
			b.Fatal(err)
		}
		ag, _, err := h.sys.CreateAgent(ctx, owner, "a", nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.sys.CreateAgentKey(ctx, owner, ag.ID); err != nil {
			b.Fatal(err)
		}
		agentID = ag.ID
	}
	return h, owner, agentID
}

// BenchmarkKeyCreateAndRevoke is an agent key made (its quota checked) and
// revoked, among the keys of keyBenchOwners other owners. The revoked keys
// stay the agent's, so the quota check reads more of them as the run goes:
// compare runs of one count (-benchtime 100x).
func BenchmarkKeyCreateAndRevoke(b *testing.B) {
	h, owner, agentID := keyBench(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		k, err := h.sys.CreateAgentKey(ctx, owner, agentID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.sys.RevokeKey(ctx, owner, k.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyList is one owner's list of keys (the console's page, and
// GET /v1/keys), among the keys of keyBenchOwners other owners.
func BenchmarkKeyList(b *testing.B) {
	h, owner, _ := keyBench(b)
	b.ResetTimer()
	for b.Loop() {
		keys, err := h.sys.ListKeys(owner)
		if err != nil || len(keys) != 2 {
			b.Fatalf("%d keys, %v", len(keys), err)
		}
		page, err := h.sys.ListKeyPage(owner, actors.ListParams{})
		if err != nil || len(page.Items) != 2 {
			b.Fatalf("a page of %d keys, %v", len(page.Items), err)
		}
	}
}
