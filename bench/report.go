package bench

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/histogram"
)

// Report is the outcome of a run; its JSON form is the -json output.
type Report struct {
	Mode       string `json:"mode"` // "in-process" or "target"
	Target     string `json:"target"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// NumCPU is the machine's core count, the one behind "at most N/s"
	// (PhaseReport.CPUPerRequest).
	NumCPU   int      `json:"num_cpu"`
	Agents   int      `json:"agents"`
	Conns    int      `json:"conns"`
	Duration Duration `json:"duration"`
	Warmup   Duration `json:"warmup"`
	// TargetAgents says, against a target, how many of the agents an
	// earlier run made (nil in-process, where every agent is new).
	TargetAgents *TargetAgents `json:"target_agents,omitempty"`
	// Changes is what the run did to a target server (nil in-process,
	// where everything goes with the run).
	Changes *TargetChanges `json:"target_changes,omitempty"`
	// Rate is Config.Rate: 0 for a closed loop.
	Rate float64 `json:"rate,omitempty"`
	// JournalDir is Config.JournalDir: where the in-process service's
	// journal went, apart from its data ("" for beside it).
	JournalDir string `json:"journal_dir,omitempty"`
	// A phase left out of Config.Phases, or not run, is zero and left out
	// of the JSON.
	Spends  PhaseReport `json:"spends,omitzero"`
	Balance PhaseReport `json:"balance,omitzero"`
	Check   PhaseReport `json:"check,omitzero"`
	// Capacity is the search for the most spends/s within a p99
	// (Config.CapacityP99; nil when not asked for).
	Capacity *CapacityReport `json:"capacity,omitempty"`
	// Ceiling is the loopback ceiling: the read phases' load against a
	// handler that does nothing, around each read phase (nil when skipped).
	Ceiling *CeilingReport `json:"ceiling,omitempty"`
	// Floor is the spend floor: the spends phase's load against a handler
	// that only signs a receipt, before and after the spends (nil when
	// skipped).
	Floor  *FloorReport  `json:"spend_floor,omitempty"`
	Memory *MemoryReport `json:"memory,omitempty"`
	// Interrupted says the run was cut short (Ctrl-C): a phase cut in its
	// window says so and covers what was measured. NotRun lists the phases
	// asked for that measured nothing, because of an interrupt or a server
	// that stopped answering.
	Interrupted bool     `json:"interrupted"`
	NotRun      []string `json:"phases_not_run,omitempty"`
	// RateLimited, MostlyDeclined and ServerFailed say the figures do not
	// measure what they claim to (see Failures, the reasons): most answers
	// were 429, most spends were declined, or the server answered with
	// transport errors or 5xx, or stopped answering. Any of them fails
	// the run.
	RateLimited    bool     `json:"rate_limited"`
	MostlyDeclined bool     `json:"mostly_declined"`
	ServerFailed   bool     `json:"server_failed"`
	Failures       []string `json:"failures,omitempty"`
	// Notes say what the run could not measure, or what skews it.
	Notes []string `json:"notes,omitempty"`
}

// TargetChanges is what a run against a running server left there, or
// did and undid: money moved in the owners' practice pools, keys made and
// revoked. The agents are in TargetAgents.
type TargetChanges struct {
	// Deposited is the practice USDC deposited into the owners' pools to
	// fill them (a simulated deposit), "0.00" when they were full.
	Deposited string `json:"deposited"`
	// Spent is how much the owners' pools went down from the first phase
	// to the end of the run: the load's settled spends, warm-ups included.
	// Empty when the pools could not be read at the end (a server that
	// stopped answering, or kept the run's keys from being revoked).
	Spent string `json:"spent,omitempty"`
	// ReserveFloors are the owners' reserve_floor, in the order of their
	// keys, when any is above zero: that much of a pool is out of the
	// load's reach.
	ReserveFloors []string `json:"reserve_floors,omitempty"`
	// RulesRepublished counts the reused agents whose rules had changed
	// and were published again.
	RulesRepublished int `json:"rules_republished,omitempty"`
	// KeysMade are the agent keys this run made, KeysRevoked those of
	// them it revoked at its end, and KeysLeftActive those it could not
	// revoke (their ids). EarlierKeysRevoked are keys earlier runs left
	// active on the agents this one reused, revoked as it took them.
	KeysMade           int      `json:"keys_made"`
	KeysRevoked        int      `json:"keys_revoked"`
	KeysLeftActive     []string `json:"keys_left_active,omitempty"`
	EarlierKeysRevoked int      `json:"earlier_keys_revoked"`
}

// TargetAgents are the agents of a run against a target: those reused
// from earlier runs (found by their names) and those made by this one.
type TargetAgents struct {
	Reused  int `json:"reused"`
	Created int `json:"created"`
}

// Duration marshals as a Go duration string ("10s").
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// PhaseReport is one phase: a kind of request sent for the measured time.
type PhaseReport struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Requests were answered (any HTTP status) inside the window;
	// PerSecond is Requests / Seconds; OK counts the 2xx answers.
	Requests  int64   `json:"requests"`
	PerSecond float64 `json:"per_second"`
	OK        int64   `json:"ok"`
	// Statuses counts 2xx spend answers by the spend's status, and
	// Declines the declined ones by reason (spends phase only).
	Statuses         map[string]int64 `json:"statuses,omitempty"`
	Declines         map[string]int64 `json:"decline_reasons,omitempty"`
	SettledPerSecond float64          `json:"settled_per_second,omitempty"`
	// Errors counts non-2xx answers by "HTTP status + error code" and
	// failed requests by "transport: kind".
	Errors  map[string]int64 `json:"errors,omitempty"`
	Latency LatencyReport    `json:"latency"`
	// OfferedPerSecond is the pace of an open-loop run (Config.Rate);
	// NotSent counts the requests due in the window that were never sent
	// because the service fell behind that pace (their connection was
	// still waiting as the window closed).
	OfferedPerSecond float64 `json:"offered_per_second,omitempty"`
	NotSent          int64   `json:"not_sent,omitempty"`
	// Unanswered counts the requests still unanswered as the window
	// closed, abandoned there, and OldestUnanswered is how long the
	// oldest of them had waited by then: the latency a stall would have
	// added past the window, which the percentiles and the maximum,
	// answered requests only, cannot show.
	Unanswered       int64   `json:"unanswered_at_close,omitempty"`
	OldestUnanswered float64 `json:"oldest_unanswered_ms,omitempty"`
	// onWire is the longest any of them had waited since it was sent:
	// OldestUnanswered in a closed loop; in an open loop behind schedule,
	// less by the lag, which is the schedule's and not a stall.
	onWire time.Duration
	// Interrupted says the run was interrupted in this phase's window:
	// Seconds is what was measured before that.
	Interrupted bool `json:"interrupted,omitempty"`
	// Timeline is the answers per second in each tenth of the measured
	// window, by when they were answered (absent when the run was cut
	// short). A rate that falls from the first tenths to the last says
	// the service slows as it runs (its files grow, its memory fills):
	// a short run would hide it.
	Timeline []float64 `json:"per_second_by_tenth,omitempty"`
	// TimelineP99 is the 99th percentile latency, in milliseconds, of the
	// answers of each tenth (0 for a tenth without any). A tail made by a
	// few stalls shows as a few high tenths among low ones, a tail that
	// grows as the run goes as a rising line: the one p99 of the window
	// cannot tell them apart.
	TimelineP99 []float64 `json:"p99_ms_by_tenth,omitempty"`
	// ProcessCPU is the CPU this process used in the window, in percent
	// of one core (in-process: the service and the load generator; against
	// a target: the load generator alone). 0 when not measured.
	ProcessCPU float64 `json:"process_cpu_percent"`
	// MachineCPU is the CPU all processes of the machine used in the
	// window, in percent of one core (Linux only; 0 elsewhere). Well above
	// ProcessCPU means other work competed for the cores.
	MachineCPU float64 `json:"machine_cpu_percent"`
	// StealCPU is the time the hypervisor kept this virtual machine's
	// cores from running while they had work, in percent of one core
	// (Linux only). Cores lost to steal are cores the service did not
	// have: on a shared host it is one cause of a slow stretch.
	StealCPU float64 `json:"steal_cpu_percent"`
	// CPUPerRequest is this process's CPU time per answered request, in
	// microseconds (in-process: service and load generator together).
	// NumCPU seconds divided by it bound the requests per second this
	// machine can answer at that cost, however the work is scheduled.
	CPUPerRequest float64 `json:"process_cpu_us_per_request,omitempty"`
	// LoadAverage is the machine's 1-minute load average as the window
	// opened: other work on the machine skews every number.
	LoadAverage string `json:"load_average,omitempty"`
	// Journal is the store's work during the window (in-process only).
	Journal *JournalReport `json:"journal,omitempty"`
}

// JournalReport is what the journal did during a measured window.
type JournalReport struct {
	// Commits are group commits (each one bbolt transaction, fsynced);
	// Records the records they made durable.
	Commits          uint64  `json:"commits"`
	Records          uint64  `json:"records"`
	CommitsPerSecond float64 `json:"commits_per_second"`
	RecordsPerCommit float64 `json:"records_per_commit"`
	Checkpoints      uint64  `json:"checkpoints"`
	Failures         uint64  `json:"failures"`
	// MaxBatch is the largest group commit since the service started.
	MaxBatch int `json:"max_batch"`
	// CommitTime is the distribution of the window's group commits'
	// durations (a batch's write and fdatasync): how the disk answered
	// under this load. CommitBusy is their sum over the window's length,
	// the share of the window in which the journal was committing; near 1
	// the journal, one commit at a time, is what every spend waits for.
	CommitTime LatencyReport `json:"commit_time"`
	CommitBusy float64       `json:"commit_busy"`
}

// LatencyReport is the distribution of answered requests' latencies, in
// milliseconds. Percentiles are upper bounds of <1%-wide buckets.
type LatencyReport struct {
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latencyOf(h *histogram.Histogram) LatencyReport {
	return LatencyReport{Mean: ms(h.Mean()), P50: ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)),
		P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

// phases are the load's three phases, in the order they run.
func (r *Report) phases() []PhaseReport { return []PhaseReport{r.Spends, r.Balance, r.Check} }

// judge decides whether the figures measure what they claim to, sets
// RateLimited, MostlyDeclined, ServerFailed and Failures, and returns the
// reasons as one error (nil for a good run).
func (r *Report) judge() error {
	var errs []error
	if err := r.serverError(); err != nil {
		r.ServerFailed = true
		errs = append(errs, err)
	}
	if err := r.rateLimitError(); err != nil {
		r.RateLimited = true
		errs = append(errs, err)
	}
	if err := r.mostlyDeclinedError(); err != nil {
		r.MostlyDeclined = true
		errs = append(errs, err)
	}
	r.Failures = nil
	for _, err := range errs {
		r.Failures = append(r.Failures, err.Error())
	}
	return errors.Join(errs...)
}

// serverError reports the phases whose requests failed on the server's
// side: transport errors (refused, reset, timed out), 5xx answers, or a
// stall (nothing answered, or a request waiting the whole window).
func (r *Report) serverError() error {
	var msgs []string
	for _, p := range r.phases() {
		if m := p.serverFailure(); m != "" {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: these figures do not measure a working server; see what it logged", strings.Join(msgs, "; "))
}

// serverFailure describes what went wrong on the server's side in the
// phase, or "".
func (p PhaseReport) serverFailure() string {
	var parts []string
	if n, kinds := p.transportErrors(); n > 0 {
		parts = append(parts, fmt.Sprintf("the server stopped answering %d requests (%s)", n, kinds))
	}
	if n := p.ServerErrors(); n > 0 {
		parts = append(parts, fmt.Sprintf("the server answered %d requests with a server error (%s)", n, p.serverErrorKinds()))
	}
	if p.Stalled() {
		parts = append(parts, fmt.Sprintf("%d requests were still unanswered when the window closed, the oldest waiting %.0f ms, and %d were answered in it",
			p.Unanswered, p.OldestUnanswered, p.Requests))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("in the %s phase %s", p.Name, strings.Join(parts, ", and "))
}

// serverErrorKinds names the 5xx answers by status and error code.
func (p PhaseReport) serverErrorKinds() string {
	kinds := map[string]int64{}
	for k, v := range p.Errors {
		if strings.HasPrefix(k, "5") {
			kinds[k] = v
		}
	}
	return tally(kinds)
}

// transportErrors counts the requests that failed without an answer, and
// names their kinds.
func (p PhaseReport) transportErrors() (int64, string) {
	var n int64
	kinds := map[string]int64{}
	for k, v := range p.Errors {
		if strings.HasPrefix(k, "transport: ") {
			n += v
			kinds[strings.TrimPrefix(k, "transport: ")] = v
		}
	}
	return n, tally(kinds)
}

// Stalled reports a window in which the server stopped answering: none
// of its requests was answered while some were left waiting, or one sent
// waited through the whole window. A window cut by an interrupt left its
// requests waiting itself, and says nothing.
func (p PhaseReport) Stalled() bool {
	if p.Unanswered == 0 || p.Seconds <= 0 || p.Interrupted {
		return false
	}
	return p.Requests == 0 || p.onWire.Seconds() >= p.Seconds
}

// rateLimitError reports the first phase most of whose answers were 429:
// its figures measure the target's rate limits, not the service.
func (r *Report) rateLimitError() error {
	for _, p := range r.phases() {
		var refused int64
		for k, v := range p.Errors {
			if strings.HasPrefix(k, "429") {
				refused += v
			}
		}
		if p.Requests > 0 && refused*2 > p.Requests {
			return fmt.Errorf("%d of the %d answers of the %s phase were 429: the target enforces the rate limits of spec 8.1, and these figures measure them, not the service; start the target for a load test with -rate-limits=false (GUARD_RATE_LIMITS=false) or a large -rate-limit-scale",
				refused, p.Requests, p.Name)
		}
	}
	return nil
}

// mostlyDeclinedError reports a spends phase most of whose answers were
// declined spends: its figures measure the decline path (no vendor, no
// receipt), not the settled payments the bench is for.
func (r *Report) mostlyDeclinedError() error {
	p := r.Spends
	declined := p.Statuses["declined"]
	if p.Requests == 0 || declined*2 <= p.Requests {
		return nil
	}
	reasons := make([]string, 0, len(p.Declines))
	for k, v := range p.Declines {
		reasons = append(reasons, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(reasons)
	return fmt.Errorf("%d of the %d spends were declined (%s): these figures measure declines, not settled payments; give the load agents whose rules and pool let it pay (the bench fills a practice pool it uses and publishes its own rules; an agent paused or rules tightened since show here)%s",
		declined, p.Requests, strings.Join(reasons, ", "), r.reserveFloorHint())
}

// reserveFloorHint explains declines for the pool by the owners' reserve
// floors, which keep part of a full pool out of the load's reach; "" when
// there are none or the pool was not the reason.
func (r *Report) reserveFloorHint() string {
	if r.Changes == nil || len(r.Changes.ReserveFloors) == 0 || r.Spends.Declines["insufficient_funds"] == 0 {
		return ""
	}
	return fmt.Sprintf(". The owners' reserve_floor (%s, in the order of -owner-key; GET /v1/funding) keeps that much of each pool unspendable, and a practice pool holds at most %s: lower it with POST /v1/funding {\"reserve_floor\": \"0.00\"}, or give owners without one",
		strings.Join(r.Changes.ReserveFloors, ", "), actors.PracticeBalanceCeiling.Display())
}

// ServerErrors counts the 5xx answers.
func (p PhaseReport) ServerErrors() int64 {
	var n int64
	for k, v := range p.Errors {
		if strings.HasPrefix(k, "5") {
			n += v
		}
	}
	return n
}

// WriteText prints the report for a person.
func (r *Report) WriteText(w io.Writer) {
	r.writeHeader(w)
	if s := r.Spends; s.Name != "" {
		fmt.Fprintf(w, "POST /v1/spends%s\n", cutMark(s))
		fmt.Fprintf(w, "  settled spends/s  %10.0f\n", s.SettledPerSecond)
		fmt.Fprintf(w, "  answered/s        %10.0f   (%d in %.1f s)\n", s.PerSecond, s.Requests, s.Seconds)
		r.writeCommon(w, s)
		fmt.Fprintf(w, "  by status        %s\n", counts(s.Statuses))
		if len(s.Declines) > 0 {
			fmt.Fprintf(w, "  declined because %s\n", counts(s.Declines))
		}
		fmt.Fprintf(w, "  errors           %s\n", counts(s.Errors))
		writeJournal(w, s.Journal)
		fmt.Fprintln(w)
	}
	writeFloor(w, r.Floor)
	writeCapacity(w, r.Capacity, time.Duration(r.Warmup), time.Duration(r.Duration))
	for _, p := range []struct {
		title string
		r     PhaseReport
	}{{"GET /v1/balance", r.Balance}, {"POST /v1/spends/check", r.Check}} {
		if p.r.Name == "" {
			continue
		}
		fmt.Fprintf(w, "%s%s\n", p.title, cutMark(p.r))
		fmt.Fprintf(w, "  requests/s        %10.0f   (%d in %.1f s, %d ok)\n", p.r.PerSecond, p.r.Requests, p.r.Seconds, p.r.OK)
		r.writeCommon(w, p.r)
		fmt.Fprintf(w, "  errors           %s\n\n", counts(p.r.Errors))
	}
	writeCeiling(w, r.Ceiling)
	writeMemory(w, r.Memory)
	r.writeChanges(w)
	if len(r.NotRun) > 0 {
		fmt.Fprintf(w, "not run: %s\n", strings.Join(r.NotRun, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// writeHeader prints what was run, and how long each phase was to be
// measured; an interrupted run says so, since its phases measured less.
func (r *Report) writeHeader(w io.Writer) {
	fmt.Fprintf(w, "guard-bench: %s", r.Mode)
	if r.Target != "" {
		fmt.Fprintf(w, " %s", r.Target)
	}
	measured := "measured per phase"
	if r.Interrupted {
		measured = "per phase asked for"
	}
	fmt.Fprintf(w, ", %s, GOMAXPROCS %d, %d cores, %d agents, %d connections, %s %s after %s warm-up",
		r.GoVersion, r.GOMAXPROCS, r.NumCPU, r.Agents, r.Conns, time.Duration(r.Duration), measured, time.Duration(r.Warmup))
	if r.Rate > 0 {
		fmt.Fprintf(w, ", paced at %.0f requests/s (open loop: latency from when each request was due)", r.Rate)
	}
	if r.JournalDir != "" {
		fmt.Fprintf(w, ", journal apart in %s", r.JournalDir)
	}
	if a := r.TargetAgents; a != nil {
		fmt.Fprintf(w, "; agents: %d reused from earlier runs, %d new", a.Reused, a.Created)
	}
	fmt.Fprintln(w)
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED before the end: each phase shows the seconds it measured")
	}
	fmt.Fprintln(w)
}

// cutMark marks the title of a phase the run was interrupted in.
func cutMark(p PhaseReport) string {
	if p.Interrupted {
		return fmt.Sprintf("   (interrupted after %.1f s of its window)", p.Seconds)
	}
	return ""
}

// writeCommon prints the lines every phase has: pace, timeline, latency,
// what was left unanswered, CPU.
func (r *Report) writeCommon(w io.Writer, p PhaseReport) {
	writePace(w, p)
	writeTimeline(w, p.Timeline, p.TimelineP99)
	writeLatency(w, p.Latency)
	writeUnanswered(w, p)
	writeCPU(w, p, r.Target != "", r.NumCPU)
}

// writeUnanswered prints the requests left waiting as the window closed:
// a few per connection is the load in flight, one that waited long is a
// stall the latencies above do not hold.
func writeUnanswered(w io.Writer, p PhaseReport) {
	if p.Unanswered == 0 {
		return
	}
	fmt.Fprintf(w, "  unanswered        %10d   still unanswered when the window closed, the oldest waiting %.2f ms (not in the latencies above)\n",
		p.Unanswered, p.OldestUnanswered)
}

// writeJournal prints what the journal did in the spends window.
func writeJournal(w io.Writer, j *JournalReport) {
	if j == nil {
		return
	}
	fmt.Fprintf(w, "  journal           %d group commits (%.0f/s, %.1f records each, largest %d), %d checkpoint steps, %d failures\n",
		j.Commits, j.CommitsPerSecond, j.RecordsPerCommit, j.MaxBatch, j.Checkpoints, j.Failures)
	c := j.CommitTime
	fmt.Fprintf(w, "  commit ms         p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  (mean %.2f); committing %.0f %% of the window\n",
		c.P50, c.P90, c.P99, c.P999, c.Max, c.Mean, 100*j.CommitBusy)
}

// writeCeiling prints the loopback ceiling, and each read phase's share
// of it unless they are not comparable (then why not).
func writeCeiling(w io.Writer, c *CeilingReport) {
	if c == nil || len(c.Slices) == 0 {
		return
	}
	fmt.Fprintf(w, "Loopback ceiling (a handler that writes a fixed balance-sized answer; same load, same connections)\n")
	for _, s := range c.Slices {
		fmt.Fprintf(w, "  %-33s %8.0f req/s (%d in %.1f s)", s.Name, s.PerSecond, s.Requests, s.Seconds)
		if s.CPUPerRequest > 0 {
			fmt.Fprintf(w, ", %.0f µs of CPU per answer", s.CPUPerRequest)
		}
		fmt.Fprintln(w)
	}
	if c.NotCompared != "" {
		fmt.Fprintf(w, "  not compared with the reads: %s\n\n", c.NotCompared)
		return
	}
	var shares []string
	if c.Balance > 0 {
		shares = append(shares, fmt.Sprintf("balance reached %.0f %% of the ceiling around it", c.BalanceShare))
	}
	if c.Check > 0 {
		shares = append(shares, fmt.Sprintf("check reached %.0f %% of the ceiling around it", c.CheckShare))
	}
	if len(shares) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(shares, ", "))
	}
	fmt.Fprintln(w)
}

// writeFloor prints the spend floor, and the spends' share of it unless
// they are not comparable (then why not).
func writeFloor(w io.Writer, f *FloorReport) {
	if f == nil || len(f.Slices) == 0 {
		return
	}
	fmt.Fprintf(w, "Spend floor (a handler that signs one receipt per request with the service's Ed25519 code and writes a settled spend's answer; no rules, no journal, no fsync; same load, same connections)\n")
	for _, s := range f.Slices {
		fmt.Fprintf(w, "  %-33s %8.0f answers/s (%d in %.1f s), p99 %.2f ms", s.Name, s.PerSecond, s.Requests, s.Seconds, s.Latency.P99)
		if s.CPUPerRequest > 0 {
			fmt.Fprintf(w, ", %.0f µs of CPU per answer", s.CPUPerRequest)
		}
		fmt.Fprintln(w)
	}
	switch {
	case f.NotCompared != "":
		fmt.Fprintf(w, "  not compared with the spends: %s\n", f.NotCompared)
	case f.Share > 0:
		fmt.Fprintf(w, "  spends reached %.0f %% of the floor around them\n", f.Share)
	}
	fmt.Fprintln(w)
}

// writeMemory prints what an idle agent costs.
func writeMemory(w io.Writer, m *MemoryReport) {
	if m == nil {
		return
	}
	fmt.Fprintf(w, "Idle activated agent (%d agents activated with one balance call each)\n", m.Agents)
	fmt.Fprintf(w, "  per agent         %10.0f B   (%.2f KiB)\n", m.PerAgent, m.PerAgent/1024)
	fmt.Fprintf(w, "  heap: baseline %s, activated %s (%d live actors), passivated %s after %.1f s (%d live)\n",
		mib(m.BaselineHeap), mib(m.ActiveHeap), m.Activated, mib(m.PassivatedHeap), m.PassivationSeconds, m.Remaining)
	fmt.Fprintf(w, "  left after passivation %+.1f KiB\n", float64(m.ResidueBytes)/1024)
	if m.Before > 0 {
		fmt.Fprintf(w, "  %d agents of the load were still active long after their idle timeout\n", m.Before)
	}
	fmt.Fprintln(w)
}

// writeChanges prints what the run did to a target server.
func (r *Report) writeChanges(w io.Writer) {
	c := r.Changes
	if c == nil {
		return
	}
	fmt.Fprintf(w, "On the target\n")
	fmt.Fprintf(w, "  practice pools    deposited %s", c.Deposited)
	if c.Spent != "" {
		fmt.Fprintf(w, ", spent %s", c.Spent)
	} else {
		fmt.Fprintf(w, ", spent unknown (the pools could not be read at the end)")
	}
	if len(c.ReserveFloors) > 0 {
		fmt.Fprintf(w, "; reserve_floor %s", strings.Join(c.ReserveFloors, ", "))
	}
	fmt.Fprintln(w)
	if a := r.TargetAgents; a != nil {
		fmt.Fprintf(w, "  agents            %d reused, %d created", a.Reused, a.Created)
		if c.RulesRepublished > 0 {
			fmt.Fprintf(w, ", rules published again on %d", c.RulesRepublished)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  agent keys        %d made, %d revoked at the end", c.KeysMade, c.KeysRevoked)
	if len(c.KeysLeftActive) > 0 {
		fmt.Fprintf(w, ", %d left active (%s)", len(c.KeysLeftActive), strings.Join(c.KeysLeftActive, ", "))
	}
	if c.EarlierKeysRevoked > 0 {
		fmt.Fprintf(w, "; %d left active by earlier runs revoked", c.EarlierKeysRevoked)
	}
	fmt.Fprintf(w, "\n\n")
}

// writeCPU prints the CPU figures of a phase, or that they were not
// measured (a window cut before any reading). Against a target, this
// process is only the load generator: its CPU per request bounds how fast
// it can send, not how fast the service answers.
func writeCPU(w io.Writer, p PhaseReport, remote bool, cores int) {
	if p.ProcessCPU <= 0 && p.MachineCPU <= 0 {
		if p.LoadAverage != "" || p.Interrupted {
			fmt.Fprintf(w, "  CPU               not measured\n")
		}
		return
	}
	fmt.Fprintf(w, "  CPU               %10.0f %%  of one core by this process, %.0f %% by the whole machine, %.0f %% taken by the hypervisor (%d cores; load average %s as the window opened)\n",
		p.ProcessCPU, p.MachineCPU, p.StealCPU, cores, p.LoadAverage)
	if p.CPUPerRequest <= 0 {
		return
	}
	label, verb := "CPU per answer  ", "answer"
	if remote {
		label, verb = "load CPU/request", "send"
	}
	fmt.Fprintf(w, "  %s  %10.0f µs  (at that cost %d cores %s at most %.0f/s)\n",
		label, p.CPUPerRequest, cores, verb, cpuBound(p.CPUPerRequest, cores))
}

// writePace prints the offered rate of an open-loop phase, and what the
// service could not keep up with.
func writePace(w io.Writer, p PhaseReport) {
	if p.OfferedPerSecond <= 0 {
		return
	}
	fmt.Fprintf(w, "  offered/s         %10.0f", p.OfferedPerSecond)
	if p.NotSent > 0 {
		fmt.Fprintf(w, "   (never sent: %d requests due in the window; the service fell behind this pace)", p.NotSent)
	}
	fmt.Fprintln(w)
}

// writeTimeline prints the rate and the p99 of each tenth of the window,
// to show whether they held.
func writeTimeline(w io.Writer, t, p99 []float64) {
	if len(t) == 0 {
		return
	}
	var b strings.Builder
	for _, v := range t {
		fmt.Fprintf(&b, " %.0f", v)
	}
	fmt.Fprintf(w, "  by tenth, /s     %s\n", b.String())
	if len(p99) == 0 {
		return
	}
	b.Reset()
	for _, v := range p99 {
		fmt.Fprintf(&b, " %.1f", v)
	}
	fmt.Fprintf(w, "  p99 by tenth, ms %s\n", b.String())
}

func writeLatency(w io.Writer, l LatencyReport) {
	fmt.Fprintf(w, "  latency ms        p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  (mean %.2f)\n",
		l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// counts prints a tally largest first, or "none".
func counts(m map[string]int64) string {
	if len(m) == 0 {
		return " none"
	}
	return " " + strings.Join(countList(m), " ")
}

// tally lists counts largest first, separated by commas, for a sentence.
func tally(m map[string]int64) string { return strings.Join(countList(m), ", ") }

// countList is a tally's entries as "key=n", largest first.
func countList(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return out
}

// cpuBound is the most requests per second n cores can answer when each
// costs us microseconds of CPU.
func cpuBound(us float64, n int) float64 {
	return float64(n) * 1e6 / us
}
