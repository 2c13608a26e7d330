package actors_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

type resetFixture struct {
	h         *harness
	ownerID   string
	ownerKey  string // practice owner key
	agentKeys []string
	n         int
}

// newResetFixture runs a system with an owner whose practice environment
// has agents (with keys), and whose live environment has one.
func newResetFixture(t *testing.T, agents int) *resetFixture {
	t.Helper()
	h := newHarness(t, guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)), "100.00")
	ctx := context.Background()
	oc, err := h.sys.CreateOwner(ctx, "r", "r@owner.invalid", "")
	if err != nil {
		t.Fatal(err)
	}
	f := &resetFixture{h: h, ownerID: oc.Owner.ID, ownerKey: oc.Keys[actors.EnvTest]}
	trusted := []string{"api.vendor.com"}
	for env, n := range map[actors.Env]int{actors.EnvTest: agents, actors.EnvLive: 1} {
		owner := f.principal(t, oc.Keys[env])
		for i := range n {
			ag, _, err := h.sys.CreateAgent(ctx, owner, fmt.Sprintf("%s-%d", env, i), &policy.RulesInput{TrustedDestinations: &trusted})
			if err != nil {
				t.Fatal(err)
			}
			k, err := h.sys.CreateAgentKey(ctx, owner, ag.ID)
			if err != nil {
				t.Fatal(err)
			}
			if env == actors.EnvTest {
				f.agentKeys = append(f.agentKeys, k.Secret)
			} else {
				f.spend(t, k.Secret, "1.00", "api.vendor.com") // fails: no live rail
			}
		}
	}
	return f
}

func (f *resetFixture) principal(t *testing.T, key string) actors.Principal {
	t.Helper()
	p, err := f.h.sys.Authenticate(key)
	if err != nil {
		t.Fatalf("authenticating %s...: %v", key[:16], err)
	}
	return p
}

func (f *resetFixture) spend(t *testing.T, key, amount, dest string) policy.Spend {
	t.Helper()
	f.n++
	in := actors.SpendInput{Amount: policy.MustAmount(amount), Currency: "usdc", Destination: dest,
		Resource: policy.Resource{Host: dest, Path: "/x", Method: "GET"}, URL: "https://" + dest + "/x",
		IdempotencyKey: fmt.Sprintf("k%d", f.n)}
	return createSpend(t, f.h.sys, f.principal(t, key), in)
}

// count is how many keys of a bucket start with prefix.
func (f *resetFixture) count(t *testing.T, bucket, prefix string) int {
	t.Helper()
	n := 0
	if err := f.h.store.Scan(bucket, []byte(prefix), nil, false, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *resetFixture) audit(t *testing.T) {
	t.Helper()
	quiesce(t, f.h)
	if err := f.h.store.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r := actors.Audit(f.h.store, map[string]policy.Amount{f.ownerID + "|test": policy.MustAmount("100.00")})
	for _, p := range r.Problems {
		t.Log(p)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

// A reset committed and cut short before its sweep (a crash) is already
// in force: the old agent's key fails, its spends and events are hidden.
// The next start finishes the sweep before anything else, and the store
// then holds nothing of the old environment.
func TestPracticeResetSweepFinishesAfterCrash(t *testing.T) {
	f := newResetFixture(t, 2)
	ctx := context.Background()
	settled := f.spend(t, f.agentKeys[0], "1.00", "api.vendor.com")
	pending := f.spend(t, f.agentKeys[1], "2.00", "new.example.org")
	if settled.Status != policy.StatusSettled || pending.Status != policy.StatusPendingApproval {
		t.Fatalf("setup: %s and %s", settled.Status, pending.Status)
	}
	owner := f.principal(t, f.ownerKey)
	liveEvents := f.count(t, "events", f.ownerID+"|live|")
	if liveEvents == 0 || f.count(t, "events", f.ownerID+"|test|") == 0 {
		t.Fatal("setup: no events")
	}

	if err := f.h.sys.CommitPracticeResetOnly(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if raw, _ := f.h.store.Get("spends", []byte(settled.ID)); raw == nil {
		t.Fatal("the spend is gone before any sweep: the test no longer cuts the reset short")
	}
	if _, err := f.h.sys.Authenticate(f.agentKeys[0]); !errors.Is(err, actors.ErrInvalidKey) {
		t.Errorf("the old agent key after the commit: %v", err)
	}
	var nf *actors.Error
	if _, err := f.h.sys.GetSpend(ctx, owner, settled.ID, 0); !errors.As(err, &nf) || nf.Code != actors.CodeNotFound {
		t.Errorf("the old spend after the commit: %v", err)
	}
	if page, err := f.h.sys.ListEvents(owner, actors.ListParams{}); err != nil || len(page.Items) != 0 {
		t.Errorf("events after the commit: %d, %v", len(page.Items), err)
	}

	f.h.close() // the crash
	f.h.open("100.00")
	for _, c := range []struct{ bucket, prefix string }{
		{"spends", settled.ID}, {"spends", pending.ID}, {"events", f.ownerID + "|test|"},
		{"env_spends", f.ownerID + "|test|"}, {"idempotency", settled.AgentID}, {"idempotency", pending.AgentID},
		{"agent_spends", settled.AgentID}, {"policies", settled.AgentID}, {"approvals", pending.Approval.ID},
		{"receipts", *settled.Settlement.ReceiptID}, {"service_meta", "practice_reset|"},
	} {
		if n := f.count(t, c.bucket, c.prefix); n != 0 {
			t.Errorf("after the restart %d records of %s/%s remain", n, c.bucket, c.prefix)
		}
	}
	// The owners' index of keys keeps the practice owner key alone.
	if n := f.count(t, "owner_keys", f.ownerID+"|test|"); n != 1 {
		t.Errorf("after the restart the owner's practice index holds %d keys, want its owner key alone", n)
	}
	if n := f.count(t, "events", f.ownerID+"|live|"); n != liveEvents {
		t.Errorf("live events %d, want %d: a practice reset must not touch them", n, liveEvents)
	}
	f.audit(t)
	// The owner key still works and the environment takes new agents.
	owner = f.principal(t, f.ownerKey)
	if _, _, err := f.h.sys.CreateAgent(ctx, owner, "after", nil); err != nil {
		t.Fatal(err)
	}
}

// Agents spending as fast as they can while their owner resets: the reset
// either waits for a moment without a payment in flight or is refused; no
// payment is lost half-way, and once it went through, the store holds
// nothing of the old agents and the books balance.
func TestPracticeResetWhileSpending(t *testing.T) {
	f := newResetFixture(t, 3)
	ctx := context.Background()
	owner := f.principal(t, f.ownerKey)
	principals := make([]actors.Principal, len(f.agentKeys))
	for i, k := range f.agentKeys {
		principals[i] = f.principal(t, k)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, p := range principals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				in := actors.SpendInput{Amount: policy.MustAmount("0.01"), Currency: "usdc", Destination: "api.vendor.com",
					Resource: policy.Resource{Host: "api.vendor.com", Path: "/w", Method: "GET"},
					URL:      "https://api.vendor.com/w", IdempotencyKey: fmt.Sprintf("w%d-%d", w, i)}
				if _, err := f.h.sys.CreateSpend(ctx, p, in); err != nil {
					var e *actors.Error
					if !errors.As(err, &e) || e.Code != actors.CodeUnavailable && err != actors.ErrInvalidKey {
						t.Errorf("spend during the reset: %v", err)
						return
					}
					if err == actors.ErrInvalidKey {
						return // the agent is gone, and its key with it: the reset went through
					}
				}
			}
		}()
	}
	var out actors.PracticeReset
	var err error
	for attempt := 0; ; attempt++ {
		// Let the agents pay a little first, so the reset has spends to remove.
		if attempt == 0 {
			for f.count(t, "env_spends", f.ownerID+"|test|") < 30 {
				runtime.Gosched()
			}
		}
		if out, err = f.h.sys.ResetPractice(ctx, owner); err == nil {
			t.Logf("the reset went through at attempt %d: %+v", attempt, out.Removed)
			break
		}
		var e *actors.Error
		if !errors.As(err, &e) || e.Code != actors.CodeConflict || attempt == 500 {
			close(stop)
			wg.Wait()
			t.Fatalf("reset attempt %d: %v", attempt, err)
		}
	}
	close(stop)
	wg.Wait()
	if out.Removed.Agents != 3 || out.Removed.APIKeys != 3 || out.Removed.Spends < 30 || out.Balance != "100.00" {
		t.Errorf("the reset answered %+v", out)
	}
	for _, p := range principals {
		for _, bucket := range []string{"agent_spends", "idempotency", "active", "policies"} {
			if n := f.count(t, bucket, p.AgentID+"|"); n != 0 {
				t.Errorf("%d records of %s remain for agent %s", n, bucket, p.AgentID)
			}
		}
	}
	if n := f.count(t, "env_spends", f.ownerID+"|test|"); n != 0 {
		t.Errorf("%d practice spends remain listed", n)
	}
	f.audit(t)
}
