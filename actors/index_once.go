package actors

import (
	"context"
	"fmt"

	"github.com/agentpay/guard/persistence"
)

// indexOnce builds, on a store that has no mark under bMeta, what a store
// written before some index or summary existed lacks: build reads the
// store and passes the entries' puts to add, which writes them in records
// of at most sweepRecordOps ops, the mark with the last. A start cut short
// builds it again from the beginning (an entry written twice is the same
// entry). build returns the attributes of the log line that says what it
// did (logged as done), none when there was nothing to build. New calls
// it before anything reads what it builds.
func (s *System) indexOnce(ctx context.Context, mark, what, done string, build func(add func(persistence.Op)) ([]any, error)) error {
	m, err := s.store.Get(bMeta, []byte(mark))
	if err != nil {
		return fmt.Errorf("actors: reading the mark of %s: %w", what, err)
	}
	if m != nil {
		return nil
	}
	w := &sweepWriter{s: s, gen: s.store.Gen()}
	attrs, err := build(w.add)
	if err != nil {
		return fmt.Errorf("actors: reading the store to build %s: %w", what, err)
	}
	w.add(persistence.Put(bMeta, []byte(mark), []byte("1")))
	if err := w.finish(ctx); err != nil {
		return fmt.Errorf("actors: writing %s: %w", what, err)
	}
	if attrs != nil {
		s.log.Info(done, attrs...)
	}
	return nil
}

// partCache is what a list's walk knows of the part of an index (an hour
// of spends, a block of events) its last entry was in: whether the part
// may hold a match, so that each part's summary is read once.
type partCache struct {
	part    uint64
	seen    bool
	mayHold bool
}

// enter moves to the part of the next entry; it reports whether the part
// is another than the last, whose mayHold the caller then sets.
func (c *partCache) enter(part uint64) bool {
	if c.seen && part == c.part {
		return false
	}
	c.seen, c.part, c.mayHold = true, part, true
	return true
}

// passed is a passer's answer for a part that cannot hold a match: where
// the walk goes on from (nil: nowhere before it, so the part is read).
func (c *partCache) passed(s *System, next []byte) ([]byte, bool) {
	if next == nil {
		return nil, false
	}
	s.partsPassedOver.Add(1)
	return next, true
}
