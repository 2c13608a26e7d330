package actors

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentpay/guard/persistence"
)

// Fan-out: from a durable event to durable deliveries.
//
// The hub hands every durable event, in journal order, to onEvent, which
// queues the events of environments that have endpoints for the
// dispatcher goroutine. The dispatcher matches each event against the
// endpoints of its environment and writes the deliveries of a batch, with
// the sequence it reached in each environment (the cursor), in one journal
// record; only once that record is durable are the deliveries due. A
// restart loses nothing: pending deliveries are loaded from the journal,
// and the events after each environment's cursor are fanned out again
// (an event is fanned out to an endpoint only if it came after the
// endpoint's FromSequence). An event whose fan-out matched nothing does
// not move the stored cursor at once: it costs no write, only a look on
// the next start, and the cursor is written back when the service stops.

// newWebhooks builds the supervisor; start loads it and runs it.
func newWebhooks(s *System) *webhooks {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhooks{sys: s, sender: s.cfg.WebhookSender, ctx: ctx, cancel: cancel,
		sends: make(chan struct{}, maxWebhookSends), hooks: map[string]*hook{}, byEnv: map[string]map[string]*hook{},
		wake: make(chan struct{}, 1), cursor: map[string]uint64{}, safe: map[string]uint64{}, saved: map[string]uint64{}}
}

// start loads the endpoints and pending deliveries, subscribes to the hub,
// and starts the dispatcher, whose first job is to fan out the events a
// previous run had not. It runs before any agent resumes work, so no
// event is missed between the catch-up and the subscription.
func (w *webhooks) start() error {
	var eps []*webhookEndpoint
	err := w.sys.store.Scan(bWebhookEndpoints, nil, nil, false, func(_, v []byte) bool {
		var e webhookEndpoint
		if json.Unmarshal(v, &e) == nil {
			eps = append(eps, &e)
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, e := range eps {
		h := &hook{id: e.ID, owner: e.OwnerID, env: e.env(), pending: map[string]*pendingDelivery{}}
		h.cur.Store(e)
		h.shown.Store(e)
		w.add(h)
	}
	err = w.sys.store.Scan(bWebhookCursors, nil, nil, false, func(k, v []byte) bool {
		if len(v) == 8 {
			seq := seqOf(v)
			w.cursor[string(k)], w.safe[string(k)], w.saved[string(k)] = seq, seq, seq
		}
		return true
	})
	if err != nil {
		return err
	}
	var orphans []persistence.Op
	var loaded []*webhookDelivery
	err = w.sys.store.Scan(bWebhookDeliveries, nil, nil, false, func(k, v []byte) bool {
		var d webhookDelivery
		if json.Unmarshal(v, &d) != nil {
			return true
		}
		loaded = append(loaded, &d)
		return true
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	for _, d := range loaded {
		h := w.hooks[d.EndpointID]
		if h == nil || h.cur.Load().Status != WebhookEnabled {
			// Its endpoint went away or paused and the cleanup did not
			// reach the disk.
			orphans = append(orphans, persistence.Del(bWebhookDeliveries, []byte(d.ID)))
			continue
		}
		w.track(h, &pendingDelivery{rec: *d})
	}
	w.mu.Unlock()
	if len(orphans) > 0 {
		w.sys.store.Append(w.sys.store.Gen(), persistence.Record{Ops: orphans})
	}
	w.sys.hub.subscribe(w.onEvent)
	w.sys.busy.add(1) // the catch-up, done by the dispatcher
	w.wg.Add(1)
	go w.dispatch()
	return nil
}

func seqOf(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

// add registers an endpoint's hook. Caller must not hold w.mu.
func (w *webhooks) add(h *hook) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks[h.id] = h
	k := envKeyOf(h.owner, h.env)
	if w.byEnv[k] == nil {
		w.byEnv[k] = map[string]*hook{}
	}
	w.byEnv[k][h.id] = h
	w.count.Store(int64(len(w.hooks)))
}

// remove forgets an endpoint: its deliveries stop. Caller holds w.mu.
func (w *webhooks) remove(h *hook) {
	delete(w.hooks, h.id)
	k := envKeyOf(h.owner, h.env)
	delete(w.byEnv[k], h.id)
	if len(w.byEnv[k]) == 0 {
		delete(w.byEnv, k)
	}
	w.count.Store(int64(len(w.hooks)))
	w.forgetAll(h)
}

// onEvent runs in the hub's goroutine for every durable event: it must
// not block. Events of environments without endpoints cost one atomic
// load or one map lookup.
func (w *webhooks) onEvent(ev StoredEvent) {
	if w.count.Load() == 0 || ev.Type == "webhook.test" {
		return // a test event carries its one delivery in its own record
	}
	k := envKeyOf(ev.OwnerID, EnvOf(ev.Livemode))
	w.mu.Lock()
	wanted := !w.stopped && len(w.byEnv[k]) > 0
	w.mu.Unlock()
	if !wanted {
		return
	}
	w.inboxMu.Lock()
	w.inbox = append(w.inbox, ev)
	w.inboxMu.Unlock()
	w.sys.busy.add(1)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// dispatch is the dispatcher goroutine.
func (w *webhooks) dispatch() {
	defer w.wg.Done()
	w.catchUp()
	w.sys.busy.add(-1)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		w.inboxMu.Lock()
		batch := w.inbox
		w.inbox = nil
		w.inboxMu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), 256)
			w.fanOut(batch[:n])
			w.sys.busy.add(-n)
			batch = batch[n:]
		}
	}
}

// catchUp fans out the events each environment with endpoints has after
// its cursor: those a previous run had not fanned out when it stopped.
func (w *webhooks) catchUp() {
	type span struct {
		owner string
		env   Env
		from  uint64
	}
	var spans []span
	w.mu.Lock()
	for k, m := range w.byEnv {
		lo := uint64(0)
		first := true
		var owner string
		var env Env
		for _, h := range m {
			owner, env = h.owner, h.env
			if e := h.cur.Load(); e.Status == WebhookEnabled && (first || e.FromSequence < lo) {
				lo, first = e.FromSequence, false
			}
		}
		if first {
			continue // only paused endpoints
		}
		spans = append(spans, span{owner: owner, env: env, from: max(lo, w.cursor[k]) + 1})
	}
	w.mu.Unlock()
	for _, sp := range spans {
		prefix := prefixOf(sp.owner, string(sp.env))
		var batch []StoredEvent
		_ = w.sys.store.Scan(bEvents, prefix, seqKey(prefix, sp.from), false, func(_, v []byte) bool {
			var ev StoredEvent
			if json.Unmarshal(v, &ev) != nil {
				return true
			}
			ev.OwnerID = sp.owner
			if ev.Type != "webhook.test" {
				batch = append(batch, ev)
			}
			if len(batch) == 256 {
				w.fanOut(batch)
				batch = nil
			}
			return w.ctx.Err() == nil
		})
		if len(batch) > 0 && w.ctx.Err() == nil {
			w.fanOut(batch)
		}
	}
}

// fanOut makes the deliveries of a batch of events durable, then due.
func (w *webhooks) fanOut(batch []StoredEvent) {
	type made struct {
		h *hook
		d *pendingDelivery
	}
	var out []made
	var ops []persistence.Op
	touched := map[string]uint64{}
	w.mu.Lock()
	for _, ev := range batch {
		k := envKeyOf(ev.OwnerID, EnvOf(ev.Livemode))
		if ev.Sequence <= w.cursor[k] {
			continue // seen already (the catch-up and the hub overlap)
		}
		w.cursor[k] = ev.Sequence
		touched[k] = ev.Sequence
		for _, h := range w.byEnv[k] {
			e := h.cur.Load()
			if e.Status != WebhookEnabled || ev.Sequence <= e.FromSequence || !subscribes(e.EnabledEvents, ev.Type) {
				continue
			}
			d := &pendingDelivery{rec: newDeliveryRecord(e, &ev.Event, w.sys.nowFor(h.owner, h.env))}
			b, _ := json.Marshal(d.rec)
			ops = append(ops, persistence.Put(bWebhookDeliveries, []byte(d.rec.ID), b))
			out = append(out, made{h, d})
		}
	}
	w.mu.Unlock()
	if len(out) == 0 {
		for k, seq := range touched {
			w.safe[k] = seq // nothing to lose up to here
		}
		return
	}
	for k, seq := range touched {
		ops = append(ops, persistence.Put(bWebhookCursors, []byte(k), seqKey(nil, seq)))
	}
	t := w.sys.store.Append(w.sys.store.Gen(), persistence.Record{Ops: ops})
	if err := t.Wait(w.ctx); err != nil {
		if w.ctx.Err() == nil {
			// Not durable: the stored cursor did not move, so the next
			// start fans these events out again.
			w.sys.log.Error("webhooks: recording deliveries failed; they are retried on the next start", "err", err)
		}
		return
	}
	for k, seq := range touched {
		w.safe[k], w.saved[k] = seq, seq
	}
	w.mu.Lock()
	for _, m := range out {
		if w.hooks[m.h.id] == m.h {
			w.track(m.h, m.d)
		}
	}
	w.mu.Unlock()
}

// newDeliveryRecord is a delivery of ev to e, due at once.
func newDeliveryRecord(e *webhookEndpoint, ev *Event, now time.Time) webhookDelivery {
	return webhookDelivery{ID: NewID("whd", now), EndpointID: e.ID, OwnerID: e.OwnerID, Livemode: e.Livemode,
		EventID: ev.ID, EventType: ev.Type, EventSeq: ev.Sequence, NextAttemptAt: now, CreatedAt: now}
}

// stop ends the dispatcher and the workers and writes back the cursors
// that moved without a write (events that matched nothing).
func (w *webhooks) stop() {
	if !w.halt() {
		return
	}
	var ops []persistence.Op
	for k, seq := range w.safe {
		if seq > w.saved[k] {
			ops = append(ops, persistence.Put(bWebhookCursors, []byte(k), seqKey(nil, seq)))
		}
	}
	if len(ops) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.sys.store.Append(w.sys.store.Gen(), persistence.Record{Ops: ops}).Wait(ctx)
	}
}

// halt ends the dispatcher, the workers and the timers, as a crash would:
// nothing more is written. It reports whether this call halted them.
func (w *webhooks) halt() bool {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false
	}
	w.stopped = true
	for _, h := range w.hooks {
		for _, d := range h.pending {
			if d.timer != nil {
				d.timer.Stop()
			}
		}
	}
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	return true
}
