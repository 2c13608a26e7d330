// Package persistence is the durability layer of the guard: an append-only
// journal with group commit, and checkpoints that fold it into a bbolt file.
//
// The service keeps its live state in actors' memory. Every change to that
// state is described as a Record (a list of put/delete ops on named
// buckets) and appended here; nobody outside the service may hear of the
// change until the record's Ticket says it is durable.
//
// # Model
//
// Two kinds of file, side by side unless Options.JournalDir puts the
// journal on a disk of its own:
//
//   - The journal: the directory Options.Path+".journal" (or JournalDir)
//     holds segment files named after the LSN (log sequence number) of
//     their first record, each a run of frames: length, CRC-32C (of
//     length, LSN and record), LSN, and the record in the compact binary
//     format of EncodeRecord. A segment past 64 MiB (DefaultSegmentSize) is
//     closed and a new one started: the file next.spare, written ahead as
//     zeros once the active segment holds a MiB (see spare.go), so that a
//     commit writes into blocks the file has and its fdatasync has no size
//     to record; a segment's records may therefore be followed by zeros,
//     which end them. The file STORE_ID names the data file
//     the journal belongs to, and LOCK is held while a store has it open.
//   - The bbolt file at Options.Path: the bucket meta holds applied_lsn, the
//     LSN of the last record folded into the entity buckets, the layout
//     version, the data file's identity, the journal's directory when it
//     is not beside the file, and clean_stop while the file is closed after
//     a Close that folded every record. Open refuses a journal directory
//     that does not name that identity (a journal disk that did not
//     mount), and another directory while the last one holds records after
//     applied_lsn, or, after a crash (no clean_stop), while the last one
//     cannot be read as this file's journal: missing, or empty where a
//     disk did not mount, it may have held acknowledged records. Every
//     other bucket is an entity bucket, the materialized state, "the
//     snapshot", as of applied_lsn.
//
// Append queues a record and returns a Ticket at once. A single committer
// goroutine takes everything queued (up to Options.MaxBatch records), writes
// their frames to the journal in one write and makes them durable with one
// fdatasync. That is group commit: concurrent appenders share one fsync, so
// throughput grows with concurrency while each appender waits about one or
// two commit times. The committer never touches the bbolt file.
//
// Once a batch is durable, its ops are applied to the overlay, an in-memory
// map from (bucket, key) to the latest value or tombstone, and only then are
// its tickets resolved. Reads (Get, Scan) consult the overlay first and the
// entity buckets second, so they see every durable record at once, before
// any checkpoint. The overlay is a short list of generations: records are
// applied to the newest, open one, and sealing it opens a new one. Where
// generations hold the same key, the newest holds its latest write.
//
// A checkpoint folds durable records into the entity buckets. It runs on its
// own goroutine, the only writer of the bbolt file, concurrently with group
// commits, which therefore never wait for it. It seals the open generation
// and folds the sealed ones, oldest first: the generation's entries (the
// last write of each key among its records m..n, where m = applied_lsn+1),
// in bucket and key order, in parts of about Options.CheckpointTxBytes of
// keys and values (32 parts at most: a large generation gets larger ones,
// so that the parts' fdatasyncs cannot leave the checkpoints behind the
// journal), each part a bbolt transaction, the last one also setting
// applied_lsn = n. Parts because every fdatasync of the journal waits for
// all the writes the disk has been given, those of a checkpoint included:
// a generation written in one transaction of megabytes held the commits
// behind it for tens of milliseconds. A stop between parts (a failure, a
// crash) leaves some keys newer than applied_lsn says; the next checkpoint,
// or the replay at the next start, writes every record after applied_lsn
// again, in order, and ends in the same values, since a record's ops are
// whole puts and deletes. Afterwards the generation is dropped from the
// overlay whole (a key rewritten by a later record lives on in a newer
// generation), and the segment files whose records are all at or below n
// are retired: renamed at once (name+".folded", which Open removes and
// never reads), then shortened 1 MiB at a time by a goroutine of their own
// and removed. A 64 MiB file unlinked in one go would stall the journal's
// next fdatasync for tens of milliseconds where freed blocks are
// discarded; Close finishes the removals without pauses.
// Checkpoints run every Options.CheckpointInterval, as soon as more than
// Options.CheckpointRecords records await folding, on Checkpoint, and on
// Close; a generation is sealed as soon as it holds a bounded number of
// records, so a long backlog is folded in several transactions.
//
// Open recovers: it reads the segments in LSN order, checking every frame's
// checksum and the continuity of LSNs, and folds the records after
// applied_lsn into the entity buckets, in chunks, before it returns; then it
// deletes the segments and starts an empty one. Each chunk advances
// applied_lsn with its writes, and records at or below applied_lsn are
// skipped, so recovery is itself crash-safe. A damaged tail of the last
// segment that no intact frame follows is a batch whose fdatasync never
// returned, so nobody was told of it: it is truncated away and logged
// (zeros written ahead, in any segment, are no damage). Any
// other damage (in an older segment, or followed by intact frames, or a gap
// in the LSNs) is in acknowledged records, and Open refuses with an error
// wrapping ErrCorruptRecord that names the file and offset. A file written
// by the earlier layout, with the journal in the bbolt bucket "journal", is
// migrated: Open folds that bucket, drops it and records the new layout.
//
// # Invariants
//
//   - Durable before visible: a record's effects are readable, and its
//     ticket resolved, only after the fdatasync of the write holding it has
//     returned. A reader never sees a record that may be lost.
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
// the journal and the checkpointer the only writer of the bbolt file; they
// share only a short mutex over the LSNs of the durable and the folded
// records. The committer publishes each batch itself once it is durable:
// overlay update, then ticket resolution (a separate goroutine for this
// cost a scheduling hop of milliseconds under load). Sealing and dropping
// of generations and Checkpoint answers are carried out, in order, by a
// third goroutine, the publisher. A batch is published before the
// checkpointer can see it, so a seal it asks for follows the updates of
// every record it wants folded, and the checkpointer reads a sealed
// generation without a lock: nothing writes it any more.
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
// If a group commit fails (the write, the fdatasync, or a CommitFault), the
// segment is truncated back to the end of the last durable batch, and the
// tickets of the whole batch and of every record
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
// If the truncation fails too, the journal refuses every later append (each
// fails like a failed commit, with an error saying so) until the process is
// restarted: a later, shorter batch could otherwise leave part of the failed
// one behind, to be read back as records.
//
// A failed checkpoint loses nothing: the records stay durable in the journal
// and readable from the overlay. It is logged, counted in Stats, returned by
// Checkpoint or Close, and retried on the next tick. The generation does not
// change, since no actor's state went ahead of the disk.
//
// # Caveats
//
//   - A real I/O error during commit leaves the failed batch in doubt until
//     the truncation is durable: if the process dies before that, the disk
//     may hold the whole batch, and it reappears after restart. This
//     process never shows it. Effects outside this store that hang on a
//     record should follow its ticket, never precede it.
//   - Open tells a torn tail from damage in acknowledged records by whether
//     an intact frame follows the damage. A process crash (SIGKILL) only
//     ever leaves a prefix of the last write; after a power loss that
//     persisted later pages of an unacknowledged batch but not earlier
//     ones, Open refuses rather than guess, and an operator truncates the
//     named segment at the named offset.
//   - OnFailure must not call Close (Close waits for running callbacks).
//   - The overlay is bounded only while checkpoints succeed and keep up with
//     commits; while they fail, or when commits outpace them, it grows with
//     every durable record (commits are never held back for them), in up to
//     16 generations that reads look through; beyond, the newest one grows,
//     and folding it takes one large transaction.
//   - Check holds bbolt's write lock for a full scan of the file and reads
//     every journal segment: an operator's tool, not for the hot path.
//   - Size limits (MaxKeySize, MaxValueSize, MaxOps, MaxRecordSize,
//     MaxBucketNameSize) are enforced by Append with ErrInvalidRecord.
//     Bucket names "journal" and "meta" are reserved: Append, Get and Scan
//     refuse them.
//   - Options.InitialMmapSize should exceed the expected file size: when
//     bbolt has to grow its mapping it waits for all read transactions and
//     blocks new ones.
package persistence
