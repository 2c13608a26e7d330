package ratelimit

import (
	"testing"
	"time"
)

// model is a plain token bucket, the definition the limiter must match:
// level counts tokens in units of 1/window, refills by rate units per
// nanosecond, holds at most (rate+burst)*window units.
type model struct {
	rate, burst, window int64
	level               int64
	last                int64
}

func (m *model) allow(now int64) (allowed bool, remaining int64, retry int64) {
	m.level = min(m.level+(now-m.last)*m.rate, (m.rate+m.burst)*m.window)
	m.last = now
	if m.level >= m.window {
		m.level -= m.window
		return true, m.level / m.window, 0
	}
	return false, 0, (m.window - m.level + m.rate - 1) / m.rate
}

// FuzzAllowMatchesModel drives one bucket with random pauses and checks
// every decision against the model. Windows are whole multiples of the
// rate, so the model and the limiter's integer interval agree exactly.
func FuzzAllowMatchesModel(f *testing.F) {
	f.Add(uint8(10), uint8(5), uint16(60), []byte{0, 0, 0, 7, 200, 0, 0, 255, 3})
	f.Add(uint8(200), uint8(0), uint16(86400/100), []byte{0, 0, 0, 0, 1, 1, 1, 250})
	f.Add(uint8(1), uint8(0), uint16(1), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, rate8, burst8 uint8, perToken uint16, steps []byte) {
		rate := int64(rate8%200) + 1
		burst := int64(burst8%50) + 1 // burst 0 is a window (FuzzWindowMatchesModel)
		interval := (int64(perToken)%1000 + 1) * int64(time.Millisecond)
		window := interval * rate

		tab := DefaultTable()
		tab.Live[Check] = Limit{Rate: int(rate), Window: time.Duration(window), Burst: int(burst)}
		clock := newFakeClock()
		l := New(tab, clock)
		m := &model{rate: rate, burst: burst, window: window, level: (rate + burst) * window}

		var now int64
		for i, s := range steps {
			// A step advances the clock by s/16 of an interval (0 mostly
			// means a burst at one instant), then asks once.
			adv := interval * int64(s) / 16
			if s == 255 {
				adv = window * 3 // a long pause
			}
			clock.Advance(time.Duration(adv))
			now += adv

			d := l.Allow(Check, true, "agt")
			ok, rem, retry := m.allow(now)
			if d.Allowed != ok || int64(d.Remaining) != rem || int64(d.RetryAfter) != retry {
				t.Fatalf("step %d (+%v): limiter %+v, model allowed=%v remaining=%d retry=%v",
					i, time.Duration(adv), d, ok, rem, time.Duration(retry))
			}
			if d.Limit != int(rate+burst) {
				t.Fatalf("Limit = %d, want rate+burst %d", d.Limit, rate+burst)
			}
			// Reset: until the model is full again.
			full := (rate + burst) * window
			wantReset := (full - m.level + rate - 1) / rate
			if int64(d.Reset) != wantReset {
				t.Fatalf("step %d: Reset = %v, want %v", i, d.Reset, time.Duration(wantReset))
			}
		}
	})
}
