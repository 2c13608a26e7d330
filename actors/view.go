package actors

import (
	"context"
	"sync/atomic"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// agentView is an immutable copy of what reads need from an agent: its
// policy in effect, its counters and holds, whether it is paused. The actor
// publishes a fresh one after every change, so balance and check requests
// are answered without a round trip through the mailbox. A read may be a
// moment out of date, which spec 4.6 allows ("the result may be out of date
// a second later"); it can never be inconsistent, because it is one
// snapshot taken inside the actor.
type agentView struct {
	// ticket is the journal record of the newest change in this snapshot:
	// a reader waits for it, so nobody outside hears of a change before it
	// is durable (it is nearly always done already).
	ticket *persistence.Ticket
	policy *policy.Policy
	ledger policy.Ledger // Holds is shared read-only; readers copy the struct
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
// change it makes.
func (a *agentActor) publishView() {
	if !a.loaded {
		return
	}
	pol := a.policy
	l := a.ledger
	holds := make(map[string]policy.HoldEntry, len(a.ledger.Holds))
	for k, v := range a.ledger.Holds {
		holds[k] = v
	}
	l.Holds = holds
	l.Asked = append([]string(nil), a.ledger.Asked...)
	if pol.DestinationWindowOver != nil {
		l.Window = append([]policy.WindowEntry(nil), a.ledger.Window...)
	} else {
		l.Window = nil // the only rule that reads it is off
	}
	a.entry.view.Store(&agentView{ticket: a.lastTicket, policy: &pol, ledger: l, paused: a.agent.Status == AgentPaused, env: a.env})
}

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
	if t := v.ticket; t != nil {
		// Nearly always durable already: look before waiting, which
		// would select on the request's context too.
		if isDone(t) {
			if t.Err() != nil {
				return nil, ErrUnavailable
			}
		} else if err := t.Wait(ctx); err != nil {
			return nil, ErrUnavailable
		}
	}
	return v, nil
}

type viewRequest struct{ reply chan viewReply }

type viewReply struct {
	view *agentView
	err  *Error
}

// pool reads the environment's durable pool: it moves with every agent's
// spends, so it is not part of one agent's snapshot.
func (v *agentView) pool() policy.Pool { return v.env.durablePool() }
