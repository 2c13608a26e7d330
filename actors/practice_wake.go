package actors

import "sync"

// practiceWakes lets an advance of a practice clock cut short the waits
// that run on the service clock: the delay before a processing spend's
// outcome is verified again. Verification is safe at any moment (it asks
// the rail about the same authorization and never pays again), so an
// advance wakes every waiting verification of that owner's practice
// environment at once.
type practiceWakes struct {
	mu    sync.Mutex
	chans map[string]chan struct{} // owner id -> closed at the next advance
}

// wait returns a channel that is closed when the owner's practice clock
// next moves.
func (w *practiceWakes) wait(ownerID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.chans == nil {
		w.chans = make(map[string]chan struct{})
	}
	ch, ok := w.chans[ownerID]
	if !ok {
		ch = make(chan struct{})
		w.chans[ownerID] = ch
	}
	return ch
}

// moved wakes everything waiting on the owner's practice clock.
func (w *practiceWakes) moved(ownerID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.chans[ownerID]; ok {
		close(ch)
		delete(w.chans, ownerID)
	}
}
