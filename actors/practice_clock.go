package actors

import (
	"context"
	"time"

	"github.com/agentpay/guard/policy"
)

// The practice clock. Each practice environment can move its own time
// forward (POST /v1/test/clock/advance) to rehearse what hours or days do:
// daily caps reset at 00:00 UTC, approvals expire, loosenings take effect,
// keys reach the end of their grace. It is an offset added to the service
// clock for everything that environment's owner and agents do, stored with
// the environment so it survives restarts. Live environments never move.

// MaxClockAdvance bounds one advance: a year is enough to rehearse anything.
const MaxClockAdvance = 366 * 24 * time.Hour

// now is the environment's time. Caller need not hold e.mu.
func (e *envLedger) now(c Clock) time.Time {
	return c.Now().Add(time.Duration(e.offset.Load())).UTC()
}

// keyNow is the time a key ages by: its creation, expiry, revocation and
// rotation grace are all read on it. A practice agent key ages with the
// practice clock, so an owner can watch a rotation's grace end in
// practice. An owner key never does: advancing the practice clock past its
// life would lock the owner out of the very controls (reset among them)
// that could undo the advance, and no other key could make a new one.
func (s *System) keyNow(kind, ownerID string, livemode bool) time.Time {
	if kind == KindOwner || livemode {
		return s.clock.Now().UTC()
	}
	return s.nowFor(ownerID, EnvTest)
}

// keyView is k's public form now, by the clock that ages it.
func (s *System) keyView(k APIKey) KeyView {
	return k.ViewAt(s.keyNow(k.Kind, k.OwnerID, k.Livemode))
}

// nowFor is the time of an owner's environment.
func (s *System) nowFor(ownerID string, env Env) time.Time {
	if env == EnvLive {
		return s.clock.Now().UTC()
	}
	e, err := s.env(ownerID, env)
	if err != nil {
		return s.clock.Now().UTC()
	}
	return e.now(s.clock)
}

// TestClock is the practice clock as the API shows it.
type TestClock struct {
	Object        string    `json:"object"`
	Now           time.Time `json:"now"`
	OffsetSeconds int64     `json:"offset_seconds"`
	Livemode      bool      `json:"livemode"`
}

// PracticeClock reads the practice clock of the principal's environment.
func (s *System) PracticeClock(p Principal) (TestClock, error) {
	e, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return TestClock{}, err
	}
	return TestClock{Object: "test_clock", Now: e.now(s.clock), OffsetSeconds: e.offset.Load() / int64(time.Second)}, nil
}

// AdvanceClock moves a practice environment's time forward, durably, then
// lets every agent of the environment catch up: approvals whose lifetime
// ended expire, loosenings that came due apply.
func (s *System) AdvanceClock(ctx context.Context, p Principal, by time.Duration) (TestClock, error) {
	if p.Livemode {
		return TestClock{}, errorf(CodeNotFound, "Practice control is not available with a live key.")
	}
	if by <= 0 || by > MaxClockAdvance {
		return TestClock{}, &Error{Code: CodeParameterInvalid, Param: "seconds",
			Message: "seconds must be a whole number from 1 to 31622400 (one year)."}
	}
	e, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return TestClock{}, err
	}
	c := &change{}
	e.mu.Lock()
	e.state.ClockOffset += by
	e.offset.Store(int64(e.state.ClockOffset))
	t := s.commit(s.store.Gen(), e, c)
	e.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return TestClock{}, ErrUnavailable
	}
	// Every agent of the environment re-checks its timers against the new
	// time; activating the idle ones is what a real day passing would do
	// to their waiting approvals too.
	_ = s.store.Scan(bOwnerAgents, prefixOf(p.OwnerID, string(p.Env())), nil, false, func(k, v []byte) bool {
		if string(v) != AgentArchived {
			s.send(string(k[len(prefixOf(p.OwnerID, string(p.Env()))):]), &clockMoved{})
		}
		return true
	})
	s.webhooks.clockMoved(p.OwnerID, p.Env()) // retries that came due
	s.wakes.moved(p.OwnerID)                  // verifications of processing spends
	return s.PracticeClock(p)
}

// clockMoved tells an agent that its environment's time jumped.
type clockMoved struct{}

// catchUp runs in the agent actor after its clock moved.
func (a *agentActor) catchUp() {
	now := a.now()
	for id, sp := range a.active {
		if sp.Status == policy.StatusPendingApproval && sp.Approval != nil {
			if !now.Before(sp.Approval.ExpiresAt) {
				a.expire(id)
			} else {
				a.sys.timers.schedule(id, a.id, sp.Approval.ExpiresAt.Sub(now))
			}
		}
	}
	a.reloadPolicy()
}
