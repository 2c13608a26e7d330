package actors

import (
	"testing"
	"time"
)

// Events take their sequence under the environment's lock but their time
// from a clock read before it: a later sequence must never carry an
// earlier time, or a created[gte] filter (which stops at the first event
// older than its bound) would skip it.
func TestEventTimesNeverGoBackAsSequenceGoesUp(t *testing.T) {
	e := &envLedger{state: EnvState{OwnerID: "o", Env: EnvTest}}
	c := &change{}
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	c.event(e, "", "spend.settled", nil, audienceOwner, t0.Add(2*time.Millisecond))
	c.event(e, "", "spend.settled", nil, audienceOwner, t0) // read the clock first, took the lock second
	c.event(e, "", "spend.settled", nil, audienceOwner, t0.Add(time.Second))
	got := []time.Time{c.events[0].Created, c.events[1].Created, c.events[2].Created}
	want := []time.Time{t0.Add(2 * time.Millisecond), t0.Add(2 * time.Millisecond), t0.Add(time.Second)}
	for i := range got {
		if !got[i].Equal(want[i]) || c.events[i].Sequence != uint64(i+1) {
			t.Fatalf("event %d: sequence %d created %v, want sequence %d created %v", i, c.events[i].Sequence, got[i], i+1, want[i])
		}
	}
}
