package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// committerState is touched only by the committer goroutine (and by Open
// before that goroutine starts), so it needs no lock.
type committerState struct {
	last      uint64       // LSN of the newest durable record
	applied   uint64       // LSN of the newest record folded into the buckets
	pending   []pendingRec // durable, not yet folded: LSNs applied+1..last in order
	processed uint64       // records resolved (committed or failed); compared with Store.enqueued
	target    uint64       // a checkpoint is under way while target > applied
	backoff   bool         // a checkpoint failed: no automatic retry before the next tick
	waiting   []*ckptReq   // Checkpoint calls not yet answered
}

type pendingRec struct {
	lsn uint64
	ops []Op
}

// ckptReq is one Checkpoint call. It covers every record accepted before
// the call (mark); once the committer has resolved those, target is the LSN
// the checkpoint must reach.
type ckptReq struct {
	mark   uint64
	target uint64
	armed  bool
	done   chan error // capacity 1
}

// Checkpoint folds every durable record, including any appended before this
// call that commit successfully, into the entity buckets now, and returns
// once they are folded.
func (s *Store) Checkpoint() error {
	req := &ckptReq{done: make(chan error, 1)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrClosed
	}
	req.mark = s.enqueued
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	s.signal()
	return <-req.done
}

// run is the committer goroutine: the only writer of the bbolt file. Each
// round it commits at most one queued batch and then, if a checkpoint is
// under way, folds at most one chunk, so neither kind of work can starve the
// other and a checkpoint delays a commit by at most one chunk.
//
// Everything that follows a transaction but does not touch the file
// (updating the overlay, resolving tickets, answering Checkpoint calls,
// starting OnFailure) is handed in order to the publisher goroutine, so the
// committer can start the next transaction at once and the two kinds of work
// run on different cores.
func (s *Store) run() {
	defer close(s.exited)
	defer func() {
		close(s.pub)
		<-s.pubDone
	}()
	var tick <-chan time.Time
	if !s.hooks.noAutoCheckpoint {
		t := time.NewTicker(s.opts.CheckpointInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		s.mu.Lock()
		var seg *segment
		if len(s.queue) > 0 {
			seg = s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.queued -= len(seg.items)
		}
		s.c.waiting = append(s.c.waiting, s.reqs...)
		s.reqs = nil
		draining := s.closing && seg == nil
		s.mu.Unlock()

		if seg != nil {
			s.space.Broadcast()
			s.commit(seg)
			if !s.hooks.noAutoCheckpoint && !s.c.backoff &&
				s.c.last-s.c.applied > uint64(s.opts.CheckpointRecords) {
				s.startCheckpoint(s.c.last)
			}
		}
		s.armRequests()
		if draining {
			s.shutdown()
			return
		}
		if s.c.target > s.c.applied {
			_ = s.checkpointChunk()
			continue
		}
		if seg != nil {
			continue
		}
		select {
		case <-s.wake:
		case <-tick:
			s.c.backoff = false
			s.startCheckpoint(s.c.last)
		}
	}
}

func (s *Store) startCheckpoint(target uint64) {
	if target > s.c.target {
		s.c.target = target
	}
}

// armRequests gives a target to every Checkpoint call whose preceding
// records have all been resolved, and answers those already satisfied.
func (s *Store) armRequests() {
	for _, r := range s.c.waiting {
		if !r.armed && s.c.processed >= r.mark {
			r.armed, r.target = true, s.c.last
			s.startCheckpoint(r.target)
		}
	}
	s.answerRequests(nil)
}

// answerRequests answers the armed requests that are satisfied, or, when
// err is non-nil, every armed request with err. Answers go through the
// publisher so that a caller of Checkpoint sees the overlay already trimmed.
func (s *Store) answerRequests(err error) {
	var answered []*ckptReq
	keep := s.c.waiting[:0]
	for _, r := range s.c.waiting {
		if r.armed && (err != nil || r.target <= s.c.applied) {
			answered = append(answered, r)
		} else {
			keep = append(keep, r)
		}
	}
	clear(s.c.waiting[len(keep):])
	s.c.waiting = keep
	if len(answered) > 0 {
		s.pub <- func() {
			for _, r := range answered {
				r.done <- err
			}
		}
	}
}

// publish runs the publisher goroutine: it executes, in order, the steps the
// committer hands over. Order is what makes it correct: a batch's overlay
// update precedes its tickets, every earlier batch's precedes a later
// failure, and a checkpoint's overlay trimming follows the updates of the
// records it folded.
func (s *Store) publish() {
	defer close(s.pubDone)
	for f := range s.pub {
		f()
	}
}

// commit writes one batch to the journal in one transaction (one fsync),
// then publishes it: overlay first, tickets second, so that whoever is woken
// by a ticket can read what it wrote.
func (s *Store) commit(seg *segment) {
	n := len(seg.items)
	first := s.c.last + 1
	// bbolt keeps a reference to each key until commit, so every key needs
	// its own bytes; one allocation serves the whole batch.
	keys := make([]byte, 8*n)
	err := s.db.Update(func(tx *bolt.Tx) error {
		j := tx.Bucket([]byte(journalBucket))
		j.FillPercent = 1 // keys only ever grow: pack pages full
		for i, it := range seg.items {
			k := keys[8*i : 8*i+8 : 8*i+8]
			binary.BigEndian.PutUint64(k, first+uint64(i))
			if err := j.Put(k, it.enc); err != nil {
				return err
			}
		}
		if h := s.hooks.commit; h != nil {
			if err := h(n); err != nil {
				return err
			}
		}
		if f := s.commitFault; f != nil {
			return f(n)
		}
		return nil
	})
	s.c.processed += uint64(n)
	if err != nil {
		s.fail(seg, err)
		return
	}
	s.c.last = first + uint64(n) - 1
	for i, it := range seg.items {
		s.c.pending = append(s.c.pending, pendingRec{lsn: first + uint64(i), ops: it.ops})
	}
	s.stats.commits.Add(1)
	s.stats.records.Add(uint64(n))
	s.stats.lastLSN.Store(s.c.last)
	if int64(n) > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(int64(n))
	}
	s.pub <- func() {
		s.ov.mu.Lock()
		for i, it := range seg.items {
			s.ov.apply(it.ops, first+uint64(i))
		}
		s.ov.mu.Unlock()
		seg.comp.first = first
		close(seg.comp.done)
	}
}

// fail handles a failed group commit: the generation moves on, the batch and
// everything queued behind it fail (those records were computed by callers
// whose in-memory state may include the failed batch), and OnFailure runs
// outside every lock.
func (s *Store) fail(seg *segment, cause error) {
	s.mu.Lock()
	old := s.gen.Load()
	s.gen.Store(old + 1)
	rest := s.queue
	s.queue, s.queued = nil, 0
	s.mu.Unlock()
	s.space.Broadcast()

	err := fmt.Errorf("%w (generation %d): %w", ErrCommitFailed, old, cause)
	failed := len(seg.items)
	for _, r := range rest {
		failed += len(r.items)
		s.c.processed += uint64(len(r.items))
	}
	s.stats.failures.Add(1)
	s.stats.failedRecords.Add(uint64(failed))
	s.log.Error("persistence: group commit failed", "generation", old, "records", failed, "err", cause)
	// Through the publisher: whoever learns of the failure and reloads
	// state must find every earlier successful batch already visible.
	s.pub <- func() {
		for _, g := range append([]*segment{seg}, rest...) {
			g.comp.err = err
			close(g.comp.done)
		}
		if cb := s.opts.OnFailure; cb != nil {
			s.callbacks.Add(1)
			go func() {
				defer s.callbacks.Done()
				cb(err)
			}()
		}
	}
}

// checkpointChunk folds up to s.chunk pending records (never beyond the
// current target) into the entity buckets, advancing applied_lsn and
// deleting their journal entries in the same transaction, then drops from
// the overlay the entries whose latest write is now in the buckets.
func (s *Store) checkpointChunk() error {
	n := 0
	for n < len(s.c.pending) && n < s.chunk && s.c.pending[n].lsn <= s.c.target {
		n++
	}
	if n == 0 {
		s.c.target = s.c.applied
		s.answerRequests(nil)
		return nil
	}
	recs := s.c.pending[:n]
	upTo := recs[n-1].lsn
	err := s.db.Update(func(tx *bolt.Tx) error {
		if h := s.hooks.checkpoint; h != nil {
			if err := h(); err != nil {
				return err
			}
		}
		if err := applyOps(tx, make(map[string]*bolt.Bucket), finalOps(recs)); err != nil {
			return err
		}
		if err := putApplied(tx, upTo); err != nil {
			return err
		}
		j := tx.Bucket([]byte(journalBucket))
		for _, r := range recs {
			if err := j.Delete(lsnKey(r.lsn)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Nothing is lost: the records stay durable in the journal and
		// visible in the overlay. Retry on the next tick or request.
		s.stats.checkpointErrors.Add(1)
		s.log.Error("persistence: checkpoint failed", "applied_lsn", s.c.applied, "target", upTo, "err", err)
		s.c.target = s.c.applied
		s.c.backoff = true
		err = fmt.Errorf("persistence: checkpoint: %w", err)
		s.answerRequests(err)
		return err
	}
	s.c.applied = upTo
	// The publisher trims the overlay; it gets its own copy of the folded
	// records because pending is compacted below.
	folded := make([][]Op, n)
	for i, r := range recs {
		folded[i] = r.ops
	}
	s.pub <- func() {
		s.ov.mu.Lock()
		for _, ops := range folded {
			s.ov.drop(ops, upTo)
		}
		s.ov.mu.Unlock()
	}
	rest := copy(s.c.pending, s.c.pending[n:])
	clear(s.c.pending[rest:])
	s.c.pending = s.c.pending[:rest]
	s.stats.checkpoints.Add(1)
	s.stats.appliedLSN.Store(upTo)
	s.answerRequests(nil)
	return nil
}

// shutdown runs once the queue is empty and no record can be appended any
// more: it folds everything (unless automatic checkpoints are off, in which
// case only explicit requests are served) and answers leftover requests.
func (s *Store) shutdown() {
	if !s.hooks.noAutoCheckpoint {
		s.startCheckpoint(s.c.last)
	}
	s.armRequests()
	for s.c.target > s.c.applied {
		if err := s.checkpointChunk(); err != nil {
			s.finalErr = err
			break
		}
	}
	if left := s.c.waiting; len(left) > 0 {
		s.pub <- func() {
			for _, r := range left {
				r.done <- ErrClosed
			}
		}
	}
	s.c.waiting = nil
}

// finalOps reduces the records of a checkpoint chunk to the last write of
// each key, sorted by bucket and key. Only the final state of a key matters
// to the buckets, and a spend writes the same keys (the spend, its agent's
// counters, its environment) at every step, so most writes of a chunk are
// superseded inside it; sorted keys let bbolt visit each page once.
func finalOps(recs []pendingRec) []Op {
	n := 0
	for _, r := range recs {
		n += len(r.ops)
	}
	last := make(map[string]int, n)
	all := make([]Op, 0, n)
	for _, r := range recs {
		for _, op := range r.ops {
			k := op.Bucket + "\x00" + string(op.Key)
			if i, ok := last[k]; ok {
				all[i] = op
				continue
			}
			last[k] = len(all)
			all = append(all, op)
		}
	}
	slices.SortFunc(all, func(a, b Op) int {
		if c := strings.Compare(a.Bucket, b.Bucket); c != 0 {
			return c
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return all
}
