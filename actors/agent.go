package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// agentActor owns one agent's spends, holds and counters. Every change it
// makes is appended to the journal inside the environment lock and answered
// with the journal ticket: the caller replies only once the ticket is
// durable, and the settlement worker pays only once the approval is.
type agentActor struct {
	sys   *System
	id    string
	entry *agentEntry
	gen   uint64

	loaded  bool
	loadErr *Error
	agent   Agent
	policy  policy.Policy
	ledger  policy.Ledger
	env     *envLedger
	// windowLoaded is set once the ledger's destination window also holds
	// the spends settled in the last 24 h before this activation. Only
	// destination_window_over reads the window, so an agent without that
	// rule activates without reading a day of its spends (see loadWindow).
	windowLoaded bool

	// active holds the spends that still hold allowance.
	active map[string]*policy.Spend
	// recent remembers idempotency keys and spend states this actor appended
	// whose records may not be durable yet; the store answers for the rest.
	recentKeys map[string]*recentKey
	// idem finds the spends of the Idempotency-Keys of the last
	// IdempotencyMemory (see idempotency.go); nil while there are none,
	// so that an idle agent does not pay for it.
	idem   *idemIndex
	latest map[string]latestState
	// waiting are create requests whose answer waits for the settlement.
	waiting map[string]chan SpendResult
	// dispatched spends are with a settlement worker; they cannot be cancelled.
	dispatched map[string]bool
	// cancelsAfterSend are cancels of dispatched spends still reading
	// approved: each is answered once the rail has (see cancel).
	cancelsAfterSend map[string][]*cancelSpend
	recentBuys       map[string]recentPurchase
	buyOrder         []boughtAt // recentBuys in the order noted, for expiry
	// lastTicket is the newest change this actor appended.
	lastTicket *persistence.Ticket
	// metaTicket is the newest change to the agent's record, its policy
	// versions or their cancellations. The store shows a change only once
	// it is durable, so work that reads those back (a reload, a publish, a
	// cancel) waits in heldBack, in order, until metaTicket is: read
	// earlier, it would find the state before the change, and a reload
	// would put back rules or a status the owner has already been told
	// were replaced. No Receive blocks for it; metaSettled wakes the actor.
	metaTicket *persistence.Ticket
	heldBack   []any
	awaiting   bool
	received   uint64
	// fenced is set while a practice reset removes the agent: every
	// change is refused (see admin_reset.go); drained tells the reset when
	// the payments in flight at the fence have ended.
	fenced  bool
	drained chan *Error
}

type recentKey struct {
	spendID  string
	fp       Fingerprint
	ticket   *persistence.Ticket
	inflight bool
}

type latestState struct {
	body   []byte
	ticket *persistence.Ticket
}

// SpendResult answers a spend request: the spend's JSON as stored, the
// ticket to wait on before answering, and whether it is a replay.
type SpendResult struct {
	Body   []byte
	Ticket *persistence.Ticket
	Replay bool
	Status policy.Status
	Err    *Error
}

func newAgentActor(s *System, id string, e *agentEntry) *agentActor {
	return &agentActor{sys: s, id: id, entry: e,
		active: map[string]*policy.Spend{}, recentKeys: map[string]*recentKey{},
		latest: map[string]latestState{}, waiting: map[string]chan SpendResult{}, dispatched: map[string]bool{}}
}

// Messages. Each carries its own reply channel (buffered, 1): the actor
// never waits on anyone.
type (
	createSpend struct {
		in    SpendInput
		reply chan SpendResult
	}
	cancelSpend struct {
		spendID string
		reply   chan SpendResult
	}
	railResult struct {
		spendID string
		outcome policy.RailOutcome
		err     error // the approval never became durable
	}
	// vendorSlow: the vendor has had a payment for the processing wait
	// without answering (see Config.ProcessingAfter).
	vendorSlow  struct{ spendID string }
	expireSpend struct{ spendID string }
	resumeWork  struct{}
	reloadAgent struct{ reply chan error }
	// answerInFlight: the service is stopping; answer now the creates
	// that wait for their vendor (see AnswerInFlight).
	answerInFlight struct{}
	// metaSettled says metaTicket may have resolved: run what waited.
	metaSettled struct{}
)

func (a *agentActor) Receive(ctx actor.Context) {
	if a.resetReceive(ctx) {
		return
	}
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.gen = a.sys.store.Gen()
		a.load()
		a.publishView()
		ctx.SetReceiveTimeout(a.sys.cfg.IdleTimeout)
		if a.loaded {
			a.applyDuePolicy()
			a.publishView()
			a.resumeOpenWork()
		}
		return
	case *actor.ReceiveTimeout:
		a.maybePassivate(ctx)
		return
	case *actor.Stopping:
		// Stopped with answers still owed (the journal failed, or the
		// system is closing): say so now rather than let callers time out.
		// A payment on its way to the vendor is answered as recorded.
		a.answerInFlight()
		for id, ch := range a.waiting {
			ch <- SpendResult{Err: ErrUnavailable}
			delete(a.waiting, id)
		}
		for id, ms := range a.cancelsAfterSend {
			for _, m := range ms {
				m.reply <- SpendResult{Err: ErrUnavailable}
			}
			delete(a.cancelsAfterSend, id)
		}
		a.refuseHeld(ErrUnavailable)
		return
	case *actor.Stopped, *actor.Restarting:
		return
	case *createSpend:
		a.received++
		if a.failLoad(msg.reply) {
			return
		}
		a.create(msg) // publishes its change before it answers
	case *cancelSpend:
		a.received++
		if a.failLoad(msg.reply) {
			return
		}
		a.cancel(msg) // publishes its change before it answers
	case *viewRequest:
		a.received++
		if !a.loaded {
			msg.reply <- viewReply{err: a.loadErr}
			return
		}
		msg.reply <- viewReply{view: a.entry.view.Load()}
	case *checkRequest:
		a.received++
		if !a.loaded {
			msg.reply <- checkReply{err: a.loadErr}
			return
		}
		msg.reply <- a.check(msg)
	case *railResult:
		a.received++
		// A result this incarnation did not ask for (an older incarnation's
		// worker finishing late) is dropped: this one dispatched its own.
		if a.loaded && a.dispatched[msg.spendID] {
			a.applyRail(ctx, msg) // publishes its change before it answers
		}
	case *vendorSlow:
		a.received++
		if a.loaded && a.dispatched[msg.spendID] {
			a.awaitVendor(msg.spendID)
			a.publishView()
		}
	case *expireSpend:
		a.received++
		if a.loaded {
			a.expire(msg.spendID)
			a.publishView()
		}
	case *resumeWork:
		a.received++
	case *answerInFlight:
		a.received++
		a.answerInFlight()
	case *publishPolicy:
		a.received++
		if !a.loaded {
			msg.reply <- publishReply{err: a.loadErr}
			return
		}
		if a.holdUntilSettled(msg) {
			return
		}
		a.publish(msg)
		a.publishView()
	case *pingAgent:
		a.received++
		msg.reply <- a.lastTicket
	case *cancelPolicyChange:
		a.received++
		if !a.loaded {
			msg.reply <- policyChangeReply{err: a.loadErr}
			return
		}
		if a.holdUntilSettled(msg) {
			return
		}
		a.cancelChange(msg)
	case *agentAction:
		a.received++
		if !a.loaded {
			msg.reply <- agentActionReply{err: a.loadErr}
			return
		}
		// An archive cancels the waiting rules, which it reads from the
		// store: it waits for the agent's own changes to them.
		if msg.action == ActionArchive && a.holdUntilSettled(msg) {
			return
		}
		a.changeAgent(msg)
		a.publishView()
	case *decideApproval:
		a.received++
		if a.failLoad(msg.reply) {
			return
		}
		a.decide(msg)
		a.publishView()
	case *clockMoved:
		a.received++
		if a.loaded {
			a.catchUp()
			a.publishView()
		}
	case *reloadAgent:
		a.received++
		if a.loaded {
			a.reloadPolicy() // waits for the agent's own changes itself
			a.publishView()
		}
		msg.reply <- nil
	case *metaSettled:
		a.received++
		a.awaiting = false
		a.runHeld()
	}
}

// holdUntilSettled keeps m for later when the agent's own changes to its
// record or rules are not durable yet, or when earlier messages already
// wait (they keep their order). It reports whether m was kept.
func (a *agentActor) holdUntilSettled(m any) bool {
	if len(a.heldBack) == 0 && (a.metaTicket == nil || isDone(a.metaTicket)) {
		return false
	}
	a.heldBack = append(a.heldBack, m)
	a.awaitMeta()
	return true
}

// awaitMeta arranges a metaSettled once metaTicket resolves.
func (a *agentActor) awaitMeta() {
	if a.awaiting || a.metaTicket == nil {
		return
	}
	a.awaiting = true
	t, sys, id := a.metaTicket, a.sys, a.id
	go func() {
		<-t.Done()
		if !sys.closed.Load() {
			sys.send(id, &metaSettled{})
		}
	}()
}

// runHeld runs the messages that waited, in order, for as long as the
// changes they read are durable; a message that writes such a change
// again makes the rest wait for it.
func (a *agentActor) runHeld() {
	for len(a.heldBack) > 0 {
		if a.metaTicket != nil && !isDone(a.metaTicket) {
			a.awaitMeta()
			return
		}
		m := a.heldBack[0]
		a.heldBack = a.heldBack[1:]
		switch m := m.(type) {
		case *publishPolicy:
			a.publish(m)
			a.publishView()
		case *cancelPolicyChange:
			a.cancelChange(m)
		case *agentAction:
			a.changeAgent(m)
			a.publishView()
		case *reloadAgent:
			a.reloadPolicy()
			a.publishView()
			m.reply <- nil
		}
	}
}

// refuseHeld answers every waiting message with err.
func (a *agentActor) refuseHeld(err *Error) {
	for _, m := range a.heldBack {
		switch m := m.(type) {
		case *publishPolicy:
			m.reply <- publishReply{err: err}
		case *cancelPolicyChange:
			m.reply <- policyChangeReply{err: err}
		case *agentAction:
			m.reply <- agentActionReply{err: err}
		case *reloadAgent:
			m.reply <- nil
		}
	}
	a.heldBack = nil
}

func (a *agentActor) failLoad(reply chan SpendResult) bool {
	if a.loaded {
		return false
	}
	reply <- SpendResult{Err: a.loadErr}
	return true
}

// now is the agent's time: the service clock plus its practice
// environment's offset.
func (a *agentActor) now() time.Time {
	if a.env == nil {
		return a.sys.clock.Now().UTC()
	}
	return a.env.now(a.sys.clock)
}

func (a *agentActor) subject() policy.Subject {
	return policy.Subject{Paused: a.agent.Status == AgentPaused}
}

// maybePassivate stops an idle actor whose state is all on disk. When it
// cannot stop yet it re-arms the timeout: protoactor cancels the receive
// timeout once it fires, and an actor that missed its chance would
// otherwise stay activated forever.
func (a *agentActor) maybePassivate(ctx actor.Context) {
	if a.entry.readSince.Swap(false) {
		ctx.SetReceiveTimeout(a.sys.cfg.IdleTimeout) // read since the last check: in use
		return
	}
	if a.canPassivate() && a.sys.passivate(a.id, a.entry, a.received) {
		ctx.Stop(ctx.Self())
		return
	}
	ctx.SetReceiveTimeout(a.sys.cfg.IdleTimeout)
}

func (a *agentActor) canPassivate() bool {
	if len(a.waiting) > 0 || len(a.dispatched) > 0 || len(a.heldBack) > 0 {
		return false
	}
	if a.metaTicket != nil && !isDone(a.metaTicket) {
		return false // the next incarnation would load what came before
	}
	for _, l := range a.latest {
		if !isDone(l.ticket) {
			return false
		}
	}
	return true
}

func isDone(t *persistence.Ticket) bool {
	select {
	case <-t.Done():
		return true
	default:
		return false
	}
}

// prune forgets what the store now answers for.
func (a *agentActor) prune() {
	for k, r := range a.recentKeys {
		if !r.inflight && isDone(r.ticket) {
			delete(a.recentKeys, k)
		}
	}
	for id, l := range a.latest {
		if isDone(l.ticket) {
			delete(a.latest, id)
		}
	}
}

// appended records a change's ticket against the spends it touched, and
// stops the actor if the journal lost it (its memory is then ahead of disk).
func (a *agentActor) appended(t *persistence.Ticket, sp *policy.Spend, body []byte) {
	a.latest[sp.ID] = latestState{body: body, ticket: t}
	a.lastTicket = t
	a.forgetUnpaid(sp)
}
