package ratelimit

import (
	"fmt"
	"hash/maphash"
	"sync"
	"time"
	"unsafe"
)

// Clock tells the limiter the time. The server passes nil to New for the
// system clock; tests pass a fake one they advance by hand.
type Clock interface{ Now() time.Time }

// numShards is the number of independently locked parts of the bucket
// map. A power of two, so a hash picks one with a mask.
const numShards = 64

// params is one Limit turned into integer nanoseconds, ready for the hot
// path.
type params struct {
	rate     int   // Limit.Rate; 0 means disabled
	capacity int   // Rate+Burst: what a full bucket holds, RateLimit-Limit
	interval int64 // nanoseconds to earn one token: Window/Rate rounded up
	size     int64 // (Rate+Burst) * interval: the debt of an empty bucket
	window   int64 // Limit.Window in nanoseconds
	recall   bool  // a new bucket starts from the limiter's History
	// slot > 0 makes the limit a window (burst 0, see window.go): slots
	// of that many nanoseconds, slots of them to a Window; bias is
	// windowBias rounded up to whole slots, so that slots begin at the
	// limiter's epoch.
	slot  int64
	slots int
	bias  int64
}

// bucketKey identifies one bucket. It holds no pointer other than the
// subject string, so a lookup for an existing bucket does not allocate.
type bucketKey struct {
	subject string
	name    uint8 // index of the Name
	live    bool
}

// shardState is one locked part of the buckets. A bucket is a single
// number, the instant it is full again in nanoseconds since the limiter's
// epoch, kept in the slab full; index maps a key to its slot, so an Allow
// hashes the key once and no bucket is a heap object of its own.
type shardState struct {
	mu    sync.Mutex
	index map[bucketKey]int32
	full  []int64 // slot -> instant the bucket is full again
	free  []int32 // slots released by Sweep, reused first
	peak  int     // largest len(index) since the shard was last rebuilt
	// windows holds the subjects of the window limits (burst 0).
	windows map[bucketKey]*window
	wpeak   int // largest len(windows) since the map was last rebuilt
}

// slot returns a free slot of the slab.
func (s *shardState) slot() int32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		return i
	}
	s.full = append(s.full, 0)
	return int32(len(s.full) - 1)
}

// shard pads shardState to a whole cache line, so that two cores working
// on neighbouring shards do not contend for the same line.
type shard struct {
	shardState
	_ [(64 - unsafe.Sizeof(shardState{})%64) % 64]byte
}

// Limiter holds one token bucket, or for a limit with burst 0 one window
// (window.go), per (limit, environment, subject). It is
// safe for concurrent use. The zero value is not usable; call New.
type Limiter struct {
	// shards comes first: the allocation starts on a cache line, so each
	// padded shard occupies whole lines of its own.
	shards [numShards]shard
	clock  Clock // nil: the system clock, read through its monotonic part
	epoch  time.Time
	seed   maphash.Seed
	params [numNames][2]params // [name index][0 practice, 1 live]
	// history recalls uses made before this limiter started, for the
	// limits whose params have recall set (see Recall).
	history History
}

// New returns a limiter for table t reading time from clock. Pass nil for
// the system clock: the limiter then reads the monotonic clock directly,
// which is cheaper than any Clock and immune to wall-clock steps. New
// panics if t does not pass Validate: the table is configuration, checked
// once at start.
func New(t Table, clock Clock) *Limiter {
	if err := t.Validate(); err != nil {
		panic(err)
	}
	l := &Limiter{clock: clock, seed: maphash.MakeSeed()}
	if clock == nil {
		l.epoch = time.Now()
	} else {
		l.epoch = clock.Now()
	}
	for i, n := range names {
		l.params[i][0] = toParams(t.Practice[n])
		l.params[i][1] = toParams(t.Live[n])
	}
	for i := range l.shards {
		l.shards[i].index = make(map[bucketKey]int32)
		l.shards[i].windows = make(map[bucketKey]*window)
	}
	return l
}

// toParams converts a validated Limit.
func toParams(lim Limit) params {
	if lim.Rate == 0 {
		return params{}
	}
	interval := ceilDiv(int64(lim.Window), int64(lim.Rate))
	p := params{
		rate:     lim.Rate,
		capacity: lim.Rate + lim.Burst,
		interval: interval,
		size:     int64(lim.Rate+lim.Burst) * interval,
		window:   int64(lim.Window),
	}
	if lim.Burst == 0 {
		p.slot, p.slots = windowSlots(lim.Window)
		p.bias = ceilDiv(windowBias, p.slot) * p.slot
	}
	return p
}

// now returns the time in nanoseconds since the limiter's epoch. With the
// system clock this reads only the monotonic clock (time.Since), about
// half the cost of time.Now, and changes of the wall clock do not move
// buckets.
func (l *Limiter) now() int64 {
	if l.clock == nil {
		return int64(time.Since(l.epoch))
	}
	return int64(l.clock.Now().Sub(l.epoch))
}

// bucket finds the parameters, map key and shard of the bucket of (name,
// livemode, subject). It panics on a name that is not one of the
// constants.
func (l *Limiter) bucket(name Name, livemode bool, subject string) (*params, bucketKey, *shard) {
	i := name.index()
	if i < 0 {
		panic(fmt.Sprintf("ratelimit: unknown limit name %q", name))
	}
	env := 0
	if livemode {
		env = 1
	}
	return &l.params[i][env], bucketKey{subject: subject, name: uint8(i), live: livemode},
		&l.shards[maphash.String(l.seed, subject)&(numShards-1)]
}

// Allow takes one token from the bucket of (name, livemode, subject). The
// subject is a key id, agent id, owner id or IP, as the limit's Name says;
// it is kept as the map key, so it must not be a string that aliases
// mutable memory. A subject seen for the first time starts with a full
// bucket. Allow panics on a name that is not one of the constants.
func (l *Limiter) Allow(name Name, livemode bool, subject string) Decision {
	p, k, s := l.bucket(name, livemode, subject)
	if p.rate == 0 {
		return Decision{Disabled: true}
	}
	now := l.now()
	if p.slot > 0 {
		return l.allowInWindow(p, name, livemode, subject, k, s, now)
	}

	d := Decision{Limit: p.capacity, Rate: p.rate}
	s.mu.Lock()
	// debt is how far the bucket is below full, in nanoseconds of refill:
	// tokens = (size - debt) / interval.
	slot, seen := s.index[k]
	if !seen && p.recall {
		// Read the history without the shard's lock: it may read the
		// store. Another request of the same subject may have started
		// the bucket meanwhile; its bucket wins.
		s.mu.Unlock()
		debt := l.recalled(p, name, livemode, subject)
		s.mu.Lock()
		if slot, seen = s.index[k]; !seen && debt > 0 {
			slot, seen = s.slot(), true
			s.index[k] = slot
			if len(s.index) > s.peak {
				s.peak = len(s.index)
			}
			s.full[slot] = now + debt
		}
	}
	var debt int64
	if seen {
		debt = s.full[slot] - now
		if debt < 0 {
			debt = 0
		}
		// debt can exceed size: this goroutine read the clock before
		// another one that took the lock first, or an injected clock
		// stepped back. Either way the bucket is empty until the clock
		// reaches fullAt-size, and RetryAfter says so. Writing a smaller
		// fullAt back here would hand out tokens twice.
	}
	if debt <= p.size-p.interval {
		debt += p.interval
		if !seen {
			slot = s.slot()
			s.index[k] = slot
			if len(s.index) > s.peak {
				s.peak = len(s.index)
			}
		}
		s.full[slot] = now + debt
		d.Allowed = true
		d.Remaining = int((p.size - debt) / p.interval)
	} else {
		d.RetryAfter = time.Duration(p.interval - (p.size - debt))
	}
	s.mu.Unlock()
	d.Reset = time.Duration(debt)
	return d
}

// allowInWindow is Allow for a window limit: the subject's window, from
// its History if the limiter has not seen it, takes the request if the
// last Window holds fewer than Rate.
func (l *Limiter) allowInWindow(p *params, name Name, livemode bool, subject string, k bucketKey, s *shard, now int64) Decision {
	s.mu.Lock()
	w, seen := s.windows[k]
	if !seen && p.recall {
		// As for buckets: the History may read the store, so not under
		// the shard's lock; a window another request started meanwhile
		// wins.
		s.mu.Unlock()
		recalled := l.recalledWindow(p, name, livemode, subject, now)
		s.mu.Lock()
		if w, seen = s.windows[k]; !seen && recalled != nil {
			w = recalled
			s.windows[k] = w
			s.wpeak = max(s.wpeak, len(s.windows))
		}
	}
	d := l.allowWindow(p, s, k, w, now)
	s.mu.Unlock()
	return d
}

// Refund gives back the token an earlier Allow of (name, livemode,
// subject) took, for a request that turned out to do nothing the limit is
// meant to count (a key creation refused with 400 or 409). The bucket
// never ends fuller than full; a bucket already dropped by Sweep is full
// and stays so.
func (l *Limiter) Refund(name Name, livemode bool, subject string) {
	p, k, s := l.bucket(name, livemode, subject)
	if p.rate == 0 {
		return
	}
	s.mu.Lock()
	if p.slot > 0 {
		if w, seen := s.windows[k]; seen {
			refundWindow(w)
		}
	} else if slot, seen := s.index[k]; seen {
		// fullAt may already be in the past (the bucket refilled since):
		// moving it further back leaves it full, which is right.
		s.full[slot] -= p.interval
	}
	s.mu.Unlock()
}

// Len returns the number of buckets held.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.index) + len(s.windows)
		s.mu.Unlock()
	}
	return n
}

// minRebuild is the peak size below which a shard's map is never rebuilt.
const minRebuild = 1024

// Sweep drops every bucket that is full again: forgetting it changes
// nothing, since a subject seen for the first time starts full. The server
// calls it periodically (every minute is plenty). A shard whose map shrank
// below a quarter of its peak is copied into a fresh map, so memory held
// after a burst of subjects is given back. Sweep locks one shard at a
// time; Allow on other shards proceeds meanwhile. An Allow that read the
// clock just before Sweep did may find its bucket already dropped and
// start it full: the credit it gains is the refill of those few
// microseconds, a small fraction of a token.
func (l *Limiter) Sweep() {
	now := l.now()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, slot := range s.index {
			if s.full[slot] <= now {
				delete(s.index, k)
				s.free = append(s.free, slot)
			}
		}
		if s.peak >= minRebuild && len(s.index) < s.peak/4 {
			s.rebuild()
		}
		l.sweepWindows(s, now)
		s.mu.Unlock()
	}
}

// rebuild copies the live buckets into a fresh map and a compact slab,
// returning the memory of the old ones.
func (s *shardState) rebuild() {
	index := make(map[bucketKey]int32, len(s.index))
	full := make([]int64, 0, len(s.index))
	for k, slot := range s.index {
		index[k] = int32(len(full))
		full = append(full, s.full[slot])
	}
	s.index, s.full, s.free, s.peak = index, full, nil, len(index)
}
