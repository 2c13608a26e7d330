package actors

import (
	"slices"
	"testing"
	"time"
)

// Keys whose hashes collide keep every spend, and forgetting the oldest
// leaves the others findable; the index empties once all are forgotten.
func TestIdemIndexKeepsCollidingKeys(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	spend := func(at time.Time) idemSpend {
		s, ok := spendOfID(NewID("spd", at))
		if !ok {
			t.Fatal("a spend id does not decode")
		}
		return s
	}
	a, b, c, d := spend(t0), spend(t0.Add(time.Minute)), spend(t0.Add(2*time.Minute)), spend(t0.Add(3*time.Minute))
	var x idemIndex
	x.add(7, a)
	x.add(9, b)
	x.add(7, c)
	x.add(7, d)
	if got := x.candidates(7); !slices.Equal(got, []idemSpend{a, c, d}) {
		t.Fatalf("candidates of a shared hash: %v", got)
	}
	x.forget(t0.Add(90 * time.Second).UnixMilli()) // a and b
	if got := x.candidates(7); !slices.Equal(got, []idemSpend{c, d}) {
		t.Fatalf("after forgetting the oldest: %v", got)
	}
	if got := x.candidates(9); got != nil {
		t.Fatalf("a forgotten key still has %v", got)
	}
	x.forget(t0.Add(150 * time.Second).UnixMilli()) // c
	if got := x.candidates(7); !slices.Equal(got, []idemSpend{d}) {
		t.Fatalf("after forgetting c: %v", got)
	}
	x.forget(t0.Add(time.Hour).UnixMilli())
	if x.first != nil || x.more != nil || x.order != nil || x.head != 0 {
		t.Fatalf("an index with nothing in its window keeps %+v", x)
	}
}

// A spend id survives the trip through the index's 16 bytes.
func TestIdemSpendRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC)
	id := NewID("spd", at)
	s, ok := spendOfID(id)
	if !ok || s.id() != id || s.millis() != at.UnixMilli() {
		t.Fatalf("%s became %s at %d", id, s.id(), s.millis())
	}
	for _, bad := range []string{"", "apr_" + id[4:], id[:20], "spd_" + string(make([]byte, 32))} {
		if _, ok := spendOfID(bad); ok {
			t.Errorf("%q decoded as a spend id", bad)
		}
	}
}
