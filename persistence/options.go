package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Sentinel errors. Errors returned by this package wrap one of these (test
// with errors.Is) and usually carry the underlying cause as well.
var (
	// ErrCommitFailed is carried by every ticket of a group commit whose
	// transaction failed, and by every record that was queued behind it.
	ErrCommitFailed = errors.New("persistence: commit failed")
	// ErrStaleGeneration is returned for records appended with a generation
	// older than Store.Gen: they were computed from in-memory state that may
	// include effects which never reached the disk.
	ErrStaleGeneration = errors.New("persistence: record computed against a failed generation")
	// ErrClosed is returned for any use of a closed (or closing) store.
	ErrClosed = errors.New("persistence: store closed")
	// ErrCorruptRecord is returned by DecodeRecord for malformed input and by
	// Open when a journal entry cannot be decoded.
	ErrCorruptRecord = errors.New("persistence: corrupt journal record")
	// ErrInvalidRecord is carried by the ticket of a record that can never be
	// written (empty or reserved bucket name, empty key, size limits). Such a
	// record is rejected by Append before it is queued.
	ErrInvalidRecord = errors.New("persistence: invalid record")
)

// Defaults applied by Open for zero-valued Options fields.
const (
	DefaultOpenTimeout        = 5 * time.Second
	DefaultInitialMmapSize    = 256 << 20
	DefaultMaxBatch           = 512
	DefaultCheckpointInterval = 500 * time.Millisecond
	DefaultCheckpointRecords  = 20000
	DefaultCheckpointTxBytes  = 64 << 10
)

// Options configure a Store. Zero values select the defaults above.
//
// JournalDir puts the journal on a disk of its own. Every acknowledged
// change waits for the journal's fdatasync, and a checkpoint writes and
// syncs its pages into the bbolt file: on one disk the journal's sync
// waits behind those pages (on the reference machine, nine in ten spends
// slower than 10 ms overlapped a checkpoint). Open records where the
// journal is, and refuses a directory that cannot be this data file's
// journal: one that does not name the data file's identity, as an
// unmounted disk would not (checkStoreID), another one while the last
// still holds records not yet folded (checkJournalMove), one that holds
// records for a new data file (checkFreshJournal), and one another open
// store holds (lockDir).
type Options struct {
	Path               string          // bbolt file; required
	JournalDir         string          // directory of the journal's segment files; default Path+".journal" (see above)
	OpenTimeout        time.Duration   // how long to wait for the file lock; default 5s
	InitialMmapSize    int             // initial mmap size in bytes; default 256 MiB
	MaxBatch           int             // records per group commit (4x this may wait in the queue before Append blocks); default 512
	CheckpointInterval time.Duration   // how often durable records are folded into the entity buckets; default 500ms
	CheckpointRecords  int             // checkpoint early once this many records await folding; default 20000
	CheckpointTxBytes  int             // keys and values a checkpoint writes per bbolt transaction (see the package doc); default 64 KiB, negative for one transaction
	OnFailure          func(err error) // optional; called once per failed group commit, never under a store lock
	Logger             *slog.Logger    // optional; default discards

	// CommitFault, when set, is called in every group commit between the
	// journal write and its fdatasync; a non-nil result fails that commit
	// exactly as a failing disk would (the write is truncated away). It exists for fault drills and for tests of the callers'
	// failure handling; leave it nil in production.
	CommitFault func(records int) error

	// hooks lets the package's own tests inject failures and switch off
	// automatic checkpoints. Always nil outside tests.
	hooks *testHooks
}

// testHooks are fault-injection points used by the package's tests. They are
// read without synchronisation, so they must be set before Open and not
// changed afterwards (closures may consult their own synchronised state).
type testHooks struct {
	// noAutoCheckpoint disables the timer, size and close-time checkpoints so
	// a test can leave records in the journal. Explicit Checkpoint calls
	// still work.
	noAutoCheckpoint bool
	// commit is called in each group commit after the journal write and
	// before the fdatasync; a non-nil result fails it.
	commit func(records int) error
	// checkpoint is called inside each checkpoint transaction; a non-nil
	// result aborts it.
	checkpoint func() error
	// scanGap is called by Scan between copying the overlay range and the
	// first bucket read, where a concurrent checkpoint is most dangerous.
	scanGap func()
	// chunkRecords overrides the number of records after which an overlay
	// generation is sealed, and so folded per checkpoint transaction.
	chunkRecords int
	// segmentSize overrides DefaultSegmentSize.
	segmentSize int64
	// truncate replaces the truncation that undoes a failed journal write.
	truncate func(f *os.File, size int64) error
	// trimmed is called by the publisher after it has dropped from the
	// overlay a generation folded by a checkpoint up to applied.
	trimmed func(applied uint64)
}

// Validate reports the first invalid field. Zero values are valid and mean
// "use the default"; negative values are not.
func (o Options) Validate() error {
	switch {
	case o.Path == "":
		return errors.New("persistence: Options.Path is required")
	case o.OpenTimeout < 0:
		return fmt.Errorf("persistence: Options.OpenTimeout must not be negative (got %v)", o.OpenTimeout)
	case o.InitialMmapSize < 0:
		return fmt.Errorf("persistence: Options.InitialMmapSize must not be negative (got %d)", o.InitialMmapSize)
	case o.MaxBatch < 0:
		return fmt.Errorf("persistence: Options.MaxBatch must not be negative (got %d)", o.MaxBatch)
	case o.MaxBatch > maxMaxBatch:
		return fmt.Errorf("persistence: Options.MaxBatch must be at most %d (got %d)", maxMaxBatch, o.MaxBatch)
	case o.CheckpointInterval < 0:
		return fmt.Errorf("persistence: Options.CheckpointInterval must not be negative (got %v)", o.CheckpointInterval)
	case o.CheckpointRecords < 0:
		return fmt.Errorf("persistence: Options.CheckpointRecords must not be negative (got %d)", o.CheckpointRecords)
	}
	return nil
}

// maxMaxBatch bounds a single group commit: a transaction holding more than
// this many ~KB records gains nothing from batching and only delays the
// first ticket in it.
const maxMaxBatch = 1 << 16

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.JournalDir == "" {
		o.JournalDir = journalDir(o.Path)
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.InitialMmapSize == 0 {
		o.InitialMmapSize = DefaultInitialMmapSize
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.CheckpointTxBytes == 0 {
		o.CheckpointTxBytes = DefaultCheckpointTxBytes
	}
	if o.CheckpointRecords == 0 {
		o.CheckpointRecords = DefaultCheckpointRecords
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.hooks == nil {
		o.hooks = &testHooks{}
	}
	return o
}
