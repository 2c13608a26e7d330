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

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/histogram"
	"github.com/agentpay/guard/persistence"
)

// Run sets up the agents, drives the three phases (spends, balance,
// check) one after the other, and, in-process, measures what an idle
// activated agent costs. It returns when the run is done or ctx ends; an
// in-process service is always stopped and its data removed, and a
// target's keys made by the run revoked.
//
// The report comes back with the error whenever it holds something: a
// run whose figures do not measure a working service (server errors, a
// server that stopped answering, 429s, declines; Report.Failures), and an
// interrupted one (Report.Interrupted, the error is ctx's).
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defer func() { err = withOpenFilesHint(err, cfg.Conns) }()
	r := &runner{cfg: cfg, rep: newReport(cfg), run: runID()}
	r.progress = func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, "guard-bench: "+format+"\n", args...)
	}
	rep = r.rep
	if cfg.Target == "" {
		if r.proc, err = startInProcess(cfg); err != nil {
			return nil, fmt.Errorf("starting the service: %w", err)
		}
		defer func() {
			if cerr := r.proc.close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("stopping the service: %w", cerr))
			}
		}()
		r.addr = r.proc.addr
		rep.GOMAXPROCS = runtime.GOMAXPROCS(0) // the service sets its own
		rep.Notes = append(rep.Notes, "the load generator shares this process and its cores with the service it measures")
	} else {
		rep.Mode, rep.Target = "target", cfg.Target
		r.addr = cfg.targetAddr()
	}
	r.client = newClient(r.addr, cfg.Conns)
	defer r.client.CloseIdleConnections()

	if r.proc != nil {
		err = r.setupInProcess(ctx)
	} else {
		err = r.setupTarget(ctx)
		// Deferred before any return, so that the keys the run made are
		// revoked however it ends (an error, or Ctrl-C: ctx ended).
		defer func() { err = errors.Join(err, r.finishTarget(ctx)) }()
	}
	if err != nil {
		if ctx.Err() != nil {
			rep.Interrupted, rep.NotRun = true, r.asked()
			return rep, err
		}
		return nil, err
	}
	rep.Agents = len(r.agents)
	if err := r.runPhases(ctx); err != nil {
		return rep, errors.Join(rep.judge(), err)
	}
	if r.proc != nil && cfg.IdleAgents > 0 {
		r.client.CloseIdleConnections()
		r.progress("memory: activating %d idle agents (idle timeout %s)", cfg.IdleAgents, cfg.IdleTimeout)
		m, err := measureIdleAgents(ctx, r.proc, cfg.IdleAgents, cfg.IdleTimeout, r.progress)
		if err != nil {
			if ctx.Err() != nil {
				rep.Interrupted = true
			}
			return rep, fmt.Errorf("measuring idle agents: %w", err)
		}
		rep.Memory = &m
	} else if r.proc == nil {
		rep.Notes = append(rep.Notes, "memory per idle agent is measured in-process only")
	}
	return rep, rep.judge()
}

// runner is one run under way.
type runner struct {
	cfg      Config
	run      string // keeps this run's Idempotency-Keys apart
	rep      *Report
	progress func(format string, args ...any)
	proc     *inProcess // nil against a target
	tgt      *targetSetup
	addr     string
	client   *fasthttp.HostClient
	agents   []agentCred
	ceiling  *ceilingServer
	cslices  []PhaseReport // the ceiling's slices
	fslices  []PhaseReport // the spend floor's
}

// newReport is the report of a run before it has measured anything.
func newReport(cfg Config) *Report {
	return &Report{Mode: "in-process", GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumCPU: runtime.NumCPU(), Conns: cfg.Conns, Duration: Duration(cfg.Duration), Warmup: Duration(cfg.Warmup),
		Rate: cfg.Rate, JournalDir: cfg.JournalDir}
}

// asked are the names of the phases the run is to take, in their order.
func (r *runner) asked() []string {
	return slices.DeleteFunc(slices.Clone(phaseNames), func(n string) bool { return !r.cfg.runs(n) })
}

// setupInProcess makes the agents of an in-process run.
func (r *runner) setupInProcess(ctx context.Context) error {
	agents, err := setupInProcess(ctx, r.proc, r.client, r.cfg.Agents)
	if err != nil {
		return err
	}
	r.agents = agents
	r.progress("%d agents ready on %s", len(agents), r.addr)
	return nil
}

// setupTarget readies the agents of a run against a running server.
func (r *runner) setupTarget(ctx context.Context) error {
	keys := r.cfg.ownerKeys()
	tgt, err := setupTarget(ctx, r.client, keys, r.cfg.Agents, r.progress)
	r.tgt = tgt
	r.rep.TargetAgents = &TargetAgents{Reused: tgt.reused, Created: tgt.created}
	// So far, for the verdict on the run (the reserve floors); the run's
	// end completes it.
	r.rep.Changes = tgt.changes()
	if err != nil {
		return err
	}
	r.agents = tgt.agents
	r.progress("%d agents ready on %s: %d reused from earlier runs, %d new", len(r.agents), r.addr, tgt.reused, tgt.created)
	if len(r.agents) < r.cfg.Agents {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(
			"the %d owner(s) could reuse or create only %d of the %d agents asked for (each may keep %d active practice agents; give more owner keys, separated by commas)%s",
			len(keys), len(r.agents), r.cfg.Agents, actors.MaxActiveAgentsPractice, tgt.pausedHint()))
	}
	tgt.startPools(ctx)
	return nil
}

// finishTarget revokes the keys the run made, notes what the load spent,
// and puts what the run did to the target in the report. The revocation
// goes first: on a server that stopped answering, the time there is goes
// to it, and the pools are not read.
func (r *runner) finishTarget(ctx context.Context) error {
	if r.tgt == nil {
		return nil
	}
	err := r.tgt.revokeKeys(ctx)
	spent := ""
	if err == nil {
		spent = r.tgt.spent(ctx)
	}
	r.rep.Changes = r.tgt.changes()
	r.rep.Changes.Spent = spent
	return err
}

// step is one phase of the run, where its report goes, and its seed:
// each phase keeps its seed whichever others run.
type step struct {
	ph   phase
	out  *PhaseReport
	seed uint64
}

// runPhases runs the phases asked for, bracketing the reads with the
// ceiling. It stops early when ctx ends (the report is marked
// interrupted) or when the server stops answering (there is nothing left
// to measure); the phases left are listed as not run.
func (r *runner) runPhases(ctx context.Context) (err error) {
	rep, cfg := r.rep, r.cfg
	phases := slices.DeleteFunc([]step{{spendsPhase(), &rep.Spends, cfg.Seed}, {balancePhase(), &rep.Balance, cfg.Seed + 1},
		{checkPhase(), &rep.Check, cfg.Seed + 2}}, func(p step) bool { return !cfg.runs(p.ph.name) })
	// The read phases that run, bracketed by the ceiling.
	reads := slices.DeleteFunc(slices.Clone(phases), func(p step) bool { return p.ph.name == "spends" })
	if cfg.CeilingDuration > 0 && len(phases) > 0 {
		c, err := startCeiling()
		if err != nil {
			return err
		}
		r.ceiling = c
		defer func() { err = errors.Join(err, c.stop()) }()
	}
	done := 0 // read phases run so far
	for i, p := range phases {
		if p.ph.name != "spends" {
			if done == 0 {
				r.slice(ctx, "before "+p.ph.name)
			} else {
				r.slice(ctx, "between "+reads[done-1].ph.name+" and "+p.ph.name)
			}
			done++
		} else {
			r.floorSlice(ctx, "before spends")
		}
		if err := r.runStep(ctx, p, r.cfg, r.run); err != nil {
			return err
		}
		if p.out.Interrupted {
			rep.Interrupted = true
			if !p.out.measured() {
				*p.out = PhaseReport{}
				r.notRun(phases[i:])
			} else {
				r.notRun(phases[i+1:])
			}
			r.boundReports(reads)
			return ctx.Err()
		}
		if err := r.stillAnswers(ctx, *p.out); err != nil {
			r.notRun(phases[i+1:])
			r.boundReports(reads)
			return err
		}
		if p.ph.name == "spends" && cfg.CapacityP99 > 0 {
			if err := r.searchCapacity(ctx, p); err != nil {
				if ctx.Err() != nil {
					rep.Interrupted = true
				}
				r.notRun(phases[i+1:])
				r.boundReports(reads)
				return err
			}
		}
		if p.ph.name == "spends" {
			r.floorSlice(ctx, "after spends")
		}
	}
	if len(reads) > 0 {
		r.slice(ctx, "after "+reads[len(reads)-1].ph.name)
	}
	r.boundReports(reads)
	if len(rep.Spends.Declines) > 0 && r.proc == nil {
		rep.Notes = append(rep.Notes, "declined spends are the running server's limits (pool, caps) at work; they skew the numbers")
	}
	if err := ctx.Err(); err != nil { // interrupted in the last ceiling slice
		rep.Interrupted = true
		return err
	}
	return nil
}

// notRun lists phases the run stopped before.
func (r *runner) notRun(left []step) {
	for _, p := range left {
		r.rep.NotRun = append(r.rep.NotRun, p.ph.name)
	}
}

// boundReports puts the ceiling and the spend floor in the report.
func (r *runner) boundReports(reads []step) {
	r.ceilingReport(reads)
	r.floorReport()
}

// ceilingReport puts the ceiling's slices in the report, compared with
// the reads they bracket when every slice was measured.
func (r *runner) ceilingReport(reads []step) {
	if r.ceiling == nil || len(r.cslices) == 0 {
		return
	}
	var ran []PhaseReport
	for _, p := range reads {
		ran = append(ran, *p.out)
	}
	r.rep.Ceiling = newCeilingReport(ceilingIncomparable(r.cfg, "ceiling", "reads"), r.cslices, ran...)
}

// measured reports whether the phase's window opened: one interrupted in
// its warm-up measured nothing.
func (p PhaseReport) measured() bool { return !p.Interrupted || p.Seconds > 0 }

// stillAnswers checks, after a phase that failed on the server's side,
// that the server still answers at all; against one that does not, the
// later phases would only measure its absence.
func (r *runner) stillAnswers(ctx context.Context, p PhaseReport) error {
	if p.serverFailure() == "" {
		return nil
	}
	err := probe(ctx, r.addr)
	if err == nil {
		return nil
	}
	r.progress("the server at %s no longer answers after the %s phase: %v", r.addr, p.Name, err)
	return fmt.Errorf("the server at %s stopped answering (GET /healthz after the %s phase: %s), so the run stopped there", r.addr, p.Name, transportKind(err))
}

// slice measures the ceiling once, before, between or after the read
// phases.
func (r *runner) slice(ctx context.Context, when string) {
	if r.ceiling == nil || ctx.Err() != nil {
		return
	}
	r.progress("ceiling %s: a handler that does nothing, %s measured on %d connections", when, r.cfg.CeilingDuration, r.cfg.Conns)
	r.cslices = append(r.cslices, r.ceiling.measure(ctx, r.cfg, r.agents, "ceiling "+when))
}

// runStep runs one phase as cfg says (the run's settings, or a capacity
// step's pace), its requests keyed apart by run; profiled and traced when
// it is the profiled one, with the CPU and, in-process, the journal read
// at the window's ends.
func (r *runner) runStep(ctx context.Context, p step, cfg Config, run string) error {
	r.progress("%s: %s warm-up, then %s measured on %d connections", p.ph.name, cfg.Warmup, cfg.Duration, cfg.Conns)
	profiling := p.ph.name == cfg.ProfilePhase && cfg.CPUProfile != nil
	if profiling {
		if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
			return fmt.Errorf("starting the CPU profile (-cpuprofile): %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if p.ph.name == cfg.ProfilePhase && cfg.Trace != nil {
		if err := trace.Start(cfg.Trace); err != nil {
			return fmt.Errorf("starting the execution trace (-trace): %w", err)
		}
		defer trace.Stop()
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
		if r.proc != nil {
			stats[i] = r.proc.svc.Store().Stats()
			commits[i] = r.proc.svc.Store().CommitDurations()
		}
	}
	*p.out = runPhase(ctx, r.addr, cfg, run, r.agents, p.ph, p.seed, mark)
	cpu.fill(p.out)
	if r.proc != nil && stats[1].Commits > 0 {
		p.out.Journal = journalOf(stats[0], stats[1], commits[1].Since(commits[0]), p.out.Seconds)
	}
	return nil
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

// probeTimeout bounds the health check after a phase that failed: a
// server that cannot answer it in that time is taken as gone.
const probeTimeout = 2 * time.Second

// probe asks the server at addr for GET /healthz on a connection of its
// own; any answer, whatever its status, says the server still answers.
func probe(ctx context.Context, addr string) error {
	c := newLoadConn(addr, probeTimeout)
	defer c.close()
	defer context.AfterFunc(ctx, c.abort)()
	req := []byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: guard-bench\r\n\r\n")
	_, _, err := c.do(req, time.Now())
	return err
}
