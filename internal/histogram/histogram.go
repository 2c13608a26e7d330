package histogram

import (
	"math/bits"
	"time"
)

// Histogram is a distribution of durations: every power of two is split
// into subBuckets equal slices, so a recorded value is known to within
// 1/subBuckets (under 1%). One histogram belongs to one goroutine (or to
// one lock); Merge combines them afterwards. The zero value is not usable;
// call New.
type Histogram struct {
	counts []uint64
	total  uint64
	sum    time.Duration
	min    time.Duration
	max    time.Duration
}

const (
	subBits    = 7
	subBuckets = 1 << subBits
	// 40 doublings above 2*subBuckets ns reach about 4.7 hours; anything
	// longer is clamped into the last bucket (and still counts as the max).
	histBuckets = (40 + 2) * subBuckets
)

// New returns an empty histogram.
func New() *Histogram {
	return &Histogram{counts: make([]uint64, histBuckets)}
}

// bucketOf maps a value in nanoseconds to its bucket. Values below
// 2*subBuckets each have their own bucket; above, a value v with
// shift = bitlen(v) - subBits - 1 lands in shift*subBuckets + v>>shift,
// which continues the index range without gaps.
func bucketOf(v uint64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	i := shift*subBuckets + int(v>>shift)
	if i >= histBuckets {
		i = histBuckets - 1
	}
	return i
}

// bucketHigh is the largest value that maps to bucket i: percentiles
// report it, so they never understate a latency.
func bucketHigh(i int) time.Duration {
	if i < 2*subBuckets {
		return time.Duration(i)
	}
	shift := i/subBuckets - 1
	mant := uint64(i - shift*subBuckets)
	return time.Duration((mant+1)<<shift - 1)
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	if h.total == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.total++
	h.sum += d
}

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest recorded value: exact, except after Since (see there).
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average of the recorded values.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return h.sum / time.Duration(h.total)
}

// Quantile is the smallest bucket bound below which at least q of the
// values lie (q in [0, 1]), capped at the exact maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank > h.total {
		rank = h.total
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketHigh(i), h.max)
		}
	}
	return h.max
}

// Clone returns an independent copy of h.
func (h *Histogram) Clone() *Histogram {
	c := *h
	c.counts = append([]uint64(nil), h.counts...)
	return &c
}

// Since returns the values recorded in h after earlier was cloned from it:
// the histogram of the window between the two copies. Counts, mean and
// percentiles are those of the window. Its extremes are bucket bounds (the
// lowest and highest non-empty buckets of the window, the maximum capped
// at h's exact one), since a copy does not say which values came after it.
// earlier must be a copy of h taken before h (or empty); otherwise Since
// panics rather than report negative counts.
func (h *Histogram) Since(earlier *Histogram) *Histogram {
	w := New()
	lo, hi := -1, -1
	for i, c := range h.counts {
		e := earlier.counts[i]
		if e > c {
			panic("histogram: Since with a histogram that is not an earlier copy")
		}
		if c -= e; c > 0 {
			w.counts[i] = c
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	w.total = h.total - earlier.total
	w.sum = h.sum - earlier.sum
	if w.total > 0 {
		w.min = bucketLow(lo)
		w.max = min(bucketHigh(hi), h.max)
	}
	return w
}

// bucketLow is the smallest value that maps to bucket i.
func bucketLow(i int) time.Duration {
	if i == 0 {
		return 0
	}
	return bucketHigh(i-1) + 1
}

// Sum is the total of the recorded values.
func (h *Histogram) Sum() time.Duration { return h.sum }

// AtMost returns, for each bound (in increasing order), how many recorded
// values are at most that bound: the cumulative buckets of a Prometheus
// histogram. A value counts under a bound when its whole bucket lies
// below it, so a count can miss values within 1% under the bound.
func (h *Histogram) AtMost(bounds []time.Duration) []uint64 {
	out := make([]uint64, len(bounds))
	var seen uint64
	b := 0
	for i, c := range h.counts {
		high := bucketHigh(i)
		for b < len(bounds) && high > bounds[b] {
			out[b] = seen
			b++
		}
		if b == len(bounds) {
			return out
		}
		seen += c
	}
	for ; b < len(bounds); b++ {
		out[b] = seen
	}
	return out
}

// Min is the smallest recorded value (a bucket bound after Since).
func (h *Histogram) Min() time.Duration { return h.min }
