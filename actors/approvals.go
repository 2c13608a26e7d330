package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentpay/guard/policy"
)

// Decisions an owner can give on an approval.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// Decision is an owner's answer to an approval, with where it came from.
// No API key can give one: the console (the owner's own session) and the
// signed links it sends are the only callers.
type Decision struct {
	ApprovalID string
	Decision   string // DecisionApprove or DecisionReject
	// ItemsHash must equal the approval's: a decision names the purchase
	// it decides, so a link signed for one purchase, or a console page
	// shown for it, cannot decide another. Missing is refused like wrong.
	ItemsHash string
	Channel   string // "console", "email", "chat"
	Reference string // session or link id, for the audit trail
}

type decideApproval struct {
	d     Decision
	reply chan SpendResult
}

// DecideApproval records the owner's decision. Exactly one decision ever
// wins: decisions run in the agent's actor one at a time, and only a spend
// still pending can take one; every later or concurrent decision is
// refused with a message saying what happened instead.
func (s *System) DecideApproval(ctx context.Context, ownerID string, d Decision) (SpendResult, error) {
	notFound := errorf(CodeNotFound, "No approval %s exists.", d.ApprovalID)
	if !ValidID("apr", d.ApprovalID) || d.Decision != DecisionApprove && d.Decision != DecisionReject {
		return SpendResult{}, notFound
	}
	spendID, err := s.store.Get(bApprovals, []byte(d.ApprovalID))
	if err != nil {
		return SpendResult{}, ErrUnavailable
	}
	if spendID == nil {
		return SpendResult{}, notFound
	}
	var sp policy.Spend
	if ok, err := s.getJSON(bSpends, spendID, &sp); err != nil {
		return SpendResult{}, ErrUnavailable
	} else if !ok {
		return SpendResult{}, notFound
	}
	var ag Agent
	if ok, err := s.getJSON(bAgents, []byte(sp.AgentID), &ag); err != nil || !ok || ag.OwnerID != ownerID {
		return SpendResult{}, notFound
	}
	r, err := ask(ctx, s, sp.AgentID, func(reply chan SpendResult) any { return &decideApproval{d: d, reply: reply} })
	if err != nil {
		return SpendResult{}, err
	}
	if r.Err != nil {
		return r, r.Err
	}
	if err := WaitDurable(ctx, r); err != nil {
		return r, err
	}
	s.logAction("approval_decided", ownerID, slog.String("env", string(EnvOf(sp.Livemode))), slog.String("by", d.Channel),
		slog.String("decision", d.Decision), slog.String("approval", d.ApprovalID), slog.String("spend", sp.ID),
		slog.String("agent", sp.AgentID), slog.String("amount", sp.Amount.String()), slog.String("spend_status", string(r.Status)))
	return r, nil
}

// decide runs in the agent actor.
func (a *agentActor) decide(m *decideApproval) {
	d := m.d
	var sp *policy.Spend
	for _, s := range a.active {
		if s.Approval != nil && s.Approval.ID == d.ApprovalID {
			sp = s
		}
	}
	if sp == nil || sp.Status != policy.StatusPendingApproval {
		m.reply <- SpendResult{Err: a.whyNotPending(d.ApprovalID)}
		return
	}
	if d.ItemsHash == "" {
		m.reply <- SpendResult{Err: &Error{Code: CodeInvalidRequest, Param: "items_hash",
			Message: "A decision must name the purchase it decides (items_hash, as the approval shows it); nothing was decided."}}
		return
	}
	if d.ItemsHash != sp.Approval.ItemsHash {
		m.reply <- SpendResult{Err: &Error{Code: CodeConflict,
			Message: "The purchase changed since this approval was requested; decide on the current request."}}
		return
	}
	now := a.now()
	if !now.Before(sp.Approval.ExpiresAt) {
		a.expire(sp.ID)
		m.reply <- SpendResult{Err: &Error{Code: CodeConflict, Message: "The approval expired before the decision; nothing was paid."}}
		return
	}
	if d.Decision == DecisionApprove && a.agent.Status == AgentPaused {
		m.reply <- SpendResult{Err: &Error{Code: CodeConflict,
			Message: "The agent is paused; resume it before approving its payments."}}
		return
	}

	c := &change{spends: []string{sp.ID}}
	a.env.mu.Lock()
	verdict := d.Decision
	reason := policy.ReasonOwnerRejected
	var rule *policy.RuleDetail
	if verdict == DecisionApprove {
		if why, changed, r := a.rulesNowDecline(sp, now); changed != "" {
			verdict, reason, rule = DecisionReject, why, r
			sp.Message = changed
			// The rules that declined it are the ones it reports
			// (spec 2.1: policy_version is the version applied).
			sp.PolicyVersion, sp.PolicyHash = a.policy.Version, a.policy.Hash
		}
	}
	status := "approved"
	if verdict == DecisionReject {
		status = "rejected"
	}
	c.event(a.env, a.id, "approval.decided", map[string]any{"id": d.ApprovalID, "object": "approval", "status": status,
		"spend_id": sp.ID, "decision": d.Decision, "channel": d.Channel, "reference": d.Reference}, audienceOwner, now)
	if verdict == DecisionApprove {
		sp.Approve(now)
		a.ledger.Restatus(sp.ID, policy.StatusApproved)
		if sp.PolicyVersion != a.policy.Version {
			// Newer rules were run again and let it pass: they are the
			// version applied (spec 2.1), in the answer and the receipt,
			// across a restart too.
			sp.PolicyVersion, sp.PolicyHash = a.policy.Version, a.policy.Hash
			c.putActive(join(a.id, sp.ID), sp)
		}
	} else {
		msg := "The owner rejected the payment; nothing was paid and the allowance was released."
		if reason != policy.ReasonOwnerRejected {
			msg = sp.Message
		}
		a.ledger.Release(sp.ID, now)
		a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
		sp.Decline(reason, policy.GateApproval, msg, now)
		sp.Rule = rule
		c.del(bActive, join(a.id, sp.ID))
	}
	c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
	body := spendJSON(sp)
	c.putSpend(sp, body)
	c.putLedger([]byte(a.id), &a.ledger)
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	a.sys.timers.cancel(sp.ID)
	a.appended(t, sp, body)
	if sp.Status == policy.StatusApproved {
		a.remember(sp, now)
		a.dispatch(sp, t, false, 0)
	} else {
		delete(a.active, sp.ID)
	}
	a.publishView()
	m.reply <- SpendResult{Body: body, Ticket: t, Status: sp.Status}
}

// rulesNowDecline re-runs the rules for a spend about to be approved: if
// the rules in effect now would decline it, it must not be paid. It
// returns the decline reason, the spend's message and the detail of the
// rule that declined (nil for an expiry), or "" when the
// payment may go.
//
// Rules that expired while the payment waited decline it (policy_expired)
// whatever their version. A newer version is run in full, with the
// spend's own hold and its place in the destination window taken out
// first, so it is not counted twice; of what it could decline, the limits
// on asking (max_pending, unknown_destination_limit) do not apply: the
// owner is answering a question already asked, and approving shortens the
// queue. Caller holds the environment lock.
func (a *agentActor) rulesNowDecline(sp *policy.Spend, now time.Time) (reason, message string, rule *policy.RuleDetail) {
	if vu := a.policy.ValidUntil; vu != nil && !now.Before(*vu) {
		return policy.ReasonPolicyExpired, fmt.Sprintf("The owner's rules expired at %s while the payment waited; nothing was paid.",
			vu.UTC().Format(time.RFC3339)), nil
	}
	if sp.PolicyVersion == a.policy.Version {
		return "", "", nil
	}
	l := a.ledger.Clone()
	l.Release(sp.ID, now)
	pool := a.env.pool()
	pool.Available = pool.Available.Add(sp.Amount)
	d := policy.Decide(&a.policy, &l, pool, a.subject(),
		policy.Request{Amount: sp.Amount, Destination: sp.Destination, Resource: sp.Resource}, now)
	if d.Outcome != policy.StatusDeclined || d.Reason == policy.ReasonMaxPending || d.Reason == policy.ReasonUnknownDestinationLimit {
		return "", "", nil
	}
	return policy.ReasonPolicyChanged, fmt.Sprintf("The owner's rules changed (version %d to %d) while the payment waited, and they now decline it (%s); nothing was paid.",
		sp.PolicyVersion, a.policy.Version, d.Reason), d.Rule
}

// whyNotPending explains why an approval cannot take a decision.
func (a *agentActor) whyNotPending(approvalID string) *Error {
	spendID, _ := a.sys.store.Get(bApprovals, []byte(approvalID))
	var sp policy.Spend
	if spendID != nil {
		if l, ok := a.latest[string(spendID)]; ok {
			_ = jsonUnmarshal(l.body, &sp)
		} else {
			_, _ = a.sys.getJSON(bSpends, spendID, &sp)
		}
	}
	switch sp.Status {
	case policy.StatusApproved, policy.StatusProcessing, policy.StatusSettled, policy.StatusFailed:
		return &Error{Code: CodeConflict, Message: "This approval was already approved; the payment is " + string(sp.Status) + "."}
	case policy.StatusDeclined:
		return &Error{Code: CodeConflict, Message: "This approval was already decided: the payment was declined."}
	case policy.StatusExpired:
		return &Error{Code: CodeConflict, Message: "The approval expired before a decision; nothing was paid."}
	case policy.StatusCancelled:
		// The agent cancelled it, or the owner archived the agent: the
		// spend's message says which.
		return &Error{Code: CodeConflict, Message: "The payment was cancelled before a decision. " + sp.Message}
	}
	return errorf(CodeNotFound, "No approval %s exists.", approvalID)
}
