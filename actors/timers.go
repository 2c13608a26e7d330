package actors

import (
	"sync"
	"time"
)

// expiryTimers fires approval expiries. One timer per pending spend,
// keyed by spend id so re-scheduling (after a restart or a reactivation)
// never doubles it. The timer only sends a message: the agent actor decides,
// against its own clock, whether the approval really ran out.
type expiryTimers struct {
	sys     *System
	mu      sync.Mutex
	timers  map[string]Timer
	stopped bool
}

func newExpiryTimers(s *System) *expiryTimers {
	return &expiryTimers{sys: s, timers: make(map[string]Timer)}
}

func (e *expiryTimers) schedule(spendID, agentID string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	if t, ok := e.timers[spendID]; ok {
		t.Stop()
	}
	if d < 0 {
		d = 0
	}
	e.timers[spendID] = e.sys.clock.AfterFunc(d, func() {
		e.mu.Lock()
		delete(e.timers, spendID)
		stopped := e.stopped
		e.mu.Unlock()
		if !stopped {
			e.sys.send(agentID, &expireSpend{spendID: spendID})
		}
	})
}

func (e *expiryTimers) cancel(spendID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.timers[spendID]; ok {
		t.Stop()
		delete(e.timers, spendID)
	}
}

func (e *expiryTimers) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	for id, t := range e.timers {
		t.Stop()
		delete(e.timers, id)
	}
}
