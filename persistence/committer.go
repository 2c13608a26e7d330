package persistence

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// committerState is touched only by the committer goroutine (and by Open
// before that goroutine starts), so it needs no lock.
type committerState struct {
	last uint64 // LSN of the newest durable record
}

// ckptState is shared by the committer, which hands it durable records and
// counts resolved ones, and the checkpointer, which folds them.
type ckptState struct {
	mu            sync.Mutex
	last          uint64       // LSN of the newest durable record
	applied       uint64       // LSN of the newest record folded into the buckets
	pending       []pendingRec // durable, not yet folded: LSNs applied+1..last in order
	processed     uint64       // records resolved (committed or failed); compared with Store.enqueued
	target        uint64       // a checkpoint is under way while target > applied
	backoff       bool         // a checkpoint failed: no automatic retry before the next tick
	waiting       []*ckptReq   // Checkpoint calls not yet answered
	committerDone bool         // the committer has drained the queue for Close
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
	// Still under mu: Close cannot start draining before the checkpointer
	// can see the request, so the request is always answered.
	s.ck.mu.Lock()
	s.ck.waiting = append(s.ck.waiting, req)
	s.ck.mu.Unlock()
	s.mu.Unlock()
	s.kick()
	return <-req.done
}

// run is the committer goroutine: the only writer of the journal. It takes
// one queued batch at a time, writes and fdatasyncs it, and hands the
// publication (overlay update, then tickets) to the publisher goroutine, so
// it can start the next write at once. It never touches the bbolt file:
// checkpoints run on their own goroutine and never delay a commit.
func (s *Store) run() {
	defer close(s.exited)
	defer func() {
		s.ck.mu.Lock()
		s.ck.committerDone = true
		s.ck.mu.Unlock()
		s.kick()
		<-s.ckDone
		close(s.pub)
		<-s.pubDone
	}()
	for {
		s.mu.Lock()
		var seg *segment
		if len(s.queue) > 0 {
			seg = s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.queued -= len(seg.items)
		}
		draining := s.closing && seg == nil
		s.mu.Unlock()

		if seg != nil {
			s.space.Broadcast()
			s.commit(seg)
			continue
		}
		if draining {
			return
		}
		<-s.wake
	}
}

// kick wakes the checkpointer.
func (s *Store) kick() {
	select {
	case s.ckWake <- struct{}{}:
	default:
	}
}

// publish runs the publisher goroutine: it executes, in order, the steps the
// committer and the checkpointer hand over. Order is what makes it correct:
// a batch's overlay update precedes its tickets, every earlier batch's
// precedes a later failure, and a checkpoint's overlay trimming follows the
// updates of the records it folded (the committer queues a batch's update
// before the checkpointer can see the batch).
func (s *Store) publish() {
	defer close(s.pubDone)
	for f := range s.pub {
		f()
	}
}

// commit writes one batch to the journal (one write, one fdatasync), then
// publishes it: overlay first, tickets second, so that whoever is woken by a
// ticket can read what it wrote. Only then does the checkpointer get the
// records.
func (s *Store) commit(seg *segment) {
	n := len(seg.items)
	first := s.c.last + 1
	err := s.wal.append(first, seg.items, s.fault)
	if err != nil {
		s.fail(seg, err)
		return
	}
	s.c.last = first + uint64(n) - 1
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
	k := &s.ck
	k.mu.Lock()
	for i, it := range seg.items {
		k.pending = append(k.pending, pendingRec{lsn: first + uint64(i), ops: it.ops})
	}
	k.last = s.c.last
	k.processed += uint64(n)
	wake := len(k.waiting) > 0 || s.autoDue()
	k.mu.Unlock()
	if wake {
		s.kick()
	}
}

// fault runs the failure hooks between a batch's write and its fdatasync.
func (s *Store) fault(records int) error {
	if h := s.hooks.commit; h != nil {
		if err := h(records); err != nil {
			return err
		}
	}
	if f := s.commitFault; f != nil {
		return f(records)
	}
	return nil
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
	s.ck.mu.Lock()
	s.ck.processed += uint64(failed)
	wake := len(s.ck.waiting) > 0
	s.ck.mu.Unlock()
	if wake {
		s.kick()
	}
}

// autoDue reports whether the backlog calls for an automatic checkpoint.
// Caller holds ck.mu.
func (s *Store) autoDue() bool {
	k := &s.ck
	return !s.hooks.noAutoCheckpoint && !k.backoff && k.last-k.applied > uint64(s.opts.CheckpointRecords)
}

// checkpointer is the goroutine that folds durable records into the entity
// buckets: the only writer of the bbolt file once Open has returned. It
// folds in chunks of a bounded number of records, each its own transaction,
// so that a checkpoint's progress survives a failure of a later chunk.
func (s *Store) checkpointer() {
	defer close(s.ckDone)
	var tick <-chan time.Time
	if !s.hooks.noAutoCheckpoint {
		t := time.NewTicker(s.opts.CheckpointInterval)
		defer t.Stop()
		tick = t.C
	}
	k := &s.ck
	for {
		k.mu.Lock()
		s.armRequests()
		if s.autoDue() {
			k.target = max(k.target, k.last)
		}
		work, done := k.target > k.applied, k.committerDone
		k.mu.Unlock()
		if work {
			_ = s.checkpointChunk()
			continue
		}
		if done {
			s.shutdown()
			return
		}
		select {
		case <-s.ckWake:
		case <-tick:
			k.mu.Lock()
			k.backoff = false
			k.target = max(k.target, k.last)
			k.mu.Unlock()
		}
	}
}

// armRequests gives a target to every Checkpoint call whose preceding
// records have all been resolved, and answers those already satisfied.
// Caller holds ck.mu.
func (s *Store) armRequests() {
	k := &s.ck
	for _, r := range k.waiting {
		if !r.armed && k.processed >= r.mark {
			r.armed, r.target = true, k.last
			k.target = max(k.target, r.target)
		}
	}
	s.answerRequests(nil)
}

// answerRequests answers the armed requests that are satisfied, or, when
// err is non-nil, every armed request with err. Answers go through the
// publisher so that a caller of Checkpoint sees the overlay already
// trimmed. Caller holds ck.mu; only the checkpointer calls it (the
// publisher's steps never take ck.mu, so sending under it is safe).
func (s *Store) answerRequests(err error) {
	k := &s.ck
	var answered []*ckptReq
	keep := k.waiting[:0]
	for _, r := range k.waiting {
		if r.armed && (err != nil || r.target <= k.applied) {
			answered = append(answered, r)
		} else {
			keep = append(keep, r)
		}
	}
	clear(k.waiting[len(keep):])
	k.waiting = keep
	if len(answered) > 0 {
		s.pub <- func() {
			for _, r := range answered {
				r.done <- err
			}
		}
	}
}

// checkpointChunk folds up to s.chunk pending records (never beyond the
// current target) into the entity buckets, advancing applied_lsn in the same
// transaction; then the publisher drops from the overlay the entries whose
// latest write is now in the buckets, and journal segments holding only
// folded records are deleted.
func (s *Store) checkpointChunk() error {
	k := &s.ck
	k.mu.Lock()
	n := 0
	for n < len(k.pending) && n < s.chunk && k.pending[n].lsn <= k.target {
		n++
	}
	if n == 0 {
		k.target = k.applied
		s.answerRequests(nil)
		k.mu.Unlock()
		return nil
	}
	// The committer only appends to pending and only the checkpointer
	// removes from it, so these n entries stay put until compacted below.
	recs := k.pending[:n:n]
	k.mu.Unlock()

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
		return putApplied(tx, upTo)
	})
	if err != nil {
		// Nothing is lost: the records stay durable in the journal and
		// visible in the overlay. Retry on the next tick or request.
		s.stats.checkpointErrors.Add(1)
		k.mu.Lock()
		s.log.Error("persistence: checkpoint failed", "applied_lsn", k.applied, "target", upTo, "err", err)
		k.target = k.applied
		k.backoff = true
		err = fmt.Errorf("persistence: checkpoint: %w", err)
		s.answerRequests(err)
		k.mu.Unlock()
		return err
	}
	// The publisher trims the overlay, after the updates of these records
	// (queued before the committer handed them over) and before any answer
	// to a Checkpoint call that this fold satisfies (queued below).
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
		if h := s.hooks.trimmed; h != nil {
			h(upTo)
		}
	}
	// The records are in bbolt now: their journal segments can go, before
	// anyone is told that the checkpoint is done.
	s.wal.deleteThrough(upTo)
	k.mu.Lock()
	k.applied = upTo
	rest := copy(k.pending, k.pending[n:])
	clear(k.pending[rest:])
	k.pending = k.pending[:rest]
	s.stats.checkpoints.Add(1)
	s.stats.appliedLSN.Store(upTo)
	s.answerRequests(nil)
	k.mu.Unlock()
	return nil
}

// shutdown runs once the committer has drained the queue for Close: it
// folds everything (unless automatic checkpoints are off, in which case only
// explicit requests are served) and answers leftover requests.
func (s *Store) shutdown() {
	k := &s.ck
	k.mu.Lock()
	if !s.hooks.noAutoCheckpoint {
		k.target = max(k.target, k.last)
	}
	s.armRequests()
	work := k.target > k.applied
	k.mu.Unlock()
	for work {
		if err := s.checkpointChunk(); err != nil {
			s.finalErr = err
			break
		}
		k.mu.Lock()
		work = k.target > k.applied
		k.mu.Unlock()
	}
	k.mu.Lock()
	left := k.waiting
	k.waiting = nil
	k.mu.Unlock()
	if len(left) > 0 {
		s.pub <- func() {
			for _, r := range left {
				r.done <- ErrClosed
			}
		}
	}
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
