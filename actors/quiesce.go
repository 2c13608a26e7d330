package actors

import (
	"context"
	"sync"

	"github.com/agentpay/guard/persistence"
)

// workCounter counts settlement work that is running (not parked on a
// timer) and signals every time the count returns to zero.
type workCounter struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (w *workCounter) add(d int) {
	w.mu.Lock()
	if w.zero == nil {
		w.zero = make(chan struct{})
	}
	w.n += d
	if w.n == 0 {
		close(w.zero)
		w.zero = make(chan struct{})
	}
	w.mu.Unlock()
}

func (w *workCounter) wait(ctx context.Context) error {
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return nil
	}
	if w.zero == nil {
		w.zero = make(chan struct{})
	}
	ch := w.zero
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type pingAgent struct {
	reply chan *persistence.Ticket
}

// Quiesce returns once nothing is moving: no settlement call or webhook
// attempt is running (nor an event waiting to be fanned out to webhooks),
// every active agent has processed its mailbox, nothing new was sent while
// checking, and the last change of every agent is durable. Work parked on a
// timer (an approval expiry, a later verification) does not count: it moves
// only when its time comes. Tests use it instead of sleeping; an operator
// tool can use it before a consistency audit.
func (s *System) Quiesce(ctx context.Context) error {
	for {
		if err := s.hub.flush(ctx); err != nil {
			return err
		}
		if err := s.busy.wait(ctx); err != nil {
			return err
		}
		before := s.sentTotal.Load()
		ids := s.activeAgents()
		for _, id := range ids {
			t, err := ask(ctx, s, id, func(reply chan *persistence.Ticket) any { return &pingAgent{reply: reply} })
			if err != nil {
				return err
			}
			if t != nil {
				if err := t.Wait(ctx); err != nil && ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		// The events of those changes reach the hub's subscribers (webhook
		// fan-out counts as busy) before idleness is judged.
		if err := s.hub.flush(ctx); err != nil {
			return err
		}
		s.busy.mu.Lock()
		idle := s.busy.n == 0
		s.busy.mu.Unlock()
		if idle && s.sentTotal.Load() == before+uint64(len(ids)) {
			return nil
		}
	}
}
