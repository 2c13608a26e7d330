package actors_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/rail"
	"github.com/agentpay/guard/transport/receipt"
)

var simSeed = flag.Uint64("sim.seed", 0, "replay the simulation with this seed")

type signer struct{ kr *receipt.Keyring }

func (s signer) Sign(c policy.ReceiptClaims) (string, string, error) {
	return s.kr.SignWithKeyID(c)
}

type harness struct {
	t     testing.TB
	store *persistence.Store
	sys   *actors.System
	clock *guardtest.FakeClock
	path  string
	// vendor configures the practice vendor of the next open.
	vendor rail.SimulatedOptions
}

func newHarness(t testing.TB, clock *guardtest.FakeClock, pool string) *harness {
	t.Helper()
	return newHarnessWith(t, clock, pool, rail.SimulatedOptions{})
}

// newHarnessWith is newHarness with a practice vendor of its own.
func newHarnessWith(t testing.TB, clock *guardtest.FakeClock, pool string, vendor rail.SimulatedOptions) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock, path: filepath.Join(t.TempDir(), "journal.db"), vendor: vendor}
	h.open(pool)
	t.Cleanup(h.close)
	return h
}

func (h *harness) open(pool string) {
	h.t.Helper()
	store, err := persistence.Open(persistence.Options{Path: h.path})
	if err != nil {
		h.t.Fatal(err)
	}
	k, err := receipt.GenerateKey(rand.Reader, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	kr, err := receipt.NewKeyring(k)
	if err != nil {
		h.t.Fatal(err)
	}
	sys, err := actors.New(actors.Config{Store: store, Clock: h.clock, Signer: signer{kr},
		PracticeRail: rail.NewSimulated(h.vendor), PracticePool: policy.MustAmount(pool),
		VerifyBackoff: []time.Duration{time.Second}, IdleTimeout: time.Hour})
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.sys = store, sys
}

func (h *harness) close() {
	if h.sys != nil {
		h.sys.Close()
		h.sys = nil
	}
	if h.store != nil {
		if err := h.store.Close(); err != nil {
			h.t.Error(err)
		}
		h.store = nil
	}
}

// practiceHarness is a harness on a fake clock (2026-11-22 10:00 UTC)
// whose practice pools start at pool, with one owner signed in with its
// practice key, whose secret it also returns.
func practiceHarness(t *testing.T, pool string) (h *harness, clock *guardtest.FakeClock, owner actors.Principal, ownerSecret string) {
	t.Helper()
	clock = guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	h = newHarness(t, clock, pool)
	owner, ownerSecret = h.newOwner(t, "o")
	return h, clock, owner, ownerSecret
}

// newOwner creates an owner and signs in with its practice key, which it
// also returns (to sign in again after a restart).
func (h *harness) newOwner(t *testing.T, name string) (actors.Principal, string) {
	t.Helper()
	oc, err := h.sys.CreateOwner(context.Background(), name, name+"@owner.invalid", "")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := h.sys.Authenticate(oc.Keys[actors.EnvTest])
	if err != nil {
		t.Fatal(err)
	}
	return owner, oc.Keys[actors.EnvTest]
}

// vendorSpend is a GET of https://api.vendor.com<path> for amount.
func vendorSpend(amount, path, idempotencyKey string) actors.SpendInput {
	return actors.SpendInput{Amount: policy.MustAmount(amount), Currency: "usdc", Destination: "api.vendor.com",
		Resource: policy.Resource{Host: "api.vendor.com", Path: path, Method: "GET"},
		URL:      "https://api.vendor.com" + path, IdempotencyKey: idempotencyKey}
}

// createSpend creates a spend and decodes the answer.
func createSpend(t *testing.T, sys *actors.System, p actors.Principal, in actors.SpendInput) policy.Spend {
	t.Helper()
	r, err := sys.CreateSpend(context.Background(), p, in)
	if err != nil {
		t.Fatal(err)
	}
	var sp policy.Spend
	if err := json.Unmarshal(r.Body, &sp); err != nil {
		t.Fatal(err)
	}
	return sp
}

func strp(s string) *string { return &s }

// TestSimulation runs seeded random concurrent spends, cancels, approvals
// expiring and days passing against several agents sharing one pool, and
// checks after every phase that the recomputed model (actors.Audit) agrees
// with the service: no cap or pool exceeded, holds and settled amounts equal
// the counters. The seed is printed; -sim.seed replays it.
//
// It runs twice: with a vendor that answers at once, whose outcome is
// journaled with the spend (an InstantRail), and with one that takes a
// millisecond, so that each payment is journaled approved, then paid from
// a worker while cancels, approvals and restarts go on around it.
func TestSimulation(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	t.Logf("simulation seed %d (replay with -sim.seed=%d)", seed, seed)
	t.Run("instant vendor", func(t *testing.T) { simulate(t, seed, rail.SimulatedOptions{}) })
	t.Run("vendor with latency", func(t *testing.T) { simulate(t, seed, rail.SimulatedOptions{Latency: time.Millisecond}) })
}

func simulate(t *testing.T, seed uint64, vendor rail.SimulatedOptions) {
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	clock := guardtest.NewFakeClock(time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC))
	h := newHarnessWith(t, clock, "150.00", vendor)
	ctx := context.Background()
	oc, err := h.sys.CreateOwner(ctx, "sim", "sim@owner.invalid", "")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := h.sys.Authenticate(oc.Keys[actors.EnvTest])
	if err != nil {
		t.Fatal(err)
	}
	trusted := []string{"api.vendor.com"}
	var agents []actors.Principal
	for i := 0; i < 4; i++ {
		in := &policy.RulesInput{TrustedDestinations: &trusted, PerSpendLimit: strp("100.00"),
			DailyCap: strp(strconv.Itoa(30+10*i) + ".00"), MonthlyCap: strp("400.00"), ApprovalOver: strp("8.00"),
			MaxPending: new(int), ApprovalTTLMinutes: new(int)}
		*in.MaxPending, *in.ApprovalTTLMinutes = 3, 5
		ag, _, err := h.sys.CreateAgent(ctx, owner, fmt.Sprintf("agent-%d", i), in)
		if err != nil {
			t.Fatal(err)
		}
		k, err := h.sys.CreateAgentKey(ctx, owner, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.sys.Authenticate(k.Secret)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, p)
	}
	amounts := []string{"0.50", "1.25", "3.00", "7.99", "9.00", "12.00", "98.00", "99.00", "0.001"}
	dests := []string{"api.vendor.com", "api.vendor.com", "api.vendor.com", "other.example.org", "new.vendor.net"}

	type seen struct {
		agent  actors.Principal
		id     string
		status policy.Status
		key    string
		in     actors.SpendInput
	}
	var mu sync.Mutex
	var all []seen
	initial := map[string]policy.Amount{owner.OwnerID + "|test": policy.MustAmount("150.00")}

	for phase := 0; phase < 6; phase++ {
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wr := mrand.New(mrand.NewPCG(rng.Uint64(), uint64(w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					ag := agents[wr.IntN(len(agents))]
					if wr.IntN(5) == 0 {
						mu.Lock()
						var cands []seen
						for _, s := range all {
							if s.agent.AgentID == ag.AgentID && s.status == policy.StatusPendingApproval {
								cands = append(cands, s)
							}
						}
						mu.Unlock()
						if len(cands) > 0 {
							c := cands[wr.IntN(len(cands))]
							if _, err := h.sys.CancelSpend(ctx, ag, c.id); err != nil {
								var e *actors.Error
								if ae, ok := err.(*actors.Error); ok {
									e = ae
								}
								if e == nil || (e.Code != actors.CodeConflict && e.Code != actors.CodeCancelTooLate) {
									t.Errorf("cancel %s: %v", c.id, err)
								}
							}
							continue
						}
					}
					dest := dests[wr.IntN(len(dests))]
					in := actors.SpendInput{Amount: policy.MustAmount(amounts[wr.IntN(len(amounts))]), Currency: "usdc",
						Destination: dest, Resource: policy.Resource{Host: dest, Path: "/r/" + strconv.Itoa(wr.IntN(4)), Method: "GET"},
						URL: "https://" + dest + "/r", IdempotencyKey: fmt.Sprintf("p%d-w%d-i%d", phase, w, i)}
					r, err := h.sys.CreateSpend(ctx, ag, in)
					if err != nil {
						t.Errorf("create: %v", err)
						continue
					}
					var sp policy.Spend
					if err := json.Unmarshal(r.Body, &sp); err != nil {
						t.Errorf("decode: %v", err)
						continue
					}
					if sp.Status == policy.StatusApproved {
						t.Errorf("spend %s answered while still approved; the create answer waits for the rail", sp.ID)
					}
					mu.Lock()
					all = append(all, seen{agent: ag, id: sp.ID, status: sp.Status, key: in.IdempotencyKey, in: in})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		quiesce(t, h)
		checkAudit(t, h, initial, phase) // with approvals still pending
		// Let processing spends be verified and some approvals expire; cross
		// a day boundary in some phases.
		for i := 0; i < 3; i++ {
			clock.Advance(time.Duration(1+rng.IntN(3)) * time.Minute)
			quiesce(t, h)
		}
		if rng.IntN(2) == 0 {
			clock.Advance(6 * time.Hour)
			quiesce(t, h)
		}
		if phase == 3 { // a restart in the middle: recovery must agree too
			h.close()
			h.open("150.00")
		}
		checkAudit(t, h, initial, phase)
	}

	// Replays return the same spend, never a second one.
	for _, s := range all[:min(len(all), 40)] {
		r, err := h.sys.CreateSpend(ctx, s.agent, s.in)
		if err != nil {
			t.Fatalf("replay %s: %v", s.key, err)
		}
		var sp policy.Spend
		_ = json.Unmarshal(r.Body, &sp)
		if !r.Replay || sp.ID != s.id {
			t.Fatalf("replay of %s gave spend %s (replay=%v), want %s", s.key, sp.ID, r.Replay, s.id)
		}
	}
	t.Logf("%d spends", len(all))
}

func quiesce(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.sys.Quiesce(ctx); err != nil {
		t.Fatalf("the system did not come to rest: %v", err)
	}
}

func checkAudit(t *testing.T, h *harness, initial map[string]policy.Amount, phase int) {
	t.Helper()
	if err := h.store.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r := actors.Audit(h.store, initial)
	if err := r.Err(); err != nil {
		for _, p := range r.Problems {
			t.Log(p)
		}
		t.Fatalf("phase %d: %v", phase, err)
	}
	t.Logf("phase %d: %d spends, %d settled, %d active", phase, r.Spends, r.Settled, r.Active)
}
