package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Shared fixtures of the policy tests. Times are fixed UTC instants: nothing
// here reads the wall clock.

// fixNow is the "current" instant of most tests: a Sunday mid-morning, far
// from any day or month boundary.
var fixNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func amt(s string) Amount { return MustAmount(s) }

func amtPtr(s string) *Amount {
	a := MustAmount(s)
	return &a
}

func timePtr(t time.Time) *time.Time { return &t }

func pats(ss ...string) []Pattern {
	out := make([]Pattern, 0, len(ss))
	for _, s := range ss {
		out = append(out, MustPattern(s))
	}
	return out
}

// fixRules are the defaults plus two trusted patterns, one exact and one
// wildcard: per spend 10.00, daily 50.00, monthly 500.00, approval over 5.00,
// max pending 5, unknown destinations ask.
func fixRules() Rules {
	r := DefaultRules()
	r.TrustedDestinations = pats("api.vendor.com", "*.trusted.io")
	return r
}

func fixPolicy(r Rules) *Policy {
	p := NewPolicy("pol_00000000000000000000000000000001", "agt_00000000000000000000000000000001", 3, r, true, fixNow, fixNow)
	return &p
}

// fixPool has far more money than any test spends.
func fixPool() Pool { return Pool{Available: amt("1000.00"), ReserveFloor: amt("0")} }

// holdInto reserves an active spend in the ledger, as the service does right
// after NewSpend for a pending or approved spend.
func holdInto(l *Ledger, id, dest, amount string, st Status, at time.Time) {
	l.Reserve(&Spend{ID: id, Amount: amt(amount), Status: st, Destination: dest, CreatedAt: at}, at)
}

// settleInto reserves and settles a spend at the same instant for its full
// amount: the simplest way to put money into the settled counters.
func settleInto(l *Ledger, id, dest, amount string, at time.Time) {
	holdInto(l, id, dest, amount, StatusApproved, at)
	l.Settle(id, amt(amount), at)
}

// mustPanic runs f and fails unless it panics with a message containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic; want a panic mentioning %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q does not mention %q", msg, want)
		}
	}()
	f()
}

// panics reports whether f panics, swallowing the panic.
func panics(f func()) (did bool) {
	defer func() {
		if recover() != nil {
			did = true
		}
	}()
	f()
	return false
}

// ledgerSnapshot is everything of a ledger that a read-only operation must
// leave alone, in a comparable form.
type ledgerSnapshot struct {
	Counters string
	Holds    string
	Window   string
}

func snapLedger(t *testing.T, l *Ledger) ledgerSnapshot {
	t.Helper()
	c, err := json.Marshal(l.Counters())
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, id := range slices.Sorted(maps.Keys(l.Holds)) {
		h := l.Holds[id]
		hs = append(hs, fmt.Sprintf("%s:%s:%s:%s:%s", id, h.Amount, h.Status, h.Dest, h.Created.Format(time.RFC3339Nano)))
	}
	var ws []string
	for _, w := range l.Window {
		ws = append(ws, fmt.Sprintf("%s:%s:%s:%s", w.SpendID, w.At.Format(time.RFC3339Nano), w.Dest, w.Amount))
	}
	return ledgerSnapshot{Counters: string(c), Holds: strings.Join(hs, ","), Window: strings.Join(ws, ",")}
}

func strOrNil(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
