package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
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
	// tenths counts the answers of each tenth of the measured window.
	tenths [timelineSlices]int64
	// pace is the worker's schedule in an open-loop run (Config.Rate),
	// nil in a closed-loop one; notSent counts the requests it had due in
	// the window but never sent, because the service fell behind.
	pace    *pacer
	notSent int64
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

// runPhase drives the phase from cfg.Conns workers: Warmup unmeasured,
// then Duration measured. In a closed loop (cfg.Rate 0), a request counts
// when it started and was answered inside the measured window. In an open
// loop, it counts when it was due inside the window, however late it was
// sent or answered, and its latency runs from when it was due. mark, when
// set, is called as the window opens (true) and closes (false).
func runPhase(ctx context.Context, addr string, cfg Config, run string, agents []agentCred, ph phase, seed uint64, mark func(open bool)) PhaseReport {
	begin := time.Now()
	start := begin.Add(cfg.Warmup)
	end := start.Add(cfg.Duration)
	workers := make([]*worker, cfg.Conns)
	var wg sync.WaitGroup
	if mark != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, at := range []time.Time{start, end} {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(at)):
				}
				mark(at == start)
			}
		}()
	}
	for i := range workers {
		w := newWorker(i, run, seed, agents)
		if cfg.Rate > 0 {
			w.pace = newPacer(cfg.Rate, cfg.Conns, i, begin)
		}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, addr, ph, start, end)
		}()
	}
	wg.Wait()
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
		}
		total.notSent += w.notSent
	}
	secs, cut := cfg.Duration.Seconds(), false
	if now := time.Now(); now.Before(end) { // cancelled early
		secs, cut = max(now.Sub(start).Seconds(), 0), true
	}
	r := PhaseReport{Name: ph.name, Seconds: secs, Requests: total.answered, OK: total.ok,
		Errors: total.errs, Latency: latencyOf(total.hist), OfferedPerSecond: cfg.Rate, NotSent: total.notSent}
	if secs > 0 {
		r.PerSecond = float64(total.answered) / secs
	}
	if !cut { // a cancelled run's last tenths would only look slow
		slice := secs / timelineSlices
		r.Timeline = make([]float64, timelineSlices)
		for i, n := range total.tenths {
			r.Timeline[i] = float64(n) / slice
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

func (w *worker) loop(ctx context.Context, addr string, ph phase, start, end time.Time) {
	c := newLoadConn(addr, 30*time.Second)
	defer c.close()
	var wait *time.Timer
	for ctx.Err() == nil {
		var due time.Time
		if w.pace != nil {
			if due = w.pace.take(); !due.Before(end) {
				return
			}
			if d := time.Until(due); d > 0 {
				if wait == nil {
					wait = time.NewTimer(d)
					defer wait.Stop()
				} else {
					wait.Reset(d)
				}
				select {
				case <-ctx.Done():
					return
				case <-wait.C:
				}
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
		counted := !due.Before(start) && (w.pace != nil || !t1.After(end))
		if err != nil {
			if counted {
				w.errs[transportKind(err)]++
			}
			// A refused or dropped connection fails at once; do not spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !counted {
			continue
		}
		w.answered++
		w.hist.Record(t1.Sub(due))
		w.tenths[tenthOf(t1, start, end)]++
		if sc < 200 || sc > 299 {
			w.errs[strconv.Itoa(sc)+" "+jsonField(body, "code")]++
			continue
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
// would make every occurrence distinct.
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
	return "transport: " + trimAddr(err.Error())
}

// trimAddr keeps the text of an error before its first address.
func trimAddr(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' || s[i] == '[' {
			return s[:i] + "..."
		}
	}
	return s
}
