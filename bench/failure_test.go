package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
)

// frozenServer accepts connections and reads what they send, but never
// answers: a server stuck in a stall. It returns its address.
func frozenServer(t *testing.T) string {
	addr, _ := frozenServerSeen(t)
	return addr
}

// frozenServerSeen is frozenServer that also tells, on the channel, each
// request line it reads.
func frozenServerSeen(t *testing.T) (string, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 64)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go func() {
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.Contains(line, "HTTP/1.1") {
						select {
						case seen <- strings.TrimSpace(line):
						default:
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), seen
}

// oneAgent is the load's agent list against a fake server.
var oneAgent = []agentCred{{ID: "agt_1", Key: "svc_test_agent_x"}}

// TestTransportKindKeepsTheCause: an error's label drops the addresses,
// which would make every occurrence distinct, but keeps what failed.
func TestTransportKindKeepsTheCause(t *testing.T) {
	for in, want := range map[string]string{
		"dial tcp 127.0.0.1:8080: connect: connection refused":                      "dial tcp: connection refused",
		"read tcp 127.0.0.1:5555->127.0.0.1:8080: read: connection reset by peer":   "read tcp: connection reset by peer",
		"write tcp [::1]:5555->[::1]:8080: write: broken pipe":                      "write tcp: broken pipe",
		"dial tcp: lookup nowhere.invalid on 10.0.0.53:53: no such host":            "dial tcp: no such host",
		"malformed status line \"SPDY/3 200 OK\\r\\n\"":                             "malformed status line \"SPDY/3 200 OK\\r\\n\"",
		"socket: too many open files":                                               "socket: too many open files",
		"dial tcp 10.1.2.3:80: connect: no route to host (10.1.2.3 is unreachable)": "dial tcp: no route to host (10.1.2.3 is unreachable)",
	} {
		if got := withoutAddrs(in); got != want {
			t.Errorf("withoutAddrs(%q) = %q, want %q", in, got, want)
		}
	}
	// A real refused connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = net.Dial("tcp", addr)
	if got := transportKind(err); got != "transport: dial tcp: connection refused" {
		t.Errorf("a refused connection is labelled %q", got)
	}
}

// TestFrozenServerIsCountedUnanswered: a server that stops answering
// leaves requests unanswered as the window closes; they are counted with
// how long they waited (not left out, not waited on for the load's
// timeout), and the phase fails as stalled.
func TestFrozenServerIsCountedUnanswered(t *testing.T) {
	addr := frozenServer(t)
	cfg := Config{Conns: 2, Duration: 50 * time.Millisecond}
	p := runPhase(context.Background(), addr, cfg, "run", oneAgent, balancePhase(), 1, nil)
	if p.Unanswered != 2 || p.OldestUnanswered <= 0 || p.Requests != 0 || len(p.Errors) != 0 {
		t.Fatalf("a frozen server: %d unanswered (oldest %.1f ms), %d answered, errors %v; want the 2 in flight unanswered",
			p.Unanswered, p.OldestUnanswered, p.Requests, p.Errors)
	}
	if !p.Stalled() || !strings.Contains(p.serverFailure(), "2 requests were still unanswered when the window closed") {
		t.Errorf("stalled %v, failure %q", p.Stalled(), p.serverFailure())
	}
	var text bytes.Buffer
	(&Report{Balance: p}).WriteText(&text)
	if !strings.Contains(text.String(), "still unanswered when the window closed, the oldest waiting") {
		t.Errorf("the report does not show the unanswered requests:\n%s", text.String())
	}
}

// TestInterruptAbandonsRequestsInFlight: an interrupt ends the phase at
// once, abandoning the request a frozen server holds rather than waiting
// out its timeout, and the CPU is read at the cut.
func TestInterruptAbandonsRequestsInFlight(t *testing.T) {
	addr, seen := frozenServerSeen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-seen // the request is with the server
		cancel()
	}()
	var (
		mu    sync.Mutex
		marks []bool
	)
	mark := func(open bool) {
		mu.Lock()
		defer mu.Unlock()
		marks = append(marks, open)
	}
	cfg := Config{Conns: 1, Duration: time.Hour}
	p := runPhase(ctx, addr, cfg, "run", oneAgent, balancePhase(), 1, mark)
	if !p.Interrupted || p.Unanswered != 1 || len(p.Errors) != 0 {
		t.Fatalf("interrupted %v, %d unanswered, errors %v; want the request in flight abandoned", p.Interrupted, p.Unanswered, p.Errors)
	}
	if p.Seconds <= 0 || p.Seconds >= time.Hour.Seconds() {
		t.Errorf("measured %.3f s, want the part of the window before the interrupt", p.Seconds)
	}
	if !slices.Equal(marks, []bool{true, false}) {
		t.Errorf("window marks %v, want it opened and closed at the cut", marks)
	}
	if p.Stalled() {
		t.Error("an interrupt's abandoned requests are taken for a stall")
	}
}

// TestServerErrorsFailTheRun: transport errors and 5xx answers make the
// run a failure that says what the server did and how many times.
func TestServerErrorsFailTheRun(t *testing.T) {
	good := PhaseReport{Name: "spends", Seconds: 1, Requests: 100, OK: 100, Statuses: map[string]int64{"settled": 100}}
	rep := &Report{Spends: good, Check: PhaseReport{Name: "check", Seconds: 1, Requests: 100, OK: 97,
		Errors: map[string]int64{"503 unavailable": 3, "transport: dial tcp: connection refused": 5, "409 conflict": 1}}}
	err := rep.judge()
	for _, want := range []string{"in the check phase the server stopped answering 5 requests (dial tcp: connection refused=5)",
		"and the server answered 3 requests with a server error (503 unavailable=3)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q", err, want)
		}
	}
	if !rep.ServerFailed || len(rep.Failures) != 1 || rep.RateLimited || rep.MostlyDeclined {
		t.Errorf("verdicts: server failed %v, rate limited %v, mostly declined %v, failures %q", rep.ServerFailed, rep.RateLimited, rep.MostlyDeclined, rep.Failures)
	}
	rep = &Report{Spends: good}
	if err := rep.judge(); err != nil || rep.ServerFailed {
		t.Errorf("a clean run: %v", err)
	}
}

// TestRunStopsWhenTheServerDies: a target that dies in the middle of the
// spends phase fails the run, which says so and runs no later phase
// against a server that is gone.
func TestRunStopsWhenTheServerDies(t *testing.T) {
	srv, err := startInProcess(Config{IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			if err := srv.close(); err != nil {
				t.Errorf("stopping the target: %v", err)
			}
		})
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owners, err := bootstrapOwners(ctx, srv.svc.System(), "dies", 1)
	if err != nil {
		t.Fatal(err)
	}
	progress := &cancelWhen{want: "spends: ", cancel: func() { go stop() }}
	rep, err := Run(ctx, Config{Target: "http://" + srv.addr, OwnerKey: owners[0].Keys[actors.EnvTest], Agents: 2, Conns: 2,
		Duration: 300 * time.Millisecond, Progress: progress})
	if err == nil || !strings.Contains(err.Error(), "in the spends phase the server stopped answering") ||
		!strings.Contains(err.Error(), "so the run stopped there") {
		t.Fatalf("a run whose server died: %v, want an error saying it stopped answering\n%s", err, progress)
	}
	if rep == nil || !rep.ServerFailed || !slices.Equal(rep.NotRun, []string{"balance", "check"}) || rep.Balance.Name != "" || rep.Check.Name != "" {
		t.Fatalf("report %+v, want the spends phase failed and the reads not run", rep)
	}
	if n, kinds := rep.Spends.transportErrors(); n == 0 || !strings.Contains(kinds, "connection refused") {
		t.Errorf("transport errors %d (%s), want refused connections named as such", n, kinds)
	}
	if c := rep.Changes; c == nil || len(c.KeysLeftActive) != 2 || !strings.Contains(err.Error(), "could not revoke 2 agent key(s)") {
		t.Errorf("changes %+v, error %v: want the two keys left active named", c, err)
	}
}

// TestInterruptedRunSaysSo: a run interrupted between its phases reports
// what it measured, marked interrupted, and lists the phase it never ran,
// in the text and the JSON.
func TestInterruptedRunSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progress := &cancelWhen{want: "check: ", cancel: cancel}
	rep, err := Run(ctx, Config{Agents: 2, Conns: 1, Duration: 50 * time.Millisecond, IdleTimeout: time.Minute,
		Phases: []string{"spends", "check"}, Progress: progress})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("an interrupted run: %v", err)
	}
	if rep == nil || !rep.Interrupted || !slices.Equal(rep.NotRun, []string{"check"}) || rep.Check.Name != "" || rep.Spends.Requests == 0 {
		t.Fatalf("report %+v, want spends measured, check not run, marked interrupted", rep)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(js, &top); err != nil {
		t.Fatal(err)
	}
	if top["interrupted"] != true || !slices.Equal(toStrings(top["phases_not_run"]), []string{"check"}) {
		t.Errorf("JSON report: interrupted %v, phases not run %v", top["interrupted"], top["phases_not_run"])
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, want := range []string{"INTERRUPTED", "not run: check"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestReportOfAPhaseCutShort: a phase cut in its window shows the seconds
// it measured, not those asked for, and CPU it did not measure as such.
func TestReportOfAPhaseCutShort(t *testing.T) {
	rep := &Report{Mode: "in-process", Duration: Duration(3 * time.Second), Interrupted: true, NumCPU: 2,
		Spends:  PhaseReport{Name: "spends", Seconds: 1.5, Requests: 300, PerSecond: 200, Interrupted: true, LoadAverage: "0.40"},
		NotRun:  []string{"balance", "check"},
		Balance: PhaseReport{}}
	var text bytes.Buffer
	rep.WriteText(&text)
	out := text.String()
	for _, want := range []string{"INTERRUPTED", "interrupted after 1.5 s of its window", "(300 in 1.5 s)", "CPU               not measured", "not run: balance, check"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"3s measured per phase", "CPU                        0 %"} {
		if strings.Contains(out, never) {
			t.Errorf("text report says %q:\n%s", never, out)
		}
	}
}

// TestCeilingNotComparedAgainstTargetOrRate: the ceiling and the spend
// floor are handlers in the bench's own process driven as fast as they
// answer; a -target server or a paced load is no share of them, and the
// report gives the figures with why they are not compared.
func TestCeilingNotComparedAgainstTargetOrRate(t *testing.T) {
	slices3 := []PhaseReport{{Name: "ceiling before balance", PerSecond: 1000}, {Name: "ceiling between", PerSecond: 1000}, {Name: "ceiling after check", PerSecond: 1000}}
	reads := []PhaseReport{{Name: "balance", PerSecond: 1220}, {Name: "check", PerSecond: 30}}
	floor := []PhaseReport{{Name: "floor before spends", PerSecond: 900}, {Name: "floor after spends", PerSecond: 1100}}
	spends := PhaseReport{Name: "spends", PerSecond: 260, SettledPerSecond: 250}
	for _, c := range []struct {
		cfg             Config
		want, wantFloor string
	}{
		{Config{Target: "http://127.0.0.1:8080"}, "-target server runs elsewhere", "the floor is a handler inside the bench process"},
		{Config{Rate: 30}, "-rate paces the reads", "-rate paces the spends"},
	} {
		reason := ceilingIncomparable(c.cfg, "ceiling", "reads")
		if !strings.Contains(reason, c.want) {
			t.Errorf("%+v: reason %q, want one saying %q", c.cfg, reason, c.want)
		}
		cr := newCeilingReport(reason, slices3, reads...)
		if cr.BalanceShare != 0 || cr.CheckShare != 0 || cr.Balance != 1000 {
			t.Errorf("%+v: %+v, want the ceilings without shares", c.cfg, cr)
		}
		var text bytes.Buffer
		writeCeiling(&text, cr)
		if strings.Contains(text.String(), "% of the ceiling") || !strings.Contains(text.String(), "not compared with the reads: "+reason) {
			t.Errorf("%+v: ceiling shown as\n%s", c.cfg, text.String())
		}

		reason = ceilingIncomparable(c.cfg, "floor", "spends")
		if !strings.Contains(reason, c.wantFloor) {
			t.Errorf("%+v: floor's reason %q, want one saying %q", c.cfg, reason, c.wantFloor)
		}
		fr := newFloorReport(reason, floor, spends)
		if fr.Share != 0 || fr.PerSecond != 1000 {
			t.Errorf("%+v: %+v, want the floor without a share", c.cfg, fr)
		}
		text.Reset()
		writeFloor(&text, fr)
		if strings.Contains(text.String(), "% of the floor") || !strings.Contains(text.String(), "not compared with the spends: "+reason) {
			t.Errorf("%+v: floor shown as\n%s", c.cfg, text.String())
		}
	}
	if reason := ceilingIncomparable(Config{}, "ceiling", "reads"); reason != "" {
		t.Errorf("in-process closed loop: not compared because %q", reason)
	}
	if cr := newCeilingReport("", slices3, reads...); cr.BalanceShare != 122 {
		t.Errorf("in-process closed loop: balance share %.0f %%, want 122", cr.BalanceShare)
	}
	// The settled spends, not every answer, against the mean of the two
	// slices; with one slice (a run cut short) there is no share.
	if fr := newFloorReport("", floor, spends); fr.Share != 25 {
		t.Errorf("in-process closed loop: spends' share %.1f %% of the floor, want 25", fr.Share)
	}
	if fr := newFloorReport("", floor[:1], spends); fr.Share != 0 || fr.PerSecond != 0 {
		t.Errorf("one slice of the floor: %+v, want no mean and no share", fr)
	}
}

// TestStalledIsTheServersWait: a request on the wire through the whole
// window is a stall; an open loop's lag behind its schedule is not,
// however long it makes the oldest wait.
func TestStalledIsTheServersWait(t *testing.T) {
	for _, c := range []struct {
		name string
		p    PhaseReport
		want bool
	}{
		{"sent before the window, unanswered through it", PhaseReport{Seconds: 1, Requests: 900, Unanswered: 1, OldestUnanswered: 1200, onWire: 1200 * time.Millisecond}, true},
		{"nothing answered", PhaseReport{Seconds: 1, Unanswered: 2, OldestUnanswered: 40, onWire: 40 * time.Millisecond}, true},
		{"behind schedule, answered promptly", PhaseReport{Seconds: 1, Requests: 900, Unanswered: 4, OldestUnanswered: 3000, onWire: 3 * time.Millisecond}, false},
		{"the load in flight", PhaseReport{Seconds: 1, Requests: 900, Unanswered: 4, OldestUnanswered: 3, onWire: 3 * time.Millisecond}, false},
		{"cut by an interrupt", PhaseReport{Seconds: 1, Unanswered: 2, OldestUnanswered: 1500, onWire: 1500 * time.Millisecond, Interrupted: true}, false},
	} {
		if got := c.p.Stalled(); got != c.want {
			t.Errorf("%s: stalled %v, want %v", c.name, got, c.want)
		}
	}
}
