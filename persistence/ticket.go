package persistence

import (
	"context"
	"errors"
)

// errPending is what Err reports for a ticket whose outcome is not known yet:
// a nil error there would read as success.
var errPending = errors.New("persistence: ticket still pending")

// completion is the outcome of one group commit, shared by all tickets of
// the batch: the committer sets first and err, then closes done, so one
// channel close releases every waiter of the batch.
type completion struct {
	done  chan struct{}
	first uint64 // LSN of the batch's first record; valid when err == nil
	err   error
}

func newCompletion() *completion {
	return &completion{done: make(chan struct{})}
}

// resolvedCompletion returns an already-closed completion carrying err.
func resolvedCompletion(err error) *completion {
	c := &completion{done: make(chan struct{}), err: err}
	close(c.done)
	return c
}

// Shared outcomes for the common immediate failures: they are immutable once
// built, so every such ticket can point at the same one.
var (
	closedCompletion = resolvedCompletion(ErrClosed)
	staleCompletion  = resolvedCompletion(ErrStaleGeneration)
)

// Ticket tracks one appended record until it is durable (or has failed).
// Tickets are cheap: a pointer to the batch's shared completion plus the
// record's index in the batch.
type Ticket struct {
	c   *completion
	idx uint64
}

// Done is closed once the record is durable and visible to readers, or has
// failed.
func (t *Ticket) Done() <-chan struct{} { return t.c.done }

// Err is the record's outcome: nil when durable, an error wrapping
// ErrCommitFailed, ErrStaleGeneration, ErrInvalidRecord or ErrClosed
// otherwise. Before Done is closed it returns a non-nil "still pending"
// error, never nil.
func (t *Ticket) Err() error {
	select {
	case <-t.c.done:
		return t.c.err
	default:
		return errPending
	}
}

// Wait blocks until the ticket is resolved and returns Err, or returns
// ctx.Err() if ctx ends first. A context ending does not cancel the record:
// it may still become durable.
func (t *Ticket) Wait(ctx context.Context) error {
	select {
	case <-t.c.done:
		return t.c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LSN is the log sequence number assigned to the record: positive, unique
// and increasing in commit order. It is 0 until the ticket resolves
// successfully.
func (t *Ticket) LSN() uint64 {
	select {
	case <-t.c.done:
		if t.c.err != nil {
			return 0
		}
		return t.c.first + t.idx
	default:
		return 0
	}
}
