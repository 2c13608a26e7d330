package actors

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// The practice reset (POST /v1/test/reset) returns an owner's practice
// environment to the state of a new one: no agents, keys, spends, holds,
// idempotency records, approvals, policy versions, events or deposits; the
// pool back at the configured practice pool; the practice clock back at the
// service clock. The owner's keys and funding settings (reserve floor,
// low-balance threshold) stay, and the live environment is not touched.
//
// It happens in three steps:
//
//  1. Fence. Every agent actor of the environment is told to refuse all
//     changes from now on (a fenced actor answers "being reset"). A
//     payment already sent to the vendor (approved) finishes first. A
//     payment whose outcome is unknown (processing: the vendor may have
//     been paid, and verifying it may take long) refuses the fence, and
//     the reset answers 409: a reset never forgets money that may have
//     moved.
//  2. Commit, in ONE journal record: the agents' records and index
//     entries, their keys (and key digests) are deleted, the environment's
//     state is replaced with a fresh one (whose event floor hides every
//     older event at once), and a sweep marker names what is left to
//     remove. Owner keys are not touched: they age with the service
//     clock, never the practice clock (see keyNow).
//     This record is the reset: before it nothing changed, after it the
//     agents, their keys, spends (readable only through their agent),
//     approvals, receipts and events are gone for every reader. It is
//     appended only if no other record of the environment was appended
//     since a barrier record made the store show everything the plan was
//     read from; otherwise the step is retried.
//  3. Sweep. The removed environment's remaining records (spends and their
//     indexes, idempotency records, approvals and the marks of their
//     notices, receipts, policy versions, events) are deleted in records
//     of bounded size, the last of which deletes the marker. A sweep cut
//     short (a crash, a failing disk) is finished when the service next
//     starts, before it serves, or by the next reset of the environment.
//
// After the commit, the fenced actors are evicted (their queued messages
// are refused, then they stop, with their expiry timers) and the removed
// keys are forgotten by the authentication cache, so nothing old answers
// afterwards: an old agent key gets 401, an old spend 404. Notification
// channels, like the owner keys and funding settings, are the owner's
// configuration and stay; a notice still being retried for a removed
// approval finds it gone and stops.
//
// The event sequence continues: receivers deduplicate by id and drop
// sequences lower than one they applied (spec 6.3), so a restarted
// sequence would be silently dropped by them.

// maxResetAttempts bounds the commit step's retries while other changes of
// the environment keep landing between the barrier and the commit.
const maxResetAttempts = 8

// sweepRecordOps bounds the ops of one sweep record (persistence.MaxOps is
// the hard limit); a record this size commits in a few milliseconds.
const sweepRecordOps = 4096

// resetMarkerPrefix keys the sweep markers in bMeta: prefix + owner id.
const resetMarkerPrefix = "practice_reset|"

// PracticeReset is the answer of ResetPractice.
type PracticeReset struct {
	Object   string       `json:"object"` // "practice_reset"
	Livemode bool         `json:"livemode"`
	Removed  ResetRemoved `json:"removed"`
	// Balance is the practice pool the environment starts again with.
	Balance string `json:"balance"`
	// LastSequence is the sequence of the environment's last event before
	// the reset; new events continue after it.
	LastSequence uint64 `json:"last_sequence"`
	// ClockOffsetSeconds is how far the practice clock had been advanced;
	// it is back at the service clock now.
	ClockOffsetSeconds int64 `json:"clock_offset_seconds"`
}

// ResetRemoved counts what a reset removed.
type ResetRemoved struct {
	Agents          int `json:"agents"`
	APIKeys         int `json:"api_keys"`
	Spends          int `json:"spends"`
	Events          int `json:"events"`
	IdempotencyKeys int `json:"idempotency_keys"`
	PolicyVersions  int `json:"policy_versions"`
}

// resetMarker names what the sweep of a committed reset still has to
// remove. It survives in the journal until the sweep's last record.
type resetMarker struct {
	OwnerID    string   `json:"owner_id"`
	Agents     []string `json:"agents"`
	EventFloor uint64   `json:"event_floor"`
}

// errResetting is the answer of a fenced agent.
var errResetting = &Error{Code: CodeUnavailable, RetryAfter: 1,
	Message: "The owner is resetting the practice environment; nothing was changed. Retry shortly: once the reset completes, this agent no longer exists."}

// ResetPractice resets the owner's practice environment (see above).
func (s *System) ResetPractice(ctx context.Context, p Principal) (PracticeReset, error) {
	if p.Kind != KindOwner || p.Livemode {
		return PracticeReset{}, errorf(CodeNotFound, "Practice control is not available with a live key.")
	}
	e, err := s.env(p.OwnerID, EnvTest)
	if err != nil {
		return PracticeReset{}, err
	}
	e.resetMu.Lock()
	defer e.resetMu.Unlock()
	out, marker, err := s.fenceAndCommitReset(ctx, e, p.OwnerID)
	if err != nil {
		return PracticeReset{}, err
	}
	s.logOwnerAction("practice_reset", p, slog.Uint64("last_sequence", out.LastSequence))
	// The sweep finishes even if the caller leaves: it is what the
	// committed record promised.
	swept, err := s.sweepReset(context.WithoutCancel(ctx), marker)
	if err != nil {
		s.log.Error("a practice reset was committed but its sweep did not finish; it is finished at the next start or reset",
			"owner", p.OwnerID, "err", err)
		return PracticeReset{}, &Error{Code: CodeUnavailable, RetryAfter: 1,
			Message: "The practice environment was reset, but removing its old records did not finish (they are already hidden). Retry the reset to finish it."}
	}
	out.Removed.Spends, out.Removed.Events = swept.Spends, swept.Events
	out.Removed.IdempotencyKeys, out.Removed.PolicyVersions = swept.IdempotencyKeys, swept.PolicyVersions
	return out, nil
}

// fenceAndCommitReset runs steps 1 and 2, then evicts the fenced actors
// and forgets the removed keys. It returns the marker the sweep follows.
func (s *System) fenceAndCommitReset(ctx context.Context, e *envLedger, ownerID string) (PracticeReset, resetMarker, error) {
	fenced := map[string]bool{}
	committed := false
	defer func() {
		if !committed {
			for id := range fenced {
				s.send(id, &unfenceAgent{})
			}
		}
	}()
	for range maxResetAttempts {
		ids, err := s.envAgentIDs(ownerID, EnvTest, true)
		if err != nil {
			return PracticeReset{}, resetMarker{}, err
		}
		var drains []chan *Error
		for _, id := range ids {
			if fenced[id] {
				continue
			}
			// Marked before asking: a fence whose answer never came (the
			// request ended) still gets its unfence, queued behind it.
			fenced[id] = true
			r, err := ask(ctx, s, id, func(reply chan fenceReply) any { return &fenceAgent{reply: reply} })
			if err != nil {
				return PracticeReset{}, resetMarker{}, err
			}
			if r.err != nil {
				return PracticeReset{}, resetMarker{}, r.err
			}
			if r.drained != nil {
				drains = append(drains, r.drained)
			}
		}
		// A payment already sent to the rail when its agent was fenced
		// finishes first (no new one can start): a reset never forgets
		// money that may be moving.
		for _, ch := range drains {
			select {
			case derr := <-ch:
				if derr != nil {
					return PracticeReset{}, resetMarker{}, derr
				}
			case <-ctx.Done():
				return PracticeReset{}, resetMarker{}, &Error{Code: CodeConflict,
					Message: "A practice payment was still being paid when the request ended; nothing was reset. Retry once it has settled or failed."}
			}
		}
		out, marker, forget, ok, err := s.commitReset(ctx, e, ownerID, ids)
		if err != nil {
			return PracticeReset{}, resetMarker{}, err
		}
		if !ok {
			continue // the environment changed meanwhile: plan again
		}
		committed = true
		for id := range fenced {
			s.evict(id)
		}
		for _, d := range forget {
			s.forgetKey(d)
		}
		s.graceAfterReset(ctx, ownerID, time.Duration(out.ClockOffsetSeconds)*time.Second)
		return out, marker, nil
	}
	return PracticeReset{}, resetMarker{}, &Error{Code: CodeConflict,
		Message: "The practice environment kept changing while it was being reset (deposits, new agents or keys); nothing was reset. Retry once those changes stop."}
}

// graceAfterReset keeps the grace period of webhook secrets rotated on a
// practice clock that the reset set back by offset: the previous secret
// signs for the time it had left, not for that time and the offset. A
// crash before this is written leaves the grace longer, never shorter.
func (s *System) graceAfterReset(ctx context.Context, ownerID string, offset time.Duration) {
	if offset <= 0 {
		return
	}
	w := s.webhooks
	w.mu.Lock()
	hooks := make([]*hook, 0, len(w.byEnv[envKeyOf(ownerID, EnvTest)]))
	for _, h := range w.byEnv[envKeyOf(ownerID, EnvTest)] {
		hooks = append(hooks, h)
	}
	w.mu.Unlock()
	for _, h := range hooks {
		h.change.Lock()
		if cur := h.cur.Load(); cur.PreviousUntil != nil {
			e := *cur
			until := cur.PreviousUntil.Add(-offset)
			e.PreviousUntil = &until
			c := &change{}
			c.put(bWebhookEndpoints, []byte(e.ID), e)
			t := s.store.Append(s.store.Gen(), persistence.Record{Ops: c.ops})
			if t.Wait(ctx) == nil {
				h.cur.Store(&e)
				h.shown.Store(&e)
			}
		}
		h.change.Unlock()
	}
}

// commitReset is step 2. It holds keyChangeMu from the barrier until the
// record is durable, so no key of the owner changes between the read and
// the write. ok is false when another record of the environment slipped in
// after the barrier; nothing was written then. forget lists the digests of
// keys the authentication cache must drop once the record is durable.
func (s *System) commitReset(ctx context.Context, e *envLedger, ownerID string, ids []string) (
	out PracticeReset, marker resetMarker, forget []string, ok bool, err error) {
	s.keyChangeMu.Lock()
	defer s.keyChangeMu.Unlock()

	// The barrier: once it is durable, so is every record appended for the
	// environment before it, and the store shows what the plan needs.
	e.mu.Lock()
	t := s.commit(s.store.Gen(), e, &change{})
	mark := e.commits
	e.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return out, marker, nil, false, ErrUnavailable
	}

	agents := make(map[string]bool, len(ids))
	for _, id := range ids {
		agents[id] = true
	}
	var agentKeys []APIKey
	err = s.ownerKeys(ownerID, EnvTest, false, "", func(id string) bool { return agents[id] }, func(k APIKey) bool {
		agentKeys = append(agentKeys, k)
		return true
	})
	if err != nil {
		return out, marker, nil, false, ErrUnavailable
	}
	// A sweep that did not finish before is carried into this one.
	marker = resetMarker{OwnerID: ownerID, Agents: ids}
	var prev resetMarker
	if found, err := s.getJSON(bMeta, []byte(resetMarkerPrefix+ownerID), &prev); err != nil {
		return out, marker, nil, false, ErrUnavailable
	} else if found {
		for _, id := range prev.Agents {
			if !agents[id] {
				marker.Agents = append(marker.Agents, id)
			}
		}
	}

	c := &change{}
	e.mu.Lock()
	if e.commits != mark {
		e.mu.Unlock()
		return out, marker, nil, false, nil
	}
	offset := e.state.ClockOffset
	marker.EventFloor = e.state.Sequence
	for _, id := range ids {
		c.del(bAgents, []byte(id))
		c.del(bOwnerAgents, join(ownerID, string(EnvTest), id))
		c.del(bLedgers, []byte(id))
	}
	for i := range agentKeys {
		c.delKey(&agentKeys[i])
		forget = append(forget, agentKeys[i].Digest)
	}
	c.put(bMeta, []byte(resetMarkerPrefix+ownerID), marker)
	old := e.state
	pool := s.cfg.PracticePool
	e.state = EnvState{OwnerID: ownerID, Env: EnvTest, Balance: pool, Sequence: old.Sequence,
		ReserveFloor: policy.MinAmount(old.ReserveFloor, pool), LowBalanceThreshold: old.LowBalanceThreshold,
		EventFloor: old.Sequence}
	e.offset.Store(0)
	// The clock went back, and every older event is hidden by the floor:
	// new events start from the clock again.
	e.lastEventAt = time.Time{}
	// The fresh pool may start below the owner's warning threshold.
	s.noteLowBalance(c, e, e.now(s.clock))
	t = s.commit(s.store.Gen(), e, c)
	e.mu.Unlock()
	// Waited for whatever the caller's context says: were the wait given
	// up and the record then became durable, the fenced actors would be
	// let go with memories the disk no longer has.
	<-t.Done()
	if t.Err() != nil {
		return out, marker, nil, false, ErrUnavailable
	}
	e.eventFloor.Store(old.Sequence) // lists hide the old events once the reset is durable
	// The clock went back: deliveries are re-armed on it, and those of
	// the removed events are dropped at once.
	s.webhooks.clockMoved(ownerID, EnvTest)
	out = PracticeReset{Object: "practice_reset", Livemode: false, Balance: pool.Display(),
		LastSequence: old.Sequence, ClockOffsetSeconds: int64(offset / time.Second),
		Removed: ResetRemoved{Agents: len(ids), APIKeys: len(agentKeys)}}
	return out, marker, forget, true, nil
}

// sweepReset is step 3: it deletes what the committed reset left, in
// records of at most sweepRecordOps ops, the last one deleting the marker.
// Deleting is idempotent, so a sweep may run again over what an earlier
// one already removed.
func (s *System) sweepReset(ctx context.Context, m resetMarker) (ResetRemoved, error) {
	w := &sweepWriter{s: s, gen: s.store.Gen()}
	var n ResetRemoved
	agents := make(map[string]bool, len(m.Agents))
	for _, id := range m.Agents {
		agents[id] = true
	}
	envPrefix := prefixOf(m.OwnerID, string(EnvTest))
	scan := func(bucket string, prefix []byte, fn func(k, v []byte)) error {
		return s.store.Scan(bucket, prefix, nil, false, func(k, v []byte) bool {
			fn(append([]byte(nil), k...), v)
			return true
		})
	}
	// The owner's list of spends goes first: the agents are gone already,
	// and this index is the one list that does not pass through them.
	err := scan(bEnvSpends, envPrefix, func(k, v []byte) {
		if agents[string(v)] {
			w.del(bEnvSpends, k)
		}
	})
	for _, id := range m.Agents {
		if err != nil {
			break
		}
		prefix := prefixOf(id)
		err = scan(bAgentSpends, prefix, func(k, v []byte) {
			spendID := k[len(prefix):]
			if _, _, ok := parseIdemEntry(v); ok {
				n.IdempotencyKeys++ // the spend's key, held in its index entry
			}
			var sp policy.Spend
			if found, _ := s.getJSON(bSpends, spendID, &sp); found {
				if sp.Approval != nil {
					w.del(bApprovals, []byte(sp.Approval.ID))
					// The marks of the approval notices sent for it.
					_ = s.store.Scan(bNotifySent, prefixOf(sp.Approval.ID), nil, false, func(k, _ []byte) bool {
						w.del(bNotifySent, append([]byte(nil), k...))
						return true
					})
				}
				if sp.Settlement != nil && sp.Settlement.ReceiptID != nil {
					w.del(bReceipts, []byte(*sp.Settlement.ReceiptID))
				}
				n.Spends++
			}
			w.del(bSpends, spendID)
			// After the delete: were it to fill a record, the wake-up
			// goes with the next one, durable after it.
			w.gone = append(w.gone, string(spendID))
			w.del(bActive, join(id, string(spendID)))
			w.del(bEnvSpends, append(append([]byte(nil), envPrefix...), spendID...))
			w.del(bAgentSpends, k)
		})
		if err == nil {
			err = scan(bIdem, prefix, func(k, _ []byte) { w.del(bIdem, k); n.IdempotencyKeys++ })
		}
		if err == nil {
			err = scan(bActive, prefix, func(k, _ []byte) { w.del(bActive, k) })
		}
		if err == nil {
			// The agent's hour summaries; the environment's stay, as a
			// summary only ever gains (spend_hours.go).
			err = scan(bSpendHours, append([]byte{hoursOfAgent}, prefix...), func(k, _ []byte) { w.del(bSpendHours, k) })
		}
		if err == nil {
			err = scan(bPolicies, prefix, func(k, v []byte) {
				var pol policy.Policy
				if json.Unmarshal(v, &pol) == nil && pol.ID != "" {
					w.del(bPolicyIDs, []byte(pol.ID))
					w.del(bPolicyCancels, []byte(pol.ID))
				}
				w.del(bPolicies, k)
				n.PolicyVersions++
			})
		}
		w.del(bAgents, []byte(id))
		w.del(bOwnerAgents, join(m.OwnerID, string(EnvTest), id))
		w.del(bLedgers, []byte(id))
	}
	// Keys the commit did not see cannot exist (key changes were held),
	// but a sweep finishing an older reset looks again anyway.
	if err == nil {
		err = scan(bOwnerKeys, envPrefix, func(k, agentID []byte) {
			if !agents[string(agentID)] {
				return
			}
			var key APIKey
			if found, _ := s.getJSON(bKeys, k[len(envPrefix):], &key); found {
				w.del(bKeyDigests, []byte(key.Digest))
			}
			w.del(bKeys, k[len(envPrefix):])
			w.del(bOwnerKeys, k)
		})
	}
	if err == nil {
		err = s.store.Scan(bEvents, envPrefix, nil, false, func(k, v []byte) bool {
			if len(k) != len(envPrefix)+8 || binary.BigEndian.Uint64(k[len(envPrefix):]) > m.EventFloor {
				return false
			}
			var ev StoredEvent
			if json.Unmarshal(v, &ev) == nil && ev.ID != "" {
				w.del(bEventIDs, []byte(ev.ID))
			}
			w.del(bEvents, append([]byte(nil), k...))
			n.Events++
			return true
		})
	}
	if err == nil {
		// The summaries of the blocks whose events are all gone.
		err = scan(bEventBlocks, envPrefix, func(k, _ []byte) {
			if len(k) == len(envPrefix)+8 && (binary.BigEndian.Uint64(k[len(envPrefix):])+1)*eventBlockSize <= m.EventFloor+1 {
				w.del(bEventBlocks, k)
			}
		})
	}
	if err != nil {
		return n, fmt.Errorf("actors: sweeping a practice reset: %w", err)
	}
	w.del(bMeta, []byte(resetMarkerPrefix+m.OwnerID))
	return n, w.finish(ctx)
}

// sweepWriter gathers deletions into records of bounded size.
type sweepWriter struct {
	s       *System
	gen     uint64
	ops     []persistence.Op
	tickets []*persistence.Ticket
	// gone are the spends the pending ops delete: their long polls are
	// woken once the deletion is durable, to answer 404 at once.
	gone []string
}

func (w *sweepWriter) del(bucket string, key []byte) {
	w.add(persistence.Del(bucket, key))
}

// add adds an op, and appends the record once it holds sweepRecordOps.
func (w *sweepWriter) add(op persistence.Op) {
	w.ops = append(w.ops, op)
	if len(w.ops) >= sweepRecordOps {
		w.flush()
	}
}

func (w *sweepWriter) flush() {
	if len(w.ops) == 0 {
		return
	}
	t := w.s.store.Append(w.gen, persistence.Record{Ops: w.ops})
	w.tickets = append(w.tickets, t)
	w.ops = nil
	if len(w.gone) > 0 {
		w.s.hub.published(t, w.gone, nil)
		w.gone = nil
	}
}

// finish appends what is left and waits until every record is durable.
func (w *sweepWriter) finish(ctx context.Context) error {
	w.flush()
	for _, t := range w.tickets {
		if err := t.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// finishResets completes the sweeps that a previous run committed but did
// not finish. New calls it before the service serves.
func (s *System) finishResets() error {
	var markers []resetMarker
	err := s.store.Scan(bMeta, []byte(resetMarkerPrefix), nil, false, func(_, v []byte) bool {
		var m resetMarker
		if json.Unmarshal(v, &m) == nil && m.OwnerID != "" {
			markers = append(markers, m)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("actors: reading practice reset markers: %w", err)
	}
	for _, m := range markers {
		if _, err := s.sweepReset(context.Background(), m); err != nil {
			return err
		}
		s.log.Info("finished the sweep of a practice reset", "owner", m.OwnerID)
	}
	return nil
}

// Messages of the reset to agent actors.
type (
	fenceAgent struct{ reply chan fenceReply }
	fenceReply struct {
		err *Error
		// drained, when set, answers once the payments the agent was
		// making when fenced have ended: nil when each settled or failed,
		// an error when one's outcome became unknown (processing).
		drained chan *Error
	}
	// unfenceAgent lifts the fence of a reset that did not happen.
	unfenceAgent struct{}
	// evictAgent is the last message an evicted actor receives.
	evictAgent struct{}
)

// evict takes an agent's actor out of the registry, so that the next
// message activates a fresh one from the store, and then tells the old one
// to stop: the registry's lock guarantees that every message sent to it
// came before, so it answers them all (refused, as it is fenced) first.
func (s *System) evict(agentID string) {
	s.regMu.Lock()
	e, ok := s.agents[agentID]
	if ok {
		delete(s.agents, agentID)
	}
	s.regMu.Unlock()
	if ok {
		s.actors.Root.Send(e.pid, &evictAgent{})
	}
}

// resetReceive handles the reset's messages, and every message while the
// actor is fenced; it reports whether it handled the message.
func (a *agentActor) resetReceive(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *fenceAgent:
		a.received++
		a.fence(m)
		return true
	case *unfenceAgent:
		a.received++
		a.drained = nil
		if a.fenced {
			a.fenced = false
			if a.loaded {
				// What the fence held back (an expiry, a loosening that
				// came due) happens now.
				a.catchUp()
				a.publishView()
			}
		}
		return true
	case *evictAgent:
		// Sent straight to the actor, not counted in its entry.
		for id := range a.active {
			a.sys.timers.cancel(id)
		}
		ctx.Stop(ctx.Self())
		return true
	}
	if !a.fenced {
		return false
	}
	switch m := ctx.Message().(type) {
	case *actor.ReceiveTimeout:
		// A fenced actor stays until the reset lets it go: a passivated
		// one would come back unfenced from the store.
		ctx.SetReceiveTimeout(a.sys.cfg.IdleTimeout)
	case *createSpend:
		a.received++
		m.reply <- SpendResult{Err: errResetting}
	case *cancelSpend:
		a.received++
		m.reply <- SpendResult{Err: errResetting}
	case *decideApproval:
		a.received++
		m.reply <- SpendResult{Err: errResetting}
	case *viewRequest:
		a.received++
		m.reply <- viewReply{err: errResetting}
	case *checkRequest:
		a.received++
		m.reply <- checkReply{err: errResetting}
	case *publishPolicy:
		a.received++
		m.reply <- publishReply{err: errResetting}
	case *cancelPolicyChange:
		a.received++
		m.reply <- policyChangeReply{err: errResetting}
	case *agentAction:
		a.received++
		m.reply <- agentActionReply{err: errResetting}
	case *reloadAgent:
		a.received++
		m.reply <- nil
	case *metaSettled:
		// What waited for the agent's own changes would change it now.
		a.received++
		a.awaiting = false
		a.refuseHeld(errResetting)
	case *railResult:
		// The payments in flight when the fence came finish as usual.
		a.received++
		if a.loaded && a.dispatched[m.spendID] {
			a.applyRail(ctx, m)
			a.publishView()
		}
		a.answerDrained()
	case *expireSpend, *clockMoved, *resumeWork, *vendorSlow:
		// Nothing else may change while fenced; an unfence catches up.
		a.received++
	case *actor.Stopping:
		// Stopped while a reset waits for a payment (the journal failed).
		if a.drained != nil {
			a.drained <- ErrUnavailable
			a.drained = nil
		}
		return false
	default:
		return false // pings and the actor's own lifecycle run as always
	}
	return true
}

// fence runs in the agent actor: from now on it refuses every change. A
// payment whose outcome is unknown (processing) refuses the fence: it may
// take long to verify, and the vendor may have been paid. A payment being
// sent (approved) is let finish, and the reply says when.
func (a *agentActor) fence(m *fenceAgent) {
	if !a.loaded && a.loadErr != nil && a.loadErr.Code != CodeNotFound {
		m.reply <- fenceReply{err: a.loadErr}
		return
	}
	if sp := a.activeIn(policy.StatusProcessing); sp != nil {
		m.reply <- fenceReply{err: &Error{Code: CodeConflict, Message: fmt.Sprintf(
			"Spend %s of agent %s is being paid and its outcome is not known yet (processing); nothing was reset. "+
				"Reset once it has settled or failed.", sp.ID, a.id)}}
		return
	}
	a.fenced = true
	if a.activeIn(policy.StatusApproved) == nil {
		m.reply <- fenceReply{}
		return
	}
	a.drained = make(chan *Error, 1)
	m.reply <- fenceReply{drained: a.drained}
}

// answerDrained tells a waiting reset that the payments in flight at the
// fence have ended.
func (a *agentActor) answerDrained() {
	if a.drained == nil || a.activeIn(policy.StatusApproved) != nil {
		return
	}
	var err *Error
	if sp := a.activeIn(policy.StatusProcessing); sp != nil {
		err = &Error{Code: CodeConflict, Message: fmt.Sprintf(
			"Spend %s of agent %s was sent to the vendor and its outcome is not known yet (processing); nothing was reset. "+
				"Reset once it has settled or failed.", sp.ID, a.id)}
	}
	a.drained <- err
	a.drained = nil
}

// activeIn is an active spend of the agent in the status, or nil.
func (a *agentActor) activeIn(st policy.Status) *policy.Spend {
	for _, sp := range a.active {
		if sp.Status == st {
			return sp
		}
	}
	return nil
}
