package histogram

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHistogramQuantiles compares the histogram with exact order
// statistics of random latencies: each percentile within 1%, never below.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := New()
	var vals []time.Duration
	for range 100000 {
		// Log-uniform from 1 µs to 10 s: every bucket scale gets values.
		d := time.Duration(float64(time.Microsecond) * math.Pow(10, rng.Float64()*7))
		vals = append(vals, d)
		h.Record(d)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
		exact := vals[max(int(q*float64(len(vals))+0.5), 1)-1]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > 0.01*float64(exact) {
			t.Errorf("q%.3f = %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Count() != uint64(len(vals)) {
		t.Errorf("max %v count %d, want %v %d", h.Max(), h.Count(), vals[len(vals)-1], len(vals))
	}
	// Bucket bounds tile the value range without gaps or overlaps.
	for v := uint64(0); v < 1<<20; v += 1 + v/300 {
		i := bucketOf(v)
		if time.Duration(v) > bucketHigh(i) || (i > 0 && time.Duration(v) <= bucketHigh(i-1)) {
			t.Fatalf("value %d in bucket %d [.., %v], previous ends %v", v, i, bucketHigh(i), bucketHigh(i-1))
		}
	}
}

// logUniform draws from 1 µs to 10 s, so every bucket scale gets values.
func logUniform(rng *rand.Rand) time.Duration {
	return time.Duration(float64(time.Microsecond) * math.Pow(10, rng.Float64()*7))
}

// TestSinceIsTheWindowAlone records values before and after a copy: the
// difference must answer exactly what a histogram of the later values
// alone answers, within bucket bounds for the extremes, and the copy must
// not move when the original does.
func TestSinceIsTheWindowAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all, window := New(), New()
	for range 5000 {
		all.Record(logUniform(rng))
	}
	start := all.Clone()
	for range 20000 {
		d := logUniform(rng) / 10 // a window of faster values than before it
		all.Record(d)
		window.Record(d)
	}
	if start.Count() != 5000 {
		t.Fatalf("the copy changed with the original: %d values", start.Count())
	}
	got := all.Since(start)
	if got.Count() != window.Count() || got.Sum() != window.Sum() || got.Mean() != window.Mean() {
		t.Errorf("count %d sum %v mean %v, want %d %v %v", got.Count(), got.Sum(), got.Mean(),
			window.Count(), window.Sum(), window.Mean())
	}
	for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999} {
		if g, w := got.Quantile(q), window.Quantile(q); g != w {
			t.Errorf("q%.3f of the difference %v, of the window alone %v", q, g, w)
		}
	}
	// The extremes are the bounds of the window's own outer buckets.
	if lo, hi := bucketOf(uint64(window.Min())), bucketOf(uint64(window.Max())); got.Min() != bucketLow(lo) || got.Max() != bucketHigh(hi) {
		t.Errorf("extremes %v..%v, want the bounds %v..%v of the window's %v..%v",
			got.Min(), got.Max(), bucketLow(lo), bucketHigh(hi), window.Min(), window.Max())
	}
	if empty := all.Since(all.Clone()); empty.Count() != 0 || empty.Quantile(0.5) != 0 || empty.Max() != 0 {
		t.Errorf("an empty window: count %d p50 %v max %v", empty.Count(), empty.Quantile(0.5), empty.Max())
	}
	defer func() {
		if recover() == nil {
			t.Error("Since with a later histogram as the earlier one did not panic")
		}
	}()
	start.Since(all)
}

func TestAtMostCountsCumulatively(t *testing.T) {
	h := New()
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond, time.Hour} {
		h.Record(d)
	}
	got := h.AtMost([]time.Duration{500 * time.Microsecond, 1500 * time.Microsecond, 5 * time.Millisecond, 20 * time.Millisecond, time.Minute})
	want := []uint64{0, 1, 3, 4, 4}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("AtMost = %v, want %v", got, want)
		}
	}
	if got := New().AtMost([]time.Duration{time.Second}); got[0] != 0 {
		t.Fatalf("empty histogram: AtMost = %v, want [0]", got)
	}
}
