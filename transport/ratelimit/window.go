package ratelimit

import (
	"math"
	"time"
)

// A limit with burst 0 (the daily ones, and invalid keys per 10 minutes)
// is a window, not a bucket: at most Rate requests in any span of Window,
// which is what "1000 per day, burst 0" promises. A token bucket of Rate
// tokens refilled over the Window lets through up to twice Rate in one
// Window (a full bucket at its start and a Window of refill).
//
// A window counts its requests in slots of Window/maxSlots (never shorter
// than minSlot), and a request is allowed while the slots that overlap the
// last Window hold fewer than Rate. The oldest of those slots began before
// the Window did, so the count may include requests a little older than
// the Window, never miss one: a request is refused at most one slot longer
// than an exact count would refuse it (15 minutes for a day), and never
// allowed when an exact count would refuse it.

const (
	maxSlots = 96          // a day in quarter hours
	minSlot  = time.Minute // invalid keys per 10 minutes: 10 slots
	// maxWindowRate bounds the Rate of a window limit: slots count in 32
	// bits. Table.Scaled keeps a scaled daily limit well within it.
	maxWindowRate = math.MaxUint32
	// windowBias is added to the limiter's clock before it is cut into
	// slots, so that a use the History dates before the limiter started
	// still has a slot of positive number (36 years of nanoseconds).
	windowBias = int64(1) << 60
)

// windowSlots returns the slot length in nanoseconds and the number of
// slots that cover a window.
func windowSlots(window time.Duration) (slot int64, n int) {
	n = int(min(max(window/minSlot, 1), maxSlots))
	return ceilDiv(int64(window), int64(n)), n
}

// window is the state of one subject's window limit. Slot k covers the
// nanoseconds [k*slot, (k+1)*slot) since the limiter's epoch; counts holds
// slots last-n .. last (n+1 of them: the last Window and the slot it
// begins in), slot k at index k mod (n+1).
type window struct {
	counts []uint32
	last   int64  // the newest slot counts holds
	total  uint64 // the sum of counts
}

func newWindow(p *params, cur int64) *window {
	return &window{counts: make([]uint32, p.slots+1), last: cur}
}

// advance moves the window to slot cur, emptying the slots that left it.
// A clock reading older than the window's newest slot (a goroutine that
// read the clock before another took the lock, or a clock stepped back)
// counts in that newest slot: the window never moves back.
func (w *window) advance(cur int64) int64 {
	if cur <= w.last {
		return w.last
	}
	size := int64(len(w.counts))
	if cur-w.last >= size {
		clear(w.counts)
		w.total = 0
	} else {
		for k := w.last + 1; k <= cur; k++ {
			i := k % size
			w.total -= uint64(w.counts[i])
			w.counts[i] = 0
		}
	}
	w.last = cur
	return cur
}

// add counts one request in slot k (one of those the window holds).
func (w *window) add(k int64) {
	i := k % int64(len(w.counts))
	if w.counts[i] < math.MaxUint32 {
		w.counts[i]++
		w.total++
	}
}

// untilBelow returns how long from now (nanoseconds since the epoch) until
// the window holds fewer than n requests: until enough of its oldest slots
// have left it. A slot k leaves when slot k+len(counts) begins.
func (w *window) untilBelow(p *params, n uint64, now int64) int64 {
	if w.total < n {
		return 0
	}
	size := int64(len(w.counts))
	left := w.total
	for k := w.last - size + 1; k <= w.last; k++ {
		left -= uint64(w.counts[k%size])
		if left < n {
			return max((k+size)*p.slot-now, 0)
		}
	}
	return max((w.last+size)*p.slot-now, 0)
}

// allowWindow is Allow for a window limit. Caller holds s.mu, with now
// read before it; the window of k, if any, is w.
func (l *Limiter) allowWindow(p *params, s *shard, k bucketKey, w *window, now int64) Decision {
	d := Decision{Limit: p.capacity, Rate: p.rate}
	now += p.bias
	cur := now / p.slot
	if w == nil {
		w = newWindow(p, cur)
	}
	cur = w.advance(cur)
	rate := uint64(p.rate)
	if w.total < rate {
		w.add(cur)
		if _, held := s.windows[k]; !held {
			s.windows[k] = w
			s.wpeak = max(s.wpeak, len(s.windows))
		}
		d.Allowed = true
		d.Remaining = int(rate - w.total)
	} else {
		d.RetryAfter = time.Duration(w.untilBelow(p, rate, now))
	}
	d.Reset = time.Duration(w.untilBelow(p, 1, now))
	return d
}

// refundWindow takes back the newest request a window counts.
func refundWindow(w *window) {
	size := int64(len(w.counts))
	for k := w.last; k > w.last-size; k-- {
		if i := k % size; w.counts[i] > 0 {
			w.counts[i]--
			w.total--
			return
		}
	}
}

// recalledWindow is the window a subject the limiter has not seen starts
// with: the uses its History finds within the window.
func (l *Limiter) recalledWindow(p *params, name Name, livemode bool, subject string, now int64) *window {
	size := int64(p.slots + 1)
	ages, err := l.history(name, livemode, subject, time.Duration(size*p.slot))
	if err != nil || len(ages) == 0 {
		return nil
	}
	now += p.bias
	cur := now / p.slot
	w := newWindow(p, cur)
	for _, a := range ages {
		// A use stamped in the future (a clock step) counts as now.
		if k := (now - max(int64(a), 0)) / p.slot; k > cur-size {
			w.add(k)
		}
	}
	if w.total == 0 {
		return nil
	}
	return w
}

// sweepWindows drops the windows that hold no request any more: a subject
// seen anew starts with an empty window, the same state. Caller holds
// s.mu.
func (l *Limiter) sweepWindows(s *shard, now int64) {
	for k, w := range s.windows {
		p := &l.params[k.name][0]
		if k.live {
			p = &l.params[k.name][1]
		}
		if p.slot == 0 {
			continue
		}
		if w.advance((now + p.bias) / p.slot); w.total == 0 {
			delete(s.windows, k)
		}
	}
	if s.wpeak >= minRebuild && len(s.windows) < s.wpeak/4 {
		fresh := make(map[bucketKey]*window, len(s.windows))
		for k, w := range s.windows {
			fresh[k] = w
		}
		s.windows, s.wpeak = fresh, len(fresh)
	}
}
