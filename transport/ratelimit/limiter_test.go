package ratelimit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// defaultCases lists every enabled limit of the default table with the
// values expected from spec 8.1, written out independently of DefaultTable.
var defaultCases = []struct {
	name        Name
	live        bool
	rate, burst int
	retry       time.Duration // Window/Rate
	retryHeader string        // Window/Rate in whole seconds, rounded up
}{
	{Key, false, 120, 30, 500 * time.Millisecond, "1"},
	{Key, true, 60, 30, time.Second, "1"},
	{Spends, false, 20, 5, 3 * time.Second, "3"},
	{Spends, true, 10, 5, 6 * time.Second, "6"},
	{SpendsDaily, false, 1000, 0, 86400 * time.Millisecond, "87"},
	{SpendsDaily, true, 200, 0, 432 * time.Second, "432"},
	{Check, false, 60, 10, time.Second, "1"},
	{Check, true, 30, 10, 2 * time.Second, "2"},
	{AdminWrites, false, 30, 10, 2 * time.Second, "2"},
	{AdminWrites, true, 15, 10, 4 * time.Second, "4"},
	{KeyChanges, false, 50, 0, 1728 * time.Second, "1728"},
	{KeyChanges, true, 10, 0, 8640 * time.Second, "8640"},
	{PracticeControl, false, 120, 20, 30 * time.Second, "30"},
	{InvalidKey, false, 30, 0, 20 * time.Second, "20"},
	{InvalidKey, true, 30, 0, 20 * time.Second, "20"},
	{Public, false, 600, 100, 100 * time.Millisecond, "1"},
	{Public, true, 600, 100, 100 * time.Millisecond, "1"},
	{SignIn, false, 10, 5, 90 * time.Second, "90"},
	{SignIn, true, 10, 5, 90 * time.Second, "90"},
	{SignInAccount, false, 20, 10, 45 * time.Second, "45"},
	{SignInAccount, true, 20, 10, 45 * time.Second, "45"},
}

func envName(live bool) string {
	if live {
		return "live"
	}
	return "practice"
}

func TestDefaultLimitsExhaustAndRecover(t *testing.T) {
	for _, tc := range defaultCases {
		if tc.burst == 0 {
			continue // a window: TestDefaultWindowLimitsExhaustAndRecover
		}
		t.Run(fmt.Sprintf("%s/%s", tc.name, envName(tc.live)), func(t *testing.T) {
			clock := newFakeClock()
			l := New(DefaultTable(), clock)
			size := tc.rate + tc.burst

			for k := 1; k <= size; k++ {
				d := l.Allow(tc.name, tc.live, "subj")
				if !d.Allowed || d.Disabled {
					t.Fatalf("request %d of %d refused: %+v", k, size, d)
				}
				if d.Limit != size {
					t.Fatalf("request %d: Limit = %d, want rate+burst %d", k, d.Limit, size)
				}
				if d.Remaining != size-k {
					t.Fatalf("request %d: Remaining = %d, want %d", k, d.Remaining, size-k)
				}
				if want := time.Duration(k) * tc.retry; d.Reset != want {
					t.Fatalf("request %d: Reset = %v, want %v", k, d.Reset, want)
				}
				if d.RetryAfter != 0 {
					t.Fatalf("request %d: RetryAfter = %v on an allowed request", k, d.RetryAfter)
				}
			}

			d := l.Allow(tc.name, tc.live, "subj")
			if d.Allowed {
				t.Fatalf("request %d allowed, want refusal after %d", size+1, size)
			}
			if d.Remaining != 0 || d.RetryAfter != tc.retry || d.Limit != size {
				t.Fatalf("refusal = %+v, want Remaining 0, RetryAfter %v, Limit %d", d, tc.retry, size)
			}
			if want := time.Duration(size) * tc.retry; d.Reset != want {
				t.Fatalf("refusal: Reset = %v, want %v", d.Reset, want)
			}
			if _, _, _, ra := d.Headers(); ra != tc.retryHeader {
				t.Fatalf("Retry-After header = %q, want %q", ra, tc.retryHeader)
			}

			// A refusal takes nothing: asking again at once gives the same answer.
			if again := l.Allow(tc.name, tc.live, "subj"); again != d {
				t.Fatalf("second refusal = %+v, want %+v", again, d)
			}

			// Just before Retry-After the token is not back yet.
			clock.Advance(d.RetryAfter - time.Nanosecond)
			if d2 := l.Allow(tc.name, tc.live, "subj"); d2.Allowed || d2.RetryAfter != time.Nanosecond {
				t.Fatalf("1ns early: %+v, want refusal with RetryAfter 1ns", d2)
			}
			clock.Advance(time.Nanosecond)
			d3 := l.Allow(tc.name, tc.live, "subj")
			if !d3.Allowed || d3.Remaining != 0 {
				t.Fatalf("after Retry-After: %+v, want allowed with Remaining 0", d3)
			}
			if d4 := l.Allow(tc.name, tc.live, "subj"); d4.Allowed || d4.RetryAfter != tc.retry {
				t.Fatalf("after the recovered token: %+v, want refusal with RetryAfter %v", d4, tc.retry)
			}

			// After a full window plus burst the bucket is full again.
			clock.Advance(time.Duration(size) * tc.retry)
			if d5 := l.Allow(tc.name, tc.live, "subj"); !d5.Allowed || d5.Remaining != size-1 {
				t.Fatalf("after refill: %+v, want Remaining %d", d5, size-1)
			}
		})
	}
}

func TestDefaultCasesCoverTable(t *testing.T) {
	tab := DefaultTable()
	seen := map[string]bool{}
	for _, tc := range defaultCases {
		seen[fmt.Sprint(tc.name, tc.live)] = true
		m := tab.Practice
		if tc.live {
			m = tab.Live
		}
		if got := m[tc.name]; got.Rate != tc.rate || got.Burst != tc.burst {
			t.Errorf("%s %s: table has %+v, spec says rate %d burst %d", envName(tc.live), tc.name, got, tc.rate, tc.burst)
		}
	}
	for _, n := range Names() {
		for _, live := range []bool{false, true} {
			m := tab.Practice
			if live {
				m = tab.Live
			}
			if m[n].Rate > 0 && !seen[fmt.Sprint(n, live)] {
				t.Errorf("%s %s is enabled but not tested", envName(live), n)
			}
		}
	}
}

func TestPracticeControlDisabledInLive(t *testing.T) {
	l := New(DefaultTable(), newFakeClock())
	for i := 0; i < 3; i++ {
		d := l.Allow(PracticeControl, true, "own_1")
		if !d.Disabled || d.Allowed || d != (Decision{Disabled: true}) {
			t.Fatalf("live practice control = %+v, want only Disabled", d)
		}
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("a disabled limit created %d buckets", n)
	}
	if d := l.Allow(PracticeControl, false, "own_1"); !d.Allowed || d.Disabled {
		t.Fatalf("practice control in practice = %+v, want allowed", d)
	}
}

// exhaust takes tokens until refusal and returns how many were granted.
func exhaust(t *testing.T, l *Limiter, name Name, live bool, subject string) int {
	t.Helper()
	for n := 0; n < 1_000_000; n++ {
		if !l.Allow(name, live, subject).Allowed {
			return n
		}
	}
	t.Fatalf("%s %s %q never refused", envName(live), name, subject)
	return 0
}

func TestPracticeAndLiveDiffer(t *testing.T) {
	l := New(DefaultTable(), newFakeClock())
	if got := exhaust(t, l, Spends, false, "agt_1"); got != 25 {
		t.Fatalf("practice spends granted %d, want 25", got)
	}
	// The live bucket of the same agent is separate and smaller.
	if got := exhaust(t, l, Spends, true, "agt_1"); got != 15 {
		t.Fatalf("live spends granted %d, want 15", got)
	}
	if p, lv := l.Allow(Key, false, "key_1"), l.Allow(Key, true, "key_2"); p.Limit != 150 || lv.Limit != 90 {
		t.Fatalf("Key limits practice %d live %d, want 150 and 90 (rate and burst)", p.Limit, lv.Limit)
	}
}

func TestSubjectsAndLimitsIndependent(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	if got := exhaust(t, l, Spends, true, "agt_a"); got != 15 {
		t.Fatalf("agt_a granted %d, want 15", got)
	}
	// Another agent is untouched.
	if d := l.Allow(Spends, true, "agt_b"); !d.Allowed || d.Remaining != 14 {
		t.Fatalf("agt_b = %+v, want allowed with Remaining 14", d)
	}
	// Other limits of the same subject are untouched.
	if d := l.Allow(Check, true, "agt_a"); !d.Allowed || d.Remaining != 39 {
		t.Fatalf("check of agt_a = %+v, want Remaining 39", d)
	}
	if d := l.Allow(SpendsDaily, true, "agt_a"); !d.Allowed || d.Remaining != 199 {
		t.Fatalf("spends_daily of agt_a = %+v, want Remaining 199", d)
	}
	// A subject that is a prefix of another does not share its bucket.
	if d := l.Allow(Spends, true, "agt_"); !d.Allowed || d.Remaining != 14 {
		t.Fatalf("agt_ = %+v, want a fresh bucket", d)
	}
}

func TestPartialRefill(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	// Live spends: 15 tokens, one every 6 s.
	if got := exhaust(t, l, Spends, true, "agt"); got != 15 {
		t.Fatalf("granted %d, want 15", got)
	}
	clock.Advance(20 * time.Second) // 3 tokens and 2/3 of a fourth
	for i := 2; i >= 0; i-- {
		d := l.Allow(Spends, true, "agt")
		if !d.Allowed || d.Remaining != i {
			t.Fatalf("after 20s: %+v, want Remaining %d", d, i)
		}
	}
	d := l.Allow(Spends, true, "agt")
	if d.Allowed || d.RetryAfter != 4*time.Second {
		t.Fatalf("fourth after 20s: %+v, want refusal with RetryAfter 4s", d)
	}
	if _, _, reset, ra := d.Headers(); ra != "4" || reset != "88" {
		t.Fatalf("headers reset %q retry %q, want 88 and 4", reset, ra)
	}
	// Refill never exceeds rate+burst, however long the pause.
	clock.Advance(365 * 24 * time.Hour)
	if got := exhaust(t, l, Spends, true, "agt"); got != 15 {
		t.Fatalf("after a year granted %d, want 15", got)
	}
}

func TestRefundGivesBackOneToken(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	// Live key changes: 10 a day, no burst.
	if got := exhaust(t, l, KeyChanges, true, "own"); got != 10 {
		t.Fatalf("granted %d, want 10", got)
	}
	l.Refund(KeyChanges, true, "own")
	if d := l.Allow(KeyChanges, true, "own"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after a refund: %+v, want one more token and none left", d)
	}
	if d := l.Allow(KeyChanges, true, "own"); d.Allowed {
		t.Fatalf("a refund gave back more than one token: %+v", d)
	}
	// A refund never fills a bucket past full: after a day the bucket is
	// full, a refund changes nothing, and still only 10 pass.
	clock.Advance(48 * time.Hour)
	l.Refund(KeyChanges, true, "own")
	l.Refund(KeyChanges, true, "own")
	if got := exhaust(t, l, KeyChanges, true, "own"); got != 10 {
		t.Fatalf("after refunds of a full bucket granted %d, want 10", got)
	}
	// A subject never seen, and another subject's bucket, are untouched.
	l.Refund(KeyChanges, true, "other")
	if got := exhaust(t, l, KeyChanges, true, "other"); got != 10 {
		t.Fatalf("other subject granted %d, want 10", got)
	}
}

func TestClockBackwards(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	if got := exhaust(t, l, Spends, true, "agt"); got != 15 {
		t.Fatalf("granted %d, want 15", got)
	}
	// A step back must never hand out tokens; the bucket stays empty until
	// the clock catches up, and RetryAfter counts the gap.
	clock.Advance(-time.Hour)
	d := l.Allow(Spends, true, "agt")
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Hour+6*time.Second || d.Reset != time.Hour+90*time.Second {
		t.Fatalf("after the clock stepped back: %+v", d)
	}
	clock.Advance(time.Hour + 6*time.Second - time.Nanosecond)
	if d := l.Allow(Spends, true, "agt"); d.Allowed {
		t.Fatalf("1ns before catching up: %+v, want refused", d)
	}
	clock.Advance(time.Nanosecond)
	if d := l.Allow(Spends, true, "agt"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after catching up: %+v, want allowed with Remaining 0", d)
	}
}

func TestUnknownNamePanics(t *testing.T) {
	l := New(DefaultTable(), newFakeClock())
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), `"spend"`) {
			t.Fatalf("recover() = %v, want a panic naming the bad name", r)
		}
	}()
	l.Allow(Name("spend"), false, "agt")
}

func TestNilClockUsesSystemTime(t *testing.T) {
	l := New(DefaultTable(), nil)
	if d := l.Allow(Key, false, "key"); !d.Allowed || d.Remaining != 149 {
		t.Fatalf("%+v, want allowed with Remaining 149", d)
	}
}

func TestSweepRemovesOnlyFullBuckets(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)

	l.Allow(Key, false, "key_a")          // full again after 500ms
	l.Allow(Spends, false, "agt_a")       // full again after 3s
	exhaust(t, l, Spends, false, "agt_b") // 25 tokens used: full after 75s
	l.Allow(SpendsDaily, true, "agt_a")   // a window: empty once its slot has left, 24h15m
	l.Allow(PracticeControl, true, "own") // disabled: no bucket
	if n := l.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4", n)
	}

	l.Sweep()
	if n := l.Len(); n != 4 {
		t.Fatalf("Sweep at once: Len = %d, want 4 (none is full)", n)
	}

	clock.Advance(3*time.Second - time.Nanosecond)
	l.Sweep()
	if n := l.Len(); n != 3 {
		t.Fatalf("Sweep after 3s-1ns: Len = %d, want 3 (key_a dropped)", n)
	}
	clock.Advance(time.Nanosecond)
	l.Sweep()
	if n := l.Len(); n != 2 {
		t.Fatalf("Sweep after 3s: Len = %d, want 2 (agt_a spends dropped)", n)
	}

	// New subjects, which may take the freed slots, do not disturb agt_b.
	if free := totalFree(l); free != 2 {
		t.Fatalf("%d free slots after dropping 2 buckets, want 2", free)
	}
	for _, subj := range []string{"agt_c", "agt_d", "agt_e", "agt_f", "agt_g"} {
		if d := l.Allow(Spends, false, subj); !d.Allowed || d.Remaining != 24 {
			t.Fatalf("%s = %+v, want a fresh bucket", subj, d)
		}
	}
	clock.Advance(3 * time.Second)
	l.Sweep() // drops agt_c to agt_g

	// agt_b kept its state: 75s of debt at 0s, 69s at 6s, so exactly two
	// tokens earned.
	for _, want := range []int{1, 0} {
		if d := l.Allow(Spends, false, "agt_b"); !d.Allowed || d.Remaining != want {
			t.Fatalf("agt_b after Sweep = %+v, want allowed with Remaining %d", d, want)
		}
	}
	if d := l.Allow(Spends, false, "agt_b"); d.Allowed {
		t.Fatalf("agt_b third = %+v, want refused: Sweep must not reset a partial bucket", d)
	}

	clock.Advance(432 * time.Second)
	l.Sweep()
	if n := l.Len(); n != 1 {
		t.Fatalf("Sweep after 438s: Len = %d, want 1 (the daily window of agt_a)", n)
	}
	clock.Advance(24*time.Hour + 15*time.Minute - 438*time.Second - time.Nanosecond)
	l.Sweep()
	if n := l.Len(); n != 1 {
		t.Fatalf("Sweep a nanosecond before the use leaves the daily window: Len = %d, want 1", n)
	}
	clock.Advance(time.Nanosecond)
	l.Sweep()
	if n := l.Len(); n != 0 {
		t.Fatalf("Sweep once the use has left the daily window: Len = %d, want 0", n)
	}
	// A swept subject starts full, exactly as it was.
	if d := l.Allow(Spends, false, "agt_b"); !d.Allowed || d.Remaining != 24 {
		t.Fatalf("agt_b after being swept = %+v, want Remaining 24", d)
	}
}

func TestSweepRebuildsShrunkShards(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	const n = 200_000
	for i := 0; i < n; i++ {
		l.Allow(Key, true, fmt.Sprintf("key_%d", i))
	}
	if got := l.Len(); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
	rebuilt := 0
	for i := range l.shards {
		if l.shards[i].peak >= minRebuild {
			rebuilt++
		}
	}
	if rebuilt == 0 {
		t.Fatalf("no shard reached the rebuild threshold; the test needs more subjects")
	}
	clock.Advance(20 * time.Second)
	l.Sweep()
	if got := l.Len(); got != 0 {
		t.Fatalf("after Sweep Len = %d, want 0", got)
	}
	for i := range l.shards {
		s := &l.shards[i]
		if s.peak != 0 || len(s.full) != 0 || s.free != nil {
			t.Fatalf("shard %d after Sweep: peak %d, slab %d, free %d; want all empty (rebuilt)",
				i, s.peak, len(s.full), len(s.free))
		}
	}
	if d := l.Allow(Key, true, "key_1"); !d.Allowed || d.Remaining != 89 {
		t.Fatalf("after rebuild: %+v, want a fresh bucket", d)
	}
}

// Windows (burst 0) are swept and their map rebuilt the same way: a burst
// of invalid keys from many addresses leaves nothing once 10 minutes (and
// the minute slot they began in) have passed.
func TestSweepRebuildsShrunkWindows(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	const n = 100_000
	for i := 0; i < n; i++ {
		l.Allow(InvalidKey, true, fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
	}
	if got := l.Len(); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
	clock.Advance(10 * time.Minute)
	l.Sweep()
	if got := l.Len(); got != n {
		t.Fatalf("Sweep at 10 min: Len = %d, want %d (the first minute's slot is still counted)", got, n)
	}
	clock.Advance(time.Minute)
	l.Sweep()
	if got := l.Len(); got != 0 {
		t.Fatalf("Sweep at 11 min: Len = %d, want 0", got)
	}
	for i := range l.shards {
		if s := &l.shards[i]; s.wpeak != 0 || len(s.windows) != 0 {
			t.Fatalf("shard %d after Sweep: peak %d, %d windows; want none (rebuilt)", i, s.wpeak, len(s.windows))
		}
	}
	if d := l.Allow(InvalidKey, true, "10.0.0.1"); !d.Allowed || d.Remaining != 29 {
		t.Fatalf("after rebuild: %+v, want an empty window", d)
	}
}

func TestShardReusesFreedSlots(t *testing.T) {
	var s shardState
	s.index = map[bucketKey]int32{}
	a, b, c := s.slot(), s.slot(), s.slot()
	if a != 0 || b != 1 || c != 2 {
		t.Fatalf("slots %d %d %d, want 0 1 2", a, b, c)
	}
	s.free = append(s.free, b, a)
	if got := s.slot(); got != a {
		t.Fatalf("slot() = %d, want the last freed %d", got, a)
	}
	if got := s.slot(); got != b {
		t.Fatalf("slot() = %d, want %d", got, b)
	}
	if got := s.slot(); got != 3 || len(s.full) != 4 {
		t.Fatalf("slot() = %d with slab %d, want a new slot 3", got, len(s.full))
	}

	// rebuild keeps exactly the indexed buckets, each with its value.
	s.full = []int64{10, 11, 12, 13}
	s.index = map[bucketKey]int32{{subject: "x"}: 3, {subject: "y"}: 1}
	s.free = []int32{0, 2}
	s.rebuild()
	if len(s.full) != 2 || s.free != nil || s.peak != 2 {
		t.Fatalf("after rebuild: slab %v, free %v, peak %d", s.full, s.free, s.peak)
	}
	if s.full[s.index[bucketKey{subject: "x"}]] != 13 || s.full[s.index[bucketKey{subject: "y"}]] != 11 {
		t.Fatalf("rebuild lost values: index %v slab %v", s.index, s.full)
	}
}

// totalFree counts the slots released by Sweep and not yet reused.
func totalFree(l *Limiter) int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.free)
		s.mu.Unlock()
	}
	return n
}

func TestConcurrentAllowNeverOvergrants(t *testing.T) {
	cases := []struct {
		name     Name
		live     bool
		subjects int
		want     int // tokens per subject
	}{
		{Spends, false, 1, 25},
		{Spends, true, 1, 15},
		{Key, false, 1, 150},
		{SpendsDaily, true, 3, 200},
		{InvalidKey, true, 97, 30},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s/%d", tc.name, envName(tc.live), tc.subjects), func(t *testing.T) {
			clock := newFakeClock()
			l := New(DefaultTable(), clock)
			const goroutines = 64
			const perGoroutine = 200
			granted := make([]atomic.Int64, tc.subjects)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < perGoroutine; i++ {
						s := (g + i) % tc.subjects
						if l.Allow(tc.name, tc.live, fmt.Sprint("s", s)).Allowed {
							granted[s].Add(1)
						}
						if i%50 == 0 {
							l.Len()
							l.Sweep() // nothing is full: must change nothing
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			for s := range granted {
				if got := granted[s].Load(); got != int64(tc.want) {
					t.Errorf("subject %d: granted %d at one instant, want exactly %d", s, got, tc.want)
				}
			}
		})
	}
}

func TestConcurrentWithMovingClock(t *testing.T) {
	// Live spends: 15 at once, then one every 6 s. While the fake clock
	// moves 60 s, at most 15 + 10 tokens can be granted, however the calls
	// interleave with the clock.
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if l.Allow(Spends, true, "agt").Allowed {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 600; i++ {
			clock.Advance(100 * time.Millisecond)
			runtime.Gosched()
		}
	}()
	wg.Wait()
	if got := granted.Load(); got > 25 {
		t.Fatalf("granted %d while the clock moved 60s, want at most 25", got)
	}
}
