package actors

import (
	"context"
	"sync"

	"github.com/agentpay/guard/persistence"
)

// hub tells waiting readers that a spend changed, once the change is
// durable. One goroutine follows the journal tickets in append order; since
// tickets complete in that order, waiting on the oldest never delays a
// newer one that is already done.
type hub struct {
	queue chan hubItem
	done  chan struct{}
	// qmu guards queue against a publish racing Close: an actor stopping
	// while the system shuts down may still append a change.
	qmu    sync.RWMutex
	closed bool

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
	// subscribers receive every durable event (webhook fan-out, tests).
	subscribers []func(StoredEvent)
}

type hubItem struct {
	ticket *persistence.Ticket
	spends []string
	events []StoredEvent
	// flushed, on an item of its own, is closed once every item queued
	// before it was handed out.
	flushed chan struct{}
}

func newHub() *hub {
	h := &hub{queue: make(chan hubItem, 4096), done: make(chan struct{}),
		watchers: make(map[string]map[chan struct{}]struct{})}
	go h.run()
	return h
}

func (h *hub) published(t *persistence.Ticket, spends []string, events []StoredEvent) {
	h.qmu.RLock()
	defer h.qmu.RUnlock()
	if h.closed {
		return
	}
	h.queue <- hubItem{ticket: t, spends: spends, events: events}
}

func (h *hub) run() {
	defer close(h.done)
	for it := range h.queue {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		<-it.ticket.Done()
		if it.ticket.Err() != nil {
			continue // never happened: nobody hears of it
		}
		h.mu.Lock()
		for _, id := range it.spends {
			for ch := range h.watchers[id] {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		subs := h.subscribers
		h.mu.Unlock()
		for _, f := range subs {
			for _, ev := range it.events {
				f(ev)
			}
		}
	}
}

// flush returns once every change published before it was handed to the
// watchers and subscribers (or dropped as failed).
func (h *hub) flush(ctx context.Context) error {
	done := make(chan struct{})
	h.qmu.RLock()
	if h.closed {
		h.qmu.RUnlock()
		return nil
	}
	h.queue <- hubItem{flushed: done}
	h.qmu.RUnlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watch registers interest in a spend; cancel must be called.
func (h *hub) watch(spendID string) (ch chan struct{}, cancel func()) {
	ch = make(chan struct{}, 1)
	h.mu.Lock()
	m := h.watchers[spendID]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		h.watchers[spendID] = m
	}
	m[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.watchers[spendID], ch)
		if len(h.watchers[spendID]) == 0 {
			delete(h.watchers, spendID)
		}
		h.mu.Unlock()
	}
}

// watching is how many long polls wait on the spend.
func (h *hub) watching(spendID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers[spendID])
}

func (h *hub) subscribe(f func(StoredEvent)) {
	h.mu.Lock()
	h.subscribers = append(h.subscribers, f)
	h.mu.Unlock()
}

func (h *hub) close() {
	h.qmu.Lock()
	if !h.closed {
		h.closed = true
		close(h.queue)
	}
	h.qmu.Unlock()
	<-h.done
}
