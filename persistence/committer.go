package persistence

import (
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// committerState is touched only by the committer goroutine (and by Open
// before that goroutine starts), so it needs no lock.
type committerState struct {
	last uint64 // LSN of the newest durable record
}

// ckptState is shared by the committer, which reports durable and resolved
// records, and the checkpointer, which folds them.
type ckptState struct {
	mu            sync.Mutex
	last          uint64     // LSN of the newest durable record
	applied       uint64     // LSN of the newest record folded into the buckets
	processed     uint64     // records resolved (committed or failed); compared with Store.enqueued
	target        uint64     // a checkpoint is under way while target > applied
	backoff       bool       // a checkpoint failed: no automatic retry before the next tick
	waiting       []*ckptReq // Checkpoint calls not yet answered
	committerDone bool       // the committer has drained the queue for Close
}

// pendingRec is a durable record read back from the journal by Open: its
// encoding, checked by DecodeRecord, in a buffer that nothing changes.
type pendingRec struct {
	lsn uint64
	enc []byte
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
// one queued batch at a time, writes and fdatasyncs it, and publishes it
// (overlay update, then tickets). It never touches the bbolt file:
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
// checkpointer hands over: sealing the open generation, dropping a folded
// one (only after the fold of its records), answering Checkpoint calls
// after the drop. A seal follows the updates of the records the
// checkpointer wants folded: the committer publishes a batch before the
// checkpointer can see it.
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
	start := time.Now()
	err := s.wal.append(first, seg.items, s.fault)
	if err != nil {
		s.fail(seg, err)
		return
	}
	took := time.Since(start)
	s.durMu.Lock()
	s.durations.Record(took)
	s.durMu.Unlock()
	s.c.last = first + uint64(n) - 1
	s.stats.commits.Add(1)
	s.stats.records.Add(uint64(n))
	s.stats.lastLSN.Store(s.c.last)
	if int64(n) > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(int64(n))
	}
	k := &s.ck
	k.mu.Lock()
	// The batch is published here, by the committer itself: overlay first,
	// tickets second, so whoever a ticket wakes reads what it wrote.
	// Handing it to the publisher goroutine cost a scheduling hop that
	// measured about 2 ms under load (the goroutine waited behind every
	// other runnable one), twice per spend. Under ck.mu, together with the
	// new k.last: the checkpointer sets applied from a sealed generation
	// only under ck.mu, so applied never passes last, and every record a
	// generation holds is durable. Steps queued to the publisher earlier
	// (seal, drop, answers) may run after this update; none depends on
	// running before it.
	s.ov.mu.Lock()
	for i, it := range seg.items {
		s.ov.apply(it.enc, first+uint64(i))
	}
	s.ov.sealFull()
	s.ov.mu.Unlock()
	seg.comp.first = first
	close(seg.comp.done)
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
	// Every earlier successful batch is already visible (the committer
	// publishes each before it takes the next), so whoever learns of the
	// failure and reloads state finds them.
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
// folds one overlay generation (of a bounded number of records) per
// transaction, so that a checkpoint's progress survives a failure of a later
// one.
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

// checkpointChunk folds the oldest overlay generation that is not folded yet
// into the entity buckets, advancing applied_lsn to its last record in the
// same transaction; then the publisher drops the generation from the
// overlay, and journal segments holding only folded records are deleted.
// When every sealed generation is folded, it first has the publisher seal
// the open one, behind the updates of all records up to the target.
func (s *Store) checkpointChunk() error {
	k := &s.ck
	k.mu.Lock()
	applied := k.applied
	k.mu.Unlock()
	g := s.ov.sealedAfter(applied)
	if g == nil {
		sealed := make(chan struct{})
		s.pub <- func() {
			s.ov.mu.Lock()
			s.ov.seal()
			s.ov.mu.Unlock()
			close(sealed)
		}
		<-sealed
		g = s.ov.sealedAfter(applied)
	}
	if g == nil {
		// Every durable record is folded: the target is reached.
		k.mu.Lock()
		k.target = k.applied
		s.answerRequests(nil)
		k.mu.Unlock()
		return nil
	}

	upTo := g.last
	// The generation goes into bbolt in parts, each a transaction of its
	// own, and applied_lsn moves with the last: a journal commit's
	// fdatasync must wait for every write the disk holds, so one
	// transaction of megabytes would hold the commits behind it as long.
	// A crash between parts leaves some keys at their newer values under
	// the older applied_lsn; the replay at the next start writes every
	// record after it again, in order, which ends in the same values (a
	// record's ops are whole puts and deletes).
	var err error
	parts := g.foldParts(s.opts.CheckpointTxBytes)
	for i, part := range parts {
		last := i == len(parts)-1
		err = s.db.Update(func(tx *bolt.Tx) error {
			if h := s.hooks.checkpoint; h != nil {
				if err := h(); err != nil {
					return err
				}
			}
			if err := foldEntries(tx, part); err != nil {
				return err
			}
			if !last {
				return nil
			}
			return putApplied(tx, upTo)
		})
		if err != nil {
			break
		}
	}
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
	// The publisher drops the generation before any answer to a
	// Checkpoint call that this fold satisfies (queued below).
	s.pub <- func() {
		s.ov.mu.Lock()
		s.ov.drop(g)
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
