package actors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// SpendInput is a validated POST /v1/spends.
type SpendInput struct {
	Amount          policy.Amount
	Currency        string
	Destination     string
	Resource        policy.Resource
	URL             string // the resource URL as given, for the fingerprint
	Memo            string
	ClientReference *string
	IdempotencyKey  string
}

// Fingerprint of the request (spec 4.2). The destination and URL are
// compared as the rules see them (canonical host), so "API.Vendor.com" and
// "api.vendor.com" are the same payment, as "5" and "5.00" are.
func (in SpendInput) Fingerprint() Fingerprint {
	dest := in.Destination
	if h, err := policy.CanonicalHost(dest); err == nil {
		dest = h
	}
	return Fingerprint{Amount: in.Amount.Display(), Currency: in.Currency, Destination: dest,
		URL: in.URL, Method: in.Resource.Method}
}

func (a *agentActor) load() {
	found, err := a.sys.getJSON(bAgents, []byte(a.id), &a.agent)
	if err != nil {
		a.loadErr = ErrUnavailable
		return
	}
	if !found {
		a.loadErr = errAgentGone(a.id)
		return
	}
	if a.env, err = a.sys.env(a.agent.OwnerID, EnvOf(a.agent.Livemode)); err != nil {
		a.loadErr = AsError(err)
		return
	}
	now := a.now() // the environment's clock, practice offset included
	if err := a.loadPolicy(now); err != nil {
		a.loadErr = AsError(err)
		return
	}
	if _, err := a.sys.getJSON(bLedgers, []byte(a.id), &a.ledger); err != nil {
		a.loadErr = ErrUnavailable
		return
	}
	type activeEntry struct {
		id  string
		rec []byte
	}
	var actives []activeEntry
	err = a.sys.store.Scan(bActive, prefixOf(a.id), nil, false, func(k, v []byte) bool {
		actives = append(actives, activeEntry{id: string(k[len(a.id)+1:]), rec: bytes.Clone(v)})
		return true
	})
	if err != nil {
		a.loadErr = ErrUnavailable
		return
	}
	for _, e := range actives {
		id := e.id
		sp := &policy.Spend{}
		if ok, err := a.sys.getJSON(bSpends, []byte(id), sp); err != nil || !ok {
			a.loadErr = ErrUnavailable
			return
		}
		if len(e.rec) > 0 {
			var r activeRecord
			if err := fastjson.Unmarshal(e.rec, &r); err != nil {
				a.loadErr = ErrUnavailable
				return
			}
			// The stored message already carries the warning; the steps
			// still to come write it again.
			sp.Nonce, sp.PolicyHash, sp.Warning = r.Nonce, r.PolicyHash, r.Warning
		}
		a.active[id] = sp
		a.ledger.Reserve(sp, now)
	}
	if err := a.ensureWindow(now); err != nil {
		a.loadErr = ErrUnavailable
		return
	}
	if err := a.loadIdem(now); err != nil {
		a.loadErr = ErrUnavailable
		return
	}
	a.loaded = true
}

// ensureWindow loads the destination window when the policy in effect
// reads it and it is not loaded yet.
func (a *agentActor) ensureWindow(now time.Time) error {
	if a.windowLoaded || a.policy.DestinationWindowOver == nil {
		return nil
	}
	return a.loadWindow(now)
}

// loadWindow adds to the destination window the spends of the last 24 h
// that settled before this activation. Since activation the ledger has
// seen every spend of the agent itself (reserved, settled, released), so
// those are in the window already and are skipped; everything older is
// durable and in the store.
func (a *agentActor) loadWindow(now time.Time) error {
	have := make(map[string]bool, len(a.ledger.Window))
	for _, w := range a.ledger.Window {
		have[w.SpendID] = true
	}
	cut := now.Add(-policy.DestinationWindowLength)
	var window []policy.WindowEntry
	err := a.sys.store.Scan(bAgentSpends, prefixOf(a.id), nil, true, func(k, _ []byte) bool {
		id := string(k[len(a.id)+1:])
		if ms, ok := idMillis(id); ok && time.UnixMilli(ms).Before(cut.Add(-time.Minute)) {
			return false
		}
		if have[id] {
			return true
		}
		sp := &policy.Spend{}
		if ok, err := a.sys.getJSON(bSpends, []byte(id), sp); err == nil && ok &&
			sp.Status == policy.StatusSettled && sp.CreatedAt.After(cut) {
			window = append(window, policy.WindowEntry{SpendID: id, At: sp.CreatedAt, Dest: sp.Destination, Amount: *sp.AmountSettled})
		}
		return true
	})
	if err != nil {
		return err
	}
	a.ledger.AddWindow(window...)
	a.windowLoaded = true
	return nil
}

// idMillis extracts the creation time embedded in an id.
func idMillis(id string) (int64, bool) {
	i := indexByte([]byte(id), '_')
	if i < 0 || len(id) < i+13 {
		return 0, false
	}
	var ms int64
	for _, c := range id[i+1 : i+13] {
		var v int64
		switch {
		case c >= '0' && c <= '9':
			v = int64(c - '0')
		case c >= 'a' && c <= 'f':
			v = int64(c-'a') + 10
		default:
			return 0, false
		}
		ms = ms<<4 | v
	}
	return ms, true
}

// loadPolicy picks the newest version in effect.
func (a *agentActor) loadPolicy(now time.Time) error {
	p, found, err := effectivePolicy(a.sys.store, a.id, now)
	if err != nil {
		return ErrUnavailable
	}
	if !found {
		return errorf(CodeNotFound, "Agent %s has no policy in effect.", a.id)
	}
	a.policy = p
	a.policy.Paused = a.agent.Status == AgentPaused
	return nil
}

// reloadPolicy picks the rules in effect now from the store (a loosening
// may have come due) and announces a new version. The agent's record is
// not read back: this actor is its only writer, so its copy is the newest.
// Its own changes to the rules must be durable first, or the store would
// answer with the rules before them: the reload waits for them instead.
func (a *agentActor) reloadPolicy() {
	if a.metaTicket != nil && !isDone(a.metaTicket) {
		// Only the ticket matters here, not what else waits: a reload is
		// the same whenever it runs, and one run from runHeld must not
		// queue itself behind the others for ever.
		a.heldBack = append(a.heldBack, &reloadAgent{reply: make(chan error, 1)})
		a.awaitMeta()
		return
	}
	prev := a.policy
	if a.loadPolicy(a.now()) != nil {
		return
	}
	if err := a.ensureWindow(a.now()); err != nil {
		// The rules in effect stay until the window can be read: the
		// next reload tries again.
		a.sys.log.Error("loading the destination window failed; the agent keeps its previous rules", "agent", a.id, "err", err)
		a.policy = prev
		return
	}
	a.applyDuePolicy()
}

// resumeOpenWork restarts what a previous incarnation left: expiry timers,
// payments to send (with the journaled nonce) and payments to verify.
// Approvals that ran out while the service was down expire here, in the
// order they ran out, so their events keep that order.
func (a *agentActor) resumeOpenWork() {
	open := make([]*policy.Spend, 0, len(a.active))
	for _, sp := range a.active {
		open = append(open, sp)
	}
	slices.SortFunc(open, func(x, y *policy.Spend) int {
		if c := openSince(x).Compare(openSince(y)); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	expired := false
	for _, sp := range open {
		switch sp.Status {
		case policy.StatusPendingApproval:
			if sp.Approval == nil {
				continue
			}
			if !a.now().Before(sp.Approval.ExpiresAt) {
				a.expire(sp.ID)
				expired = true
				continue
			}
			a.sys.timers.schedule(sp.ID, a.id, sp.Approval.ExpiresAt.Sub(a.now()))
		case policy.StatusApproved:
			a.dispatch(sp, nil, false, 0)
		case policy.StatusProcessing:
			a.dispatch(sp, nil, true, a.sys.cfg.VerifyBackoff[0])
		}
	}
	if expired {
		a.publishView()
	}
}

// openSince orders open spends: a pending approval by when it runs out,
// any other by when it was created.
func openSince(sp *policy.Spend) time.Time {
	if sp.Status == policy.StatusPendingApproval && sp.Approval != nil {
		return sp.Approval.ExpiresAt
	}
	return sp.CreatedAt
}

func (a *agentActor) replay(reply chan SpendResult, spendID string, stored, asked Fingerprint) {
	if diff := stored.Diff(asked); len(diff) > 0 {
		reply <- SpendResult{Err: &Error{Code: CodeIdempotencyConflict, ChangedFields: diff, Param: diff[0],
			Message: "This Idempotency-Key was used for a different payment (changed: " + joinList(diff) +
				"). Use a new Idempotency-Key for a new payment, or repeat the original request unchanged."}}
		return
	}
	if l, ok := a.latest[spendID]; ok {
		reply <- SpendResult{Body: l.body, Ticket: l.ticket, Replay: true}
		return
	}
	body, err := a.sys.store.Get(bSpends, []byte(spendID))
	if err != nil || body == nil {
		reply <- SpendResult{Err: ErrUnavailable}
		return
	}
	reply <- SpendResult{Body: body, Replay: true}
}

func joinList(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func (a *agentActor) create(m *createSpend) {
	a.prune()
	if a.agent.Status == AgentArchived {
		// The request passed its key before the archive revoked it: it
		// gets the answer the key gets now, and nothing is created. The
		// archive is final, so no rule decides this (a pause is a rule).
		m.reply <- SpendResult{Err: ErrInvalidKey}
		return
	}
	in := m.in
	fp := in.Fingerprint()
	if rk, ok := a.recentKeys[in.IdempotencyKey]; ok {
		// A different payment under the key is a conflict whatever the
		// first one's progress: the answer (and its changed_fields) must
		// not depend on when the second request arrived.
		if rk.inflight && len(rk.fp.Diff(fp)) == 0 {
			m.reply <- SpendResult{Err: &Error{Code: CodeIdempotencyInProgress, RetryAfter: 1,
				Message: "A request with this Idempotency-Key is still being processed; retry in a second to get its result."}}
			return
		}
		a.replay(m.reply, rk.spendID, rk.fp, fp)
		return
	}
	now := a.now()
	idem, found, err := a.findIdem(in.IdempotencyKey, now)
	if err != nil {
		m.reply <- SpendResult{Err: ErrUnavailable}
		return
	}
	if found {
		a.replay(m.reply, idem.SpendID, idem.Fingerprint, fp)
		return
	}

	id := NewID("spd", now)
	c := &change{spends: []string{id}}
	a.env.mu.Lock()
	d := policy.Decide(&a.policy, &a.ledger, a.env.pool(), a.subject(),
		policy.Request{Amount: in.Amount, Destination: in.Destination, Resource: in.Resource}, now)
	sp := policy.NewSpend(policy.NewSpendInput{ID: id, AgentID: a.id, OwnerID: a.agent.OwnerID,
		Livemode: a.agent.Livemode, Request: policy.Request{Amount: in.Amount, Destination: in.Destination, Resource: in.Resource},
		Currency: in.Currency, Memo: in.Memo, ClientReference: in.ClientReference,
		IdempotencyKey: in.IdempotencyKey, Nonce: RandomHex(16)}, &a.policy, d, now)
	if d.NewDestination {
		a.ledger.RecordAsked(d.Destination, now)
	}
	if d.Reason == policy.ReasonAgentPaused && a.agent.PausedAt != nil {
		sp.PauseDetail = &policy.PauseDetail{Scope: "agent", PausedAt: *a.agent.PausedAt,
			Message: "The owner paused this agent; payments resume when the owner resumes it."}
		if a.agent.PauseDetail != nil && a.agent.PauseDetail.Emergency {
			sp.PauseDetail.Scope = "owner"
			sp.PauseDetail.Message = "The owner paused every agent (an emergency pause); payments resume when the owner resumes this agent."
		}
	}
	a.duplicateWarning(sp, now)
	answered := false // the rail's outcome is in this record
	if sp.Status.Holds() {
		a.ledger.Reserve(sp, now)
		a.env.state.Held = a.env.state.Held.Add(sp.Amount)
		if sp.Status == policy.StatusApproved {
			if o, ok := a.sys.payNow(a.payment(sp)); ok {
				a.applyOutcome(c, sp, o, now)
				answered = true
			}
		}
		if sp.Status.Holds() {
			a.active[id] = sp
			c.putActive(join(a.id, id), sp)
		}
	}
	switch {
	case sp.Status == policy.StatusPendingApproval:
		a.requestApproval(c, sp, fp, now)
	case !answered:
		c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	}
	body := spendJSON(sp)
	c.putSpend(sp, body)
	c.putIdemEntry(join(a.id, id), in.IdempotencyKey, &idemRecord{SpendID: id, Fingerprint: fp, CreatedAt: now})
	c.putRaw(bEnvSpends, join(a.agent.OwnerID, string(EnvOf(a.agent.Livemode)), id), []byte(a.id))
	c.putLedger([]byte(a.id), &a.ledger)
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()

	a.recentKeys[in.IdempotencyKey] = &recentKey{spendID: id, fp: fp, ticket: t, inflight: sp.Status == policy.StatusApproved}
	a.noteIdem(in.IdempotencyKey, id)
	a.appended(t, sp, body)
	a.remember(sp, now)
	a.publishView()
	switch sp.Status {
	case policy.StatusApproved:
		a.waiting[id] = m.reply
		a.dispatch(sp, t, false, 0)
	case policy.StatusPendingApproval:
		a.sys.timers.schedule(id, a.id, sp.Approval.ExpiresAt.Sub(a.now()))
		m.reply <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
	case policy.StatusProcessing:
		a.verifyLater(sp)
		m.reply <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
	default:
		m.reply <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
	}
}

// requestApproval attaches an approval to a pending spend and announces it.
func (a *agentActor) requestApproval(c *change, sp *policy.Spend, fp Fingerprint, now time.Time) {
	aprID := NewID("apr", now)
	exp := now.Add(time.Duration(a.policy.ApprovalTTLMinutes) * time.Minute)
	sum := sha256.Sum256(mustJSON(fp))
	sp.Approval = &policy.ApprovalSummary{ID: aprID, Status: "pending", ExpiresAt: exp,
		ItemsHash: "sha256:" + hex.EncodeToString(sum[:]), ShortCode: shortCode(aprID),
		OwnerURL: a.sys.cfg.ConsoleURL + "/approvals/" + aprID}
	sp.Hold.ExpiresAt = &exp
	sp.NextAction.OwnerURL = sp.Approval.OwnerURL
	c.putRaw(bApprovals, []byte(aprID), []byte(sp.ID))
	c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	c.event(a.env, a.id, "approval.requested", map[string]any{"id": aprID, "object": "approval", "status": "pending",
		"spend_id": sp.ID, "expires_at": exp, "items_hash": sp.Approval.ItemsHash, "short_code": sp.Approval.ShortCode,
		"reason": sp.ApprovalReason, "amount": sp.Amount, "destination": sp.Destination}, audienceOwner, now)
}

// shortCode is "#" and 4 characters from an alphabet without look-alikes.
func shortCode(id string) string {
	const alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
	sum := sha256.Sum256([]byte(id))
	b := []byte{'#', 0, 0, 0, 0}
	for i := 1; i < 5; i++ {
		b[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(b)
}

func mustJSON(v any) []byte {
	b, err := fastjson.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (a *agentActor) payment(sp *policy.Spend) policy.Payment {
	return policy.Payment{SpendID: sp.ID, AgentID: a.id, OwnerID: a.agent.OwnerID, Livemode: sp.Livemode,
		Amount: sp.Amount, Currency: sp.Currency, Destination: sp.Destination, Resource: sp.Resource,
		Nonce: sp.Nonce, At: sp.CreatedAt}
}

// dispatch hands a payment to a settlement worker, which waits until
// `after` is durable before it calls the rail.
func (a *agentActor) dispatch(sp *policy.Spend, after *persistence.Ticket, verify bool, delay time.Duration) {
	a.dispatched[sp.ID] = true
	a.sys.settle(a.id, a.payment(sp), after, verify, delay)
}

// applyRail records what the rail said.
func (a *agentActor) applyRail(ctx actor.Context, m *railResult) {
	delete(a.dispatched, m.spendID)
	sp := a.active[m.spendID]
	if m.err != nil {
		// The approval never became durable: this actor's memory is ahead of
		// the disk. Answer, then stop; the next message reloads from disk.
		if ch, ok := a.waiting[m.spendID]; ok {
			ch <- SpendResult{Err: ErrUnavailable}
			delete(a.waiting, m.spendID)
		}
		a.sys.dropAgent(a.id, a.entry)
		ctx.Stop(ctx.Self())
		return
	}
	if sp == nil {
		a.answerCancelsAfterSend(m.spendID)
		return
	}
	now := a.now()
	o := m.outcome
	if o.Status == policy.RailUnknown && sp.Status == policy.StatusProcessing {
		a.verifyLater(sp) // still unknown: nothing changed, nothing to record
		a.answerCancelsAfterSend(m.spendID)
		return
	}
	c := &change{spends: []string{sp.ID}}
	a.env.mu.Lock()
	a.applyOutcome(c, sp, o, now)
	body := spendJSON(sp)
	c.putSpend(sp, body)
	c.putLedger([]byte(a.id), &a.ledger)
	if sp.Status.Terminal() {
		c.del(bActive, join(a.id, sp.ID))
	}
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	a.appended(t, sp, body)
	if sp.Status.Terminal() {
		delete(a.active, sp.ID)
	} else {
		a.verifyLater(sp)
	}
	a.publishView()
	a.answerWaiting(sp, body, t)
	a.answerCancelsAfterSend(sp.ID)
}

// applyOutcome moves a spend that holds its allowance to what the rail
// said, with the event of its new state: settled (with its receipt),
// processing when nobody knows yet, failed otherwise (the allowance goes
// back). Caller holds the environment lock.
func (a *agentActor) applyOutcome(c *change, sp *policy.Spend, o policy.RailOutcome, now time.Time) {
	switch o.Status {
	case policy.RailSettled:
		a.settle(c, sp, o, now)
	case policy.RailUnknown:
		sp.Processing(o, now)
		c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	default:
		a.ledger.Release(sp.ID, now)
		a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
		sp.Fail(o, now)
		c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	}
}

// awaitVendor moves a payment whose vendor has not answered within the
// processing wait from approved to processing, durably and announced
// (spend.processing), and answers the request that created it, and the
// cancels that waited, from that state: a caller is not kept waiting for
// as long as a vendor takes, and a spend that was sent never reads
// approved ("not yet sent", spec 3) for longer than the wait. The rail's
// answer, still awaited by its worker, settles or fails it later.
func (a *agentActor) awaitVendor(spendID string) {
	sp := a.active[spendID]
	if sp == nil || sp.Status != policy.StatusApproved {
		return // answered meanwhile
	}
	now := a.now()
	c := &change{spends: []string{sp.ID}}
	a.env.mu.Lock()
	sp.AwaitVendor(now)
	c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	body := spendJSON(sp)
	c.putSpend(sp, body)
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	a.appended(t, sp, body)
	a.answerWaiting(sp, body, t)
	a.answerCancelsAfterSend(sp.ID)
}

// answerCancelsAfterSend answers the cancels that waited for the rail's
// answer about spendID, from the state it has now.
func (a *agentActor) answerCancelsAfterSend(spendID string) {
	ms := a.cancelsAfterSend[spendID]
	delete(a.cancelsAfterSend, spendID)
	for _, m := range ms {
		a.cancel(m)
	}
}

// answerInFlight answers every create that still waits for its vendor
// with the spend as recorded: approved, the payment on its way. It runs
// when the service stops: a restart sends the same authorization again or
// verifies it, and the agent reads the outcome with GET /v1/spends/{id}
// (next_action says to). "Nothing was changed" would be false: the
// payment may well go through.
func (a *agentActor) answerInFlight() {
	for id, ch := range a.waiting {
		sp := a.active[id]
		if sp == nil || sp.Status != policy.StatusApproved {
			continue
		}
		body, t := spendJSON(sp), (*persistence.Ticket)(nil)
		if l, ok := a.latest[id]; ok {
			body, t = l.body, l.ticket // the record may not be durable yet: the caller waits for it
		}
		ch <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
		delete(a.waiting, id)
	}
}

func (a *agentActor) answerWaiting(sp *policy.Spend, body []byte, t *persistence.Ticket) {
	if ch, ok := a.waiting[sp.ID]; ok {
		ch <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
		delete(a.waiting, sp.ID)
	}
	if rk, ok := a.recentKeys[sp.IdempotencyKey]; ok && rk.spendID == sp.ID {
		rk.inflight = false
		rk.ticket = t
	}
}

func (a *agentActor) verifyLater(sp *policy.Spend) {
	n := 0
	if sp.ProcessingDetail != nil {
		n = int(a.now().Sub(sp.ProcessingDetail.Since) / time.Second)
	}
	// Back off with the time already spent unknown: short at first, then
	// the last configured delay forever.
	delay := a.sys.cfg.VerifyBackoff[len(a.sys.cfg.VerifyBackoff)-1]
	elapsed := time.Duration(n) * time.Second
	var sum time.Duration
	for _, d := range a.sys.cfg.VerifyBackoff {
		sum += d
		if elapsed < sum {
			delay = d
			break
		}
	}
	a.dispatch(sp, nil, true, delay)
}

// settle records a confirmed payment with its signed receipt. Caller holds
// the environment lock: the receipt chain follows journal order.
func (a *agentActor) settle(c *change, sp *policy.Spend, o policy.RailOutcome, now time.Time) {
	price, err := policy.ParseAmount(o.Price.Display())
	if err != nil || price.Cmp(sp.Amount) > 0 || price.Sign() < 0 {
		a.sys.log.Error("rail reported a price outside the accepted maximum", "spend", sp.ID, "price", o.Price.String(), "max", sp.Amount.String())
		if err != nil {
			price = sp.Amount
		}
	}
	o.Price = price
	rid := NewID("rcp", now)
	claims := policy.ReceiptClaims{ReceiptID: rid, SpendID: sp.ID, AgentID: a.id, OwnerID: a.agent.OwnerID,
		Livemode: sp.Livemode, Amount: sp.Amount.String(), AmountSettled: price.Display(), Currency: sp.Currency,
		Destination: sp.Destination, Resource: sp.Resource, Network: o.Network, Reference: o.Reference,
		PolicyVersion: sp.PolicyVersion, PolicyHash: sp.PolicyHash, PrevHash: a.env.state.ReceiptChain,
		// When the token was made, on the service's clock: a practice
		// clock moved ahead would put it in the future, and JWT libraries
		// refuse a token issued after now. The spend's own times follow
		// the environment's clock.
		IssuedAt: a.sys.clock.Now().Unix()}
	if o.Result != nil {
		claims.BodySHA256 = o.Result.BodySHA256
	}
	jws, kid, err := a.sys.cfg.Signer.Sign(claims)
	if err != nil {
		a.sys.log.Error("signing a receipt failed; the spend settles without one", "spend", sp.ID, "err", err)
		rid = ""
	} else {
		a.env.state.ReceiptChain = chainHash(jws)
		c.putReceipt([]byte(rid), &Receipt{ID: rid, Object: "receipt", SpendID: sp.ID, AgentID: a.id,
			OwnerID: a.agent.OwnerID, Livemode: sp.Livemode, JWS: jws, KeyID: kid, CreatedAt: now})
	}
	a.ledger.Settle(sp.ID, price, now)
	a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
	a.env.state.Balance = a.env.state.Balance.Sub(price)
	sp.Settle(o, rid, now)
	if rid == "" {
		sp.Settlement.ReceiptID = nil
	}
	c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	// After the settlement it follows from: a receiver reading in sequence
	// order sees the payment, then the balance it left.
	a.sys.noteLowBalance(c, a.env, now)
}

// cancel handles POST /v1/spends/{id}/cancel.
func (a *agentActor) cancel(m *cancelSpend) {
	a.prune()
	sp := a.active[m.spendID]
	if sp == nil {
		a.cancelInactive(m)
		return
	}
	if sp.Status == policy.StatusApproved && a.dispatched[sp.ID] {
		// The payment is on its way to the vendor and still reads
		// approved, which promises it can be cancelled. Whether it was
		// paid is the rail's answer: the cancel waits for it (at most the
		// processing wait, after which the spend reads processing and the
		// cancel is too late) and then answers from the state the spend has,
		// settled, failed or processing, never "too late" for a spend
		// that reads approved.
		if a.cancelsAfterSend == nil {
			a.cancelsAfterSend = map[string][]*cancelSpend{}
		}
		a.cancelsAfterSend[sp.ID] = append(a.cancelsAfterSend[sp.ID], m)
		return
	}
	if sp.Status == policy.StatusProcessing || a.dispatched[sp.ID] {
		m.reply <- SpendResult{Ticket: a.latest[sp.ID].ticket, Err: &Error{Code: CodeCancelTooLate,
			Message: "The payment was already sent to the vendor and cannot be cancelled; poll it until it settles or fails."}}
		return
	}
	now := a.now()
	c := &change{spends: []string{sp.ID}}
	a.env.mu.Lock()
	a.ledger.Release(sp.ID, now)
	a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
	sp.Cancel(now)
	c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	body := spendJSON(sp)
	c.putSpend(sp, body)
	c.del(bActive, join(a.id, sp.ID))
	c.putLedger([]byte(a.id), &a.ledger)
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	delete(a.active, sp.ID)
	a.sys.timers.cancel(sp.ID)
	a.appended(t, sp, body)
	a.publishView()
	m.reply <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
}

func (a *agentActor) cancelInactive(m *cancelSpend) {
	var body []byte
	var t *persistence.Ticket
	if l, ok := a.latest[m.spendID]; ok {
		body, t = l.body, l.ticket
	} else {
		var err error
		if body, err = a.sys.store.Get(bSpends, []byte(m.spendID)); err != nil {
			m.reply <- SpendResult{Err: ErrUnavailable}
			return
		}
	}
	var sp policy.Spend
	if body == nil || fastjson.Unmarshal(body, &sp) != nil || sp.AgentID != a.id {
		m.reply <- SpendResult{Err: errorf(CodeNotFound, "No spend %s exists for this agent.", m.spendID)}
		return
	}
	switch sp.Status {
	case policy.StatusCancelled:
		m.reply <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
	case policy.StatusSettled:
		m.reply <- SpendResult{Ticket: t, Err: &Error{Code: CodeCancelTooLate, Message: "The payment already settled and cannot be cancelled."}}
	default:
		m.reply <- SpendResult{Ticket: t, Err: &Error{Code: CodeConflict,
			Message: "Only a payment that is pending_approval or approved can be cancelled; this one is " + string(sp.Status) + "."}}
	}
}

// expire ends a pending approval whose lifetime ran out.
func (a *agentActor) expire(spendID string) {
	sp := a.active[spendID]
	if sp == nil || sp.Status != policy.StatusPendingApproval || sp.Approval == nil {
		return
	}
	now := a.now()
	if now.Before(sp.Approval.ExpiresAt) {
		a.sys.timers.schedule(sp.ID, a.id, sp.Approval.ExpiresAt.Sub(a.now()))
		return
	}
	c := &change{spends: []string{sp.ID}}
	a.env.mu.Lock()
	a.ledger.Release(sp.ID, now)
	a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
	// The spend expired when its approval ran out, even when that is
	// noticed later (found at a start, or a practice clock moved past
	// it); its event is announced now, in sequence.
	sp.Expire(sp.Approval.ExpiresAt)
	c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	body := spendJSON(sp)
	c.putSpend(sp, body)
	c.del(bActive, join(a.id, sp.ID))
	c.putLedger([]byte(a.id), &a.ledger)
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	delete(a.active, sp.ID)
	a.appended(t, sp, body)
}

// activeRecord is the value of a spend's active entry: what the spend
// needs until it ends that its stored form, which is its wire form, leaves
// out. The nonce above all: a payment approved or verified after the agent
// was reloaded must reuse the authorization it was created with, so that
// the vendor can never be paid twice for it. The policy hash goes into the
// spend's receipt; the warning into its message until it settles.
type activeRecord struct {
	Nonce      string          `json:"nonce"`
	PolicyHash string          `json:"policy_hash"`
	Warning    *policy.Warning `json:"warning,omitempty"`
}
