package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/histogram"
	"github.com/agentpay/guard/persistence"
)

// Run sets up the agents, drives the three phases (spends, balance,
// check) one after the other, and, in-process, measures what an idle
// activated agent costs. It returns when the run is done or ctx ends; an
// in-process service is always stopped and its data removed.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, "guard-bench: "+format+"\n", args...)
	}
	rep = &Report{Mode: "in-process", GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Conns: cfg.Conns, Duration: Duration(cfg.Duration), Warmup: Duration(cfg.Warmup), Rate: cfg.Rate,
		JournalDir: cfg.JournalDir}

	var proc *inProcess
	addr := ""
	if cfg.Target == "" {
		if proc, err = startInProcess(cfg); err != nil {
			return nil, fmt.Errorf("starting the service: %w", err)
		}
		defer func() {
			if cerr := proc.close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("stopping the service: %w", cerr))
			}
		}()
		addr = proc.addr
		rep.GOMAXPROCS = runtime.GOMAXPROCS(0) // the service sets its own
		rep.Notes = append(rep.Notes, "the load generator shares this process and its cores with the service it measures")
	} else {
		rep.Mode, rep.Target = "target", cfg.Target
		addr = cfg.targetAddr()
	}
	client := newClient(addr, cfg.Conns)
	defer client.CloseIdleConnections()

	var agents []agentCred
	if proc != nil {
		agents, err = setupInProcess(ctx, proc, client, cfg.Agents)
		if err == nil {
			progress("%d agents ready on %s", len(agents), addr)
		}
	} else {
		keys := cfg.ownerKeys()
		var tgt *targetSetup
		tgt, err = setupTarget(ctx, client, keys, cfg.Agents, progress)
		// Deferred before any return, so that the keys the run made are
		// revoked however it ends (an error, or Ctrl-C: ctx ended).
		defer func() {
			if rerr := tgt.revokeKeys(ctx); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}()
		if err == nil {
			agents = tgt.agents
			rep.TargetAgents = &TargetAgents{Reused: tgt.reused, Created: tgt.created}
			progress("%d agents ready on %s: %d reused from earlier runs, %d new", len(agents), addr, tgt.reused, tgt.created)
			if len(agents) < cfg.Agents {
				rep.Notes = append(rep.Notes, fmt.Sprintf(
					"the %d owner(s) could reuse or create only %d of the %d agents asked for (each may keep %d active practice agents; give more owner keys, separated by commas)%s",
					len(keys), len(agents), cfg.Agents, actors.MaxActiveAgentsPractice, tgt.pausedHint()))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	rep.Agents = len(agents)

	run := runID()
	// Each phase keeps its seed whichever others run.
	type step struct {
		ph   phase
		out  *PhaseReport
		seed uint64
	}
	phases := slices.DeleteFunc([]step{{spendsPhase(), &rep.Spends, cfg.Seed}, {balancePhase(), &rep.Balance, cfg.Seed + 1},
		{checkPhase(), &rep.Check, cfg.Seed + 2}}, func(p step) bool { return !cfg.runs(p.ph.name) })
	// The read phases that run, bracketed by the ceiling.
	reads := slices.DeleteFunc(slices.Clone(phases), func(p step) bool { return p.ph.name == "spends" })

	var (
		ceiling *ceilingServer
		cslices []PhaseReport
	)
	if cfg.CeilingDuration > 0 && len(reads) > 0 {
		if ceiling, err = startCeiling(); err != nil {
			return rep, err
		}
		defer func() {
			if cerr := ceiling.stop(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
	}
	// slice measures the ceiling once, before, between and after the
	// read phases.
	slice := func(when string) {
		if ceiling == nil || ctx.Err() != nil {
			return
		}
		progress("ceiling %s: a handler that does nothing, %s measured on %d connections", when, cfg.CeilingDuration, cfg.Conns)
		cslices = append(cslices, ceiling.measure(ctx, cfg, agents, "ceiling "+when))
	}

	done := 0 // read phases run so far
	for _, p := range phases {
		if p.ph.name != "spends" {
			if done == 0 {
				slice("before " + p.ph.name)
			} else {
				slice("between " + reads[done-1].ph.name + " and " + p.ph.name)
			}
			done++
		}
		progress("%s: %s warm-up, then %s measured on %d connections", p.ph.name, cfg.Warmup, cfg.Duration, cfg.Conns)
		profiling := p.ph.name == cfg.ProfilePhase && cfg.CPUProfile != nil
		if profiling {
			if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
				return nil, fmt.Errorf("starting the CPU profile: %w", err)
			}
		}
		tracing := p.ph.name == cfg.ProfilePhase && cfg.Trace != nil
		if tracing {
			if err := trace.Start(cfg.Trace); err != nil {
				return nil, fmt.Errorf("starting the execution trace: %w", err)
			}
		}
		var (
			stats   [2]persistence.Stats
			commits [2]*histogram.Histogram
			cpu     cpuWindow
		)
		mark := func(open bool) {
			cpu.mark(open)
			i := 1
			if open {
				i = 0
			}
			if proc != nil {
				stats[i] = proc.svc.Store().Stats()
				commits[i] = proc.svc.Store().CommitDurations()
			}
		}
		*p.out = runPhase(ctx, addr, cfg, run, agents, p.ph, p.seed, mark)
		cpu.fill(p.out)
		if proc != nil && stats[1].Commits > 0 {
			p.out.Journal = journalOf(stats[0], stats[1], commits[1].Since(commits[0]), p.out.Seconds)
		}
		if profiling {
			pprof.StopCPUProfile()
		}
		if tracing {
			trace.Stop()
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	if len(reads) > 0 {
		slice("after " + reads[len(reads)-1].ph.name)
	}
	if ceiling != nil {
		var ran []PhaseReport
		for _, p := range reads {
			ran = append(ran, *p.out)
		}
		rep.Ceiling = newCeilingReport(cslices, ran...)
	}
	if len(rep.Spends.Declines) > 0 && proc == nil {
		rep.Notes = append(rep.Notes, "declined spends are the running server's limits (pool, caps) at work; they skew the numbers")
	}

	if proc != nil && cfg.IdleAgents > 0 {
		client.CloseIdleConnections()
		progress("memory: activating %d idle agents (idle timeout %s)", cfg.IdleAgents, cfg.IdleTimeout)
		m, err := measureIdleAgents(ctx, proc, cfg.IdleAgents, cfg.IdleTimeout, progress)
		if err != nil {
			return rep, fmt.Errorf("measuring idle agents: %w", err)
		}
		rep.Memory = &m
	} else if proc == nil {
		rep.Notes = append(rep.Notes, "memory per idle agent is measured in-process only")
	}
	return rep, nil
}

// journalOf is the journal's work between the store's counters a and b,
// with the durations of the group commits that window made.
func journalOf(a, b persistence.Stats, commits *histogram.Histogram, secs float64) *JournalReport {
	j := &JournalReport{Commits: b.Commits - a.Commits, Records: b.Records - a.Records,
		Checkpoints: b.Checkpoints - a.Checkpoints, Failures: b.Failures - a.Failures, MaxBatch: b.MaxBatch,
		CommitTime: latencyOf(commits)}
	if secs > 0 {
		j.CommitsPerSecond = float64(j.Commits) / secs
		j.CommitBusy = commits.Sum().Seconds() / secs
	}
	if j.Commits > 0 {
		j.RecordsPerCommit = float64(j.Records) / float64(j.Commits)
	}
	return j
}

// runID keeps the Idempotency-Keys of this run apart from any other run's
// against the same server.
func runID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprint(time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}
