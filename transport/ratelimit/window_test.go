package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// The limits with burst 0 are windows: Rate requests, then nothing until
// they leave the window, which happens when the slot they were counted in
// does (a Window and one slot after the slot began).
func TestDefaultWindowLimitsExhaustAndRecover(t *testing.T) {
	for _, tc := range []struct {
		name   Name
		live   bool
		rate   int
		window time.Duration
		slot   time.Duration
	}{
		{SpendsDaily, false, 1000, 24 * time.Hour, 15 * time.Minute},
		{SpendsDaily, true, 200, 24 * time.Hour, 15 * time.Minute},
		{KeyChanges, false, 50, 24 * time.Hour, 15 * time.Minute},
		{KeyChanges, true, 10, 24 * time.Hour, 15 * time.Minute},
		{InvalidKey, false, 30, 10 * time.Minute, time.Minute},
		{InvalidKey, true, 30, 10 * time.Minute, time.Minute},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.name, envName(tc.live)), func(t *testing.T) {
			clock := newFakeClock()
			l := New(DefaultTable(), clock)
			leaves := tc.window + tc.slot // a use at the start of a slot leaves the window then

			// Half at once, the other half in the slot after the
			// limiter's first.
			for k := 1; k <= tc.rate; k++ {
				if k == tc.rate/2+1 {
					clock.Advance(tc.slot)
				}
				d := l.Allow(tc.name, tc.live, "subj")
				if !d.Allowed || d.Limit != tc.rate || d.Remaining != tc.rate-k || d.RetryAfter != 0 {
					t.Fatalf("request %d of %d: %+v, want allowed with Limit %d and Remaining %d", k, tc.rate, d, tc.rate, tc.rate-k)
				}
			}
			// Empty once the second half has left: a window after it.
			if d := l.Allow(tc.name, tc.live, "subj"); d.Allowed || d.Remaining != 0 ||
				d.RetryAfter != leaves-tc.slot || d.Reset != leaves {
				t.Fatalf("request %d: %+v, want refused, RetryAfter %v (the first half leaves), Reset %v",
					tc.rate+1, d, leaves-tc.slot, leaves)
			}
			// Nothing comes back bit by bit, as a bucket's tokens would.
			clock.Advance(tc.window / 2)
			d := l.Allow(tc.name, tc.live, "subj")
			if d.Allowed || d.RetryAfter != leaves-tc.slot-tc.window/2 {
				t.Fatalf("half a window later: %+v, want refused for %v more", d, leaves-tc.slot-tc.window/2)
			}
			clock.Advance(d.RetryAfter - time.Nanosecond)
			if d := l.Allow(tc.name, tc.live, "subj"); d.Allowed || d.RetryAfter != time.Nanosecond {
				t.Fatalf("1ns before the first half leaves: %+v, want refused for 1ns", d)
			}
			clock.Advance(time.Nanosecond)
			if got := exhaust(t, l, tc.name, tc.live, "subj"); got != tc.rate/2 {
				t.Fatalf("once the first half has left: granted %d, want %d", got, tc.rate/2)
			}
		})
	}
}

// FuzzWindowMatchesModel drives a window with random pauses and checks
// each decision against the two promises of a window: it never allows a
// request that would make more than Rate in a span of Window, and it
// refuses only when the last Window and one slot hold Rate requests
// already. Remaining and Reset are checked against the allowed log.
func FuzzWindowMatchesModel(f *testing.F) {
	f.Add(uint8(5), uint16(60), []byte{0, 0, 0, 7, 200, 0, 0, 255, 3, 0, 0, 0, 0})
	f.Add(uint8(200), uint16(1440), []byte{0, 0, 0, 0, 1, 1, 1, 250})
	f.Add(uint8(1), uint16(1), []byte{1, 2, 3, 255, 0})
	f.Fuzz(func(t *testing.T, rate8 uint8, minutes uint16, steps []byte) {
		rate := int(rate8%200) + 1
		window := time.Duration(int64(minutes)%2880+1) * time.Minute
		slot, _ := windowSlots(window)

		tab := DefaultTable()
		tab.Live[SpendsDaily] = Limit{Rate: rate, Window: window}
		clock := newFakeClock()
		l := New(tab, clock)

		var now time.Duration
		var allowed []time.Duration
		count := func(span time.Duration) int {
			n := 0
			for _, at := range allowed {
				if at > now-span {
					n++
				}
			}
			return n
		}
		for i, s := range steps {
			// A step advances the clock by s/64 of a slot (0 mostly
			// means several at one instant); 255 is a long pause.
			adv := time.Duration(int64(slot) * int64(s) / 64)
			if s == 255 {
				adv = 2 * window
			}
			clock.Advance(adv)
			now += adv

			d := l.Allow(SpendsDaily, true, "agt")
			if d.Allowed {
				allowed = append(allowed, now)
				if n := count(window); n > rate {
					t.Fatalf("step %d: allowed the %dth request within %v, over the rate %d", i, n, window, rate)
				}
			} else if n := count(window + time.Duration(slot)); n < rate {
				t.Fatalf("step %d: refused with %d requests in the last %v, under the rate %d", i, n, window+time.Duration(slot), rate)
			} else if d.RetryAfter <= 0 || d.RetryAfter > window+time.Duration(slot) {
				t.Fatalf("step %d: refused with RetryAfter %v", i, d.RetryAfter)
			}
			if d.Limit != rate || d.Remaining < 0 || d.Remaining > rate-count(window) {
				t.Fatalf("step %d: %+v, with %d allowed in the window", i, d, count(window))
			}
			if len(allowed) > 0 && count(window+time.Duration(slot)) > 0 &&
				(d.Reset <= 0 || d.Reset > window+time.Duration(slot)) {
				t.Fatalf("step %d: Reset %v with requests in the window", i, d.Reset)
			}
		}
	})
}
