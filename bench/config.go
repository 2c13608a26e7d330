package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Config says what to load and for how long. WithDefaults fills zero
// fields from Defaults, except Warmup, IdleAgents and CeilingDuration,
// where zero means none, and Seed, where zero is a seed like any other.
type Config struct {
	// Agents is how many agents the load spreads over. In-process, five
	// per bootstrapped owner (the practice quota); against a running
	// server, up to this number: the active agents earlier runs made,
	// then new ones while the owners have room.
	Agents int
	// Conns is the number of concurrent connections, one request in
	// flight on each.
	Conns int
	// Duration is the measured time of each phase.
	Duration time.Duration
	// Warmup is unmeasured load before each phase: connections open,
	// agents activate, buffers grow.
	Warmup time.Duration
	// Rate, when positive, paces each phase at that many requests per
	// second in all (an open loop): each connection sends on a fixed
	// schedule, and a latency runs from when its request was due, not
	// from when the connection was free to send it, so a stall of the
	// service shows in full in the percentiles (or, for the requests it
	// kept past the window's end, as their wait when it closed). Zero sends each request as
	// soon as the connection's previous one is answered (a closed loop):
	// the most the service can do, with latencies that are mostly queueing
	// behind the other connections. The loopback ceiling always runs in a
	// closed loop.
	Rate float64
	// CapacityP99, when positive, follows the spends phase with a search
	// for the service's capacity at that p99: the highest paced rate of
	// spends whose 99th percentile latency stays within it, found by
	// bisection below the rate of the (unpaced) spends phase; see
	// CapacityReport. It needs the spends phase, and no Rate: the search
	// chooses the paces.
	CapacityP99 time.Duration
	// CapacitySteps is the most paced spends phases the search runs, each
	// Warmup plus Duration long; zero takes the default (6), which finds
	// the capacity within 1/64 of the unpaced rate.
	CapacitySteps int
	// IdleAgents is how many extra agents the memory measurement
	// activates (in-process only); zero skips it.
	IdleAgents int
	// CeilingDuration is the measured time of each of the three slices of
	// the loopback ceiling around the read phases (see CeilingReport);
	// zero skips it.
	CeilingDuration time.Duration
	// IdleTimeout is the in-process service's passivation delay. Short,
	// so the memory measurement can watch agents passivate.
	IdleTimeout time.Duration
	// Target is the base URL (http://host:port) of a running server. Empty
	// starts the service in-process on a temporary data directory.
	Target string
	// DataDir and JournalDir (in-process only) choose the disks: the
	// temporary data directory is made in DataDir (empty: the system's
	// temporary directory), and with JournalDir the service's journal goes
	// to a temporary directory made there (its journal_dir) instead of
	// beside the data file. Both are removed after the run.
	DataDir    string
	JournalDir string
	// OwnerKey is one practice owner key of the Target server, or several
	// separated by commas: an owner may have only a few practice agents,
	// so a load over many agents needs several owners.
	OwnerKey string
	// CPUProfile, when set, receives a pprof CPU profile of ProfilePhase
	// (warm-up included). In-process it covers the server and the load
	// generator alike.
	CPUProfile io.Writer
	// Trace, when set, receives a runtime execution trace of ProfilePhase:
	// where goroutines wait (go tool trace -pprof=sync|syscall|sched).
	Trace io.Writer
	// ProfilePhase names the phase CPUProfile and Trace cover: "spends"
	// (the default), "balance" or "check".
	ProfilePhase string
	// Phases names the phases to run, from "spends", "balance" and
	// "check"; empty runs all three. They always run in that order, so a
	// long run of one phase (say, spends for ten minutes, to see whether
	// the rate holds as the files grow) needs no patience for the others.
	Phases []string
	// Seed makes amounts and the spread over agents repeatable; every
	// value, zero included, is a seed of its own.
	Seed uint64
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// Defaults are the settings of `make bench`.
func Defaults() Config {
	return Config{
		Agents: 200, Conns: 64, Duration: 10 * time.Second, Warmup: 2 * time.Second,
		IdleAgents: 2000, IdleTimeout: 2 * time.Second, CeilingDuration: 3 * time.Second, Seed: 1,
		CapacitySteps: 6,
	}
}

// WithDefaults fills the zero fields from Defaults.
func (c Config) WithDefaults() Config {
	d := Defaults()
	if c.Agents == 0 {
		c.Agents = d.Agents
	}
	if c.Conns == 0 {
		c.Conns = d.Conns
	}
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.ProfilePhase == "" {
		c.ProfilePhase = "spends"
	}
	if c.CapacitySteps == 0 {
		c.CapacitySteps = d.CapacitySteps
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Validate reports the first unusable field by its flag name.
func (c Config) Validate() error {
	switch {
	case c.Agents < 1:
		return errors.New("bench: -agents must be at least 1")
	case c.Conns < 1:
		return errors.New("bench: -conns must be at least 1")
	case c.Duration <= 0:
		return errors.New("bench: -duration must be positive")
	case c.Warmup < 0:
		return errors.New("bench: -warmup must not be negative")
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return errors.New("bench: -rate must be a number of requests per second, or 0 to send as fast as answers come")
	case c.Rate > 0 && float64(c.Conns)/c.Rate > 60:
		return fmt.Errorf("bench: -rate %g over %d connections sends less than once a minute on each; raise -rate or lower -conns", c.Rate, c.Conns)
	case c.Rate > maxRate(c.Conns):
		return fmt.Errorf("bench: -rate %g is more than the bench can pace over %d connections: at most %.0f requests/s (one request per microsecond on each); lower -rate, or raise -conns",
			c.Rate, c.Conns, maxRate(c.Conns))
	case c.CapacityP99 < 0:
		return errors.New("bench: -capacity-p99 must not be negative; give a latency like 10ms, or 0 for no capacity search")
	case c.CapacityP99 > 0 && c.Rate > 0:
		return errors.New("bench: give -rate or -capacity-p99, not both: the capacity search chooses its paces itself")
	case c.CapacitySteps < 1 || c.CapacitySteps > maxCapacitySteps:
		return fmt.Errorf("bench: -capacity-steps %d must be from 1 to %d", c.CapacitySteps, maxCapacitySteps)
	case c.IdleAgents < 0:
		return errors.New("bench: -idle-agents must not be negative")
	case c.CeilingDuration < 0:
		return errors.New("bench: -ceiling must not be negative")
	case c.IdleTimeout <= 0:
		return errors.New("bench: -idle-timeout must be positive")
	}
	if !slices.Contains(phaseNames, c.ProfilePhase) {
		return fmt.Errorf("bench: -profile-phase %q must be spends, balance or check", c.ProfilePhase)
	}
	for i, name := range c.Phases {
		if !slices.Contains(phaseNames, name) {
			return fmt.Errorf("bench: -phases: %q is not a phase; give spends, balance or check, separated by commas", name)
		}
		if slices.Contains(c.Phases[:i], name) {
			return fmt.Errorf("bench: -phases: %q is given twice; give each phase once", name)
		}
	}
	if c.CapacityP99 > 0 && !c.runs("spends") {
		return fmt.Errorf("bench: -capacity-p99 searches paced spends, and -phases %s leaves the spends phase out; add it", strings.Join(c.Phases, ","))
	}
	if (c.CPUProfile != nil || c.Trace != nil) && !c.runs(c.ProfilePhase) {
		return fmt.Errorf("bench: -profile-phase %q is not among -phases %s; profile a phase that runs", c.ProfilePhase, strings.Join(c.Phases, ","))
	}
	if err := c.validateTarget(); err != nil {
		return err
	}
	return c.checkOpenFiles(openFilesLimit())
}

// maxRate is the most requests per second the pacer can schedule over
// conns connections: one per microsecond on each. Beyond it the interval
// between one connection's requests would round to nothing, and a
// connection cannot send that fast anyway.
func maxRate(conns int) float64 {
	return float64(conns) * float64(time.Second/minPace)
}

// minPace is the shortest interval between two requests of one connection
// the pacer schedules.
const minPace = time.Microsecond

// openFilesMargin is what the process needs open beside the load's
// connections: the service's data and journal files, its listeners, the
// setup's connections.
const openFilesMargin = 64

// checkOpenFiles makes sure the connections fit in the open-files limit
// (0: unknown). In-process each connection takes two descriptors, the
// load's end and the service's; past the limit the service fails to
// accept ("too many open files") in the middle of the run.
func (c Config) checkOpenFiles(limit uint64) error {
	if limit == 0 {
		return nil
	}
	need, per := uint64(c.Conns)+openFilesMargin, "one open file each"
	if c.Target == "" {
		need, per = 2*uint64(c.Conns)+openFilesMargin, "two open files each in-process, the load's end and the service's"
	}
	if need <= limit {
		return nil
	}
	return fmt.Errorf("bench: -conns %d needs about %d open files (%s), more than this process may open (%d, ulimit -n): lower -conns, or raise the limit (ulimit -n %d) before the run",
		c.Conns, need, per, limit, need)
}

// withOpenFilesHint adds to an error that says the process ran out of
// open files (the service's "accept4: too many open files", or the load's
// "socket: ...") what to do about it; other errors pass as they are.
func withOpenFilesHint(err error, conns int) error {
	if err == nil || !strings.Contains(err.Error(), "too many open files") {
		return err
	}
	limit := "unknown"
	if n := openFilesLimit(); n > 0 {
		limit = fmt.Sprint(n)
	}
	return fmt.Errorf("%w\nthe process ran out of open files with -conns %d: lower -conns, or raise the open-files limit (ulimit -n, now %s) before the run", err, conns, limit)
}

// validateTarget checks the flags of a run against a running server, and
// that none of them is given to an in-process run.
func (c Config) validateTarget() error {
	if c.Target == "" {
		if c.OwnerKey != "" {
			return errors.New("bench: -owner-key needs -target (in-process runs create their own owners)")
		}
		return nil
	}
	if c.DataDir != "" || c.JournalDir != "" {
		return errors.New("bench: -data-dir and -journal-dir place the in-process service's files; a -target server has its own (its data and journal_dir settings)")
	}
	u, err := url.Parse(c.Target)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("bench: -target %q must be http://host:port", c.Target)
	}
	keys := c.ownerKeys()
	if len(keys) == 0 {
		return errors.New("bench: -target needs -owner-key with a practice owner key (svc_test_owner_...), or several separated by commas")
	}
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		if err := checkOwnerKey(k); err != nil {
			return fmt.Errorf("bench: -owner-key: key %d of %d %w", i+1, len(keys), err)
		}
		if seen[k] {
			return fmt.Errorf("bench: -owner-key: key %d of %d repeats an earlier one; give each owner once", i+1, len(keys))
		}
		seen[k] = true
	}
	return nil
}

// checkOwnerKey says what is wrong with a key given as an owner key, as
// the end of a sentence that begins with the key's place.
func checkOwnerKey(k string) error {
	const practice = "a practice owner key (svc_test_owner_...), the .keys.test of what guard owner create prints"
	switch {
	case strings.HasPrefix(k, "svc_test_owner_"):
		return nil
	case strings.HasPrefix(k, "svc_test_agent_"), strings.HasPrefix(k, "svc_live_agent_"):
		return fmt.Errorf("is an agent key; -owner-key takes %s", practice)
	case strings.HasPrefix(k, "svc_live_owner_"):
		return fmt.Errorf("is a live owner key, and the bench never pays live money; give %s", practice)
	}
	return fmt.Errorf("is not %s", practice)
}

// phaseNames are the phases in the order a run takes them.
var phaseNames = []string{"spends", "balance", "check"}

// runs reports whether the phase is to run.
func (c Config) runs(name string) bool {
	return len(c.Phases) == 0 || slices.Contains(c.Phases, name)
}

// ParsePhases splits the -phases flag, a comma-separated list of phase
// names; Validate checks the names.
func ParsePhases(list string) []string { return splitList(list) }

// ownerKeys are the owner keys of OwnerKey, in order, blanks dropped.
func (c Config) ownerKeys() []string { return splitList(c.OwnerKey) }

// splitList splits a comma-separated flag value, spaces trimmed and blanks
// dropped.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// targetAddr is host:port of Target.
func (c Config) targetAddr() string {
	u, _ := url.Parse(c.Target)
	return u.Host
}
