package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"
)

// CapacityReport is the search that follows the spends phase when
// Config.CapacityP99 is set: the highest paced rate of spends whose p99
// stays within a bound. The unpaced spends phase says what the service
// does flat out, but its latencies are mostly queueing behind the other
// connections and say nothing of a rate an operator would run at; paced
// (open-loop) phases at rates bisected below it find where the latency
// bound still holds.
type CapacityReport struct {
	// P99Within is the bound, in milliseconds.
	P99Within float64 `json:"p99_within_ms"`
	// Unpaced is the settled spends/s of the unpaced spends phase: the
	// top of the search.
	Unpaced float64 `json:"unpaced_settled_per_second"`
	// Rate is the highest offered rate that kept the bound, 0 when none
	// did. When the unpaced phase kept it, Rate is Unpaced and no step
	// ran.
	Rate float64 `json:"rate"`
	// Above is the lowest offered rate that did not keep it, 0 when every
	// step did (then the unpaced phase is the one that did not): the
	// capacity lies between Rate and Above.
	Above float64 `json:"above,omitempty"`
	// Steps are the paced phases, in the order they ran.
	Steps []CapacityStep `json:"steps"`
	// Interrupted says an interrupt cut the search short: Rate and Above
	// are what the steps before it found.
	Interrupted bool `json:"interrupted,omitempty"`
}

// CapacityStep is one paced spends phase of the search.
type CapacityStep struct {
	Offered       float64       `json:"offered_per_second"`
	Settled       float64       `json:"settled_per_second"`
	Latency       LatencyReport `json:"latency"`
	CPUPerRequest float64       `json:"process_cpu_us_per_request,omitempty"`
	Within        bool          `json:"within"`
	// Why says why a step did not keep the bound.
	Why string `json:"why,omitempty"`
}

// keepPace is the share of the offered rate a step must settle in its
// window: one that settles less fell behind its pace, and its latencies
// leave out the requests it never got to.
const keepPace = 0.95

// judgeStep decides whether a paced phase kept the bound.
func judgeStep(p PhaseReport, bound time.Duration) CapacityStep {
	s := CapacityStep{Offered: p.OfferedPerSecond, Settled: p.SettledPerSecond, Latency: p.Latency, CPUPerRequest: p.CPUPerRequest}
	switch {
	case p.Latency.P99 > ms(bound):
		s.Why = fmt.Sprintf("p99 %.2f ms is over %s", p.Latency.P99, bound)
	case p.OldestUnanswered > ms(bound):
		s.Why = fmt.Sprintf("a request still unanswered as the window closed had waited %.2f ms, over %s", p.OldestUnanswered, bound)
	case p.SettledPerSecond < keepPace*p.OfferedPerSecond:
		s.Why = fmt.Sprintf("it settled %.0f/s of the %.0f/s offered: it fell behind the pace", p.SettledPerSecond, p.OfferedPerSecond)
	default:
		s.Within = true
	}
	return s
}

// bisect searches (0, top) for the highest rate that measure finds
// within the bound, in at most steps measurements: each halves the range
// between the highest rate found within (lo, 0 at first) and the lowest
// found over (hi, top at first). Rates are whole requests per second; the
// search ends early when the next one would be below lowest or no longer
// inside the range. An error from measure ends it with what was found so
// far.
func bisect(top float64, steps int, lowest float64, measure func(rate float64) (CapacityStep, error)) (lo, hi float64, done []CapacityStep, err error) {
	lo, hi = 0, top
	done = []CapacityStep{}
	for range steps {
		rate := math.Round((lo + hi) / 2)
		if rate < lowest || rate <= lo || rate >= hi {
			break
		}
		s, err := measure(rate)
		if err != nil {
			return lo, hi, done, err
		}
		done = append(done, s)
		if s.Within {
			lo = rate
		} else {
			hi = rate
		}
	}
	return lo, hi, done, nil
}

// lowestPace is the lowest rate a step may offer over conns connections:
// Validate's bound of one request a minute on each.
func lowestPace(conns int) float64 { return float64(conns) / 60 }

// searchCapacity runs the capacity search after the spends phase (spends,
// already run): paced spends phases, each with the run's warm-up and
// duration and keys of its own, at rates bisected below the unpaced one.
// A step whose server failed, or whose spends were mostly declined, ends
// the search with an error: its latencies measure no working payment.
func (r *runner) searchCapacity(ctx context.Context, spends step) error {
	cfg, bound := r.cfg, r.cfg.CapacityP99
	c := &CapacityReport{P99Within: ms(bound), Unpaced: r.rep.Spends.SettledPerSecond, Steps: []CapacityStep{}}
	r.rep.Capacity = c
	if r.rep.Spends.Latency.P99 <= ms(bound) {
		c.Rate = c.Unpaced
		r.progress("capacity: the unpaced spends kept p99 within %s at %.0f/s; no paced step is needed", bound, c.Unpaced)
		return nil
	}
	n := 0
	lo, hi, steps, err := bisect(c.Unpaced, cfg.CapacitySteps, lowestPace(cfg.Conns), func(rate float64) (CapacityStep, error) {
		n++
		sc := cfg
		sc.Rate, sc.CPUProfile, sc.Trace = rate, nil, nil
		if err := r.quiesce(ctx); err != nil {
			return CapacityStep{}, err
		}
		r.progress("capacity step %d of at most %d: spends paced at %.0f/s, p99 to stay within %s", n, cfg.CapacitySteps, rate, bound)
		var out PhaseReport
		st := step{ph: spends.ph, out: &out, seed: spends.seed + uint64(n)*capacitySeedStride}
		if err := r.runStep(ctx, st, sc, fmt.Sprintf("%s-c%d", r.run, n)); err != nil {
			return CapacityStep{}, err
		}
		if out.Interrupted {
			return CapacityStep{}, ctx.Err()
		}
		if f := out.serverFailure(); f != "" {
			return CapacityStep{}, fmt.Errorf("capacity step at %.0f/s: %s: these figures do not measure a working server; see what it logged", rate, f)
		}
		if declined := out.Statuses["declined"]; declined*2 > out.Requests {
			return CapacityStep{}, fmt.Errorf("capacity step at %.0f/s: %d of the %d spends were declined (%s): the steps measure declines, not settled payments; give the load more room (pools, caps) or fewer -capacity-steps",
				rate, declined, out.Requests, counts(out.Declines))
		}
		s := judgeStep(out, bound)
		if s.Within {
			r.progress("capacity step %d: p99 %.2f ms at %.0f/s, within", n, s.Latency.P99, rate)
		} else {
			r.progress("capacity step %d: %s", n, s.Why)
		}
		return s, nil
	})
	c.Steps, c.Rate = steps, lo
	if hi < c.Unpaced {
		c.Above = hi
	}
	if err != nil && ctx.Err() != nil {
		c.Interrupted = true
	}
	return err
}

// maxCapacitySteps bounds Config.CapacitySteps: 20 halvings narrow the
// range to a millionth of the unpaced rate, far below the noise of a
// phase.
const maxCapacitySteps = 20

// quiesceLimit bounds how long a step waits for the journal to catch up.
const quiesceLimit = time.Minute

// quiesce waits, in-process, until the journal has folded every record
// the phases before left it (Stats.Pending back to zero), at most
// quiesceLimit: the unpaced phase leaves checkpoints behind, and a step
// begun under that backlog measured it (p99 161 ms at half the unpaced
// rate, against 25 ms when paced alone). Against a target the backlog
// cannot be seen; the warm-up is all there is.
func (r *runner) quiesce(ctx context.Context) error {
	if r.proc == nil {
		return nil
	}
	store := r.proc.svc.Store()
	began := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for store.Stats().Pending > 0 && time.Since(began) < quiesceLimit {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if waited := time.Since(began); waited >= 100*time.Millisecond {
		r.progress("capacity: waited %s for the journal to fold what the phase before left", waited.Round(10*time.Millisecond))
	}
	return nil
}

// capacitySeedStride keeps each step's seed apart from the phases' own
// (Seed, Seed+1, Seed+2).
const capacitySeedStride = 16

// writeCapacity prints the capacity search: its steps, and the rate found.
func writeCapacity(w io.Writer, c *CapacityReport, warmup, duration time.Duration) {
	if c == nil {
		return
	}
	bound := time.Duration(c.P99Within * float64(time.Millisecond))
	fmt.Fprintf(w, "Capacity at p99 within %s (paced spends, %s warm-up then %s each, bisecting below the unpaced %.0f/s)\n",
		bound, warmup, duration, c.Unpaced)
	if len(c.Steps) > 0 {
		fmt.Fprintf(w, "  %10s %10s %8s %8s %9s %8s\n", "offered/s", "settled/s", "p50 ms", "p99 ms", "p99.9 ms", "µs CPU")
		for _, s := range c.Steps {
			verdict := "within"
			if !s.Within {
				verdict = "over: " + s.Why
			}
			fmt.Fprintf(w, "  %10.0f %10.0f %8.2f %8.2f %9.2f %8.0f   %s\n",
				s.Offered, s.Settled, s.Latency.P50, s.Latency.P99, s.Latency.P999, s.CPUPerRequest, verdict)
		}
	}
	switch {
	case len(c.Steps) == 0 && c.Rate > 0:
		fmt.Fprintf(w, "  the unpaced spends kept p99 within %s: the capacity is at least %.0f spends/s\n", bound, c.Rate)
	case c.Rate == 0 && len(c.Steps) > 0:
		fmt.Fprintf(w, "  no rate tried kept p99 within %s; the lowest, %.0f/s, did not\n", bound, c.Above)
	case c.Rate == 0:
		fmt.Fprintf(w, "  no step ran\n")
	case c.Above == 0:
		fmt.Fprintf(w, "  => %.0f spends/s kept p99 within %s; the unpaced %.0f/s did not\n", c.Rate, bound, c.Unpaced)
	default:
		fmt.Fprintf(w, "  => %.0f spends/s kept p99 within %s; %.0f/s did not\n", c.Rate, bound, c.Above)
	}
	if c.Interrupted {
		fmt.Fprintf(w, "  (interrupted: the steps run before it)\n")
	}
	fmt.Fprintln(w)
}
