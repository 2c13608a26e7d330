package logbatch

import (
	"io"
	"sync"
	"time"
)

// Batcher holds lines for out. Its methods are safe for concurrent use;
// each Write is kept whole (slog handlers write one record per call).
type Batcher struct {
	mu    sync.Mutex
	out   io.Writer
	buf   []byte
	limit int
	// armed says a flush is scheduled for the lines held now.
	armed  bool
	every  time.Duration
	timer  *time.Timer
	closed bool
}

// New returns a Batcher that writes to out the lines held at most every
// after the first of them, or when they reach limit bytes. Close writes
// what is left.
func New(out io.Writer, every time.Duration, limit int) *Batcher {
	b := &Batcher{out: out, every: every, limit: limit, buf: make([]byte, 0, limit)}
	b.timer = time.AfterFunc(time.Hour, b.timed)
	b.timer.Stop()
	return b
}

// Write holds p for a later write. A p that would overflow the buffer
// writes out what is held first; one larger than the buffer is written at
// once. After Close, p is written at once.
func (b *Batcher) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(p) > b.limit {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		return b.out.Write(p)
	}
	if len(b.buf)+len(p) > b.limit {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	b.buf = append(b.buf, p...)
	if !b.armed {
		b.armed = true
		b.timer.Reset(b.every)
	}
	return len(p), nil
}

// Urgent returns a writer whose lines are not held: each writes the held
// lines, then itself.
func (b *Batcher) Urgent() io.Writer { return urgent{b} }

type urgent struct{ b *Batcher }

func (u urgent) Write(p []byte) (int, error) {
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	if err := u.b.flushLocked(); err != nil {
		return 0, err
	}
	return u.b.out.Write(p)
}

// Flush writes the held lines now.
func (b *Batcher) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

// Close writes the held lines; later writes go straight to out.
func (b *Batcher) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.timer.Stop()
	return b.flushLocked()
}

func (b *Batcher) timed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.flushLocked() // the next write meets the same error and returns it
}

// flushLocked writes the held lines. On an error they are dropped: the
// output is failing, and holding them would only grow the buffer.
func (b *Batcher) flushLocked() error {
	b.armed = false
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.out.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}
