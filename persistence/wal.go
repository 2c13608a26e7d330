package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The journal lives next to the bbolt file, in the directory Path+".journal"
// (or Options.JournalDir), as a sequence of append-only segment files named after the LSN of their
// first record (16 hex digits, ".wal"). Each record is one frame:
//
//	length  4 bytes big-endian: bytes of the record encoding
//	crc     4 bytes big-endian CRC-32C of length, LSN and encoding
//	lsn     8 bytes big-endian
//	record  the EncodeRecord form
//
// A group commit is one write of all its frames followed by one fdatasync.
const (
	frameHeaderSize = 16
	// DefaultSegmentSize is the size past which the journal starts a new
	// segment file. Old segments are deleted once a checkpoint has folded
	// all of their records.
	DefaultSegmentSize = 64 << 20
	// keepBuffer bounds the write buffer the journal keeps between commits.
	keepBuffer = 4 << 20
)

var segmentName = regexp.MustCompile(`^[0-9a-f]{16}\.wal$`)

// segmentFirst reads the LSN of the first record of the segment file e
// from its name; ok is false for anything that is not a segment file.
func segmentFirst(e os.DirEntry) (first uint64, ok bool, err error) {
	if !e.Type().IsRegular() || !segmentName.MatchString(e.Name()) {
		return 0, false, nil
	}
	if _, err := fmt.Sscanf(e.Name(), "%016x.wal", &first); err != nil {
		return 0, false, fmt.Errorf("journal segment %s: %w", e.Name(), err)
	}
	return first, true, nil
}

// A folded segment is not unlinked in one go. Unlinking a 64 MiB file frees
// all of its blocks in one file system transaction, and where freed blocks
// are discarded (ext4 mounted with discard), the journal's next fdatasync
// waits for all of it: 20-27 ms on the reference machine, during which
// every spend in flight stalls. A folded segment is renamed out of the
// journal's way instead (the rename durable before anything else), then
// shortened 1 MiB at a time with a pause between steps, so that each of the
// journal's commits carries a small part of the work (its worst fdatasync
// then took 2.4-3.9 ms), and removed once empty. That removes 200 MB/s,
// well above what the journal writes; should retired segments pile up
// anyway (retireBacklog), they are removed without pauses.
const (
	retiredSuffix = ".folded"
	retireStep    = 1 << 20
	retirePause   = 5 * time.Millisecond
	retireBacklog = 4
)

// journalDir returns the directory of the journal belonging to the bbolt
// file at path.
func journalDir(path string) string { return path + ".journal" }

// wal is the journal's segment files. The committer is the only writer of
// records; the checkpointer deletes old segments; Check reads them.
type wal struct {
	dir     string
	segSize int64
	// limit is the size past which the active segment is closed: segSize,
	// but less for the first segment after an open (see restart).
	limit int64
	log   *slog.Logger

	// mu guards segs: rotation (committer), deletion (checkpointer) and
	// Check. Appending to the active segment does not take it.
	mu   sync.Mutex
	segs []walSegment // oldest first; the last one is being appended to

	lock   *os.File     // the directory's lock file, held while open (lockDir)
	f      *os.File     // active segment; committer only
	off    atomic.Int64 // end of the last durable batch in the active segment
	broken error        // committer only: set once a failed write could not be undone
	buf    []byte       // committer only: reused frame buffer
	// truncate undoes a failed write; a test hook may replace it.
	truncate func(f *os.File, size int64) error

	// The retired segments (folded, renamed) still to be removed, by the
	// remover goroutine.
	retireMu   sync.Mutex
	retired    []string
	retireWake chan struct{} // capacity 1
	retireDone chan struct{} // closed when the remover has exited
	stopping   atomic.Bool   // set by close: finish without pauses, then exit

	// spare is the next segment, written ahead (spare.go).
	spare spare
}

type walSegment struct {
	first uint64 // LSN of the segment's first record (named so even while empty)
	path  string
}

func segmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016x.wal", first))
}

// appendFrame appends the frame of the record enc with the given LSN.
func appendFrame(b []byte, lsn uint64, enc []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(len(enc)))
	b = append(b, 0, 0, 0, 0) // crc, filled in below
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = append(b, enc...)
	crc := crc32.Update(0, castagnoli, b[start:start+4])
	crc = crc32.Update(crc, castagnoli, b[start+8:])
	binary.BigEndian.PutUint32(b[start+4:], crc)
	return b
}

// frame is one parsed journal frame; rec aliases the segment's bytes.
type frame struct {
	lsn uint64
	rec []byte
}

// errShortFrame marks a frame cut off by the end of the data.
var errShortFrame = errors.New("frame cut off by the end of the file")

// parseFrame reads the frame at the start of b.
func parseFrame(b []byte) (frame, int, error) {
	if len(b) < frameHeaderSize {
		return frame{}, 0, errShortFrame
	}
	n := binary.BigEndian.Uint32(b)
	if n < 1+1+crcSize || n > MaxRecordSize {
		return frame{}, 0, fmt.Errorf("impossible record length %d", n)
	}
	end := frameHeaderSize + int(n)
	if len(b) < end {
		return frame{}, 0, errShortFrame
	}
	crc := crc32.Update(0, castagnoli, b[:4])
	crc = crc32.Update(crc, castagnoli, b[8:end])
	if stored := binary.BigEndian.Uint32(b[4:]); stored != crc {
		return frame{}, 0, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", stored, crc)
	}
	return frame{lsn: binary.BigEndian.Uint64(b[8:]), rec: b[frameHeaderSize:end]}, end, nil
}

// segmentDamage describes a segment that does not parse to its end.
type segmentDamage struct {
	path   string
	offset int
	err    error
}

func (d *segmentDamage) Error() string {
	return fmt.Sprintf("%v: journal segment %s damaged at offset %d: %v", ErrCorruptRecord, d.path, d.offset, d.err)
}

func (d *segmentDamage) Unwrap() error { return ErrCorruptRecord }

// parseSegment parses the frames of one segment whose first record must have
// LSN first. It stops at the first frame that is damaged, cut off, or breaks
// LSN continuity, and returns the frames before it and the offset where it
// stopped (len(data) when everything parsed) with the reason.
func parseSegment(data []byte, first uint64) ([]frame, int, error) {
	var frames []frame
	off, next := 0, first
	for off < len(data) {
		f, n, err := parseFrame(data[off:])
		if err == nil && f.lsn != next {
			err = fmt.Errorf("LSN %d where %d was expected", f.lsn, next)
		}
		if err != nil {
			return frames, off, err
		}
		frames = append(frames, f)
		off += n
		next++
	}
	return frames, off, nil
}

// intactAfter reports whether an intact frame with an LSN after last starts
// anywhere in data. It tells a torn tail (nothing intact follows the damage:
// the unacknowledged last batch) from damage inside acknowledged records.
func intactAfter(data []byte, last uint64) bool {
	for q := 0; q+frameHeaderSize <= len(data); q++ {
		lsn := binary.BigEndian.Uint64(data[q+8:])
		if lsn <= last || lsn-last > MaxOps*uint64(maxMaxBatch) {
			continue
		}
		if _, _, err := parseFrame(data[q:]); err == nil {
			return true
		}
	}
	return false
}

// openWAL locks dir (creating it if needed) for this store alone, then
// reads it (readWAL). The lock is held until close.
func openWAL(dir string, segSize int64, log *slog.Logger, applied uint64) (*wal, []pendingRec, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	w, recs, err := readWAL(dir, segSize, log, applied)
	if err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	w.lock = lock
	return w, recs, nil
}

// readWAL lists the segments in dir, checks them and returns the records
// after applied, in LSN order. A damaged tail of the last segment that
// nothing intact follows is the batch whose fsync never returned: it is
// truncated away and logged. Any other damage, or a gap between applied and
// the first record, refuses to open.
func readWAL(dir string, segSize int64, log *slog.Logger, applied uint64) (*wal, []pendingRec, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	w := &wal{dir: dir, segSize: segSize, log: log, truncate: (*os.File).Truncate}
	if err := removeStaleSpare(dir); err != nil {
		return nil, nil, fmt.Errorf("journal: remove the spare segment of an earlier run: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), retiredSuffix) {
			// Retired before a stop, not yet removed: all of its records
			// are folded.
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, nil, fmt.Errorf("journal: remove retired segment: %w", err)
			}
			continue
		}
		first, ok, err := segmentFirst(e)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		w.segs = append(w.segs, walSegment{first: first, path: filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(w.segs, func(a, b walSegment) int { return cmpUint64(a.first, b.first) })

	var recs []pendingRec
	next := applied + 1 // the LSN the next record must have once past applied
	for i, seg := range w.segs {
		if seg.first > next {
			return nil, nil, fmt.Errorf("%w: journal segment %s starts at LSN %d, but records from %d are missing",
				ErrCorruptRecord, seg.path, seg.first, next)
		}
		data, err := os.ReadFile(seg.path)
		if err != nil {
			return nil, nil, err
		}
		frames, end, perr := parseSegment(data, seg.first)
		if perr != nil && allZero(data[end:]) {
			perr = nil // written ahead, and no record reached it (spare.go)
		}
		if perr != nil {
			last := seg.first - 1 + uint64(len(frames))
			if i != len(w.segs)-1 || intactAfter(data[end:], last) {
				return nil, nil, &segmentDamage{path: seg.path, offset: end, err: perr}
			}
			log.Warn("persistence: truncating torn journal tail", "segment", seg.path,
				"offset", end, "bytes", len(data)-end, "reason", perr)
			if err := truncateFile(seg.path, int64(end)); err != nil {
				return nil, nil, fmt.Errorf("journal segment %s: truncate torn tail at offset %d: %w", seg.path, end, err)
			}
		}
		for _, f := range frames {
			if f.lsn < next {
				if f.lsn <= applied {
					continue // folded already; the segment was not deleted yet
				}
				return nil, nil, fmt.Errorf("%w: journal segment %s repeats LSN %d", ErrCorruptRecord, seg.path, f.lsn)
			}
			if _, err := DecodeRecord(f.rec); err != nil {
				return nil, nil, fmt.Errorf("journal segment %s, LSN %d: %w", seg.path, f.lsn, err)
			}
			// f.rec aliases the segment as read, which nothing changes.
			recs = append(recs, pendingRec{lsn: f.lsn, enc: f.rec})
			next = f.lsn + 1
		}
	}
	w.retireWake, w.retireDone = make(chan struct{}, 1), make(chan struct{})
	go w.remover()
	return w, recs, nil
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// restart deletes every segment (all of their records are folded, at or
// below applied) and starts an empty one for the records after applied.
func (w *wal) restart(applied uint64) error {
	for _, seg := range w.segs {
		if err := os.Remove(seg.path); err != nil {
			return fmt.Errorf("journal: remove folded segment: %w", err)
		}
	}
	w.segs = nil
	if err := w.startSegment(applied + 1); err != nil {
		return err
	}
	// The first segment is made, not written ahead (spare.go): kept short
	// (16 MiB of the default 64), it hands over to one written ahead within
	// the first seconds after a start rather than after 64 MiB.
	w.limit = min(w.segSize, max(w.segSize/4, 1<<20))
	return nil
}

// startSegment creates the segment for records from first on and makes it
// the active one. Caller holds mu or is the only user (Open).
func (w *wal) startSegment(first uint64) error {
	path := segmentPath(w.dir, first)
	f, ok := w.takeSpare(path)
	if !ok {
		var err error
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return fmt.Errorf("journal: create segment: %w", err)
		}
	}
	// The directory entry must be durable before any record in the file is
	// acknowledged.
	if err := syncDir(w.dir); err != nil {
		_ = f.Close()
		return fmt.Errorf("journal: sync directory %s: %w", w.dir, err)
	}
	if w.f != nil {
		_ = w.f.Close() // fsynced with its last batch
	}
	w.f = f
	w.off.Store(0)
	w.limit = w.segSize
	w.segs = append(w.segs, walSegment{first: first, path: path})
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// append writes the batch whose first record gets LSN first in one write
// and makes it durable with one fdatasync. fault (the test and drill hooks)
// runs between the two and fails the batch like the disk would. After a
// failure the segment is truncated back to the end of the last durable
// batch; if even that fails, the journal refuses every later append.
func (w *wal) append(first uint64, items []item, fault func(int) error) error {
	if w.broken != nil {
		return w.broken
	}
	if w.off.Load() >= w.limit {
		w.mu.Lock()
		err := w.startSegment(first)
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
	buf := w.buf[:0]
	for i, it := range items {
		buf = appendFrame(buf, first+uint64(i), it.enc)
	}
	if cap(buf) <= keepBuffer {
		w.buf = buf
	} else {
		w.buf = nil
	}
	off := w.off.Load()
	_, err := w.f.WriteAt(buf, off)
	if err == nil && fault != nil {
		err = fault(len(items))
	}
	if err == nil {
		err = fdatasync(w.f)
	}
	if err != nil {
		w.undo(off)
		return err
	}
	w.off.Store(off + int64(len(buf)))
	w.prepareSpare()
	return nil
}

// undo cuts a failed batch off the active segment, so that no later batch
// can leave part of it behind to be mistaken for records on the next Open.
func (w *wal) undo(off int64) {
	err := w.truncate(w.f, off)
	if err == nil {
		err = fdatasync(w.f)
	}
	if err != nil {
		w.broken = fmt.Errorf("persistence: journal segment %s could not be truncated back to offset %d after a failed write, so no further records are accepted (restart the service to recover): %w",
			w.f.Name(), off, err)
		w.log.Error("persistence: journal unusable", "err", w.broken)
	}
}

// deleteThrough retires the segments whose records are all at or below
// applied: they leave the journal at once (renamed), and the remover
// deletes them at its pace (see retireStep). The active segment always
// stays.
func (w *wal) deleteThrough(applied uint64) {
	w.mu.Lock()
	n := 0
	var retired []string
	for n+1 < len(w.segs) && w.segs[n+1].first-1 <= applied {
		to := w.segs[n].path + retiredSuffix
		if err := os.Rename(w.segs[n].path, to); err != nil {
			w.log.Error("persistence: retiring a folded journal segment failed; retried after the next checkpoint",
				"segment", w.segs[n].path, "err", err)
			break
		}
		retired = append(retired, to)
		n++
	}
	w.segs = slices.Delete(w.segs, 0, n)
	w.mu.Unlock()
	if len(retired) == 0 {
		return
	}
	// After a crash, no shortened file may be found under a segment's
	// name, where Open would take it for damage: the renames are durable
	// before the first truncation.
	if err := syncDir(w.dir); err != nil {
		w.log.Error("persistence: syncing the journal directory after retiring segments failed; they are removed at the next start",
			"err", err)
		return
	}
	w.retireMu.Lock()
	w.retired = append(w.retired, retired...)
	w.retireMu.Unlock()
	w.wakeRemover()
}

// wakeRemover has the remover look at its queue (and at stopping) again.
func (w *wal) wakeRemover() {
	select {
	case w.retireWake <- struct{}{}:
	default:
	}
}

// remover is the goroutine that deletes retired segments, until close.
func (w *wal) remover() {
	defer close(w.retireDone)
	for {
		w.retireMu.Lock()
		todo := w.retired
		w.retired = nil
		w.retireMu.Unlock()
		for i, path := range todo {
			err := shrinkFile(path, retireStep, func() {
				w.retireMu.Lock()
				behind := len(todo) - i - 1 + len(w.retired)
				w.retireMu.Unlock()
				if !w.stopping.Load() && behind < retireBacklog {
					time.Sleep(retirePause)
				}
			})
			if err == nil {
				err = os.Remove(path)
			}
			if err != nil {
				w.log.Error("persistence: removing a retired journal segment failed; it is removed at the next start",
					"file", path, "err", err)
			}
		}
		if len(todo) > 0 {
			continue
		}
		if w.stopping.Load() {
			return
		}
		<-w.retireWake
	}
}

// shrinkFile truncates the file at path to nothing, step bytes at a time,
// calling pause between steps.
func shrinkFile(path string, step int64, pause func()) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil {
		for size := st.Size(); size > 0 && err == nil; {
			size = max(size-step, 0)
			if err = f.Truncate(size); err == nil && size > 0 {
				pause()
			}
		}
	}
	return errors.Join(err, f.Close())
}

// check verifies every durable frame of every segment: checksums, record
// encodings, LSN continuity within and across segments, and that no record
// after applied is missing. applied is read after the segment list is
// locked, so no segment it depends on can be deleted meanwhile.
func (w *wal) check(applied func() uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	end := w.off.Load()
	next := applied() + 1
	var errs []error
	for i, seg := range w.segs {
		if seg.first > next {
			errs = append(errs, fmt.Errorf("journal segment %s starts at LSN %d, records from %d are missing", seg.path, seg.first, next))
		}
		data, err := os.ReadFile(seg.path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if i == len(w.segs)-1 {
			if int64(len(data)) < end {
				errs = append(errs, fmt.Errorf("journal segment %s holds %d bytes, %d are durable", seg.path, len(data), end))
				continue
			}
			data = data[:end] // a batch may be being written past end
		}
		frames, off, err := parseSegment(data, seg.first)
		if err != nil && !allZero(data[off:]) {
			errs = append(errs, &segmentDamage{path: seg.path, offset: off, err: err})
		}
		for _, f := range frames {
			if _, err := DecodeRecord(f.rec); err != nil {
				errs = append(errs, fmt.Errorf("journal segment %s, LSN %d: %w", seg.path, f.lsn, err))
			}
		}
		next = max(next, seg.first+uint64(len(frames)))
	}
	return errors.Join(errs...)
}

// close finishes removing the retired segments, without pauses, and closes
// the active segment.
func (w *wal) close() error {
	w.stopping.Store(true)
	if w.retireDone != nil {
		w.wakeRemover()
		<-w.retireDone
	}
	w.spare.done.Wait()
	// The next open would not trust it; it need not hold a segment's worth
	// of disk meanwhile.
	err := removeStaleSpare(w.dir)
	if w.f != nil {
		err = errors.Join(err, w.f.Close())
	}
	if w.lock != nil {
		err = errors.Join(err, w.lock.Close())
	}
	return err
}
