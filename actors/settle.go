package actors

import (
	"context"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// payNow asks the rail of p for an outcome known at once (InstantRail).
func (s *System) payNow(p policy.Payment) (policy.RailOutcome, bool) {
	rail := s.cfg.PracticeRail
	if p.Livemode {
		rail = s.cfg.LiveRail
	}
	if r, ok := rail.(InstantRail); ok {
		return r.PayNow(p)
	}
	return policy.RailOutcome{}, false
}

// settle runs one rail call in a worker goroutine, owned by the System and
// stopped by Close. The goroutine waits until the record that allows the
// payment is durable, so a crash can never leave a paid vendor without a
// journaled nonce. Its answer goes back to the agent actor as a message.
func (s *System) settle(agentID string, p policy.Payment, after *persistence.Ticket, verify bool, delay time.Duration) {
	s.work.Add(1)
	s.busy.add(1)
	s.pool.Go(func() {
		defer s.work.Done()
		defer s.busy.add(-1)
		if after != nil {
			select {
			case <-after.Done():
			case <-s.ctx.Done():
				return
			}
			if err := after.Err(); err != nil {
				s.send(agentID, &railResult{spendID: p.SpendID, err: err})
				return
			}
		}
		if delay > 0 {
			// Parked on a timer, this work is not "running" for Quiesce;
			// the timer makes it running again before it lets it go.
			fire := make(chan struct{})
			var advanced <-chan struct{} // nil: never ready
			if !p.Livemode {
				advanced = s.wakes.wait(p.OwnerID)
			}
			// Registered before the work stops counting as busy (see
			// notifier.park).
			t := s.clock.AfterFunc(delay, func() { s.busy.add(1); close(fire) })
			s.busy.add(-1)
			select {
			case <-fire:
			case <-advanced:
				if !t.Stop() {
					<-fire // the timer fired meanwhile and counted us busy
				} else {
					s.busy.add(1)
				}
			case <-s.ctx.Done():
				if t.Stop() {
					s.busy.add(1)
				}
				return
			}
		}
		rail := s.cfg.PracticeRail
		if p.Livemode {
			rail = s.cfg.LiveRail
		}
		var o policy.RailOutcome
		if rail == nil {
			o = policy.RailOutcome{Status: policy.RailRejected, ErrorCode: "rail_not_configured",
				ErrorMessage: "Live payments are not configured on this service; no money moved."}
		} else {
			ctx, cancel := context.WithTimeout(s.ctx, s.cfg.SettleTimeout)
			if verify {
				o = rail.Verify(ctx, p)
			} else {
				// A vendor slower than the processing wait makes the
				// payment read processing meanwhile; its answer, when it
				// comes, still settles or fails it. Wall time, as the
				// settle timeout: it measures a call, not the calendar.
				slow := time.AfterFunc(s.cfg.ProcessingAfter, func() { s.send(agentID, &vendorSlow{spendID: p.SpendID}) })
				o = rail.Pay(ctx, p)
				slow.Stop()
			}
			cancel()
		}
		if s.ctx.Err() != nil {
			// Shutting down: the spend stays as the journal has it; the next
			// start re-sends the same authorization or verifies it.
			return
		}
		s.send(agentID, &railResult{spendID: p.SpendID, outcome: o})
	})
}
