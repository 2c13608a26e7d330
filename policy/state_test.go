package policy

import (
	"fmt"
	"testing"
	"time"
)

var everyStatus = []Status{
	StatusPendingApproval, StatusApproved, StatusDeclined, StatusProcessing, StatusSettled,
	StatusFailed, StatusExpired, StatusCancelled, StatusRefunded, StatusDisputed,
}

// specMoves is the spec's part 3, written out independently of state.go.
//
//   - (new): a rule rejects -> declined; approval needed -> pending_approval;
//     rules pass -> approved (announced by spend.approved, T3), from which
//     the payment settles, fails or turns processing.
//   - pending_approval: owner approves -> approved (spend.approved, T4);
//     owner rejects -> declined; approval lifetime ends -> expired; agent
//     cancels -> cancelled.
//   - approved: sent without answer -> processing; paid -> settled; rail
//     rejects -> failed; rules changed before sending -> declined
//     (policy_changed, T11); agent cancels -> cancelled.
//   - processing: verification finds it paid -> settled or refused -> failed.
//     Cancelling is too late (409), which is no move.
//   - settled: the reserved refunded and disputed (T17, T18).
//   - cancelling a cancelled spend returns it unchanged: idempotent, no move.
//   - declined, failed, expired, cancelled, refunded, disputed: final.
var specMoves = map[Status][]Status{
	statusNew:             {StatusDeclined, StatusPendingApproval, StatusApproved},
	StatusPendingApproval: {StatusApproved, StatusDeclined, StatusExpired, StatusCancelled},
	StatusApproved:        {StatusProcessing, StatusSettled, StatusFailed, StatusDeclined, StatusCancelled},
	StatusProcessing:      {StatusSettled, StatusFailed},
	StatusSettled:         {StatusRefunded, StatusDisputed},
}

func specAllows(from, to Status) bool {
	for _, s := range specMoves[from] {
		if s == to {
			return true
		}
	}
	return false
}

func TestCanMoveMatchesSpecTable(t *testing.T) {
	froms := append([]Status{statusNew}, everyStatus...)
	tos := append([]Status{statusNew, "bogus"}, everyStatus...)
	allowed := 0
	for _, from := range froms {
		for _, to := range tos {
			want := specAllows(from, to)
			if got := CanMove(from, to); got != want {
				t.Errorf("CanMove(%q, %q) = %v, want %v", from, to, got, want)
			}
			if want {
				allowed++
			}
		}
	}
	if allowed != 16 {
		t.Errorf("the spec table has 16 moves, the test table %d", allowed)
	}
}

func TestMovePanicsOnImpossibleTransition(t *testing.T) {
	later := fixNow.Add(time.Minute)
	for _, from := range append([]Status{statusNew}, everyStatus...) {
		for _, to := range everyStatus {
			t.Run(fmt.Sprintf("%s->%s", orNew(from), to), func(t *testing.T) {
				s := &Spend{Status: from, UpdatedAt: fixNow}
				if specAllows(from, to) {
					if panics(func() { s.Move(to, later) }) {
						t.Fatalf("legal move panicked")
					}
					if s.Status != to || !s.UpdatedAt.Equal(later) {
						t.Fatalf("after Move: status %q updated %v", s.Status, s.UpdatedAt)
					}
					return
				}
				mustPanic(t, "impossible spend transition", func() { s.Move(to, later) })
				if s.Status != from || !s.UpdatedAt.Equal(fixNow) {
					t.Fatalf("a refused move changed the spend: status %q updated %v", s.Status, s.UpdatedAt)
				}
			})
		}
	}
}

func orNew(s Status) string {
	if s == statusNew {
		return "(new)"
	}
	return string(s)
}

func TestMoveStoresUTC(t *testing.T) {
	s := &Spend{Status: StatusApproved}
	s.Move(StatusSettled, time.Date(2026, 11, 22, 19, 0, 0, 0, time.FixedZone("UTC+9", 9*3600)))
	if s.UpdatedAt.Location() != time.UTC || s.UpdatedAt.Hour() != 10 {
		t.Fatalf("UpdatedAt = %v, want 10:00 UTC", s.UpdatedAt)
	}
}

func TestStatusProperties(t *testing.T) {
	cases := []struct {
		s               Status
		terminal, holds bool
	}{
		{StatusPendingApproval, false, true},
		{StatusApproved, false, true},
		{StatusProcessing, false, true},
		{StatusDeclined, true, false},
		{StatusSettled, true, false},
		{StatusFailed, true, false},
		{StatusExpired, true, false},
		{StatusCancelled, true, false},
		{StatusRefunded, true, false},
		{StatusDisputed, true, false},
	}
	if len(cases) != len(everyStatus) {
		t.Fatalf("%d cases for %d statuses", len(cases), len(everyStatus))
	}
	for _, c := range cases {
		if got := c.s.Terminal(); got != c.terminal {
			t.Errorf("%s.Terminal() = %v, want %v", c.s, got, c.terminal)
		}
		if got := c.s.Holds(); got != c.holds {
			t.Errorf("%s.Holds() = %v, want %v", c.s, got, c.holds)
		}
		if !c.s.Valid() {
			t.Errorf("%s.Valid() = false", c.s)
		}
		if got, want := c.s.EventType(), "spend."+string(c.s); got != want {
			t.Errorf("%s.EventType() = %q, want %q", c.s, got, want)
		}
		// A spend that holds money must be able to release it by moving on.
		if c.holds && len(specMoves[c.s]) == 0 {
			t.Errorf("%s holds allowance but has no way out", c.s)
		}
		// Only a settled spend moves after it is final, and only to the
		// reserved refund and dispute states.
		if c.terminal && c.s != StatusSettled && len(specMoves[c.s]) != 0 {
			t.Errorf("final status %s has moves", c.s)
		}
	}
	for _, bad := range []Status{statusNew, "bogus", "Settled", "pending"} {
		if bad.Valid() {
			t.Errorf("%q.Valid() = true", bad)
		}
	}
}

// The events named in the spec (6.2) are exactly the spend.* types.
func TestStatusEventTypesAreTheSpecOnes(t *testing.T) {
	spec := map[string]bool{
		"spend.pending_approval": true, "spend.approved": true, "spend.declined": true, "spend.processing": true,
		"spend.settled": true, "spend.failed": true, "spend.expired": true, "spend.cancelled": true,
		"spend.refunded": true, "spend.disputed": true,
	}
	for _, s := range everyStatus {
		if !spec[s.EventType()] {
			t.Errorf("%s announces %q, which spec 6.2 does not list", s, s.EventType())
		}
		delete(spec, s.EventType())
	}
	for e := range spec {
		t.Errorf("spec event %s has no status", e)
	}
}
