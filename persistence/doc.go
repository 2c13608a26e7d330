// Package persistence is the durability layer of the guard: a journal with
// group commit and checkpoints, kept in a single bbolt file.
//
// The service keeps its live state in actors' memory. Every change to that
// state is described as a Record (a list of put/delete ops on named
// buckets) and appended here; nobody outside the service may hear of the
// change until the record's Ticket says it is durable.
//
// # Model
//
// The file holds three kinds of bucket:
//
//   - journal: records keyed by their LSN (log sequence number, big-endian
//     uint64), in the compact binary format of EncodeRecord (version byte,
//     length-prefixed fields, CRC-32C trailer).
//   - meta: applied_lsn, the LSN of the last record folded into the entity
//     buckets, and the layout version.
//   - entity buckets (any other name): the materialized state, "the
//     snapshot", as of applied_lsn.
//
// Append queues a record and returns a Ticket at once. A single committer
// goroutine takes everything queued (up to Options.MaxBatch records), writes
// it to the journal in one bbolt read-write transaction and commits, which
// fsyncs. That is group commit: concurrent appenders share one fsync, so
// throughput grows with concurrency while each appender waits about one or
// two commit times.
//
// Once a batch is durable, its ops are applied to the overlay, an in-memory
// map from (bucket, key) to the latest value or tombstone, and only then are
// its tickets resolved. Reads (Get, Scan) consult the overlay first and the
// entity buckets second, so they see every durable record at once, before
// any checkpoint.
//
// A checkpoint folds durable records into the entity buckets: in one
// transaction it applies records applied_lsn+1..n, sets applied_lsn = n and
// deletes those journal entries; afterwards the overlay entries whose latest
// write is at or below n are dropped (an entry rewritten by a later record
// stays). Checkpoints run every Options.CheckpointInterval, as soon as more
// than Options.CheckpointRecords records await folding, on Checkpoint, and on
// Close. A long backlog is folded in chunks of a bounded number of records,
// alternating with group commits, so a checkpoint delays a commit by at most
// one chunk (about a dozen milliseconds for 1,000 records of 1.5 KB on a
// small VM) and the overlay stays bounded while the disk keeps up.
//
// Open replays: journal records after applied_lsn are folded into the entity
// buckets before Open returns. That is the whole crash recovery; because the
// journal entries, the entity writes and applied_lsn change together in each
// transaction, recovery is itself crash-safe.
//
// # Invariants
//
//   - Durable before visible: a record's effects are readable, and its
//     ticket resolved, only after the transaction holding it has committed
//     (and so been fsynced). A reader never sees a record that may be lost.
//   - All or nothing: a record's ops become visible and durable together.
//   - Order: records appended by one goroutine commit in append order, and
//     across goroutines in the order their Append calls returned. LSNs are
//     assigned at commit, contiguous and increasing in that order. Later
//     records win over earlier ones for the same key.
//   - Reads see the durable state: after Open, and at any moment after a
//     ticket resolves, Get and Scan reflect every record whose ticket has
//     resolved successfully.
//
// # Concurrency
//
// All methods are safe for concurrent use. Append takes a mutex only to put
// the already-encoded record on the queue; it blocks only when Options.MaxBatch
// * 4 records are queued (back-pressure). The committer is the only writer of
// the file. The overlay updates, ticket resolution, Checkpoint answers and
// OnFailure launches are carried out, in commit order, by a second
// goroutine, so the committer can start the next transaction while the
// previous batch is being published.
//
// Get takes the overlay's read lock for a map lookup and, on a miss, a short
// bbolt read transaction. No lock that readers need is held during an fsync.
// Scan copies the overlay's matching range first and then reads the bucket
// in short transactions of a few hundred keys; its callback runs with no lock
// or transaction held, so it may call any method, including Append and
// Checkpoint. Scan is not a point-in-time snapshot: keys that are live for
// the whole scan are visited exactly once, in order, each with a value that
// was durable during the scan; keys written meanwhile may or may not appear.
//
// Values handed to callers (Get, Scan) are fresh copies they may keep and
// modify. Append copies the record; the caller may reuse its buffers at once.
//
// # Failure semantics
//
// If a group commit fails, the tickets of the whole batch and of every record
// queued behind it fail with an error wrapping ErrCommitFailed (and the
// cause). The generation (Gen) increases by one and Options.OnFailure is
// called with the same error, in its own goroutine. Records queued behind the
// failed batch fail too because they were computed by actors whose memory
// already included the failed batch's effects.
//
// Appenders pass the generation their state was computed against. A record
// with an older generation fails at once with ErrStaleGeneration and is never
// written. Actors are expected to react to either error by reloading their
// state from the store (which, by then, shows every earlier successful batch)
// and continuing at the new generation. New appends are attempted normally:
// the disk may have recovered.
//
// A failed checkpoint loses nothing: the records stay durable in the journal
// and readable from the overlay. It is logged, counted in Stats, returned by
// Checkpoint or Close, and retried on the next tick. The generation does not
// change, since no actor's state went ahead of the disk.
//
// # Caveats
//
//   - A real I/O error during commit leaves the failed batch in doubt: the
//     disk may have taken more of the transaction than it acknowledged.
//     This process never shows the batch (nothing of it reaches the
//     overlay, and the next successful commit, which reuses the
//     transaction ID and the LSNs, supersedes it on disk), but if the
//     process dies before another commit succeeds, the batch may reappear
//     after restart. Effects outside this store that hang on a record
//     should follow its ticket, never precede it.
//   - OnFailure must not call Close (Close waits for running callbacks).
//   - The overlay is bounded only while checkpoints succeed; while they fail
//     it grows with every durable record.
//   - Check holds the write lock for a full scan of the file: an
//     operator's tool, not for the hot path.
//   - Size limits (MaxKeySize, MaxValueSize, MaxOps, MaxRecordSize,
//     MaxBucketNameSize) are enforced by Append with ErrInvalidRecord.
//     Bucket names "journal" and "meta" are reserved: Append, Get and Scan
//     refuse them.
//   - Options.InitialMmapSize should exceed the expected file size: when
//     bbolt has to grow its mapping it waits for all read transactions and
//     blocks new ones.
package persistence
