package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/histogram"
	"github.com/agentpay/guard/persistence"
)

// TestRunInProcess runs the whole bench briefly and checks that the report
// adds up: spends settled, no 5xx, no transport error, every phase
// answered, the memory figures filled in.
func TestRunInProcess(t *testing.T) {
	var progress bytes.Buffer
	cfg := Config{Agents: 7, Conns: 4, Duration: time.Second, Warmup: 200 * time.Millisecond,
		IdleAgents: 20, IdleTimeout: 300 * time.Millisecond, CeilingDuration: 500 * time.Millisecond,
		Progress: &progress, Seed: 7}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if rep.Agents != 7 {
		t.Errorf("agents = %d, want 7", rep.Agents)
	}
	s := rep.Spends
	if s.Statuses["settled"] == 0 || s.SettledPerSecond <= 0 {
		t.Errorf("no spend settled: %+v", s)
	}
	if s.Statuses["settled"] != s.OK {
		t.Errorf("every spend of the load should settle, got statuses %v (declines %v)", s.Statuses, s.Declines)
	}
	if s.Journal == nil || s.Journal.Records == 0 {
		t.Errorf("journal report missing or empty: %+v", s.Journal)
	} else if ct := s.Journal.CommitTime; ct.P50 <= 0 || ct.P99 < ct.P50 || ct.Max < ct.P99 || s.Journal.CommitBusy <= 0 {
		t.Errorf("commit durations missing or out of order: %+v, committing %.2f of the window", ct, s.Journal.CommitBusy)
	}
	c := rep.Ceiling
	if c == nil || len(c.Slices) != 3 {
		t.Fatalf("want a ceiling in three slices around the reads, got %+v", c)
	}
	// Each read is compared with the mean of the slices around it.
	if want := 100 * rep.Balance.PerSecond / ((c.Slices[0].PerSecond + c.Slices[1].PerSecond) / 2); c.BalanceShare != want || want <= 0 {
		t.Errorf("balance share %.1f %%, want %.1f %%", c.BalanceShare, want)
	}
	if want := 100 * rep.Check.PerSecond / ((c.Slices[1].PerSecond + c.Slices[2].PerSecond) / 2); c.CheckShare != want || want <= 0 {
		t.Errorf("check share %.1f %%, want %.1f %%", c.CheckShare, want)
	}
	// The spend floor brackets the spends, and every answer of its
	// slices is a settled spend whose receipt was signed.
	f := rep.Floor
	if f == nil || len(f.Slices) != 2 || f.Slices[0].Name != "floor before spends" || f.Slices[1].Name != "floor after spends" {
		t.Fatalf("want the spend floor before and after the spends, got %+v", f)
	}
	if want := 100 * s.SettledPerSecond / ((f.Slices[0].PerSecond + f.Slices[1].PerSecond) / 2); f.Share != want || want <= 0 {
		t.Errorf("spends' share of the floor %.1f %%, want %.1f %%", f.Share, want)
	}
	for _, sl := range f.Slices {
		if sl.Statuses["settled"] != sl.OK || sl.OK == 0 {
			t.Errorf("%s: statuses %v of %d ok answers, want all settled", sl.Name, sl.Statuses, sl.OK)
		}
	}
	for _, p := range append(append([]PhaseReport{rep.Spends, rep.Balance, rep.Check}, c.Slices...), f.Slices...) {
		if p.Requests == 0 || p.OK != p.Requests {
			t.Errorf("%s: %d answered, %d ok", p.Name, p.Requests, p.OK)
		}
		if n := p.ServerErrors(); n > 0 {
			t.Errorf("%s: %d server errors: %v", p.Name, n, p.Errors)
		}
		for k := range p.Errors {
			if strings.HasPrefix(k, "transport") {
				t.Errorf("%s: transport errors: %v", p.Name, p.Errors)
			}
		}
		// Both figures come from one CPU reading of the window.
		if p.ProcessCPU > 0 {
			want := p.ProcessCPU / 100 * p.Seconds * 1e6 / float64(p.Requests)
			if math.Abs(p.CPUPerRequest-want) > 0.01*want {
				t.Errorf("%s: %.1f µs of CPU per answer, want %.1f (%.0f %% of a core over %.2f s, %d answers)",
					p.Name, p.CPUPerRequest, want, p.ProcessCPU, p.Seconds, p.Requests)
			}
		}
		if len(p.Timeline) != timelineSlices {
			t.Errorf("%s: timeline of %d slices, want %d", p.Name, len(p.Timeline), timelineSlices)
		}
		// Every answer of the window is in exactly one tenth.
		sum := 0.0
		for _, v := range p.Timeline {
			sum += v * p.Seconds / timelineSlices
		}
		if math.Abs(sum-float64(p.Requests)) > 0.5 {
			t.Errorf("%s: the tenths hold %.1f answers, the window %d", p.Name, sum, p.Requests)
		}
		// Each tenth's p99 is of its own answers: at most the window's
		// maximum (to the microsecond it is rounded up to), and the
		// window's p99 lies between the lowest and the highest of them
		// (the window's is a bucket's upper bound, under 1 % above the
		// value). A tenth without answers has 0.
		if len(p.TimelineP99) != timelineSlices {
			t.Errorf("%s: p99 of %d tenths, want %d", p.Name, len(p.TimelineP99), timelineSlices)
		} else {
			lo, hi := slices.Min(p.TimelineP99), slices.Max(p.TimelineP99)
			if hi <= 0 || hi > p.Latency.Max+0.001 || p.Latency.P99 < lo || p.Latency.P99 > 1.01*hi+0.001 {
				t.Errorf("%s: p99 by tenth %v against the window's p99 %.3f and max %.3f", p.Name, p.TimelineP99, p.Latency.P99, p.Latency.Max)
			}
		}
		l := p.Latency
		if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
			t.Errorf("%s: latency percentiles out of order: %+v", p.Name, l)
		}
	}
	m := rep.Memory
	if m == nil {
		t.Fatal("no memory report")
	}
	if m.Activated-m.Before < m.Agents || m.PerAgent <= 0 {
		t.Errorf("memory: %d of %d agents activated, %.0f B each", m.Activated-m.Before, m.Agents, m.PerAgent)
	}
	if m.Remaining > m.Before {
		t.Errorf("memory: %d idle agents still active after passivation", m.Remaining-m.Before)
	}

	var text bytes.Buffer
	rep.WriteText(&text)
	wants := []string{"settled spends/s", "GET /v1/balance", "POST /v1/spends/check", "per agent",
		"Loopback ceiling", "ceiling before balance", "ceiling between balance and check", "ceiling after check",
		"balance reached", "check reached", "by tenth, /s", "Spend floor", "floor before spends", "spends reached"}
	if rep.Spends.ProcessCPU > 0 {
		wants = append(wants, "CPU per answer")
	}
	for _, want := range wants {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("report does not encode: %v", err)
	}
	t.Logf("\n%s", text.String())
}

// TestRunOnlyTheChosenPhases runs the check phase alone: nothing else is
// loaded, reported or encoded, and the ceiling brackets that one phase.
func TestRunOnlyTheChosenPhases(t *testing.T) {
	cfg := Config{Agents: 5, Conns: 4, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		IdleTimeout: time.Minute, CeilingDuration: 300 * time.Millisecond, Seed: 3, Phases: []string{"check"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Spends.Name != "" || rep.Spends.Requests != 0 || rep.Balance.Name != "" || rep.Balance.Requests != 0 {
		t.Errorf("phases that were not asked for ran: spends %+v, balance %+v", rep.Spends, rep.Balance)
	}
	if rep.Check.Name != "check" || rep.Check.Requests == 0 || rep.Check.OK != rep.Check.Requests {
		t.Errorf("check phase: %+v", rep.Check)
	}
	c := rep.Ceiling
	if c == nil || len(c.Slices) != 2 || c.Slices[0].Name != "ceiling before check" || c.Slices[1].Name != "ceiling after check" {
		t.Fatalf("want the ceiling before and after check, got %+v", c)
	}
	if want := 100 * rep.Check.PerSecond / ((c.Slices[0].PerSecond + c.Slices[1].PerSecond) / 2); c.CheckShare != want || want <= 0 {
		t.Errorf("check share %.1f %%, want %.1f %%", c.CheckShare, want)
	}
	if c.Balance != 0 || c.BalanceShare != 0 {
		t.Errorf("a balance ceiling without a balance phase: %+v", c)
	}

	var text bytes.Buffer
	rep.WriteText(&text)
	for _, never := range []string{"POST /v1/spends\n", "GET /v1/balance", "balance reached"} {
		if strings.Contains(text.String(), never) {
			t.Errorf("text report shows %q:\n%s", never, text.String())
		}
	}
	for _, want := range []string{"POST /v1/spends/check", "check reached", "ceiling before check"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"spends", "balance"} {
		if _, ok := top[key]; ok {
			t.Errorf("JSON report has %q for a phase that did not run", key)
		}
	}
	if _, ok := top["check"]; !ok {
		t.Errorf("JSON report lacks the check phase: %s", js)
	}
}

// TestP99ByNearestRank: the p99 of a tenth is the smallest latency that
// at least 99 % of its answers do not exceed, and a latency is rounded up
// to the microsecond, never down.
func TestP99ByNearestRank(t *testing.T) {
	hundred := make([]uint32, 100)
	for i := range hundred {
		hundred[i] = uint32(100 - i) // 100 µs down to 1 µs, unsorted
	}
	if got := p99Millis(hundred); got != 0.099 {
		t.Errorf("p99 of 1..100 µs = %v ms, want 0.099", got)
	}
	if got := p99Millis([]uint32{7000}); got != 7 {
		t.Errorf("p99 of one answer of 7 ms = %v", got)
	}
	if got := p99Millis(append(make([]uint32, 98), 5000, 9000)); got != 5 {
		t.Errorf("p99 of 98 zeros, 5 ms and 9 ms = %v, want 5 (the 99th of 100)", got)
	}
	if got := p99Millis(nil); got != 0 {
		t.Errorf("p99 of none = %v", got)
	}
	if got := micros(1500*time.Nanosecond + 1); got != 2 {
		t.Errorf("micros(1.5 µs) = %d, want 2 (rounded up)", got)
	}
	if got := micros(3 * time.Hour); got != math.MaxUint32 {
		t.Errorf("micros(3 h) = %d, want the cap", got)
	}
}

// TestTenthOf puts each moment of the window in its tenth.
func TestTenthOf(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(10 * time.Second)
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{0, 0}, {999 * time.Millisecond, 0}, {time.Second, 1}, {4500 * time.Millisecond, 4},
		{9999 * time.Millisecond, 9}, {10 * time.Second, 9}} {
		if got := tenthOf(start.Add(c.at), start, end); got != c.want {
			t.Errorf("%v into the window: tenth %d, want %d", c.at, got, c.want)
		}
	}
}

// TestRunAtAnOfferedRate runs the check phase in an open loop: every
// request due in the window is accounted for, answered or never sent,
// however fast the machine is, and the report carries the offered rate.
func TestRunAtAnOfferedRate(t *testing.T) {
	// 4 connections at 100/s in all: one request every 40 ms on each,
	// so a 1-second window holds exactly 25 due requests per connection.
	cfg := Config{Agents: 5, Conns: 4, Duration: time.Second, Warmup: 100 * time.Millisecond, Rate: 100,
		IdleTimeout: time.Minute, Seed: 5, Phases: []string{"check"}, CeilingDuration: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Check
	if c.OfferedPerSecond != 100 || rep.Rate != 100 {
		t.Errorf("offered %v/s, report rate %v, want 100", c.OfferedPerSecond, rep.Rate)
	}
	var failed int64
	for kind, n := range c.Errors {
		if strings.HasPrefix(kind, "transport: ") {
			failed += n
		}
	}
	if got := c.Requests + failed + c.NotSent + c.Unanswered; got != 100 {
		t.Errorf("%d answered + %d failed + %d never sent + %d unanswered at the close = %d, want the 100 due in the window",
			c.Requests, failed, c.NotSent, c.Unanswered, got)
	}
	// A paced rate is no share of the ceiling, which runs unpaced.
	if cr := rep.Ceiling; cr == nil || cr.CheckShare != 0 || !strings.Contains(cr.NotCompared, "-rate") {
		t.Errorf("ceiling of a paced run: %+v, want it shown but not compared", cr)
	}
	if c.Requests == 0 || c.OK != c.Requests {
		t.Errorf("%d answered, %d ok", c.Requests, c.OK)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, want := range []string{"paced at 100 requests/s", "offered/s", "p99 by tenth, ms"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// A pacer spreads the connections over one interval and counts what is
// still due before the end of a window.
func TestPacer(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	p := newPacer(100, 4, 1, start) // 40 ms apart; the second of four starts 10 ms in
	if p.interval != 40*time.Millisecond {
		t.Fatalf("interval %v, want 40ms", p.interval)
	}
	for i, want := range []time.Duration{10, 50, 90} {
		if got := p.take().Sub(start); got != want*time.Millisecond {
			t.Errorf("request %d due at +%v, want +%vms", i, got, want)
		}
	}
	// Next due at +130 ms: +130, +170 and +210 fall before +250 ms.
	if n := p.dueBefore(start.Add(250 * time.Millisecond)); n != 3 {
		t.Errorf("due before +250ms: %d, want 3", n)
	}
	if n := p.dueBefore(start.Add(210 * time.Millisecond)); n != 2 {
		t.Errorf("due before +210ms: %d, want 2 (the end is excluded)", n)
	}
	if n := p.dueBefore(start.Add(100 * time.Millisecond)); n != 0 {
		t.Errorf("due before +100ms: %d, want 0", n)
	}
}

// TestConfigValidate names the flag at fault.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Agents: -1}, "-agents"},
		{Config{Conns: -2}, "-conns"},
		{Config{Warmup: -time.Second}, "-warmup"},
		{Config{IdleAgents: -1}, "-idle-agents"},
		{Config{CeilingDuration: -time.Second}, "-ceiling"},
		{Config{OwnerKey: "svc_test_owner_x"}, "-owner-key needs -target"},
		{Config{Target: "127.0.0.1:8080", OwnerKey: "svc_test_owner_x"}, "-target"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_live_owner_x"}, "practice owner key"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_owner_x,svc_live_owner_y"}, "key 2 of 2 is a live owner key"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_owner_x,owner_y"}, "key 2 of 2 is not a practice owner key"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_agent_x"}, "key 1 of 1 is an agent key; -owner-key takes a practice owner key (svc_test_owner_...)"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_owner_x, svc_test_owner_x"}, "key 2 of 2 repeats"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: " , "}, "needs -owner-key"},
		{Config{ProfilePhase: "nope"}, "-profile-phase"},
		{Config{Phases: []string{"spends", "reads"}}, `-phases: "reads" is not a phase`},
		{Config{Phases: []string{"check", "check"}}, `"check" is given twice`},
		{Config{Phases: []string{"check"}, CPUProfile: io.Discard}, `-profile-phase "spends" is not among -phases check`},
		{Config{Phases: []string{"balance"}, ProfilePhase: "check", Trace: io.Discard}, "profile a phase that runs"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_owner_x", JournalDir: "/mnt/fast"}, "-journal-dir place the in-process service's files"},
		{Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_owner_x", DataDir: "/mnt/big"}, "-data-dir and -journal-dir"},
		{Config{Rate: -5}, "-rate must be a number"},
		{Config{Rate: math.NaN()}, "-rate must be a number"},
		{Config{Rate: math.Inf(1)}, "-rate must be a number"},
		{Config{Rate: 1, Conns: 64}, "less than once a minute"},
		{Config{Rate: 1e11, Conns: 64}, "-rate 1e+11 is more than the bench can pace over 64 connections: at most 64000000 requests/s"},
		{Config{Rate: 2e6 + 1, Conns: 2}, "-rate"},
		{Config{CapacityP99: -time.Millisecond}, "-capacity-p99 must not be negative"},
		{Config{CapacityP99: 10 * time.Millisecond, Rate: 100}, "give -rate or -capacity-p99, not both"},
		{Config{CapacityP99: 10 * time.Millisecond, Phases: []string{"check"}}, "-phases check leaves the spends phase out"},
		{Config{CapacitySteps: -1}, "-capacity-steps -1 must be from 1 to 20"},
		{Config{CapacitySteps: 21}, "-capacity-steps 21 must be from 1 to 20"},
	} {
		err := tc.cfg.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.cfg, err, tc.want)
		}
	}
	ok := Config{Target: "http://127.0.0.1:8080", OwnerKey: "svc_test_owner_x, svc_test_owner_y,"}
	if err := ok.WithDefaults().Validate(); err != nil {
		t.Errorf("two practice owner keys: %v", err)
	}
	if got := ok.ownerKeys(); !slices.Equal(got, []string{"svc_test_owner_x", "svc_test_owner_y"}) {
		t.Errorf("owner keys %q", got)
	}
	if got := ParsePhases(" spends, ,check "); !slices.Equal(got, []string{"spends", "check"}) {
		t.Errorf("ParsePhases = %q", got)
	}
	if err := (Config{Phases: []string{"check"}, ProfilePhase: "check", CPUProfile: io.Discard}).WithDefaults().Validate(); err != nil {
		t.Errorf("profiling the one phase that runs: %v", err)
	}
	if err := Defaults().WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := (Config{Rate: 2e6, Conns: 2}).WithDefaults().Validate(); err != nil {
		t.Errorf("one request per microsecond on each connection: %v", err)
	}
	// The pacer's interval at the most it paces is still a real interval.
	if p := newPacer(maxRate(64), 64, 0, time.Now()); p.interval <= 0 {
		t.Errorf("interval %v at the highest rate", p.interval)
	}
}

// TestSeedZeroIsASeed: a seed of 0 is kept, not taken for the default.
func TestSeedZeroIsASeed(t *testing.T) {
	if got := (Config{Seed: 0}).WithDefaults().Seed; got != 0 {
		t.Errorf("seed 0 became %d", got)
	}
}

// TestOpenFilesHint: running out of open files anyway (other files open,
// a limit lowered since) ends with what to do, naming -conns and ulimit.
func TestOpenFilesHint(t *testing.T) {
	err := withOpenFilesHint(errors.New("stopping the service: accept4: too many open files"), 30000)
	if err == nil || !strings.Contains(err.Error(), "accept4: too many open files") ||
		!strings.Contains(err.Error(), "-conns 30000: lower -conns, or raise the open-files limit (ulimit -n, now") {
		t.Errorf("error %v, want the cause and what to do", err)
	}
	other := errors.New("connection refused")
	if got := withOpenFilesHint(other, 30000); got != other {
		t.Errorf("another error became %v", got)
	}
}

// TestConnsBeyondTheOpenFilesLimit: more connections than the process may
// open files for is refused before the run, naming -conns and the limit.
func TestConnsBeyondTheOpenFilesLimit(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		limit uint64
		want  string
	}{
		{Config{Conns: 1000}, 1024, "-conns 1000 needs about 2064 open files (two open files each in-process"},
		{Config{Conns: 1000, Target: "http://127.0.0.1:1"}, 1024, "more than this process may open (1024, ulimit -n)"},
		{Config{Conns: 900, Target: "http://127.0.0.1:1"}, 1024, ""},
		{Config{Conns: 1000}, 0, ""}, // unknown limit: nothing to check
	} {
		err := c.cfg.checkOpenFiles(c.limit)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%d connections (target %q), limit %d: %v, want %q", c.cfg.Conns, c.cfg.Target, c.limit, err, c.want)
		}
	}
	limit := openFilesLimit()
	if limit == 0 || limit > math.MaxInt32 {
		t.Skipf("open-files limit %d", limit)
	}
	err := Config{Conns: int(limit)}.WithDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "-conns") || !strings.Contains(err.Error(), "ulimit -n") {
		t.Errorf("as many connections as the limit (%d): %v", limit, err)
	}
}

// TestReportSaysWhoseCPU: against a target, this process is only the load
// generator, and the report must not present its CPU as the service's.
func TestReportSaysWhoseCPU(t *testing.T) {
	phase := PhaseReport{Name: "balance", Seconds: 2, Requests: 100000, PerSecond: 50000, OK: 100000,
		ProcessCPU: 100, CPUPerRequest: 20}
	for _, c := range []struct {
		target      string
		want, never string
	}{
		{"", "CPU per answer            20 µs", "send at most"},
		{"http://127.0.0.1:8080", "load CPU/request          20 µs", "answer at most"},
	} {
		rep := Report{Mode: "in-process", Target: c.target, Spends: phase, Balance: phase, Check: phase}
		if c.target != "" {
			rep.Mode = "target"
		}
		var text bytes.Buffer
		rep.WriteText(&text)
		if got := strings.Count(text.String(), c.want); got != 3 {
			t.Errorf("target %q: %q appears %d times, want once per phase:\n%s", c.target, c.want, got, text.String())
		}
		if strings.Contains(text.String(), c.never) {
			t.Errorf("target %q: the report says %q:\n%s", c.target, c.never, text.String())
		}
	}
}

// TestRunAgainstTargetWithSeveralOwners: against a running server, the
// agents come from every owner key given, each owner up to its practice
// quota, a later run reusing those of earlier ones; the report says when
// the owners could not give them all.
func TestRunAgainstTargetWithSeveralOwners(t *testing.T) {
	srv, err := startInProcess(Config{IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.close(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owners, err := bootstrapOwners(ctx, srv.svc.System(), "target", 2)
	if err != nil {
		t.Fatal(err)
	}
	keys := owners[0].Keys[actors.EnvTest] + "," + owners[1].Keys[actors.EnvTest]
	per := actors.MaxActiveAgentsPractice
	for _, tc := range []struct {
		ask, want int
		origin    TargetAgents
		note      bool
	}{
		{per + 2, per + 2, TargetAgents{Created: per + 2}, false},                  // the first owner full, two from the second
		{2 * per, 2 * per, TargetAgents{Reused: per + 2, Created: per - 2}, false}, // those again, and what the second owner has left
		{2*per + 3, 2 * per, TargetAgents{Reused: 2 * per}, true},                  // more than the owners may have
	} {
		var progress bytes.Buffer
		rep, err := Run(ctx, Config{Target: "http://" + srv.addr, OwnerKey: keys, Agents: tc.ask, Conns: 4,
			Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, IdleAgents: 0, Progress: &progress})
		if err != nil {
			t.Fatalf("asking for %d agents: %v\n%s", tc.ask, err, progress.String())
		}
		if rep.Agents != tc.want || rep.TargetAgents == nil || *rep.TargetAgents != tc.origin {
			t.Errorf("asked for %d agents, the run used %d (%+v), want %d (%+v)", tc.ask, rep.Agents, rep.TargetAgents, tc.want, tc.origin)
		}
		noted := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "could reuse or create only") })
		if noted != tc.note {
			t.Errorf("asked for %d agents: notes %q, want a quota note: %v", tc.ask, rep.Notes, tc.note)
		}
		if rep.Spends.Statuses["settled"] == 0 {
			t.Errorf("asked for %d agents: no spend settled: %+v", tc.ask, rep.Spends.Statuses)
		}
	}
}

// TestParseCPULine: busy is user, nice, system, irq and softirq; steal is
// apart; idle, I/O wait and guest time are in neither; a line that is not
// the aggregate cpu line, or is cut short of softirq, reads as nothing.
func TestParseCPULine(t *testing.T) {
	for _, c := range []struct {
		line        string
		ok          bool
		busy, steal time.Duration
	}{
		{"cpu  4612550 7099 783159 3619650 101263 0 212739 132334 0 0", true,
			(4612550 + 7099 + 783159 + 212739) * 10 * time.Millisecond, 132334 * 10 * time.Millisecond},
		{"cpu  100 0 50 900 40 3 7 25 60 5", true, 160 * 10 * time.Millisecond, 25 * 10 * time.Millisecond},
		{"cpu  100 0 50 900 40 3 7", true, 160 * 10 * time.Millisecond, 0}, // no steal field yet
		{"cpu  100 0 50 900", false, 0, 0},
		{"cpu0 100 0 50 900 40 3 7 25 0 0", false, 0, 0},
		{"cpu  100 x 50 900 40 3 7 25 0 0", false, 0, 0},
	} {
		got, ok := parseCPULine(c.line)
		if ok != c.ok || got.busy != c.busy || got.steal != c.steal {
			t.Errorf("parseCPULine(%q) = %+v, %v; want busy %v steal %v, %v", c.line, got, ok, c.busy, c.steal, c.ok)
		}
	}
}

// TestReportShowsSteal: the CPU line names the hypervisor's share next to
// the machine's own.
func TestReportShowsSteal(t *testing.T) {
	phase := PhaseReport{Name: "spends", Seconds: 2, Requests: 10000, PerSecond: 5000, OK: 10000,
		ProcessCPU: 150, MachineCPU: 152, StealCPU: 41, CPUPerRequest: 300, LoadAverage: "1.50"}
	var text bytes.Buffer
	rep := Report{Mode: "in-process", Spends: phase, Balance: phase, Check: phase}
	rep.WriteText(&text)
	if want := "152 % by the whole machine, 41 % taken by the hypervisor"; strings.Count(text.String(), want) != 3 {
		t.Errorf("the report does not say %q once per phase:\n%s", want, text.String())
	}
}

// A paced phase that fell behind says how many requests it never sent; a
// closed-loop phase shows no pace at all.
func TestReportShowsThePace(t *testing.T) {
	paced := PhaseReport{Name: "spends", Seconds: 2, Requests: 5997, PerSecond: 2998.5, OK: 5997,
		OfferedPerSecond: 3000, NotSent: 3}
	var text bytes.Buffer
	(&Report{Mode: "in-process", Rate: 3000, Spends: paced}).WriteText(&text)
	for _, want := range []string{"paced at 3000 requests/s", "offered/s               3000", "never sent: 3 requests due in the window"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("paced report lacks %q:\n%s", want, text.String())
		}
	}
	text.Reset()
	closed := paced
	closed.OfferedPerSecond, closed.NotSent = 0, 0
	(&Report{Mode: "in-process", Spends: closed}).WriteText(&text)
	for _, never := range []string{"paced at", "offered/s", "never sent"} {
		if strings.Contains(text.String(), never) {
			t.Errorf("closed-loop report shows %q:\n%s", never, text.String())
		}
	}
}

// The in-process service makes its data directory in DataDir and, with
// JournalDir, its journal there apart from the data; both go with the run.
func TestInProcessFilesWhereAsked(t *testing.T) {
	data, journal := t.TempDir(), t.TempDir()
	cfg := Config{DataDir: data, JournalDir: journal, IdleTimeout: time.Minute}.WithDefaults()
	p, err := startInProcess(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(data, "guard-bench-*", "guard.db")); len(m) != 1 {
		t.Errorf("data files in %s: %v, want one guard.db", data, m)
	}
	if m, _ := filepath.Glob(filepath.Join(data, "guard-bench-*", "guard.db.journal")); len(m) != 0 {
		t.Errorf("a journal beside the data file: %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(journal, "guard-bench-journal-*", "*.wal")); len(m) == 0 {
		t.Errorf("no journal segment under %s", journal)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{data, journal} {
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%s still holds %v after the run", dir, left)
		}
	}
}

// TestJournalOfAWindow builds the journal report of a window from the
// store's counters and commit durations at its two ends.
func TestJournalOfAWindow(t *testing.T) {
	before := histogram.New()
	before.Record(50 * time.Millisecond) // a slow commit before the window: not its
	open := before.Clone()
	for range 300 {
		before.Record(time.Millisecond)
	}
	before.Record(4 * time.Millisecond)
	a := persistence.Stats{Commits: 10, Records: 100, Checkpoints: 1, MaxBatch: 20}
	b := persistence.Stats{Commits: 311, Records: 3100, Checkpoints: 4, Failures: 1, MaxBatch: 30}
	j := journalOf(a, b, before.Since(open), 2)
	want := JournalReport{Commits: 301, Records: 3000, CommitsPerSecond: 150.5, RecordsPerCommit: 3000.0 / 301,
		Checkpoints: 3, Failures: 1, MaxBatch: 30}
	ct, busy := j.CommitTime, j.CommitBusy
	j.CommitTime, j.CommitBusy = LatencyReport{}, 0
	if *j != want {
		t.Errorf("counters %+v, want %+v", *j, want)
	}
	// 304 ms of commits in a 2 s window. Percentiles are the upper bounds
	// of 1%-wide buckets; the mean is exact to the nanosecond.
	if math.Abs(busy-0.152) > 1e-9 {
		t.Errorf("committing %.4f of the window, want 0.152", busy)
	}
	within := func(got float64, want float64) bool { return got >= want && got <= want*1.01 }
	if !within(ct.P50, 1) || !within(ct.P99, 1) || !within(ct.Max, 4) || math.Abs(ct.Mean-304.0/301) > 1e-6 {
		t.Errorf("commit durations %+v, want p50 and p99 1 ms, max 4 ms, mean %.3f ms", ct, 304.0/301)
	}
}

// TestCeilingStopsRightAfterStart: a run cancelled as the ceiling server
// starts stops it before its Serve may have begun; stop must still end
// Serve rather than wait for it for ever.
func TestCeilingStopsRightAfterStart(t *testing.T) {
	for range 200 {
		c, err := startCeiling()
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- c.stop() }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the ceiling server did not stop within 10 s of its start")
		}
	}
}

// A run most of whose answers were 429 measured the target's rate limits:
// it is an error that says how to start the target, not a report of
// figures; a few 429s are reported as they are.
func TestMostlyRateLimitedIsAnError(t *testing.T) {
	rep := &Report{Spends: PhaseReport{Name: "spends", Requests: 1000, OK: 100,
		Errors: map[string]int64{"429 rate_limited": 900}}}
	if err := rep.rateLimitError(); err == nil || !strings.Contains(err.Error(), "-rate-limits=false") {
		t.Fatalf("900 of 1000 refused: %v", err)
	}
	rep.Spends.Errors["429 rate_limited"], rep.Spends.OK = 10, 990
	if err := rep.rateLimitError(); err != nil {
		t.Fatalf("10 of 1000 refused: %v", err)
	}
}
