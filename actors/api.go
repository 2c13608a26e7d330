package actors

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/policy"
)

// CreateSpend registers a spend for the principal's agent and, when the
// rules allow, pays. The result's ticket must be waited on (WaitDurable)
// before anyone is told.
func (s *System) CreateSpend(ctx context.Context, p Principal, in SpendInput) (SpendResult, error) {
	r, err := ask(ctx, s, p.AgentID, func(reply chan SpendResult) any { return &createSpend{in: in, reply: reply} })
	if err != nil {
		return SpendResult{}, err
	}
	if r.Err != nil {
		return r, forKey(p, r.Err)
	}
	return r, WaitDurable(ctx, r)
}

// WaitDurable waits until the change behind a result is on disk.
func WaitDurable(ctx context.Context, r SpendResult) error {
	if r.Ticket == nil {
		return nil
	}
	if err := r.Ticket.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return &Error{Code: CodeTimeout, Message: "The request was cancelled while the change was being recorded."}
		}
		return ErrUnavailable
	}
	return nil
}

// CancelSpend cancels a pending or approved spend of the principal's agent.
func (s *System) CancelSpend(ctx context.Context, p Principal, spendID string) (SpendResult, error) {
	if !ValidID("spd", spendID) {
		return SpendResult{}, errorf(CodeNotFound, "No spend %s exists.", spendID)
	}
	r, err := ask(ctx, s, p.AgentID, func(reply chan SpendResult) any { return &cancelSpend{spendID: spendID, reply: reply} })
	if err != nil {
		return SpendResult{}, err
	}
	if r.Err != nil {
		// A refusal that reports a state ("already settled") waits until
		// that state is durable, like any answer about money: the agent
		// must not hear of a settlement a crash could still undo.
		if werr := WaitDurable(ctx, r); werr != nil {
			return r, werr
		}
		return r, forKey(p, r.Err)
	}
	return r, WaitDurable(ctx, r)
}

// GetSpend reads a spend's durable state. An agent sees only its own, an
// owner only its environment's; anything else is not found. With wait > 0
// it returns as soon as the spend changes, or when wait ends.
func (s *System) GetSpend(ctx context.Context, p Principal, spendID string, wait time.Duration) ([]byte, error) {
	if !ValidID("spd", spendID) {
		return nil, errorf(CodeNotFound, "No spend %s exists.", spendID)
	}
	var ch chan struct{}
	if wait > 0 {
		var cancel func()
		ch, cancel = s.hub.watch(spendID)
		defer cancel()
	}
	body, sp, err := s.readSpend(p, spendID)
	if err != nil || wait <= 0 || sp.Status.Terminal() {
		return body, err
	}
	// The hub may still deliver news of a change the first read already
	// shows (it reports after durability, which can trail the reply that
	// announced it): wake, compare, and keep waiting until the spend really
	// differs from what the caller was given.
	seen := body
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ch:
		case <-t.C:
			return s.readSpendBody(p, spendID)
		case <-ctx.Done():
			return s.readSpendBody(p, spendID)
		}
		body, _, err = s.readSpend(p, spendID)
		if err != nil || !bytes.Equal(body, seen) {
			return body, err
		}
	}
}

// LongPolls is how many GET /v1/spends/{id}?wait_seconds=N wait on the
// spend now: a diagnostic, and how a test knows its poll is open.
func (s *System) LongPolls(spendID string) int { return s.hub.watching(spendID) }

func (s *System) readSpendBody(p Principal, spendID string) ([]byte, error) {
	body, _, err := s.readSpend(p, spendID)
	return body, err
}

func (s *System) readSpend(p Principal, spendID string) ([]byte, policy.Spend, error) {
	var sp policy.Spend
	body, err := s.store.Get(bSpends, []byte(spendID))
	if err != nil {
		return nil, sp, ErrUnavailable
	}
	if body == nil || fastjson.Unmarshal(body, &sp) != nil {
		return nil, sp, errorf(CodeNotFound, "No spend %s exists.", spendID)
	}
	if !s.visible(p, sp.AgentID, sp.Livemode) {
		return nil, sp, s.notFound(p, "spend", spendID, sp.AgentID, sp.Livemode)
	}
	return body, sp, nil
}

// notFound answers a request for an object p may not see: no such object,
// with otherEnvHint when it belongs to p's owner in the other environment.
func (s *System) notFound(p Principal, what, id, agentID string, livemode bool) *Error {
	var ag Agent
	if p.Kind == KindOwner && livemode != p.Livemode {
		if ok, err := s.getJSON(bAgents, []byte(agentID), &ag); err != nil || !ok {
			ag = Agent{}
		}
	}
	return notFoundFor(p, what, id, ag.OwnerID, livemode)
}

// notFoundFor answers a request for an object of ownerID that p may not
// see: no such object, with otherEnvHint when ownerID is p's owner and
// the object is of the other environment.
func notFoundFor(p Principal, what, id, ownerID string, livemode bool) *Error {
	if p.Kind == KindOwner && ownerID != "" && ownerID == p.OwnerID && livemode != p.Livemode {
		e := errorf(CodeNotFound, "No %s %s exists%s", what, id, otherEnvHint(p, what))
		e.elsewhere = true
		return e
	}
	return errorf(CodeNotFound, "No %s %s exists.", what, id)
}

// visible reports whether the principal may see an object of this agent.
func (s *System) visible(p Principal, agentID string, livemode bool) bool {
	if livemode != p.Livemode {
		return false
	}
	if p.Kind == KindAgent {
		return agentID == p.AgentID
	}
	var ag Agent
	ok, err := s.getJSON(bAgents, []byte(agentID), &ag)
	return err == nil && ok && ag.OwnerID == p.OwnerID
}

// Check simulates a spend (spec 4.6); it reserves nothing. It reads the
// agent's published snapshot, not its mailbox.
func (s *System) Check(ctx context.Context, p Principal, destination string, amount *policy.Amount) (policy.CheckResult, error) {
	v, err := s.readView(ctx, p.AgentID)
	if err != nil {
		return policy.CheckResult{}, forKey(p, err)
	}
	if amount != nil && v.policy.DestinationWindowOver != nil {
		r, err := s.checkInActor(ctx, p.AgentID, destination, *amount)
		return r, forKey(p, err)
	}
	l := v.ledger // a private copy: the rules roll windows forward on it
	return policy.Check(v.policy, &l, v.pool(), policy.Subject{Paused: v.paused}, destination, amount, v.env.now(s.clock)), nil
}

// checkInActor runs a check in the agent's actor, against its own ledger:
// the destination window, which destination_window_over reads, is not in
// the snapshots. Like a snapshot read, the answer waits until the newest
// change it saw is durable.
func (s *System) checkInActor(ctx context.Context, agentID, destination string, amount policy.Amount) (policy.CheckResult, error) {
	r, err := ask(ctx, s, agentID, func(reply chan checkReply) any {
		return &checkRequest{destination: destination, amount: amount, reply: reply}
	})
	if err != nil {
		return policy.CheckResult{}, err
	}
	if r.err != nil {
		return policy.CheckResult{}, r.err
	}
	if err := waitDurable(ctx, r.ticket); err != nil {
		return policy.CheckResult{}, err
	}
	return r.result, nil
}

// Balance is the agent's spendable amount (spec 2.7), from its snapshot.
func (s *System) Balance(ctx context.Context, p Principal) (policy.Balance, error) {
	v, err := s.readView(ctx, p.AgentID)
	if err != nil {
		return policy.Balance{}, forKey(p, err)
	}
	now := v.env.now(s.clock)
	st := v.env.durableState()
	day := utcDay(now)
	var b policy.Balance
	if m := v.balance.Load(); m != nil && m.pool == st && m.day == day {
		b = m.bal
		b.AsOf = now.UTC()
	} else {
		l := v.ledger
		b = policy.ComputeBalance(p.AgentID, v.policy, &l, poolOf(st), now)
		v.balance.Store(&balanceMemo{pool: st, day: day, bal: b})
	}
	// spendable is the formula of spec 2.7, which has no term for a pause
	// or an expiry; the message must not say the agent can spend now when
	// every spend would be declined.
	switch vu := v.policy.ValidUntil; {
	case v.paused:
		b.Message = fmt.Sprintf("The owner paused this agent: no payment is made until the owner resumes it. Once resumed, %s is spendable (%s is the limiting factor).",
			b.Spendable, b.LimitingFactor)
	case vu != nil && !now.Before(*vu):
		b.Message = fmt.Sprintf("The agent's rules expired at %s: no payment is made until the owner publishes new rules.",
			vu.UTC().Format(time.RFC3339))
	}
	return b, nil
}

// utcDay numbers the UTC day of t; the counters roll when it changes.
func utcDay(t time.Time) int64 {
	sec := t.Unix()
	if sec < 0 {
		return (sec+1)/86400 - 1
	}
	return sec / 86400
}

// Policy is the agent's policy in effect.
func (s *System) Policy(p Principal, agentID string) (policy.Policy, error) {
	if p.Kind == KindAgent {
		agentID = p.AgentID
	}
	var ag Agent
	if ok, err := s.getJSON(bAgents, []byte(agentID), &ag); err != nil {
		return policy.Policy{}, ErrUnavailable
	} else if !ok || !s.visible(p, agentID, ag.Livemode) {
		return policy.Policy{}, forKey(p, s.agentNotFound(p, agentID, ok, ag))
	}
	out, found, err := effectivePolicy(s.store, agentID, s.nowFor(ag.OwnerID, EnvOf(ag.Livemode)))
	if err != nil {
		return out, ErrUnavailable
	}
	if !found {
		return out, errorf(CodeNotFound, "Agent %s has no policy in effect.", agentID)
	}
	out.Paused = ag.Status == AgentPaused
	return out, nil
}

// Agent reads an agent visible to the principal.
func (s *System) Agent(p Principal, agentID string) (Agent, error) {
	var ag Agent
	if ok, err := s.getJSON(bAgents, []byte(agentID), &ag); err != nil {
		return ag, ErrUnavailable
	} else if !ok || !s.visible(p, agentID, ag.Livemode) {
		if agentID == p.AgentID {
			return ag, forKey(p, errAgentGone(agentID)) // the key's own agent
		}
		return ag, s.agentNotFound(p, agentID, ok, ag)
	}
	return ag, nil
}

// agentNotFound is errAgentGone for an agent p may not see, with
// otherEnvHint when p's owner has it in the other environment.
func (s *System) agentNotFound(p Principal, agentID string, found bool, ag Agent) *Error {
	if !found {
		return errAgentGone(agentID)
	}
	e := notFoundFor(p, "agent", agentID, ag.OwnerID, ag.Livemode)
	e.agentGone = true
	return e
}

// Receipt reads a signed receipt visible to the principal.
func (s *System) Receipt(p Principal, id string) (Receipt, error) {
	var r Receipt
	if !ValidID("rcp", id) {
		return r, errorf(CodeNotFound, "No receipt %s exists.", id)
	}
	ok, err := s.getJSON(bReceipts, []byte(id), &r)
	if err != nil {
		return r, ErrUnavailable
	}
	if !ok {
		return r, errorf(CodeNotFound, "No receipt %s exists.", id)
	}
	if !s.visible(p, r.AgentID, r.Livemode) {
		return r, s.notFound(p, "receipt", id, r.AgentID, r.Livemode)
	}
	return r, nil
}

// Subscribe registers f to receive every event once it is durable, in
// journal order. f must not block for long.
func (s *System) Subscribe(f func(StoredEvent)) { s.hub.subscribe(f) }

// Now is the service clock.
func (s *System) Now() time.Time { return s.clock.Now() }

// Approval is the read-only view of an approval (GET /v1/approvals/{id}).
// Deciding happens only in the owner's own session, never through a key.
type Approval struct {
	ID          string          `json:"id"`
	Object      string          `json:"object"`
	Status      string          `json:"status"`
	SpendID     string          `json:"spend_id"`
	AgentID     string          `json:"agent_id"`
	Livemode    bool            `json:"livemode"`
	Reason      *string         `json:"reason"`
	Amount      policy.Amount   `json:"amount"`
	Currency    string          `json:"currency"`
	Destination string          `json:"destination"`
	Resource    policy.Resource `json:"resource"`
	ItemsHash   string          `json:"items_hash"`
	ShortCode   string          `json:"short_code"`
	OwnerURL    string          `json:"owner_url"`
	ExpiresAt   time.Time       `json:"expires_at"`
	CreatedAt   time.Time       `json:"created_at"`
	SpendStatus policy.Status   `json:"spend_status"`
}

// GetApproval reads an approval visible to the principal.
func (s *System) GetApproval(p Principal, id string) (Approval, error) {
	notFound := errorf(CodeNotFound, "No approval %s exists.", id)
	if !ValidID("apr", id) {
		return Approval{}, notFound
	}
	spendID, err := s.store.Get(bApprovals, []byte(id))
	if err != nil {
		return Approval{}, ErrUnavailable
	}
	if spendID == nil {
		return Approval{}, notFound
	}
	_, sp, err := s.readSpend(p, string(spendID))
	if isElsewhere(err) {
		return Approval{}, s.notFound(p, "approval", id, sp.AgentID, sp.Livemode)
	}
	if err != nil || sp.Approval == nil {
		return Approval{}, notFound
	}
	a := sp.Approval
	return Approval{ID: a.ID, Object: "approval", Status: a.Status, SpendID: sp.ID, AgentID: sp.AgentID,
		Livemode: sp.Livemode, Reason: sp.ApprovalReason, Amount: sp.Amount, Currency: sp.Currency,
		Destination: sp.Destination, Resource: sp.Resource, ItemsHash: a.ItemsHash, ShortCode: a.ShortCode,
		OwnerURL: a.OwnerURL, ExpiresAt: a.ExpiresAt, CreatedAt: sp.CreatedAt, SpendStatus: sp.Status}, nil
}
