package ratelimit

import (
	"errors"
	"testing"
	"time"
)

// A restarted limiter remembers the day's spends: the live daily limit
// (200 in any day) starts from the uses the history finds in its window.
func TestRecallStartsFromTheHistory(t *testing.T) {
	clock := newFakeClock()
	l := New(DefaultTable(), clock)
	calls := map[string]int{}
	l.Recall(func(name Name, live bool, subject string, within time.Duration) ([]time.Duration, error) {
		calls[subject]++
		// The day and the quarter hour it begins in.
		if name != SpendsDaily || within != 24*time.Hour+15*time.Minute {
			t.Errorf("history asked for %s within %v, want spends_daily within 24h15m", name, within)
		}
		var ages []time.Duration
		switch subject {
		case "busy": // 150 spends in the last hour, and 500 three days ago
			for i := range 150 {
				ages = append(ages, time.Duration(i)*20*time.Second)
			}
			for range 500 {
				ages = append(ages, 72*time.Hour)
			}
		case "spent": // 200 spends a minute ago
			for range 200 {
				ages = append(ages, time.Minute)
			}
		case "broken":
			return nil, errors.New("store unreadable")
		}
		return ages, nil
	}, SpendsDaily)

	// 150 uses within the last 50 minutes: 50 left, and nothing comes
	// back within the day.
	if got := exhaust(t, l, SpendsDaily, true, "busy"); got != 50 {
		t.Errorf("busy: granted %d, want 50", got)
	}
	// A day's allowance used a minute ago: nothing until those uses leave
	// the window. They are in the quarter hour before the clock's, which
	// leaves it 24 h from now (a minute later than an exact count would).
	d := l.Allow(SpendsDaily, true, "spent")
	if d.Allowed || d.RetryAfter != 24*time.Hour {
		t.Errorf("spent: %+v, want a refusal with RetryAfter 24h", d)
	}
	// No history, or none readable: a full bucket.
	if got := exhaust(t, l, SpendsDaily, true, "new"); got != 200 {
		t.Errorf("new: granted %d, want 200", got)
	}
	if got := exhaust(t, l, SpendsDaily, true, "broken"); got != 200 {
		t.Errorf("broken history: granted %d, want 200", got)
	}
	// The history is read once per bucket, and never for other limits.
	l.Allow(Spends, true, "busy")
	for subject, n := range calls {
		if n != 1 {
			t.Errorf("history of %s read %d times, want once", subject, n)
		}
	}
}

func TestDebtAfter(t *testing.T) {
	// 4 per hour, no burst: a token every 15 minutes, 1 h when empty.
	p := toParams(Limit{Rate: 4, Window: time.Hour})
	mins := func(m int) time.Duration { return time.Duration(m) * time.Minute }
	for _, c := range []struct {
		name string
		ages []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"one just now", []time.Duration{0}, mins(15)},
		{"one 10 minutes ago", []time.Duration{mins(10)}, mins(5)},
		{"one 20 minutes ago", []time.Duration{mins(20)}, 0},
		{"in any order", []time.Duration{mins(1), mins(3), mins(2)}, mins(42)},
		{"never below empty", []time.Duration{0, 0, 0, 0, 0, 0, 0}, mins(60)},
		{"a full day of uses has refilled", []time.Duration{mins(200), mins(200), mins(200), mins(200)}, 0},
		// Emptied 70 minutes ago and used again (still empty, so the
		// use is capped) 60 minutes ago: full again now.
		{"emptied before the window", []time.Duration{mins(70), mins(70), mins(70), mins(70), mins(60)}, mins(0)},
		{"the future counts as now", []time.Duration{-mins(5)}, mins(15)},
		{"beyond two windows is forgotten", []time.Duration{mins(121)}, 0},
	} {
		if got := time.Duration(debtAfter(&p, c.ages)); got != c.want {
			t.Errorf("%s: debt %v, want %v", c.name, got, c.want)
		}
	}
}
