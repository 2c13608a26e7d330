package policy

import (
	"fmt"
	"time"
)

// NewSpendInput is what the service knows when it registers a spend.
type NewSpendInput struct {
	ID              string
	AgentID         string
	OwnerID         string
	Livemode        bool
	Request         Request
	Currency        string
	Memo            string
	ClientReference *string
	IdempotencyKey  string
	Fingerprint     string
	Nonce           string
}

// NewSpend registers a spend in the state the decision gives it.
func NewSpend(in NewSpendInput, p *Policy, d Decision, now time.Time) *Spend {
	now = now.UTC()
	s := &Spend{
		ID: in.ID, Object: "spend", AgentID: in.AgentID, OwnerID: in.OwnerID, Livemode: in.Livemode,
		Amount: in.Request.Amount, Currency: in.Currency, Destination: d.Destination,
		DestinationRule: d.MatchedRule, Resource: in.Request.Resource, Memo: in.Memo,
		ClientReference: in.ClientReference, PolicyVersion: p.Version, PolicyHash: p.Hash,
		Rule: d.Rule, Message: d.Message, CreatedAt: now, UpdatedAt: now,
		IdempotencyKey: in.IdempotencyKey, Fingerprint: in.Fingerprint, Nonce: in.Nonce,
	}
	if !in.Livemode {
		s.Sandbox = &Sandbox{SimulatedVendor: true}
	}
	s.move(d.Outcome, now)
	switch d.Outcome {
	case StatusDeclined:
		s.DeclineReason, s.DeclinedAtGate = strPtr(d.Reason), strPtr(GateCreate)
		s.NextAction, s.Retryable = declineNextAction(d.Reason, d.Rule)
	case StatusPendingApproval:
		s.ApprovalReason = strPtr(d.ApprovalReason)
		s.Hold = &Hold{Amount: in.Request.Amount}
		s.NextAction = NextAction{Code: NextWaitForOwner, CheckWith: CheckWithGetSpend,
			Detail: "Poll this payment (wait_seconds up to 20) until the owner decides."}
	case StatusApproved:
		s.Hold = &Hold{Amount: in.Request.Amount}
		s.NextAction = NextAction{Code: NextCheckLater, CheckWith: CheckWithGetSpend, RetryAfterSeconds: 1}
	}
	return s
}

func declineNextAction(reason string, rule *RuleDetail) (NextAction, bool) {
	switch reason {
	case ReasonDailyCap, ReasonMonthlyCap:
		na := NextAction{Code: NextDoNotRetry, Detail: "Do not retry before the cap resets."}
		if rule != nil && rule.ResetsAt != nil {
			na.Suggestions = []string{fmt.Sprintf("Retry with a new Idempotency-Key after %s.", rule.ResetsAt.Format(time.RFC3339)),
				"Ask the owner to raise the cap."}
		}
		return na, false
	case ReasonInsufficientFunds, ReasonMaxPending:
		return NextAction{Code: NextNewAttemptNewKey, Suggestions: []string{"Try again later with a new Idempotency-Key."}}, true
	case ReasonUnknownDestinationLimit:
		return NextAction{Code: NextDoNotRetry, Suggestions: []string{"Ask the owner to trust the destination, or retry tomorrow (UTC)."}}, false
	case ReasonPerSpendLimit:
		return NextAction{Code: NextDoNotRetry, Suggestions: []string{"Ask for a smaller amount, or ask the owner to raise per_spend_limit."}}, false
	case ReasonAgentPaused:
		return NextAction{Code: NextDoNotRetry, Detail: "The owner paused this agent."}, false
	}
	return NextAction{Code: NextDoNotRetry}, false
}

// Approve moves a pending spend to approved (the owner said yes).
func (s *Spend) Approve(now time.Time) {
	s.move(StatusApproved, now)
	if s.Approval != nil {
		s.Approval.Status = "approved"
	}
	if s.Hold != nil {
		// The hold no longer ends with the approval: it lasts until the
		// payment settles or fails, as at a create that needs no approval.
		s.Hold.ExpiresAt = nil
	}
	s.NextAction = NextAction{Code: NextCheckLater, CheckWith: CheckWithGetSpend, RetryAfterSeconds: 1}
	s.Message = "The owner approved the payment; the service is paying the vendor."
	s.applyWarning()
}

// Decline moves a pending or approved spend to declined.
func (s *Spend) Decline(reason, gate, msg string, now time.Time) {
	s.move(StatusDeclined, now)
	s.DeclineReason, s.DeclinedAtGate, s.Message = strPtr(reason), strPtr(gate), msg
	// A decline at the approval gate closes the approval whatever the
	// reason: the owner's rejection, or the owner's approval overruled by
	// rules that changed while the spend waited (approval.decided says
	// "rejected" for both). A pending approval left behind would keep a
	// client polling it waiting for a decision that was already taken.
	if s.Approval != nil && gate == GateApproval {
		s.Approval.Status = "rejected"
	}
	s.Hold = nil
	s.NextAction, s.Retryable = declineNextAction(reason, nil)
}

// Cancel moves a pending or approved spend to cancelled.
func (s *Spend) Cancel(now time.Time) {
	s.move(StatusCancelled, now)
	// An approval still waiting ends with the spend, whoever cancelled it
	// (the agent, or the owner by archiving the agent).
	if s.Approval != nil && s.Approval.Status == "pending" {
		s.Approval.Status = "cancelled"
	}
	s.Hold = nil
	s.Message = "The agent cancelled the payment; nothing was paid and the allowance was released."
	s.NextAction, s.Retryable = NextAction{Code: NextNewAttemptNewKey}, true
}

// Expire moves a pending spend whose approval ran out to expired.
func (s *Spend) Expire(now time.Time) {
	s.move(StatusExpired, now)
	s.Hold = nil
	if s.Approval != nil {
		s.Approval.Status = "expired"
	}
	s.Message = "The owner did not answer before the approval expired; nothing was paid."
	s.NextAction, s.Retryable = NextAction{Code: NextNewAttemptNewKey, Suggestions: []string{"Ask again with a new Idempotency-Key if the purchase is still needed."}}, true
}

// Settle records a confirmed payment.
func (s *Spend) Settle(o RailOutcome, receiptID string, now time.Time) {
	s.move(StatusSettled, now)
	price := o.Price
	s.AmountSettled = &price
	s.Hold = nil
	s.ProcessingDetail = nil
	s.Settlement = &Settlement{Mode: SettlementMode, Status: "settled", Network: strPtr(o.Network),
		Reference: strPtr(o.Reference), ReceiptID: strPtr(receiptID), Result: o.Result}
	s.markSandbox(o)
	s.Message = fmt.Sprintf("Paid %s to %s.", price.Display(), s.Destination)
	s.NextAction, s.Retryable = NextAction{Code: NextNone}, false
	s.applyWarning()
}

// Fail records a rail rejection: no money moved.
func (s *Spend) Fail(o RailOutcome, now time.Time) {
	s.move(StatusFailed, now)
	s.Hold = nil
	s.ProcessingDetail = nil
	s.FailureReason = strPtr("rail_error")
	s.RailError = &RailError{Code: o.ErrorCode, Message: o.ErrorMessage}
	s.Settlement = &Settlement{Mode: SettlementMode, Status: "failed"}
	s.markSandbox(o)
	s.Message = "The payment rail refused the payment; no money moved and the allowance was released."
	s.NextAction, s.Retryable = NextAction{Code: NextNewAttemptNewKey,
		Suggestions: []string{"A new attempt needs a new Idempotency-Key; repeating this key returns this failed payment."}}, true
}

// AwaitVendor records a payment sent to its vendor that has not answered
// within the wait the service allows a request: it is out of the agent's
// hands (it can no longer be cancelled) and its outcome is not known yet.
// The hold stays; the vendor's answer, or a verification if none comes,
// settles or fails it. It is never sent again.
func (s *Spend) AwaitVendor(now time.Time) {
	s.move(StatusProcessing, now)
	s.ProcessingDetail = &ProcessingDetail{Code: "outcome_unknown",
		Message: "The payment was sent and the vendor has not answered yet; the service waits for its answer, verifies it if none comes, and will not send it again.",
		Since:   now.UTC()}
	s.Settlement = &Settlement{Mode: SettlementMode, Status: "processing"}
	s.Message = "The payment is with the vendor, which has not answered yet; poll it until it settles or fails."
	s.NextAction, s.Retryable = NextAction{Code: NextCheckLater, CheckWith: CheckWithGetSpend, RetryAfterSeconds: 5}, false
	s.applyWarning()
}

// Processing records a payment whose outcome is unknown; the hold stays.
func (s *Spend) Processing(o RailOutcome, now time.Time) {
	s.move(StatusProcessing, now)
	s.ProcessingDetail = &ProcessingDetail{Code: "outcome_unknown",
		Message: "The payment was sent and the vendor's answer was lost; the service is verifying it and will not send it again.",
		Since:   now.UTC()}
	s.Settlement = &Settlement{Mode: SettlementMode, Status: "processing"}
	s.markSandbox(o)
	s.Message = "The outcome of the payment is not known yet; the service is verifying it."
	s.NextAction, s.Retryable = NextAction{Code: NextCheckLater, CheckWith: CheckWithGetSpend, RetryAfterSeconds: 5}, false
	s.applyWarning()
}

func (s *Spend) markSandbox(o RailOutcome) {
	if o.Simulated {
		if s.Sandbox == nil {
			s.Sandbox = &Sandbox{}
		}
		s.Sandbox.SimulatedVendor = true
		if o.Forced != "" { // a later verification does not erase what forced the outcome
			s.Sandbox.Forced = o.Forced
		}
	}
}

// CheckResult is spec 2.8 without the per-response fields.
type CheckResult struct {
	Object          string      `json:"object"`
	Allowed         bool        `json:"allowed"`
	Destination     string      `json:"destination"`
	Decision        *string     `json:"decision"`
	Reason          string      `json:"reason"`
	MatchedRule     *string     `json:"matched_rule"`
	Rule            *RuleDetail `json:"rule"`
	ReservesNothing bool        `json:"reserves_nothing"`
	Message         string      `json:"message"`
	NextAction      NextAction  `json:"next_action"`
	Livemode        bool        `json:"livemode"`
}

// Check simulates a spend without creating or reserving anything. Without an
// amount only the destination is checked. The ledger passed in is not changed
// in any way that matters (windows may roll forward, which is idempotent).
//
// A valid destination that is not trusted (on no list, or only allowed),
// under unknown_destination "ask", needs the owner's approval whatever the
// amount (spec 4.6, rule 2): the answer is pending_approval even for an
// amount the rules would refuse at once when paid, since create checks
// amounts first (api-decisions.md). The message then says which amount
// rule the payment would not pass.
func Check(p *Policy, l *Ledger, pool Pool, subj Subject, dest string, amount *Amount, now time.Time) CheckResult {
	now = now.UTC()
	d, stop := destinationGate(p, subj, dest, now)
	switch {
	case stop:
	case !d.Trusted: // not in the trusted list, mode ask (spec 4.6 rule 2)
		dest0 := d
		switch {
		case overNewDestinations(l, d, now):
			d.Outcome, d.Reason = StatusDeclined, ReasonUnknownDestinationLimit
			d.Message = fmt.Sprintf("The agent already asked about %d new destinations today.", NewDestinationsPerDay)
		case amount == nil:
			d.Outcome, d.ApprovalReason = StatusPendingApproval, ReasonUnknownDestination
			d.Message = untrusted(d, "a payment to it would wait for the owner.")
		default:
			d = pendingOrMax(p, l, d, ReasonUnknownDestination, untrusted(d, "a payment to it would wait for the owner, whatever the amount."))
			if d.Outcome == StatusPendingApproval {
				if a := amountGates(p, l, pool, Request{Amount: *amount, Destination: dest}, d, now); a.Outcome == StatusDeclined && amountRule(a.Reason) {
					d.Message += " Amounts are checked first when the payment is made, and this one would be declined: " + a.Message
				}
			}
		}
		if amount != nil && d.Outcome == StatusDeclined {
			// Declined either way (the day's new destinations, or
			// max_pending): then no approval is asked, and the payment
			// meets the rules in create's order, amounts first. Only a
			// payment that would wait skips them (spec 4.6 rule 2).
			if a := amountGates(p, l, pool, Request{Amount: *amount, Destination: dest}, dest0, now); a.Outcome == StatusDeclined && amountRule(a.Reason) {
				d = a
			}
		}
	case amount == nil:
		d.Outcome = StatusApproved
		d.Message = fmt.Sprintf("%s is a trusted destination.", d.Destination)
	default:
		d = amountGates(p, l, pool, Request{Amount: *amount, Destination: dest}, d, now)
	}
	r := CheckResult{Object: "spend_check", Destination: d.Destination, MatchedRule: d.MatchedRule, Rule: d.Rule,
		ReservesNothing: true, Message: d.Message, Livemode: p.Livemode}
	switch d.Outcome {
	case StatusApproved:
		r.Allowed, r.Reason = true, "allowed"
		r.NextAction = NextAction{Code: NextNone}
	case StatusPendingApproval:
		r.Decision, r.Reason = strPtr(string(StatusPendingApproval)), d.ApprovalReason
		r.NextAction = NextAction{Code: NextWaitForOwner, Detail: "A payment would wait for the owner's approval."}
	default:
		r.Reason = d.Reason
		if d.Reason != ReasonDestinationNotAllowed {
			r.Decision = strPtr(string(StatusDeclined))
		}
		r.NextAction, _ = declineNextAction(d.Reason, d.Rule)
	}
	return r
}

// amountRule reports whether a decline reason is one of the rules on the
// amount: the per-spend limit, a cap, or the owner's funds.
func amountRule(reason string) bool {
	switch reason {
	case ReasonPerSpendLimit, ReasonDailyCap, ReasonMonthlyCap, ReasonLifetimeCap, ReasonInsufficientFunds:
		return true
	}
	return false
}

// Balance is spec 2.7 without the per-response fields.
type Balance struct {
	Object         string            `json:"object"`
	AgentID        string            `json:"agent_id"`
	Currency       string            `json:"currency"`
	Spendable      string            `json:"spendable"`
	LimitingFactor string            `json:"limiting_factor"`
	Components     BalanceComponents `json:"components"`
	Held           string            `json:"held"`
	PendingCount   int               `json:"pending_count"`
	Message        string            `json:"message"`
	Livemode       bool              `json:"livemode"`
	AsOf           time.Time         `json:"as_of"`
}

// BalanceComponents are the terms of the spendable minimum.
type BalanceComponents struct {
	PoolAvailable     string  `json:"pool_available"`
	ReserveFloor      string  `json:"reserve_floor"`
	DailyRemaining    string  `json:"daily_remaining"`
	MonthlyRemaining  string  `json:"monthly_remaining"`
	PerSpendLimit     string  `json:"per_spend_limit"`
	LifetimeRemaining *string `json:"lifetime_remaining"`
}

// ComputeBalance: spendable = min(pool_available - reserve_floor,
// daily_remaining, monthly_remaining, per_spend_limit, lifetime_remaining).
func ComputeBalance(agentID string, p *Policy, l *Ledger, pool Pool, now time.Time) Balance {
	type term struct {
		name string
		v    Amount
	}
	u := l.Usage(now)
	daily := nonNeg(p.DailyCap.Sub(u.Day))
	monthly := nonNeg(p.MonthlyCap.Sub(u.Month))
	terms := []term{
		{"pool_available", nonNeg(pool.Spendable())},
		{"daily_remaining", daily},
		{"monthly_remaining", monthly},
		{"per_spend_limit", p.PerSpendLimit},
	}
	b := Balance{Object: "balance", AgentID: agentID, Currency: "usdc", Held: l.Held().Display(),
		PendingCount: l.PendingCount(), Livemode: p.Livemode, AsOf: now.UTC(),
		Components: BalanceComponents{PoolAvailable: pool.Available.Display(), ReserveFloor: pool.ReserveFloor.Display(),
			DailyRemaining: daily.Display(), MonthlyRemaining: monthly.Display(), PerSpendLimit: p.PerSpendLimit.Display()}}
	if p.LifetimeCap != nil {
		lr := nonNeg(p.LifetimeCap.Sub(u.Lifetime))
		s := lr.Display()
		b.Components.LifetimeRemaining = &s
		terms = append(terms, term{"lifetime_remaining", lr})
	}
	min := terms[0]
	for _, t := range terms[1:] {
		if t.v.Cmp(min.v) < 0 {
			min = t
		}
	}
	b.Spendable, b.LimitingFactor = min.v.Display(), min.name
	b.Message = fmt.Sprintf("The agent can spend up to %s now; %s is the limiting factor.", min.v.Display(), min.name)
	return b
}
