package actors_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/rail"
	"github.com/agentpay/guard/transport/receipt"
)

// commitGate holds the next group commit inside its transaction once
// armed: the record is appended (the actors have changed their memory)
// but not durable.
type commitGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *commitGate) fault(int) error {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
	return nil
}

// gatedSystem is a service whose store holds a commit when its gate is
// armed, on a fake clock, with one practice owner (loosenings wait an
// hour).
func gatedSystem(t *testing.T) (*actors.System, *guardtest.FakeClock, *commitGate, actors.Principal) {
	t.Helper()
	gate := &commitGate{entered: make(chan struct{}), release: make(chan struct{})}
	store, err := persistence.Open(persistence.Options{Path: filepath.Join(t.TempDir(), "journal.db"), CommitFault: gate.fault})
	if err != nil {
		t.Fatal(err)
	}
	clock := guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	k, _ := receipt.GenerateKey(rand.Reader, clock.Now())
	kr, _ := receipt.NewKeyring(k)
	sys, err := actors.New(actors.Config{Store: store, Clock: clock, Signer: signer{kr}, LoosenDelay: time.Hour,
		PracticeRail: rail.NewSimulated(rail.SimulatedOptions{}), PracticePool: policy.MustAmount("100.00")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close(); _ = store.Close() })
	return sys, clock, gate, guardtest.PracticeOwner(t, sys, "o", "o@owner.invalid")
}

// Reads that change nothing (balance, funding) never show a hold whose
// record is not yet on disk, and show it as soon as the spend that made
// it has been answered.
func TestReadsShowOnlyDurableState(t *testing.T) {
	sys, _, gate, owner := gatedSystem(t)
	ctx := context.Background()
	payer := guardtest.AgentPrincipal(t, sys, owner, "payer", nil)
	reader := guardtest.AgentPrincipal(t, sys, owner, "reader", nil)
	if _, err := sys.Balance(ctx, reader); err != nil { // activated before the gate closes
		t.Fatal(err)
	}
	held := func() (string, string) {
		f, err := sys.Funding(owner)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sys.Balance(ctx, reader)
		if err != nil {
			t.Fatal(err)
		}
		return f.Held, b.Components.PoolAvailable
	}

	gate.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		// An unknown destination waits for the owner: its hold stays.
		_, err := sys.CreateSpend(ctx, payer, actors.SpendInput{Amount: policy.MustAmount("2.00"), Currency: "usdc",
			Destination: "shop.example.org", URL: "https://shop.example.org/item", IdempotencyKey: "k1",
			Resource: policy.Resource{Host: "shop.example.org", Path: "/item", Method: "GET"}})
		done <- err
	}()
	<-gate.entered // the hold is in the actors' memory, its record not on disk
	if h, avail := held(); h != "0.00" || avail != "100.00" {
		t.Errorf("before the hold is durable: held %s, pool_available %s; want 0.00 and 100.00", h, avail)
	}
	close(gate.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, avail := held(); h != "2.00" || avail != "98.00" {
		t.Errorf("after the spend was answered: held %s, pool_available %s; want 2.00 and 98.00", h, avail)
	}
}
