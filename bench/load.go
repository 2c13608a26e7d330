package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentpay/guard/internal/histogram"
)

// phase is one kind of request the workers send in a loop.
type phase struct {
	name string
	// build writes the next request (a whole HTTP/1.1 request for host).
	build func(w *worker, host string) []byte
	// spends classifies 2xx answers by the spend status in their body.
	spends bool
}

// worker is one connection's request loop and its private tallies, merged
// when the phase ends so that no counter is shared on the hot path.
type worker struct {
	id       int
	run      string
	rng      *rand.Rand
	agents   []agentCred
	n        uint64
	body     []byte
	key      []byte
	req      requestBuilder
	hist     *histogram.Histogram
	answered int64
	ok       int64
	statuses map[string]int64
	declines map[string]int64
	errs     map[string]int64
	// tenths counts the answers of each tenth of the measured window, and
	// tenthMicros holds their latencies, in microseconds, for each tenth's
	// p99 (PhaseReport.TimelineP99).
	tenths      [timelineSlices]int64
	tenthMicros [timelineSlices][]uint32
	// pace is the worker's schedule in an open-loop run (Config.Rate),
	// nil in a closed-loop one; notSent counts the requests it had due in
	// the window but never sent, because the service fell behind.
	pace    *pacer
	notSent int64
	// unanswered counts the requests left unanswered as the window
	// closed, oldest is the longest any of them had waited by then since
	// it was due, and onWire since it was sent (in an open loop behind
	// schedule, the part of the wait that is the server's).
	unanswered int64
	oldest     time.Duration
	onWire     time.Duration
}

// pacer is one connection's share of an open-loop load: a request due
// every interval, from next on, whenever the previous one is answered.
type pacer struct {
	next     time.Time
	interval time.Duration
}

// newPacer spreads conns connections evenly over one interval of the total
// rate, so that together they send at rate per second from start on
// instead of all at once.
func newPacer(rate float64, conns, id int, start time.Time) *pacer {
	interval := time.Duration(float64(conns) * float64(time.Second) / rate)
	return &pacer{next: start.Add(interval * time.Duration(id) / time.Duration(conns)), interval: interval}
}

// take returns when the next request is due and moves the schedule on.
func (p *pacer) take() time.Time {
	t := p.next
	p.next = p.next.Add(p.interval)
	return t
}

// dueBefore counts the requests due from the next one up to end
// (excluded).
func (p *pacer) dueBefore(end time.Time) int64 {
	if !p.next.Before(end) {
		return 0
	}
	return int64((end.Sub(p.next) + p.interval - 1) / p.interval)
}

// micros is d in whole microseconds, rounded up (a latency is never
// understated) and capped at what a uint32 holds (71 minutes, past any
// request's timeout).
func micros(d time.Duration) uint32 {
	us := (d + time.Microsecond - 1) / time.Microsecond
	return uint32(min(max(us, 0), math.MaxUint32))
}

// p99Millis is the 99th percentile of latencies given in microseconds, in
// milliseconds, by nearest rank (the smallest value that at least 99 % of
// them do not exceed); 0 for none. It sorts us.
func p99Millis(us []uint32) float64 {
	if len(us) == 0 {
		return 0
	}
	slices.Sort(us)
	rank := (len(us)*99 + 99) / 100 // ceil(0.99 n)
	return float64(us[rank-1]) / 1000
}

// timelineSlices is how many equal slices of the measured window
// PhaseReport.Timeline has.
const timelineSlices = 10

// tenthOf is the slice of the window [start, end] that holds at; the end
// itself belongs to the last.
func tenthOf(at, start, end time.Time) int {
	return min(max(int(timelineSlices*at.Sub(start)/end.Sub(start)), 0), timelineSlices-1)
}

func newWorker(id int, run string, seed uint64, agents []agentCred) *worker {
	return &worker{id: id, run: run, rng: rand.New(rand.NewPCG(seed, uint64(id))), agents: agents,
		hist: histogram.New(), statuses: map[string]int64{}, declines: map[string]int64{}, errs: map[string]int64{}}
}

// agent picks the agent of the next request, uniformly.
func (w *worker) agent() agentCred { return w.agents[w.rng.IntN(len(w.agents))] }

// appendAmount appends a random amount from 0.01 to 0.99.
func (w *worker) appendAmount(b []byte) []byte {
	cents := 1 + w.rng.IntN(99)
	b = append(b, '0', '.', byte('0'+cents/10), byte('0'+cents%10))
	return b
}

// spendsPhase pays a small random amount to the trusted vendor with a
// unique Idempotency-Key, for a resource no earlier request bought.
func spendsPhase() phase {
	return phase{
		name: "spends",
		build: func(w *worker, host string) []byte {
			w.n++
			w.req.start("POST", "/v1/spends", host, w.agent().Key)
			w.key = append(w.key[:0], w.run...)
			w.key = append(w.key, '-')
			w.key = strconv.AppendInt(w.key, int64(w.id), 10)
			w.key = append(w.key, '-')
			w.key = strconv.AppendUint(w.key, w.n, 10)
			w.req.header("Idempotency-Key", w.key)
			b := append(w.body[:0], `{"amount":"`...)
			b = w.appendAmount(b)
			b = append(b, `","destination":"`+Destination+`","resource":{"url":"https://`+Destination+`/reports/`...)
			b = append(b, w.key...)
			b = append(b, `"}}`...)
			w.body = b
			return w.req.finish(b)
		},
		spends: true,
	}
}

// balancePhase reads an agent's balance.
func balancePhase() phase {
	return phase{
		name: "balance",
		build: func(w *worker, host string) []byte {
			w.req.start("GET", "/v1/balance", host, w.agent().Key)
			return w.req.finish(nil)
		},
	}
}

// checkPhase asks whether a small payment would pass; it reserves nothing.
func checkPhase() phase {
	return phase{
		name: "check",
		build: func(w *worker, host string) []byte {
			w.req.start("POST", "/v1/spends/check", host, w.agent().Key)
			b := append(w.body[:0], `{"destination":"`+Destination+`","amount":"`...)
			b = w.appendAmount(b)
			b = append(b, `"}`...)
			w.body = b
			return w.req.finish(b)
		},
	}
}

// loadTimeout bounds one request of the load on a server that stopped
// answering; the end of the measured window and an interrupt cut it
// short.
const loadTimeout = 30 * time.Second

// drainGrace is the longest the requests still in flight as the window
// closes are waited for before they are abandoned (a window shorter than
// it waits its own length). They are counted as unanswered at the close
// either way; waiting for them leaves the server idle for the next phase
// and lets what they spent be read after the run, and the grace bounds
// the wait on a server that stopped answering.
const drainGrace = time.Second

// runPhase drives the phase from cfg.Conns workers: Warmup unmeasured,
// then Duration measured. A request counts when it was answered inside
// the measured window and, in a closed loop (cfg.Rate 0), started in it,
// in an open loop, was due in it, however late it was sent; its latency
// runs from when it was due. A request still unanswered as the window
// closes is counted apart, with how long it had waited by then, and
// abandoned if still unanswered a grace later (see drainGrace): a server
// that stalls or stops answering shows there rather than not at all. An
// interrupt (ctx ending) abandons the requests in flight at once. mark,
// when set, is called as the window opens (true) and closes (false), or
// is cut short by the end of ctx.
func runPhase(ctx context.Context, addr string, cfg Config, run string, agents []agentCred, ph phase, seed uint64, mark func(open bool)) PhaseReport {
	begin := time.Now()
	start := begin.Add(cfg.Warmup)
	end := start.Add(cfg.Duration)
	window := &windowWatch{mark: mark}
	workers := make([]*worker, cfg.Conns)
	// The workers send nothing after the end of the window, and abandon
	// the requests still in flight a grace later (drainGrace, or the
	// window's length when shorter), or at once when ctx ends (an
	// interrupt).
	wctx, cancel := context.WithDeadline(ctx, end.Add(min(drainGrace, cfg.Duration)))
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		window.watch(ctx, start, end)
	}()
	for i := range workers {
		w := newWorker(i, run, seed, agents)
		if cfg.Rate > 0 {
			w.pace = newPacer(cfg.Rate, cfg.Conns, i, begin)
		}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(wctx, addr, ph, start, end)
		}()
	}
	wg.Wait()
	return phaseReport(ph, cfg, mergeWorkers(workers), window, start)
}

// windowWatch follows the measured window from a goroutine of its own:
// whether it opened, and when it closed (its end, or earlier when the run
// was interrupted).
type windowWatch struct {
	mark   func(open bool)
	opened bool
	closed time.Time
	cut    bool
}

// watch waits for the window's start and end, calling mark at each, and
// returns early when ctx ends; a window cut short is closed then.
func (ww *windowWatch) watch(ctx context.Context, start, end time.Time) {
	if !sleepUntil(ctx, start) {
		return
	}
	ww.opened = true
	if ww.mark != nil {
		ww.mark(true)
	}
	ww.cut = !sleepUntil(ctx, end)
	ww.closed = time.Now()
	if ww.mark != nil {
		ww.mark(false)
	}
}

// sleepUntil waits until at, or reports false when ctx ends first (or
// has ended already, even if at has passed).
func sleepUntil(ctx context.Context, at time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// mergeWorkers adds up the workers' tallies.
func mergeWorkers(workers []*worker) *worker {
	total := &worker{hist: histogram.New(), statuses: map[string]int64{}, declines: map[string]int64{}, errs: map[string]int64{}}
	for _, w := range workers {
		total.hist.Merge(w.hist)
		total.answered += w.answered
		total.ok += w.ok
		for k, v := range w.statuses {
			total.statuses[k] += v
		}
		for k, v := range w.declines {
			total.declines[k] += v
		}
		for k, v := range w.errs {
			total.errs[k] += v
		}
		for i, n := range w.tenths {
			total.tenths[i] += n
			total.tenthMicros[i] = append(total.tenthMicros[i], w.tenthMicros[i]...)
		}
		total.notSent += w.notSent
		total.unanswered += w.unanswered
		total.oldest = max(total.oldest, w.oldest)
		total.onWire = max(total.onWire, w.onWire)
	}
	return total
}

// phaseReport turns the phase's tallies into its report. A window that
// never opened (interrupted during the warm-up) measured nothing: its
// report says only that it was cut.
func phaseReport(ph phase, cfg Config, total *worker, window *windowWatch, start time.Time) PhaseReport {
	r := PhaseReport{Name: ph.name, OfferedPerSecond: cfg.Rate, Interrupted: window.cut || !window.opened}
	if !window.opened {
		return r
	}
	secs := cfg.Duration.Seconds()
	if window.cut {
		secs = max(window.closed.Sub(start).Seconds(), 0)
	}
	r.Seconds, r.Requests, r.OK, r.Errors = secs, total.answered, total.ok, total.errs
	r.Latency, r.NotSent = latencyOf(total.hist), total.notSent
	r.Unanswered, r.OldestUnanswered, r.onWire = total.unanswered, ms(total.oldest), total.onWire
	if secs > 0 {
		r.PerSecond = float64(total.answered) / secs
	}
	if !window.cut { // a cancelled run's last tenths would only look slow
		slice := secs / timelineSlices
		r.Timeline = make([]float64, timelineSlices)
		r.TimelineP99 = make([]float64, timelineSlices)
		for i, n := range total.tenths {
			r.Timeline[i] = float64(n) / slice
			r.TimelineP99[i] = p99Millis(total.tenthMicros[i])
		}
	}
	if ph.spends {
		r.Statuses, r.Declines = total.statuses, total.declines
		if secs > 0 {
			r.SettledPerSecond = float64(total.statuses["settled"]) / secs
		}
	}
	return r
}

// loop sends the phase's requests until ctx ends, which it does at the
// end of the window or on an interrupt.
func (w *worker) loop(ctx context.Context, addr string, ph phase, start, end time.Time) {
	c := newLoadConn(addr, loadTimeout)
	defer c.close()
	defer context.AfterFunc(ctx, c.abort)()
	var wait *time.Timer
	for ctx.Err() == nil {
		var due time.Time
		if w.pace != nil {
			if due = w.pace.take(); !due.Before(end) {
				return
			}
			if !w.waitUntil(ctx, &wait, due) {
				return
			}
		}
		req := ph.build(w, addr)
		t0 := time.Now()
		if !t0.Before(end) {
			if w.pace != nil && !due.Before(start) {
				// Behind schedule as the window closes: what was still
				// due in it is reported, not sent late.
				w.notSent += 1 + w.pace.dueBefore(end)
			}
			return
		}
		if w.pace == nil {
			due = t0
		}
		sc, body, err := c.do(req, t0)
		t1 := time.Now()
		if t1.After(end) || errors.Is(err, errAborted) {
			cut := t1
			if cut.After(end) {
				cut = end
			}
			w.leftUnanswered(due, t0, cut, start)
			return
		}
		w.record(ph, sc, body, err, due, t1, start, end)
		if err != nil {
			// A refused or dropped connection fails at once; do not spin.
			w.waitUntil(ctx, &wait, t1.Add(10*time.Millisecond))
		}
	}
}

// waitUntil waits on the worker's timer until at, or reports false when
// ctx ends first.
func (w *worker) waitUntil(ctx context.Context, wait **time.Timer, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return true
	}
	if *wait == nil {
		*wait = time.NewTimer(d)
	} else {
		(*wait).Reset(d)
	}
	select {
	case <-ctx.Done():
		(*wait).Stop()
		return false
	case <-(*wait).C:
		return true
	}
}

// leftUnanswered counts a request, due at due and sent at sent, that was
// still unanswered as the window closed (or was cut) at cut, whenever it
// was due: a request stuck since the warm-up is what a frozen server looks
// like. One abandoned before the window opened measured nothing.
func (w *worker) leftUnanswered(due, sent, cut, start time.Time) {
	if cut.Before(start) {
		return
	}
	w.unanswered++
	w.oldest = max(w.oldest, cut.Sub(due))
	w.onWire = max(w.onWire, cut.Sub(sent))
}

// record tallies a request answered, or failed, inside the window; one
// due before it (the warm-up) is not counted.
func (w *worker) record(ph phase, sc int, body []byte, err error, due, t1, start, end time.Time) {
	if due.Before(start) {
		return
	}
	if err != nil {
		w.errs[transportKind(err)]++
		return
	}
	w.answered++
	w.hist.Record(t1.Sub(due))
	tenth := tenthOf(t1, start, end)
	w.tenths[tenth]++
	w.tenthMicros[tenth] = append(w.tenthMicros[tenth], micros(t1.Sub(due)))
	if sc < 200 || sc > 299 {
		w.errs[strconv.Itoa(sc)+" "+jsonField(body, "code")]++
		return
	}
	w.ok++
	if ph.spends {
		st := jsonField(body, "status")
		w.statuses[st]++
		if st == "declined" {
			w.declines[jsonField(body, "decline_reason")]++
		}
	}
}

// jsonField returns the first string value of "name" in a JSON body. For a
// spend, the first "status" is the spend's own: it precedes the nested
// objects (approval, settlement) that carry a status of their own. This
// costs a scan instead of a decode, which matters when the load generator
// shares the cores with the server it measures.
func jsonField(body []byte, name string) string {
	pat := make([]byte, 0, len(name)+4)
	pat = append(pat, '"')
	pat = append(pat, name...)
	pat = append(pat, '"', ':', '"')
	i := bytes.Index(body, pat)
	if i < 0 {
		return "?"
	}
	rest := body[i+len(pat):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "?"
	}
	return string(rest[:j])
}

// transportKind names a client-side failure without the addresses that
// would make every occurrence distinct, keeping its cause: "dial tcp:
// connection refused", not "dial tcp 127.0.0.1:8080: connect: ...".
func transportKind(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "transport: connection closed"
	case errors.Is(err, errChunked):
		return "transport: " + errChunked.Error()
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return "transport: timeout"
	}
	return "transport: " + withoutAddrs(err.Error())
}

// withoutAddrs shortens an error to what it was doing and its final
// cause: the first part of "op tcp ADDR->ADDR: syscall: cause" without
// its addresses, then the last part.
func withoutAddrs(s string) string {
	parts := strings.Split(s, ": ")
	var head []string
	for _, word := range strings.Fields(parts[0]) {
		if !isAddr(word) {
			head = append(head, word)
		}
	}
	out := strings.Join(head, " ")
	if len(parts) > 1 {
		if out != "" {
			out += ": "
		}
		out += parts[len(parts)-1]
	}
	return out
}

// isAddr reports whether a word is a network address ("127.0.0.1:8080",
// "[::1]:80", "10.0.0.1:5->10.0.0.2:80"): it holds a digit and a colon, or
// opens with a bracket.
func isAddr(word string) bool {
	return strings.HasPrefix(word, "[") || strings.ContainsAny(word, "0123456789") && strings.Contains(word, ":")
}
