package guardtest

import (
	"context"
	"sync"
	"time"

	"github.com/agentpay/guard/actors"
)

// FakeClock is an actors.Clock whose time moves only when Advance is
// called. It is safe for concurrent use.
type FakeClock struct {
	// advancing serializes Advance calls, so timers fire in one order.
	advancing sync.Mutex

	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  map[*fakeTimer]struct{}
	changed chan struct{} // closed and replaced whenever a timer is added
}

var _ actors.Clock = (*FakeClock)(nil)

// NewFakeClock returns a clock standing at start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start.UTC(), timers: make(map[*fakeTimer]struct{}), changed: make(chan struct{})}
}

// Now is the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run d after the current time. As with
// time.AfterFunc, a non-positive d runs f at once in its own goroutine.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) actors.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers[t] = struct{}{}
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

// Advance moves the clock forward by d and runs every timer that falls due
// on the way, earliest deadline first (ties in scheduling order). The clock
// reads each timer's deadline while its function runs. Each function runs
// in its own goroutine, like time.AfterFunc, and Advance waits for it to
// return before it looks for the next one, so a timer that a function
// schedules inside the span also fires in this Advance.
func (c *FakeClock) Advance(d time.Duration) {
	c.advancing.Lock()
	defer c.advancing.Unlock()
	c.mu.Lock()
	target := c.now.Add(d)
	for {
		t := c.nextDue(target)
		if t == nil {
			break
		}
		delete(c.timers, t)
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.f()
		}()
		<-done
		c.mu.Lock()
	}
	if target.After(c.now) {
		c.now = target
	}
	c.mu.Unlock()
}

// nextDue is the pending timer due first, not after target. Caller holds mu.
func (c *FakeClock) nextDue(target time.Time) *fakeTimer {
	var best *fakeTimer
	for t := range c.timers {
		if t.when.After(target) {
			continue
		}
		if best == nil || t.when.Before(best.when) || t.when.Equal(best.when) && t.seq < best.seq {
			best = t
		}
	}
	return best
}

// Pending is the number of timers scheduled and not yet fired or stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are pending, or ctx ends.
// Work the service hands to a goroutine (a verification scheduled after a
// delay, say) registers its timer a moment after the request that caused it
// returns; waiting here before Advance makes sure Advance releases it.
func (c *FakeClock) WaitForTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type fakeTimer struct {
	c    *FakeClock
	when time.Time
	seq  uint64
	f    func()
}

// Stop cancels the timer; it reports whether the timer was still pending.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if _, ok := t.c.timers[t]; !ok {
		return false
	}
	delete(t.c.timers, t)
	return true
}
