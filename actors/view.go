package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// agentView is an immutable copy of what reads need from an agent: its
// policy in effect, its counters and the sums of its holds, whether it is
// paused. The actor publishes a fresh one after every change, so balance
// and check requests are answered without a round trip through the
// mailbox. A read may be a moment out of date, which spec 4.6 allows ("the
// result may be out of date a second later"); it can never be
// inconsistent, because it is one snapshot taken inside the actor.
type agentView struct {
	// ticket is the journal record of the newest change in this snapshot:
	// a reader waits for it, so nobody outside hears of a change before it
	// is durable (it is nearly always done already).
	ticket *persistence.Ticket
	policy *policy.Policy
	ledger policy.Ledger // a ReadCopy; readers copy the struct before rolling it
	paused bool
	env    *envLedger
	// balance memoizes the last balance computed from this snapshot.
	balance atomic.Pointer[balanceMemo]
}

// balanceMemo is a balance computed from one snapshot, one durable pool
// state and one UTC day: the same inputs always give the same balance
// (only as_of moves), so an agent polling its balance between changes
// costs no arithmetic. A change publishes a new snapshot or a new pool
// state, and a new day rolls the counters; each misses the memo.
type balanceMemo struct {
	pool *EnvState
	day  int64
	bal  policy.Balance
}

// publishView replaces the agent's snapshot. Called by the actor after each
// change it makes, and before it answers the request that made the change:
// a caller that reads its balance or checks a payment right after its
// answer must see its own change.
func (a *agentActor) publishView() {
	if !a.loaded {
		return
	}
	if d := publishDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	// The rules change far less often than the counters: a snapshot
	// shares the previous one's copy of them while they are the same.
	pol := &a.policy
	if prev := a.entry.view.Load(); prev != nil && samePolicy(prev.policy, pol) {
		pol = prev.policy
	} else {
		c := a.policy
		pol = &c
	}
	// Without the destination window: it can hold every spend of a day,
	// and copying it would make each change cost as much as the day's
	// spends. A check that needs it is answered by the actor
	// (System.checkInActor).
	l := a.ledger.ReadCopy()
	a.entry.view.Store(&agentView{ticket: a.lastTicket, policy: pol, ledger: l, paused: a.agent.Status == AgentPaused, env: a.env})
}

// samePolicy reports whether two copies hold the same rules: a new version
// of the rules always has a new version number and hash, and the pause
// flag is the one field an agent's policy changes in place.
func samePolicy(a, b *policy.Policy) bool {
	return a.ID == b.ID && a.Version == b.Version && a.Hash == b.Hash && a.Paused == b.Paused &&
		a.EffectiveAt.Equal(b.EffectiveAt)
}

// publishDelay slows every publication, in tests only: it widens the
// moment between a change and its snapshot, which a reply sent in between
// would let a caller see.
var publishDelay atomic.Int64

// view is the agent's published snapshot, or nil when it is not activated.
func (s *System) view(agentID string) *agentView {
	s.regMu.RLock()
	e, ok := s.agents[agentID]
	s.regMu.RUnlock()
	if !ok {
		return nil
	}
	v := e.view.Load()
	if v != nil {
		e.markRead()
	}
	return v
}

// readView returns a snapshot, activating the agent through its mailbox
// when it has none yet.
func (s *System) readView(ctx context.Context, agentID string) (*agentView, error) {
	v := s.view(agentID)
	if v == nil {
		r, err := ask(ctx, s, agentID, func(reply chan viewReply) any { return &viewRequest{reply: reply} })
		if err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		v = r.view
	}
	if err := waitDurable(ctx, v.ticket); err != nil {
		return nil, err
	}
	return v, nil
}

// waitDurable waits until t, the journal record of the newest change a
// reader saw, is durable (nil: nothing to wait for).
func waitDurable(ctx context.Context, t *persistence.Ticket) error {
	if t == nil {
		return nil
	}
	// Nearly always durable already: look before waiting, which would
	// select on the request's context too.
	if isDone(t) {
		if t.Err() != nil {
			return ErrUnavailable
		}
	} else if err := t.Wait(ctx); err != nil {
		return ErrUnavailable
	}
	return nil
}

type viewRequest struct{ reply chan viewReply }

type viewReply struct {
	view *agentView
	err  *Error
}

// pool reads the environment's durable pool: it moves with every agent's
// spends, so it is not part of one agent's snapshot.
func (v *agentView) pool() policy.Pool { return v.env.durablePool() }

// checkRequest asks the actor for a check against its own ledger (see
// System.checkInActor).
type checkRequest struct {
	destination string
	amount      policy.Amount
	reply       chan checkReply
}

type checkReply struct {
	result policy.CheckResult
	ticket *persistence.Ticket // newest change the result saw
	err    *Error
}

// check answers a checkRequest. The rules roll the ledger's windows
// forward, as any spend would; nothing else of it changes.
func (a *agentActor) check(m *checkRequest) checkReply {
	r := policy.Check(&a.policy, &a.ledger, a.env.durablePool(), a.subject(), m.destination, &m.amount, a.env.now(a.sys.clock))
	return checkReply{result: r, ticket: a.lastTicket}
}
