package bench

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBisectHalvesTheRangeTowardsTheCapacity: against a service that
// keeps the bound up to 3,000/s, six steps below an unpaced 8,000/s try
// the rates a bisection does, and end between 3,000 and 3,125.
func TestBisectHalvesTheRangeTowardsTheCapacity(t *testing.T) {
	var tried []float64
	lo, hi, steps, err := bisect(8000, 6, 1, func(rate float64) (CapacityStep, error) {
		tried = append(tried, rate)
		return CapacityStep{Offered: rate, Within: rate <= 3000}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{4000, 2000, 3000, 3500, 3250, 3125}; !slices.Equal(tried, want) {
		t.Errorf("rates tried %v, want %v", tried, want)
	}
	if lo != 3000 || hi != 3125 || len(steps) != 6 {
		t.Errorf("ended between %v and %v after %d steps, want 3000 and 3125 after 6", lo, hi, len(steps))
	}
}

// TestBisectStopsAtTheLowestPaceAndOnAnError: the search offers no rate
// below the lowest the connections can pace, and an error ends it with
// the steps measured before.
func TestBisectStopsAtTheLowestPaceAndOnAnError(t *testing.T) {
	var tried []float64
	lo, hi, steps, err := bisect(100, 6, 30, func(rate float64) (CapacityStep, error) {
		tried = append(tried, rate)
		return CapacityStep{Offered: rate}, nil
	})
	if err != nil || !slices.Equal(tried, []float64{50}) || lo != 0 || hi != 50 || len(steps) != 1 {
		t.Errorf("tried %v, ended between %v and %v with %d steps (%v); want only 50, then 25 refused as below 30", tried, lo, hi, len(steps), err)
	}

	boom := errors.New("server gone")
	n := 0
	lo, hi, steps, err = bisect(8000, 6, 1, func(rate float64) (CapacityStep, error) {
		if n++; n == 3 {
			return CapacityStep{}, boom
		}
		return CapacityStep{Offered: rate, Within: true}, nil
	})
	if !errors.Is(err, boom) || lo != 6000 || hi != 8000 || len(steps) != 2 {
		t.Errorf("error at the third step: ended between %v and %v with %d steps, err %v; want 6000, 8000, 2 steps and the error", lo, hi, len(steps), err)
	}
}

// TestJudgeStep: a step keeps the bound only with its p99 within it, no
// request left waiting longer, and the pace kept.
func TestJudgeStep(t *testing.T) {
	bound := 10 * time.Millisecond
	ok := PhaseReport{OfferedPerSecond: 1000, SettledPerSecond: 999, Latency: LatencyReport{P99: 9.5}}
	slow := ok
	slow.Latency.P99 = 10.5
	stuck := ok
	stuck.OldestUnanswered = 40
	behind := ok
	behind.SettledPerSecond = 900
	for _, c := range []struct {
		name string
		p    PhaseReport
		why  string
	}{
		{"within", ok, ""},
		{"p99 over", slow, "p99 10.50 ms is over 10ms"},
		{"left waiting", stuck, "had waited 40.00 ms, over 10ms"},
		{"behind the pace", behind, "settled 900/s of the 1000/s offered"},
	} {
		s := judgeStep(c.p, bound)
		if s.Within != (c.why == "") || !strings.Contains(s.Why, c.why) || s.Offered != 1000 {
			t.Errorf("%s: %+v, want within=%v and a reason naming %q", c.name, s, c.why == "", c.why)
		}
	}
}

// TestCapacitySearchInProcess runs the search for real. A bound no
// latency can keep makes every step slower than its pace's bound: the
// steps halve the rate each time, report why, and find no capacity. A
// bound every latency keeps needs no step at all.
func TestCapacitySearchInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Agents: 5, Conns: 4, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond,
		IdleTimeout: time.Minute, Seed: 3, Phases: []string{"spends"}, CapacityP99: time.Nanosecond, CapacitySteps: 2}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Capacity
	if c == nil || c.Unpaced != rep.Spends.SettledPerSecond || c.Unpaced <= 0 {
		t.Fatalf("capacity %+v after spends at %.0f/s", c, rep.Spends.SettledPerSecond)
	}
	if len(c.Steps) != 2 || c.Rate != 0 {
		t.Fatalf("%d steps, capacity %v; want 2 steps over the bound and none found: %+v", len(c.Steps), c.Rate, c.Steps)
	}
	first, second := c.Steps[0], c.Steps[1]
	if first.Offered != roundRate(c.Unpaced/2) || second.Offered != roundRate(first.Offered/2) || c.Above != second.Offered {
		t.Errorf("offered %v then %v, above %v; want half the unpaced %v, then half that, and above the last", first.Offered, second.Offered, c.Above, c.Unpaced)
	}
	for _, s := range c.Steps {
		if s.Within || !strings.Contains(s.Why, "is over 1ns") || s.Settled <= 0 {
			t.Errorf("step %+v: want one that settled spends and is over the 1ns bound", s)
		}
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, want := range []string{"Capacity at p99 within 1ns", "offered/s", "no rate tried kept p99 within 1ns"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}

	cfg.CapacityP99 = time.Hour
	rep, err = Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Capacity; c == nil || len(c.Steps) != 0 || c.Rate != rep.Spends.SettledPerSecond {
		t.Errorf("capacity within an hour: %+v; want the unpaced rate and no step", c)
	}
}

func roundRate(r float64) float64 { return float64(int64(r + 0.5)) }
