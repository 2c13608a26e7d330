package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/persistence"
)

// idemFixture is a practice owner and agent on a harness that can restart.
type idemFixture struct {
	h     *harness
	owner actors.Principal
	agent actors.Principal
	// the keys' secrets, to authenticate again after a restart
	ownerSecret, agentSecret string
}

func newIdemFixture(t *testing.T) *idemFixture {
	t.Helper()
	h, _, owner, ownerSecret := practiceHarness(t, "100.00")
	ctx := context.Background()
	ag, _, err := h.sys.CreateAgent(ctx, owner, "payer", nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := h.sys.CreateAgentKey(ctx, owner, ag.ID)
	if err != nil {
		t.Fatal(err)
	}
	f := &idemFixture{h: h, owner: owner, ownerSecret: ownerSecret, agentSecret: key.Secret}
	f.login(t)
	return f
}

func (f *idemFixture) login(t *testing.T) {
	t.Helper()
	p, err := f.h.sys.Authenticate(f.agentSecret)
	if err != nil {
		t.Fatal(err)
	}
	f.agent = p
}

// restart stops the service and opens it again on the same files: the
// agent's actor is built anew from the store.
func (f *idemFixture) restart(t *testing.T) {
	t.Helper()
	f.h.close()
	f.h.open("100.00")
	var err error
	if f.owner, err = f.h.sys.Authenticate(f.ownerSecret); err != nil {
		t.Fatal(err)
	}
	f.login(t)
}

// spend asks for in and says which spend answered and whether as a replay.
func (f *idemFixture) spend(t *testing.T, in actors.SpendInput) (id string, replay bool, err error) {
	t.Helper()
	r, err := f.h.sys.CreateSpend(context.Background(), f.agent, in)
	if err != nil {
		return "", false, err
	}
	var sp struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &sp); err != nil {
		t.Fatal(err)
	}
	return sp.ID, r.Replay, nil
}

func wantConflict(t *testing.T, err error, field string) {
	t.Helper()
	var e *actors.Error
	if !errors.As(err, &e) || e.Code != actors.CodeIdempotencyConflict || !slices.Contains(e.ChangedFields, field) {
		t.Fatalf("want an idempotency_conflict on %s, got %v", field, err)
	}
}

// An Idempotency-Key answers with its spend from memory, after the agent's
// actor is rebuilt from the store, and until IdempotencyMemory has passed
// on the environment's clock; then it makes a new payment.
func TestIdempotencyKeysAreRememberedForTheirWindow(t *testing.T) {
	f := newIdemFixture(t)
	in := vendorSpend("1.00", "/report", "k-1")
	first, replay, err := f.spend(t, in)
	if err != nil || replay {
		t.Fatalf("first request: replay %v, %v", replay, err)
	}
	other, _, err := f.spend(t, vendorSpend("1.00", "/other", "k-2"))
	if err != nil || other == first {
		t.Fatalf("another key made %s (first %s), %v", other, first, err)
	}
	check := func(when string) {
		t.Helper()
		id, replay, err := f.spend(t, in)
		if err != nil || !replay || id != first {
			t.Fatalf("%s: the same request answered %s replay=%v (%v), want %s replayed", when, id, replay, err, first)
		}
		_, _, err = f.spend(t, vendorSpend("2.00", "/report", "k-1"))
		wantConflict(t, err, "amount")
	}
	check("in memory")
	f.restart(t)
	check("after a restart")

	if _, err := f.h.sys.AdvanceClock(context.Background(), f.owner, actors.IdempotencyMemory-time.Hour); err != nil {
		t.Fatal(err)
	}
	check("an hour before the window ends")
	f.restart(t)
	check("an hour before the window ends, after a restart")

	if _, err := f.h.sys.AdvanceClock(context.Background(), f.owner, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	id, replay, err := f.spend(t, in)
	if err != nil || replay || id == first {
		t.Fatalf("after the window the key answered %s replay=%v (%v), want a new spend", id, replay, err)
	}
	again, replay, err := f.spend(t, in)
	if err != nil || !replay || again != id {
		t.Fatalf("the key used again answered %s replay=%v (%v), want %s replayed", again, replay, err, id)
	}
}

// A spend made before the agent's index held idempotency records (its
// entry empty, its record in the idempotency bucket) is still found.
func TestIdempotencyRecordsOfTheOldLayoutAreFound(t *testing.T) {
	f := newIdemFixture(t)
	in := vendorSpend("1.00", "/report", "old-key")
	first, _, err := f.spend(t, in)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the spend's records the way the old layout held them.
	st := f.h.store
	entry, err := st.Get("agent_spends", []byte(f.agent.AgentID+"|"+first))
	if err != nil || len(entry) == 0 {
		t.Fatalf("the spend's index entry: %q, %v", entry, err)
	}
	i := slices.Index(entry, 0)
	rec := persistence.Record{Ops: []persistence.Op{
		persistence.Put("agent_spends", []byte(f.agent.AgentID+"|"+first), nil),
		persistence.Put("idempotency", []byte(f.agent.AgentID+"|old-key"), entry[i+1:]),
	}}
	if err := st.Append(st.Gen(), rec).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.restart(t)
	id, replay, err := f.spend(t, in)
	if err != nil || !replay || id != first {
		t.Fatalf("the old key answered %s replay=%v (%v), want %s replayed", id, replay, err, first)
	}
	_, _, err = f.spend(t, vendorSpend("1.00", "/elsewhere", "old-key"))
	wantConflict(t, err, "resource")
}
