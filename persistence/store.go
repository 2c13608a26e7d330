package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentpay/guard/internal/histogram"
)

// Keys in the meta bucket. Package-level slices are safe to hand to bbolt's
// Put, which keeps a reference until commit, because nothing modifies them.
var (
	appliedKey = []byte("applied_lsn")
	// cleanStopKey is present while the store is closed after a Close that
	// folded every record: its journal then holds nothing the data file
	// lacks, wherever that journal is. Open removes it (before any new
	// record), so a crash leaves it absent.
	cleanStopKey = []byte("clean_stop")
	formatKey    = []byte("format")
)

// formatVersion identifies this package's on-disk layout (bucket names,
// key encoding, record format, journal files). Open refuses files with
// another version, except legacyFormat, which it migrates.
const formatVersion = 2

// legacyFormat kept the journal in the bbolt file's "journal" bucket. Open
// folds such a journal into the entity buckets and moves the file to
// formatVersion.
const legacyFormat = 1

// entityFillPercent is the page split threshold for entity buckets.
const entityFillPercent = 0.9

// filePageSize is the page size of a new bbolt file (an existing file keeps
// the one it was made with). A spend's records are a few values of about
// 1.5 KB: a 4 KiB page holds two of them, so a checkpoint writes a page,
// one pwrite each, for every two spends. With 16 KiB pages a checkpoint
// makes a quarter of the writes and splits fewer pages: 8 to 15 % less CPU
// per record on the spend workload (go test -run '^$' -bench SpendRecords
// ./persistence/), where 8 KiB gained less and 32 or 64 KiB no more.
const filePageSize = 16 << 10

// Store is a durable key-value journal with group commit. See the package
// documentation for the model and guarantees. All methods are safe for
// concurrent use.
type Store struct {
	opts  Options
	db    *bolt.DB
	log   *slog.Logger
	hooks *testHooks
	// commitFault is Options.CommitFault.
	commitFault func(records int) error
	ov          *overlay

	// maxQueued bounds the records waiting for the committer; Append blocks
	// (back-pressure) while the queue is full.
	maxQueued int
	// chunk bounds the records folded per bbolt transaction (an overlay
	// generation is sealed once it holds that many; recovery folds that
	// many at a time), and so the memory and size of one transaction. It
	// is large enough for a timer tick's records at high load to fold in
	// one transaction: each costs two fsyncs and a rewrite of the pages it
	// touches, and the more records it folds, the more of their writes are
	// to the same keys (a spend, its agent's ledger) and are written once.
	chunk int
	wal   *wal

	mu       sync.Mutex
	space    *sync.Cond    // on mu; broadcast when queue space frees or the store closes
	queue    []*segment    // FIFO of batches waiting to commit; each at most MaxBatch records
	queued   int           // records in queue
	enqueued uint64        // records ever accepted by Append
	closing  bool          // set once by Close; Append and Checkpoint refuse from then on
	gen      atomic.Uint64 // written only under mu

	wake      chan struct{} // capacity 1: "there may be work" for the committer
	ckWake    chan struct{} // capacity 1: "there may be work" for the checkpointer
	ckDone    chan struct{} // closed when the checkpointer returns
	pub       chan func()   // checkpointer -> publisher, in order
	pubDone   chan struct{} // closed when the publisher returns
	exited    chan struct{} // closed when the committer, checkpointer and publisher have returned
	closed    atomic.Bool   // set after the committer has exited
	closeOnce sync.Once
	closeErr  error
	finalErr  error          // written by the checkpointer before exiting
	callbacks sync.WaitGroup // running OnFailure calls

	c     committerState // owned by the committer goroutine
	ck    ckptState      // shared by the committer and the checkpointer
	stats counters

	// durMu guards durations: the committer records into it once per
	// batch, CommitDurations copies it. A lock taken once per group
	// commit costs nothing next to the commit's fdatasync.
	durMu     sync.Mutex
	durations *histogram.Histogram
}

// segment is one future group commit: the records queued for it and the
// completion its tickets share.
type segment struct {
	items []item
	comp  *completion
}

// item is a queued record: its encoding, the journal's frame payload and
// the backing of its overlay entries.
type item struct {
	enc []byte
}

type counters struct {
	commits, records, failures, failedRecords atomic.Uint64
	checkpoints, checkpointErrors             atomic.Uint64
	lastLSN, appliedLSN                       atomic.Uint64
	maxBatch                                  atomic.Int64
}

// Stats is a snapshot of the store's counters, each read atomically but not
// all at the same instant.
type Stats struct {
	Gen              uint64 // current generation
	Commits          uint64 // successful group commits (one journal write and fdatasync each)
	Records          uint64 // records made durable by those commits
	Failures         uint64 // failed group commits
	FailedRecords    uint64 // records failed with ErrCommitFailed
	Checkpoints      uint64 // successful checkpoint transactions
	CheckpointErrors uint64 // failed checkpoint transactions (retried later)
	Overlay          int    // entries held in the overlay: keys awaiting folding, once per generation holding them
	Pending          uint64 // durable records not yet folded (LastLSN - AppliedLSN)
	LastLSN          uint64 // LSN of the newest durable record
	AppliedLSN       uint64 // LSN of the newest record folded into the entity buckets
	MaxBatch         int    // largest group commit so far, in records
}

// Open opens (creating if needed) the store at opts.Path and replays any
// journal records that the previous process made durable but did not fold
// into the entity buckets, so the state after Open is exactly what was
// durable.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	db, err := bolt.Open(opts.Path, 0o600, &bolt.Options{
		Timeout:         opts.OpenTimeout,
		InitialMmapSize: opts.InitialMmapSize,
		// The freelist is written by every commit, a page or so: the
		// commits are the checkpoints', off the payments' path, and few
		// pages are ever free. Without it, Open rebuilt the freelist by
		// reading every page of the file: 23 s for a 2.9 GB file not in
		// the page cache (a restart after a reboot), against a few
		// milliseconds.
		NoFreelistSync: false,
		FreelistType:   bolt.FreelistMapType,
		PageSize:       filePageSize,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("persistence: open %s: another process has held it for %s (is a server already running on this data directory? stop it first; a second server needs a data directory of its own): %w",
			opts.Path, opts.OpenTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", opts.Path, err)
	}
	s := &Store{
		opts:        opts,
		db:          db,
		log:         opts.Logger,
		hooks:       opts.hooks,
		commitFault: opts.CommitFault,
		maxQueued:   4 * opts.MaxBatch,
		chunk:       min(max(16*opts.MaxBatch, 256), 8192),
		wake:        make(chan struct{}, 1),
		ckWake:      make(chan struct{}, 1),
		ckDone:      make(chan struct{}),
		pub:         make(chan func(), 64),
		pubDone:     make(chan struct{}),
		exited:      make(chan struct{}),
		durations:   histogram.New(),
	}
	if opts.hooks.chunkRecords > 0 {
		s.chunk = opts.hooks.chunkRecords
	}
	s.ov = newOverlay(s.chunk)
	s.space = sync.NewCond(&s.mu)
	s.gen.Store(1)
	if err := s.recover(); err != nil {
		if s.wal != nil {
			_ = s.wal.close()
		}
		_ = db.Close()
		return nil, err
	}
	go s.publish()
	go s.checkpointer()
	go s.run()
	return s, nil
}

// recover prepares the meta bucket, migrates a journal left in the bbolt
// file by the legacy layout, reads the journal files (truncating a torn
// tail) and folds every record after applied_lsn into the entity buckets,
// in chunks so that a long journal does not build one huge transaction.
// Each chunk advances applied_lsn atomically, and the segments are deleted
// only after the last chunk, so a crash during recovery is itself
// recoverable. The journal then starts over with an empty segment.
func (s *Store) recover() error {
	var applied uint64
	var format byte
	var lastDir string // where the journal was at the last open; "" before the key existed
	var fresh bool     // the data file is new: nothing was ever folded into it
	var storeID string // the data file's identity; "" until a journal recorded it
	var cleanStop bool // the last Close folded every record
	err := s.db.Update(func(tx *bolt.Tx) error {
		fresh = tx.Bucket([]byte(metaBucket)) == nil && tx.Bucket([]byte(journalBucket)) == nil
		m, err := tx.CreateBucketIfNotExists([]byte(metaBucket))
		if err != nil {
			return err
		}
		lastDir = string(m.Get(journalDirKey))
		storeID = string(m.Get(storeIDKey))
		cleanStop = m.Get(cleanStopKey) != nil
		switch v := m.Get(formatKey); {
		case v == nil:
			if tx.Bucket([]byte(journalBucket)) != nil {
				// Written by a version that predates the format key.
				format = legacyFormat
				break
			}
			format = formatVersion
			if err := m.Put(formatKey, []byte{formatVersion}); err != nil {
				return err
			}
		case len(v) == 1 && (v[0] == formatVersion || v[0] == legacyFormat):
			format = v[0]
		default:
			return fmt.Errorf("persistence: unsupported format version %x", v)
		}
		applied, err = readApplied(m)
		return err
	})
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", s.opts.Path, err)
	}
	if format == legacyFormat {
		if err := s.migrateLegacy(&applied); err != nil {
			return fmt.Errorf("persistence: migrate journal of %s: %w", s.opts.Path, err)
		}
	}
	segSize := int64(DefaultSegmentSize)
	if s.hooks.segmentSize > 0 {
		segSize = s.hooks.segmentSize
	}
	dir, err := absDir(s.opts.JournalDir)
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", s.opts.Path, err)
	}
	beside, err := absDir(journalDir(s.opts.Path))
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", s.opts.Path, err)
	}
	// A journal beside its data file is recorded as no path at all, so that
	// a data directory copied or restored elsewhere finds its journal.
	record := dir
	if sameDir(dir, beside) {
		dir, record = beside, ""
	}
	prev := lastDir
	if prev == "" {
		prev = beside
	}
	moved := !sameDir(prev, dir)
	if moved && fresh {
		if err := checkFreshJournal(s.opts.Path, dir, beside); err != nil {
			return err
		}
	} else if moved {
		if err := checkJournalMove(s.opts.Path, prev, dir, applied, storeID, cleanStop); err != nil {
			return err
		}
	}
	if storeID != "" {
		if err := checkStoreID(s.opts.Path, dir, storeID, moved); err != nil {
			return err
		}
	}
	w, recs, err := openWAL(dir, segSize, s.log, applied)
	if err != nil {
		return fmt.Errorf("persistence: open journal of %s: %w", s.opts.Path, err)
	}
	s.wal = w
	if s.hooks.truncate != nil {
		w.truncate = s.hooks.truncate
	}
	for len(recs) > 0 {
		n := min(len(recs), s.chunk)
		chunk := recs[:n]
		err := s.db.Update(func(tx *bolt.Tx) error {
			if err := genOf(chunk).fold(tx); err != nil {
				return err
			}
			return putApplied(tx, chunk[n-1].lsn)
		})
		if err != nil {
			return fmt.Errorf("persistence: replay %s: %w", s.opts.Path, err)
		}
		applied = chunk[n-1].lsn
		recs = recs[n:]
		s.log.Info("persistence: replayed journal", "records", n, "applied_lsn", applied)
	}
	if err := w.restart(applied); err != nil {
		return fmt.Errorf("persistence: open journal of %s: %w", s.opts.Path, err)
	}
	newID := storeID == ""
	if newID {
		storeID = newStoreID()
	}
	if newID || moved {
		// The journal directory names the data file before the data file
		// records its identity (see writeStoreID).
		if err := writeStoreID(dir, storeID); err != nil {
			return fmt.Errorf("persistence: open %s: %w", s.opts.Path, err)
		}
	}
	if record != lastDir || newID {
		// Recorded once the journal is open in dir; a crash before this
		// leaves prev folded, which the next open accepts as a move again.
		err := s.db.Update(func(tx *bolt.Tx) error {
			m := tx.Bucket([]byte(metaBucket))
			if err := m.Put(storeIDKey, []byte(storeID)); err != nil {
				return err
			}
			if record == "" {
				return m.Delete(journalDirKey)
			}
			return m.Put(journalDirKey, []byte(record))
		})
		if err != nil {
			return fmt.Errorf("persistence: open %s: recording the journal directory: %w", s.opts.Path, err)
		}
		if moved {
			s.log.Info("persistence: the journal moved; the previous directory holds only folded records and may be removed",
				"from", prev, "to", dir)
		}
	}
	if cleanStop {
		// From here on the journal may hold records the data file lacks.
		err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte(metaBucket)).Delete(cleanStopKey) })
		if err != nil {
			return fmt.Errorf("persistence: open %s: %w", s.opts.Path, err)
		}
	}
	s.c.last = applied
	s.ck.last, s.ck.applied = applied, applied
	s.stats.lastLSN.Store(applied)
	s.stats.appliedLSN.Store(applied)
	return nil
}

func readApplied(m *bolt.Bucket) (uint64, error) {
	v := m.Get(appliedKey)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("%w: applied_lsn has %d bytes", ErrCorruptRecord, len(v))
}

// genOf collects records read back from the journal into an overlay
// generation, which folds them like a checkpoint: the last write of each
// key, in bucket and key order.
func genOf(recs []pendingRec) *ovGen {
	g := newOvGen(nil)
	for _, r := range recs {
		g.apply(r.enc, r.lsn)
	}
	return g
}

func putApplied(tx *bolt.Tx, lsn uint64) error {
	return tx.Bucket([]byte(metaBucket)).Put(appliedKey, lsnKey(lsn))
}

// lsnKey is the journal key of an LSN: big-endian so that bbolt's byte order
// is LSN order.
func lsnKey(lsn uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), lsn)
}

// Gen returns the current generation. It starts at 1 and increases by one
// with every failed group commit.
func (s *Store) Gen() uint64 { return s.gen.Load() }

// Append queues rec for the next group commit and returns its ticket without
// waiting for the disk (it may wait briefly for queue space when the
// committer is behind). The record is copied; the caller may reuse its
// slices at once.
//
// Records appended by one goroutine commit in append order; across
// goroutines, commit order is the order in which Append calls returned. A
// record whose gen is not the current generation fails at once with
// ErrStaleGeneration and is never written; an invalid record fails at once
// with ErrInvalidRecord; after Close it fails with ErrClosed.
func (s *Store) Append(gen uint64, rec Record) *Ticket {
	size, err := validateRecord(rec)
	if err != nil {
		return &Ticket{c: resolvedCompletion(err)}
	}
	// Encode before taking the lock so that appenders copy in parallel.
	enc := encode(rec, size)
	s.mu.Lock()
	for {
		if s.closing {
			s.mu.Unlock()
			return &Ticket{c: closedCompletion}
		}
		if gen != s.gen.Load() {
			s.mu.Unlock()
			return &Ticket{c: staleCompletion}
		}
		if s.queued < s.maxQueued {
			break
		}
		s.space.Wait()
	}
	var seg *segment
	if n := len(s.queue); n > 0 && len(s.queue[n-1].items) < s.opts.MaxBatch {
		seg = s.queue[n-1]
	} else {
		seg = &segment{comp: newCompletion()}
		s.queue = append(s.queue, seg)
	}
	idx := len(seg.items)
	seg.items = append(seg.items, item{enc: enc})
	s.queued++
	s.enqueued++
	first := s.queued == 1
	s.mu.Unlock()
	if first {
		// The committer may be idle; if it is busy, it looks at the queue
		// again before it sleeps anyway.
		s.signal()
	}
	return &Ticket{c: seg.comp, idx: uint64(idx)}
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Get returns a copy of the value stored under key, or (nil, nil) when the
// key is absent. It sees every durable record, including those not yet
// checkpointed, and nothing that is not durable yet.
func (s *Store) Get(bucket string, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := checkReadable(bucket); err != nil {
		return nil, err
	}
	if v, del, ok := s.ov.get(bucket, key); ok {
		if del {
			return nil, nil
		}
		return cloneNonNil(v), nil
	}
	// Not in the overlay: the bucket holds the latest durable value. A
	// checkpoint racing with this read only ever moves newer values into
	// the bucket, never removes one the overlay did not have.
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		if v := b.Get(key); v != nil {
			out = cloneNonNil(v)
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, ErrClosed
	}
	return out, err
}

// checkReadable keeps the store's own buckets out of reach of Get and Scan:
// their contents are an implementation detail, not entity state.
func checkReadable(bucket string) error {
	if bucket == journalBucket || bucket == metaBucket {
		return fmt.Errorf("persistence: bucket %q is reserved", bucket)
	}
	return nil
}

// Check runs bbolt's consistency check over the whole file and verifies
// every durable frame of the journal files (checksums, record encodings,
// LSN continuity, no record after applied_lsn missing), and returns the
// problems found, joined, or nil when everything is consistent. It holds
// bbolt's write lock while it runs (bbolt's check is only exact when no
// write can free pages under it), so checkpoints wait; commits go on, and
// the journal is checked up to the last batch durable when Check started:
// an operator's tool, not something for the hot path.
func (s *Store) Check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	tx, err := s.db.Begin(true)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // nothing was written
	var errs []error
	for e := range tx.Check() {
		errs = append(errs, e)
	}
	// Under the write transaction no checkpoint can move applied_lsn, so
	// the journal is compared with the applied_lsn of this transaction.
	applied, err := readApplied(tx.Bucket([]byte(metaBucket)))
	if err != nil {
		errs = append(errs, err)
	}
	if err := s.wal.check(func() uint64 { return applied }); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CommitDurations returns a copy of the distribution of the successful
// group commits' durations since Open: for each batch, framing its records,
// writing them and the fdatasync, i.e. how long the journal kept the
// batch's appenders waiting once it took the batch. Under load the
// fdatasync is nearly all of it, so this is how the disk answers, as the
// service sees it. Two copies give a window's own distribution
// (histogram.Histogram.Since).
func (s *Store) CommitDurations() *histogram.Histogram {
	s.durMu.Lock()
	defer s.durMu.Unlock()
	return s.durations.Clone()
}

// Stats returns a snapshot of the store's counters.
func (s *Store) Stats() Stats {
	last, applied := s.stats.lastLSN.Load(), s.stats.appliedLSN.Load()
	var pending uint64
	if last > applied {
		pending = last - applied
	}
	return Stats{
		Gen:              s.gen.Load(),
		Commits:          s.stats.commits.Load(),
		Records:          s.stats.records.Load(),
		Failures:         s.stats.failures.Load(),
		FailedRecords:    s.stats.failedRecords.Load(),
		Checkpoints:      s.stats.checkpoints.Load(),
		CheckpointErrors: s.stats.checkpointErrors.Load(),
		Overlay:          s.ov.entries(),
		Pending:          pending,
		LastLSN:          last,
		AppliedLSN:       applied,
		MaxBatch:         int(s.stats.maxBatch.Load()),
	}
}

// Close stops accepting records, commits everything already queued,
// checkpoints, waits for running OnFailure callbacks and closes the file. It
// is idempotent; every call returns the first call's result. A failed final
// checkpoint is reported but loses nothing: the records stay in the journal
// files and the next Open replays them.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.space.Broadcast() // appenders waiting for space fail with ErrClosed
		s.signal()
		<-s.exited
		s.callbacks.Wait()
		s.closed.Store(true)
		walErr := s.wal.close()
		if s.finalErr == nil && walErr == nil && s.ck.applied == s.ck.last {
			// Every durable record is folded: say so, for a start that
			// finds the journal's directory gone (see checkJournalMove).
			_ = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte(metaBucket)).Put(cleanStopKey, []byte{1}) })
		}
		s.closeErr = errors.Join(s.finalErr, walErr, s.db.Close())
	})
	return s.closeErr
}
