package persistence

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A group commit appended to the end of its segment grows the file, and
// the fdatasync that makes it durable then has the file's new size to
// write too: a commit of the file system's own journal besides the
// record's blocks. Writing into blocks the file already has (written, not
// merely allocated) needs no such commit: measured on the reference
// machine, a group commit took p50 0.35-0.46 ms instead of 0.59-0.75 ms at
// 2,000 spends/s, and 0.59-0.94 ms instead of 1.21-1.61 ms under the
// unpaced load of make bench.
//
// So the journal writes its next segment ahead of time: once the active
// segment holds a MiB, a goroutine writes a spare file of zeros, a step at
// a time with a pause between steps (like the remover, so that the
// journal's own commits never wait behind a long write), and fdatasyncs
// it. The next segment is that spare, renamed. A segment therefore ends in
// zeros after its last record; reading it (readWAL, check) takes an
// all-zero rest for the end of the records, and nothing else: any other
// rest is a torn tail or damage, as before. A spare left by an earlier run
// is not trusted (its zeros may not all be durable) and is removed at open.
const (
	spareName  = "next.spare"
	spareStep  = 1 << 20
	sparePause = 5 * time.Millisecond
	spareAfter = 1 << 20
)

// spare is the state of the next segment's file.
type spare struct {
	mu        sync.Mutex
	preparing bool // a goroutine is writing it
	ready     bool // written and durable: the next segment takes it
	done      sync.WaitGroup
}

// spareSize is the size of a spare: the segment size and room for the
// batch that crosses it.
func (w *wal) spareSize() int64 { return w.segSize + w.segSize/8 }

// prepareSpare starts writing the spare once the active segment holds
// spareAfter bytes (half its limit, if that is less: the tests' tiny
// segments) and no spare is ready or being written. A journal that never
// gets that far (most tests, a store barely used) writes none. Committer
// only.
func (w *wal) prepareSpare() {
	if w.off.Load() < min(w.limit/2, spareAfter) || w.stopping.Load() {
		return
	}
	w.spare.mu.Lock()
	defer w.spare.mu.Unlock()
	if w.spare.preparing || w.spare.ready {
		return
	}
	w.spare.preparing = true
	w.spare.done.Add(1)
	go w.writeSpare()
}

// writeSpare writes the spare file, then marks it ready; on any failure
// (or a close meanwhile) it removes what it wrote, and the next segment is
// made the ordinary way.
func (w *wal) writeSpare() {
	defer w.spare.done.Done()
	path := filepath.Join(w.dir, spareName)
	err := writeZeros(path, w.spareSize(), func() bool {
		if w.stopping.Load() {
			return false
		}
		time.Sleep(sparePause)
		return true
	})
	w.spare.mu.Lock()
	w.spare.preparing = false
	w.spare.ready = err == nil
	w.spare.mu.Unlock()
	if err != nil {
		_ = os.Remove(path)
		if !errors.Is(err, errSpareStopped) {
			w.log.Warn("persistence: writing the next journal segment ahead failed; it is made when needed", "err", err)
		}
	}
}

var errSpareStopped = errors.New("journal closing")

// writeZeros writes size zero bytes to a new file at path, step by step,
// each step made durable before next() decides whether to go on.
func writeZeros(path string, size int64, next func() bool) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	zero := make([]byte, min(spareStep, size))
	for off := int64(0); off < size && err == nil; {
		n := min(int64(len(zero)), size-off)
		if _, err = f.WriteAt(zero[:n], off); err == nil {
			err = fdatasync(f)
		}
		off += n
		if err == nil && off < size && !next() {
			err = errSpareStopped
		}
	}
	return errors.Join(err, f.Close())
}

// takeSpare renames a ready spare to path and opens it; ok is false when
// no spare is ready (or the rename failed: the caller makes the file).
// The caller syncs the directory.
func (w *wal) takeSpare(path string) (f *os.File, ok bool) {
	w.spare.mu.Lock()
	ready := w.spare.ready
	w.spare.ready = false
	w.spare.mu.Unlock()
	if !ready {
		return nil, false
	}
	if err := os.Rename(filepath.Join(w.dir, spareName), path); err != nil {
		w.log.Warn("persistence: taking the journal's spare segment failed; making one", "err", err)
		return nil, false
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		// The spare is the segment now, durable or not: truncated below by
		// the ordinary way.
		return nil, false
	}
	return f, true
}

// removeStaleSpare removes a spare an earlier run left.
func removeStaleSpare(dir string) error {
	err := os.Remove(filepath.Join(dir, spareName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// allZero reports whether b holds nothing but zero bytes: the part of a
// segment written ahead that no record has reached.
func allZero(b []byte) bool {
	const chunk = 4096
	var zero [chunk]byte
	for len(b) > 0 {
		n := min(len(b), chunk)
		if !bytes.Equal(b[:n], zero[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
