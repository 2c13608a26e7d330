package policy

import (
	"fmt"
	"time"
)

// Request is a validated spend request as the rules see it.
type Request struct {
	Amount      Amount
	Destination string // as the agent wrote it; canonicalized here
	Resource    Resource
}

// Pool is the owner's money as one spend sees it: what is left after every
// active hold of every agent, and the floor the owner keeps untouched.
type Pool struct {
	Available    Amount // the balance less the holds
	ReserveFloor Amount
	Held         Amount // the holds of payments not yet settled
}

// Spendable is what the pool can still pay.
func (p Pool) Spendable() Amount { return p.Available.Sub(p.ReserveFloor) }

// Decision is the outcome of the rules for one request.
type Decision struct {
	Outcome        Status // StatusDeclined, StatusPendingApproval or StatusApproved
	Reason         string // decline reason when declined
	ApprovalReason string // when pending
	Destination    string // canonical host, or the raw input when invalid
	MatchedRule    *string
	// Trusted: the destination matched a trusted pattern. Only a trusted
	// destination is paid without the owner's approval for being what it
	// is (spec 3 and 4.6 rule 2); an allowed one is known (it does not
	// count among the day's new destinations) but still waits for the
	// owner.
	Trusted bool
	Rule    *RuleDetail
	// NewDestination: the request asks about a destination not yet asked
	// about today; accepting the decision records it.
	NewDestination bool
	Message        string
}

// Subject is the agent-level state the rules read besides the ledger.
type Subject struct {
	Paused bool
}

// Decide applies the rules in the documented order: paused, valid_until,
// destination blocked or invalid, per-spend limit, daily/monthly/lifetime caps
// (counting holds), pool, unknown destination, approval_over and
// destination_window_over, max_pending. The first that objects decides.
func Decide(p *Policy, l *Ledger, pool Pool, subj Subject, req Request, now time.Time) Decision {
	now = now.UTC()
	if d, stop := destinationGate(p, subj, req.Destination, now); stop {
		return d
	} else {
		return amountGates(p, l, pool, req, d, now)
	}
}

// destinationGate runs the steps that do not need an amount. stop is true
// when it reached a decline.
func destinationGate(p *Policy, subj Subject, raw string, now time.Time) (Decision, bool) {
	if subj.Paused {
		return decline(raw, ReasonAgentPaused, "The owner paused this agent; no payment is made until the owner resumes it."), true
	}
	if p.ValidUntil != nil && !now.Before(*p.ValidUntil) {
		return decline(raw, ReasonPolicyExpired, fmt.Sprintf("The agent's rules expired at %s; the owner must publish new rules.", p.ValidUntil.Format(time.RFC3339))), true
	}
	host, err := CanonicalHost(raw)
	if err != nil {
		return decline(raw, ReasonDestinationNotAllowed, fmt.Sprintf("The destination %q is not a public host name: %s", raw, hostProblem(err))), true
	}
	if b, ok := FirstMatch(p.BlockedDestinations, host); ok {
		d := decline(host, ReasonDestinationNotAllowed, fmt.Sprintf("The owner blocked %s (rule %s).", host, b.String()))
		return d, true
	}
	d := Decision{Destination: host}
	if t, ok := FirstMatch(p.TrustedDestinations, host); ok {
		d.MatchedRule, d.Trusted = strPtr(t.String()), true
	} else if a, ok := FirstMatch(p.AllowedDestinations, host); ok {
		d.MatchedRule = strPtr(a.String())
	} else if p.UnknownDestination == UnknownDecline {
		return decline(host, ReasonDestinationNotAllowed, fmt.Sprintf(
			"%s is on none of the agent's destination lists, and its rules decline unknown destinations (unknown_destination: decline); the owner can allow or trust it.", host)), true
	}
	return d, false
}

// untrusted says why a payment to a destination that is not trusted waits
// for the owner; then comes what follows (tail).
func untrusted(d Decision, tail string) string {
	if d.MatchedRule != nil {
		return fmt.Sprintf("%s is an allowed destination (rule %s) but not a trusted one; %s", d.Destination, *d.MatchedRule, tail)
	}
	return fmt.Sprintf("%s is not a trusted destination; %s", d.Destination, tail)
}

// overNewDestinations reports whether the request is about an unknown
// destination (on no list) not yet asked about today, while the agent has
// asked about the day's limit of them already. Allowed destinations are
// known: the owner listed them, so they never count.
func overNewDestinations(l *Ledger, d Decision, now time.Time) bool {
	if d.MatchedRule != nil || l.asked(d.Destination) {
		return false
	}
	l.roll(now)
	return len(l.Asked) >= NewDestinationsPerDay
}

func hostProblem(err error) string {
	if he, ok := err.(*HostError); ok {
		return he.Problem
	}
	return err.Error()
}

func decline(dest, reason, msg string) Decision {
	return Decision{Outcome: StatusDeclined, Reason: reason, Destination: dest, Message: msg}
}

func amountGates(p *Policy, l *Ledger, pool Pool, req Request, d Decision, now time.Time) Decision {
	amt := req.Amount
	if amt.Cmp(p.PerSpendLimit) > 0 {
		return capDecline(d, ReasonPerSpendLimit, p.PerSpendLimit, Amount{}, amt, nil,
			fmt.Sprintf("%s is above the per-payment limit of %s.", amt.Display(), p.PerSpendLimit.Display()))
	}
	u := l.Usage(now)
	if used := u.Day; used.Add(amt).Cmp(p.DailyCap) > 0 {
		r := NextDay(now)
		return capDecline(d, ReasonDailyCap, p.DailyCap, used, amt, &r,
			fmt.Sprintf("Paying %s would exceed the daily cap of %s (%s already spent or held today); it resets at %s.",
				amt.Display(), p.DailyCap.Display(), used.Display(), r.Format(time.RFC3339)))
	}
	if used := u.Month; used.Add(amt).Cmp(p.MonthlyCap) > 0 {
		r := NextMonth(now)
		return capDecline(d, ReasonMonthlyCap, p.MonthlyCap, used, amt, &r,
			fmt.Sprintf("Paying %s would exceed the monthly cap of %s (%s already spent or held this month); it resets at %s.",
				amt.Display(), p.MonthlyCap.Display(), used.Display(), r.Format(time.RFC3339)))
	}
	if p.LifetimeCap != nil {
		if used := u.Lifetime; used.Add(amt).Cmp(*p.LifetimeCap) > 0 {
			return capDecline(d, ReasonLifetimeCap, *p.LifetimeCap, used, amt, nil,
				fmt.Sprintf("Paying %s would exceed the lifetime cap of %s (%s already spent or held).",
					amt.Display(), p.LifetimeCap.Display(), used.Display()))
		}
	}
	if sp := pool.Spendable(); amt.Cmp(sp) > 0 {
		// Read like a cap: the limit is what the owner lets agents pay
		// out of the pool (the balance above the reserve floor), spent is
		// what payments not yet settled hold of it, and remaining is the
		// difference. Settled payments have left the balance already.
		rd := &RuleDetail{Name: ReasonInsufficientFunds, Scope: "owner",
			Limit: nonNeg(pool.Available.Add(pool.Held).Sub(pool.ReserveFloor)).Display(),
			Spent: pool.Held.Display(), Requested: amt.Display(), Remaining: nonNeg(sp).Display()}
		d.Outcome, d.Reason, d.Rule = StatusDeclined, ReasonInsufficientFunds, rd
		d.Message = fmt.Sprintf("The owner's funds cannot cover %s right now (%s available above the reserve floor).", amt.Display(), nonNeg(sp).Display())
		return d
	}
	if !d.Trusted { // spec 3: not in the trusted list, mode ask
		if overNewDestinations(l, d, now) {
			d.Outcome, d.Reason = StatusDeclined, ReasonUnknownDestinationLimit
			d.Message = fmt.Sprintf("The agent already asked about %d new destinations today; %s can be asked about after %s, or the owner can allow or trust it.",
				NewDestinationsPerDay, d.Destination, NextDay(now).Format(time.RFC3339))
			return d
		}
		d.NewDestination = d.MatchedRule == nil && !l.asked(d.Destination)
		return pendingOrMax(p, l, d, ReasonUnknownDestination, untrusted(d, "the owner must approve this payment."))
	}
	if amt.Cmp(p.ApprovalOver) > 0 {
		return pendingOrMax(p, l, d, ApprovalOverReason,
			fmt.Sprintf("%s is above the approval threshold of %s; the owner must approve this payment.", amt.Display(), p.ApprovalOver.Display()))
	}
	if p.DestinationWindowOver != nil {
		sent := l.destinationSent(d.Destination, now).Add(amt)
		if sent.Cmp(*p.DestinationWindowOver) > 0 {
			return pendingOrMax(p, l, d, DestinationWindowReason,
				fmt.Sprintf("%s sent to %s in the last 24 hours would be above %s; the owner must approve this payment.",
					sent.Display(), d.Destination, p.DestinationWindowOver.Display()))
		}
	}
	d.Outcome = StatusApproved
	d.Message = "The payment passed the owner's rules."
	return d
}

func pendingOrMax(p *Policy, l *Ledger, d Decision, reason, msg string) Decision {
	if l.PendingCount() >= p.MaxPending {
		d.Outcome, d.Reason, d.NewDestination = StatusDeclined, ReasonMaxPending, false
		d.Message = fmt.Sprintf("This payment needs the owner's approval, but %d payments already wait for the owner (the limit is %d).", l.PendingCount(), p.MaxPending)
		return d
	}
	d.Outcome, d.ApprovalReason, d.Message = StatusPendingApproval, reason, msg
	return d
}

func capDecline(d Decision, name string, limit, spent, requested Amount, resets *time.Time, msg string) Decision {
	d.Outcome, d.Reason, d.Message = StatusDeclined, name, msg
	d.Rule = &RuleDetail{Name: name, Scope: "agent", Limit: limit.Display(), Spent: spent.Display(),
		Requested: requested.Display(), Remaining: nonNeg(limit.Sub(spent)).Display(), ResetsAt: resets}
	return d
}

func nonNeg(a Amount) Amount {
	if a.Sign() < 0 {
		return Amount{}
	}
	return a
}
