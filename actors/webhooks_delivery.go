package actors

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/agentpay/guard/persistence"
)

// Delivery: from a durable delivery to the endpoint's answer.
//
// An endpoint receives its events in sequence order: only its pending
// delivery of the lowest event sequence, its head, is ever attempted, and
// the others wait behind it until it is delivered or given up. Spec 6.3
// has receivers drop an event whose sequence is lower than one they
// applied; an event retried after later ones had gone through would be
// dropped by every such receiver, and lost to the owner's books. Waiting
// behind a failing head also paces the failures: an endpoint down for a
// minute during a burst fails once per retry of its head, not once per
// event, so it is not paused (20 failures in a row) by a blip.
//
// The head waits on a timer of the service clock until its NextAttemptAt,
// which is on its environment's clock: when a practice clock moves,
// clockMoved re-arms it, and it becomes ready at once when due. The ready
// head of an endpoint is sent by a worker goroutine that exists while the
// endpoint has a ready delivery; at most maxWebhookSends attempts are in
// flight across all endpoints. Each
// attempt's outcome is journaled before the next attempt of that endpoint:
// delivered (the delivery is deleted), failed (the next attempt is
// scheduled, or the delivery given up after WebhookAttempts), and the
// endpoint's count of consecutive failures, which pauses it at
// WebhookPauseAfter.
//
// Ready deliveries count as running work for System.Quiesce, from the
// moment they become ready until their outcome is recorded; deliveries
// parked on a timer do not.

// track makes a delivery pending for its endpoint. Caller holds w.mu.
func (w *webhooks) track(h *hook, d *pendingDelivery) {
	if w.stopped {
		return
	}
	old := h.head()
	h.pending[d.rec.ID] = d
	if old != nil && d.rec.EventSeq < old.rec.EventSeq {
		// An older event (loaded after a newer one at a start, or sent
		// again on request) goes first: the head it displaces waits.
		w.block(h, old)
	}
	w.schedule(h, d, w.sys.nowFor(h.owner, h.env))
}

// head is the pending delivery of h with the lowest event sequence, the
// only one that may be attempted; nil when none is pending. Caller holds
// w.mu.
func (h *hook) head() *pendingDelivery {
	var first *pendingDelivery
	for _, d := range h.pending {
		if first == nil || d.rec.EventSeq < first.rec.EventSeq {
			first = d
		}
	}
	return first
}

// block stops d's timer and takes it out of the ready queue: an older
// delivery of its endpoint goes first. An attempt already out finishes;
// its outcome schedules d again only if it is the head by then. Caller
// holds w.mu.
func (w *webhooks) block(h *hook, d *pendingDelivery) {
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	for i, r := range h.ready {
		if r == d {
			h.ready = append(h.ready[:i], h.ready[i+1:]...)
			d.ready = false
			w.sys.busy.add(-1)
			break
		}
	}
}

// advance schedules the endpoint's new head once the old one left.
// Caller holds w.mu.
func (w *webhooks) advance(h *hook) {
	if d := h.head(); d != nil && !d.ready && d.timer == nil {
		w.schedule(h, d, w.sys.nowFor(h.owner, h.env))
	}
}

// schedule arms d's timer, or makes it ready when due; a delivery behind
// an older one of its endpoint waits unarmed (see advance). Caller holds
// w.mu.
func (w *webhooks) schedule(h *hook, d *pendingDelivery, now time.Time) {
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if h.head() != d {
		return
	}
	wait := d.rec.NextAttemptAt.Sub(now)
	if w.resetAway(h, d) {
		// Its event went with a practice reset, and its retry time is on
		// the clock the reset set back: waiting for it would hold the
		// endpoint's newer events for as long as that clock had been
		// moved ahead. The attempt finds the event gone and drops it.
		wait = 0
	}
	if wait <= 0 {
		w.makeReady(h, d)
		return
	}
	gen := d.gen
	d.timer = w.sys.clock.AfterFunc(wait, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped || d.gen != gen || d.ready || h.pending[d.rec.ID] != d {
			return
		}
		d.timer = nil
		w.makeReady(h, d)
	})
}

// resetAway reports whether d's event is one a practice reset removed
// (its sequence at or below the environment's floor).
func (w *webhooks) resetAway(h *hook, d *pendingDelivery) bool {
	if h.env != EnvTest {
		return false
	}
	e, err := w.sys.env(h.owner, h.env)
	return err == nil && d.rec.EventSeq <= e.eventFloor.Load()
}

// makeReady queues d for its endpoint's worker. Caller holds w.mu.
func (w *webhooks) makeReady(h *hook, d *pendingDelivery) {
	d.ready = true
	i := sort.Search(len(h.ready), func(i int) bool { return h.ready[i].rec.EventSeq > d.rec.EventSeq })
	h.ready = append(h.ready, nil)
	copy(h.ready[i+1:], h.ready[i:])
	h.ready[i] = d
	w.sys.busy.add(1)
	if !h.running {
		h.running = true
		w.wg.Add(1)
		go w.work(h)
	}
}

// forget drops a pending delivery from memory. Caller holds w.mu.
func (w *webhooks) forget(h *hook, id string) {
	d := h.pending[id]
	if d == nil {
		return
	}
	delete(h.pending, id)
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.gen++
	if d.ready {
		for i, r := range h.ready {
			if r == d {
				h.ready = append(h.ready[:i], h.ready[i+1:]...)
				w.sys.busy.add(-1)
				break
			}
		}
	}
}

// forgetAll drops every pending delivery of h from memory. Caller holds w.mu.
func (w *webhooks) forgetAll(h *hook) {
	for id := range h.pending {
		w.forget(h, id)
	}
}

// clockMoved re-arms the deliveries of an environment whose practice
// clock moved; those now due are ready before it returns, so a Quiesce
// that follows waits for their attempts.
func (w *webhooks) clockMoved(ownerID string, env Env) {
	now := w.sys.nowFor(ownerID, env)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	for _, h := range w.byEnv[envKeyOf(ownerID, env)] {
		for _, d := range h.pending {
			if !d.ready {
				w.schedule(h, d, now)
			}
		}
	}
}

// work is an endpoint's worker: it sends the ready deliveries one by one
// and ends when none is left.
func (w *webhooks) work(h *hook) {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		if w.stopped || len(h.ready) == 0 {
			h.running = false
			w.mu.Unlock()
			return
		}
		d := h.ready[0]
		h.ready = h.ready[1:]
		w.mu.Unlock()
		w.attempt(h, d)
		w.sys.busy.add(-1)
	}
}

// attempt sends d once and records the outcome.
func (w *webhooks) attempt(h *hook, d *pendingDelivery) {
	e := h.cur.Load()
	ev, found := w.event(e.OwnerID, e.env(), d.rec.EventSeq, d.rec.EventID)
	if e.Status != WebhookEnabled || !found {
		w.drop(h, d)
		return
	}
	if w.sender == nil {
		return // no sender configured: the delivery stays on disk
	}
	select {
	case w.sends <- struct{}{}:
	case <-w.ctx.Done():
		return
	}
	res := w.sender.Send(w.ctx, WebhookRequest{URL: e.URL, Body: ev, Secrets: e.secrets(w.sys.nowFor(e.OwnerID, e.env())),
		Timestamp: w.sys.clock.Now(), Livemode: e.env() == EnvLive})
	<-w.sends
	if w.ctx.Err() != nil {
		return // stopping: the outcome is unknown and the delivery stays pending on disk
	}
	w.record(h, d, res)
}

// event is the stored event's envelope exactly as GET /v1/events lists it.
// An event a practice reset removed is not found, though its record may
// wait for the reset's sweep.
func (w *webhooks) event(ownerID string, env Env, seq uint64, id string) ([]byte, bool) {
	if e, err := w.sys.env(ownerID, env); err == nil && seq <= e.eventFloor.Load() {
		return nil, false
	}
	raw, err := w.sys.store.Get(bEvents, seqKey(prefixOf(ownerID, string(env)), seq))
	if err != nil || raw == nil {
		return nil, false
	}
	var ev StoredEvent
	if json.Unmarshal(raw, &ev) != nil || ev.ID != id {
		return nil, false
	}
	return mustJSON(ev.Event), true
}

// drop deletes a delivery that can no longer be sent.
func (w *webhooks) drop(h *hook, d *pendingDelivery) {
	t := w.sys.store.Append(w.sys.store.Gen(), persistence.Record{Ops: []persistence.Op{
		persistence.Del(bWebhookDeliveries, []byte(d.rec.ID))}})
	_ = t.Wait(w.ctx)
	w.mu.Lock()
	w.forget(h, d.rec.ID)
	w.advance(h)
	w.mu.Unlock()
}

// record journals an attempt's outcome and schedules what follows.
func (w *webhooks) record(h *hook, d *pendingDelivery, res WebhookResult) {
	h.change.Lock()
	defer h.change.Unlock()
	cur := h.cur.Load()
	w.mu.Lock()
	live := w.hooks[h.id] == h
	w.mu.Unlock()
	if !live || cur.Status != WebhookEnabled {
		// Deleted or paused by its owner while the attempt was out: the
		// delivery went with it.
		w.drop(h, d)
		return
	}
	env, err := w.sys.env(cur.OwnerID, cur.env())
	if err != nil {
		w.retryLater(h, d, err)
		return
	}
	e := *cur
	now := env.now(w.sys.clock)
	next := d.rec
	c := &change{}
	pause, done := false, true // done: the delivery leaves the queue
	if res.OK() {
		c.del(bWebhookDeliveries, []byte(d.rec.ID))
		if e.Failures != 0 {
			e.Failures = 0
			c.put(bWebhookEndpoints, []byte(e.ID), e)
		}
	} else {
		e.Failures++
		next.Attempts++
		switch {
		case e.Failures >= WebhookPauseAfter:
			// Paused: every delivery still pending for it is dropped; the
			// owner catches up with GET /v1/events once it is re-enabled.
			pause = true
			e.Status, e.PausedAt, e.UpdatedAt = WebhookPaused, &now, now
			w.mu.Lock()
			for id := range h.pending {
				c.del(bWebhookDeliveries, []byte(id))
			}
			w.mu.Unlock()
		case next.Attempts >= WebhookAttempts:
			c.del(bWebhookDeliveries, []byte(d.rec.ID))
			w.sys.log.Info("webhooks: delivery given up", "endpoint", e.ID, "event", d.rec.EventID, "attempts", next.Attempts)
		default:
			done = false
			next.NextAttemptAt = now.Add(webhookRetryDelays[next.Attempts-1])
			c.put(bWebhookDeliveries, []byte(d.rec.ID), next)
		}
		c.put(bWebhookEndpoints, []byte(e.ID), e)
	}
	var t *persistence.Ticket
	switch {
	case pause:
		env.mu.Lock()
		c.event(env, "", "webhook_endpoint.paused", e.view(now), audienceOwner, now)
		h.cur.Store(&e) // fan-out stops with the events after this one
		t = w.sys.commit(w.sys.store.Gen(), env, c)
		env.mu.Unlock()
	case len(c.ops) > 0:
		t = w.sys.store.Append(w.sys.store.Gen(), persistence.Record{Ops: c.ops})
	}
	if t != nil {
		if err := t.Wait(w.ctx); err != nil {
			h.cur.CompareAndSwap(&e, cur)
			if w.ctx.Err() == nil {
				w.retryLater(h, d, err)
			}
			return
		}
		h.cur.Store(&e)
		h.shown.Store(&e)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case pause:
		w.forgetAll(h)
		w.sys.log.Warn("webhooks: endpoint paused after consecutive failures", "endpoint", e.ID, "failures", e.Failures)
	case done:
		w.forget(h, d.rec.ID)
		w.advance(h)
	case h.pending[d.rec.ID] == d:
		d.rec, d.ready = next, false
		w.schedule(h, d, now)
	}
}

// retryLater keeps a delivery whose outcome could not be journaled
// pending as the disk has it, and tries it again after the first retry
// delay: at least once, never lost.
func (w *webhooks) retryLater(h *hook, d *pendingDelivery, err error) {
	w.sys.log.Error("webhooks: recording an attempt failed; it is made again", "endpoint", h.id, "err", err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.pending[d.rec.ID] == d {
		d.ready = false
		d.rec.NextAttemptAt = w.sys.nowFor(h.owner, h.env).Add(webhookRetryDelays[0])
		w.schedule(h, d, w.sys.nowFor(h.owner, h.env))
	}
}

// queue makes deliveries pending once their record is durable.
func (w *webhooks) queue(h *hook, ds ...webhookDelivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hooks[h.id] != h {
		return
	}
	for i := range ds {
		w.track(h, &pendingDelivery{rec: ds[i]})
	}
}
