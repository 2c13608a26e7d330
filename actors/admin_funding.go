package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentpay/guard/policy"
)

// CodeDepositFailed answers a practice deposit that could not be completed
// (funding.failed was emitted).
const CodeDepositFailed Code = "deposit_failed"

// PracticeBalanceCeiling is the most a practice pool may hold: a deposit
// that would take the balance above it fails (funding.failed).
var PracticeBalanceCeiling = policy.MustAmount("1000000.00")

// Funding is the owner's view of an environment's pool (GET /v1/funding).
// Amounts are decimal strings in their display form.
type Funding struct {
	Object              string `json:"object"`
	Livemode            bool   `json:"livemode"`
	Balance             string `json:"balance"`
	Held                string `json:"held"`
	PoolAvailable       string `json:"pool_available"`
	ReserveFloor        string `json:"reserve_floor"`
	LowBalanceThreshold string `json:"low_balance_threshold"`
}

// FundingRef is a deposit as funding.* events show it.
type FundingRef struct {
	ID     string        `json:"id"`
	Object string        `json:"object"`
	Amount policy.Amount `json:"amount"`
	Status string        `json:"status"`
}

// WalletRef is the pool as wallet.low_balance shows it, amounts in the
// display form GET /v1/funding uses ("2000.00", never the scale a
// request typed or the ledger's six places).
type WalletRef struct {
	ID                  string `json:"id"`
	Object              string `json:"object"`
	PoolAvailable       string `json:"pool_available"`
	LowBalanceThreshold string `json:"low_balance_threshold"`
}

// FundingChange is what POST /v1/funding may change; nil leaves a value
// as it is.
type FundingChange struct {
	ReserveFloor        *policy.Amount
	LowBalanceThreshold *policy.Amount
}

// Deposit is the answer of a practice deposit.
type Deposit struct {
	Funding
	ID string
}

// fundingOf is the funding view of an environment. Caller holds e.mu.
func fundingOf(e *envLedger) Funding { return fundingOfState(&e.state) }

func fundingOfState(st *EnvState) Funding {
	return Funding{Object: "funding", Livemode: st.Env.Livemode(), Balance: st.Balance.Display(),
		Held: st.Held.Display(), PoolAvailable: st.Balance.Sub(st.Held).Display(),
		ReserveFloor: st.ReserveFloor.Display(), LowBalanceThreshold: st.LowBalanceThreshold.Display()}
}

// Funding reads the pool of the key's environment.
func (s *System) Funding(p Principal) (Funding, error) {
	if p.Kind != KindOwner {
		return Funding{}, errorf(CodeInvalidRequest, "Only an owner key can read the funding of an environment.")
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return Funding{}, err
	}
	// The durable state: a hold or settlement still on its way to disk is
	// not shown (see envLedger.durable).
	return fundingOfState(env.durableState()), nil
}

// UpdateFunding sets the reserve floor (what agents may never spend) and
// the low-balance warning threshold. The floor may not exceed what the
// pool has available now: the pool check keeps pool_available at or above
// the floor, and a floor set above it would break that. No event is
// emitted for the change itself; wallet.low_balance is, when the new
// threshold puts the pool below it.
func (s *System) UpdateFunding(ctx context.Context, p Principal, ch FundingChange) (Funding, error) {
	if p.Kind != KindOwner {
		return Funding{}, errorf(CodeInvalidRequest, "Only an owner key can change the funding of an environment.")
	}
	for param, v := range map[string]*policy.Amount{"reserve_floor": ch.ReserveFloor, "low_balance_threshold": ch.LowBalanceThreshold} {
		if v != nil && v.Sign() < 0 {
			return Funding{}, &Error{Code: CodeParameterInvalid, Param: param, Message: param + " must be 0 or more."}
		}
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return Funding{}, err
	}
	now := s.nowFor(p.OwnerID, p.Env())
	env.mu.Lock()
	if ch.ReserveFloor == nil && ch.LowBalanceThreshold == nil {
		f := fundingOf(env)
		env.mu.Unlock()
		return f, nil
	}
	if ch.ReserveFloor != nil {
		if avail := env.pool().Available; ch.ReserveFloor.Cmp(avail) > 0 {
			env.mu.Unlock()
			return Funding{}, &Error{Code: CodeParameterInvalid, Param: "reserve_floor",
				Message: fmt.Sprintf("reserve_floor %s is above what the pool has available (%s); deposit first or choose a lower floor.",
					ch.ReserveFloor.Display(), avail.Display())}
		}
		env.state.ReserveFloor = *ch.ReserveFloor
	}
	if ch.LowBalanceThreshold != nil {
		env.state.LowBalanceThreshold = *ch.LowBalanceThreshold
	}
	c := &change{}
	s.noteLowBalance(c, env, now)
	t := s.commit(s.store.Gen(), env, c)
	f := fundingOf(env)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		// A failed record drops the cached environment (StoreFailed): the
		// next request reads the state the journal really has.
		return Funding{}, ErrUnavailable
	}
	s.logOwnerAction("funding_changed", p, slog.String("reserve_floor", f.ReserveFloor), slog.String("low_balance_threshold", f.LowBalanceThreshold))
	return f, nil
}

// Deposit adds amount to the practice pool, as a simulated deposit that
// arrives and converts at once: it emits funding.awaiting_deposit,
// funding.deposit_received and funding.converted, in that order, in one
// journal record with the new balance. A deposit that would take the
// balance above PracticeBalanceCeiling fails instead: funding.failed is
// emitted (and journaled) and the answer is CodeDepositFailed. Live
// environments have no practice deposits (the transport answers 404
// before calling this).
func (s *System) Deposit(ctx context.Context, p Principal, amount policy.Amount) (Deposit, error) {
	if p.Kind != KindOwner || p.Livemode {
		return Deposit{}, errorf(CodeNotFound, "Practice deposits exist only for practice owner keys.")
	}
	if amount.Sign() <= 0 {
		return Deposit{}, &Error{Code: CodeParameterInvalid, Param: "amount", Message: "amount must be greater than 0."}
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return Deposit{}, err
	}
	now := s.nowFor(p.OwnerID, p.Env())
	ref := FundingRef{ID: NewID("fnd", now), Object: "funding", Amount: amount}
	c := &change{}
	env.mu.Lock()
	if env.state.Balance.Add(amount).Cmp(PracticeBalanceCeiling) > 0 {
		ref.Status = "failed"
		c.event(env, "", "funding.failed", ref, audienceOwner, now)
		t := s.commit(s.store.Gen(), env, c)
		bal := env.state.Balance
		env.mu.Unlock()
		if err := t.Wait(ctx); err != nil {
			return Deposit{}, ErrUnavailable
		}
		return Deposit{}, &Error{Code: CodeDepositFailed, Param: "amount",
			Message: fmt.Sprintf("The deposit of %s could not be completed: a practice balance may hold at most %s and holds %s now. Deposit less.",
				amount.Display(), PracticeBalanceCeiling.Display(), bal.Display())}
	}
	for _, st := range []string{"awaiting_deposit", "deposit_received"} {
		ref.Status = st
		c.event(env, "", "funding."+st, ref, audienceOwner, now)
	}
	env.state.Balance = env.state.Balance.Add(amount)
	ref.Status = "converted"
	c.event(env, "", "funding.converted", ref, audienceOwner, now)
	s.noteLowBalance(c, env, now)
	t := s.commit(s.store.Gen(), env, c)
	f := fundingOf(env)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		// A failed record drops the cached environment (StoreFailed): the
		// next request reads the journal, which has no deposit.
		return Deposit{}, ErrUnavailable
	}
	return Deposit{Funding: f, ID: ref.ID}, nil
}

// lowBalanceCrossed reports whether a change took pool_available from at
// or above the warning threshold (before) to below it (after). A zero
// threshold warns never.
func lowBalanceCrossed(before, after, threshold policy.Amount) bool {
	return threshold.Sign() > 0 && before.Cmp(threshold) >= 0 && after.Cmp(threshold) < 0
}

// noteLowBalance adds wallet.low_balance to c when pool_available is below
// the environment's threshold and was not when last checked: once per
// crossing. The environment's BelowLowBalance flag is what "when last
// checked" remembers, so a crossing is reported by the first change that
// sees it, and a pool that rises back to the threshold (a deposit, a lower
// threshold) arms the warning again. Caller holds e.mu, after changing the
// state and before s.commit, which journals the flag with the event.
//
// Called by settlements (in the same journal record as the payment),
// deposits and funding changes.
func (s *System) noteLowBalance(c *change, e *envLedger, now time.Time) {
	after := e.pool().Available
	threshold := e.state.LowBalanceThreshold
	if e.state.BelowLowBalance {
		if threshold.Sign() == 0 || after.Cmp(threshold) >= 0 {
			e.state.BelowLowBalance = false
		}
		return
	}
	// Not below when last checked: the pool was at or above the threshold.
	if lowBalanceCrossed(policy.MaxAmount(after, threshold), after, threshold) {
		e.state.BelowLowBalance = true
		c.event(e, "", "wallet.low_balance", WalletRef{ID: "wal_" + walletID(e), Object: "wallet",
			PoolAvailable: after.Display(), LowBalanceThreshold: threshold.Display()}, audienceOwner, now)
	}
}

// walletID names an environment's pool in events: stable per owner and
// environment, without revealing the owner id.
func walletID(e *envLedger) string {
	sum := chainHash(string(e.key))
	return sum[len("sha256:") : len("sha256:")+32]
}
