package persistence

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Once the active segment is half full, the next one is written ahead as
// zeros; the rotation takes it, records land at its start, and a reopen
// reads them up to the zeros, with nothing lost or invented.
func TestNextSegmentIsWrittenAhead(t *testing.T) {
	const segSize = 16 << 10
	opts, s := storeWithSegments(t, t.TempDir(), segSize)
	spare := filepath.Join(journalDir(opts.Path), spareName)
	value := make([]byte, 200)
	n := 0
	appendOne := func() {
		t.Helper()
		mustAppend(t, s, Put("b", []byte(fmt.Sprintf("k%05d", n)), value))
		n++
	}
	// Past half of the first segment (less than spareAfter here): the
	// spare appears, in full.
	for s.wal.off.Load() < segSize/2+1 {
		appendOne()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.wal.spare.mu.Lock()
		ready := s.wal.spare.ready
		s.wal.spare.mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare segment was written ahead")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st, err := os.Stat(spare); err != nil || st.Size() != segSize+segSize/8 {
		t.Fatalf("spare: %v, %v; want %d bytes", st, err, segSize+segSize/8)
	}
	// The rotation takes it: the second segment is the spare, renamed.
	for len(segmentFiles(t, opts.Path)) < 2 {
		appendOne()
	}
	segs := segmentFiles(t, opts.Path)
	if st, err := os.Stat(segs[1]); err != nil || st.Size() < segSize+segSize/8 {
		t.Fatalf("second segment %v, %v: not the spare", st, err)
	}
	if _, err := os.Stat(spare); err == nil {
		t.Fatal("the spare is still there after the rotation took it")
	}
	for range 5 {
		appendOne()
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check with a segment written ahead: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := unfolded(t, opts.Path); u != n {
		t.Fatalf("%d records in the journal, want %d", u, n)
	}
	s = openStore(t, opts)
	defer s.Close()
	for i := range n {
		if v, err := s.Get("b", []byte(fmt.Sprintf("k%05d", i))); err != nil || len(v) != len(value) {
			t.Fatalf("record %d after the reopen: %d bytes, %v", i, len(v), err)
		}
	}
}

// A spare left by an earlier run is not trusted (its zeros may not all be
// durable): Open removes it, and the journal starts its segments anew.
func TestSpareOfAnEarlierRunIsRemoved(t *testing.T) {
	opts := testOptions(t.TempDir(), noAutoCheckpoint)
	s := openStore(t, opts)
	mustAppend(t, s, Put("b", []byte("k"), []byte("v")))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	spare := filepath.Join(journalDir(opts.Path), spareName)
	if err := os.WriteFile(spare, []byte("not zeros"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, opts)
	defer s.Close()
	if _, err := os.Stat(spare); !os.IsNotExist(err) {
		t.Fatalf("the earlier run's spare is still there: %v", err)
	}
	if v, err := s.Get("b", []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after the reopen: %q, %v", v, err)
	}
}

// A zero rest ends a segment's records; any other rest does not.
func TestAllZero(t *testing.T) {
	long := make([]byte, 10000)
	if !allZero(nil) || !allZero(long) {
		t.Fatal("zeros not taken for zeros")
	}
	long[9999] = 1
	if allZero(long) {
		t.Fatal("a non-zero byte at the end was missed")
	}
}

// A crash image of a journal whose segments were written ahead (small
// segments: most of them were spares, each ending in zeros, and a spare
// may be half written) recovers to the state the store had.
func TestRecoveryFromCrashImageWithSegmentsWrittenAhead(t *testing.T) {
	dir := t.TempDir()
	opts, s := storeWithSegments(t, dir, 512)
	defer s.Close()
	for i := range 200 {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint(i%13)), []byte(fmt.Sprint(i))), Del("b", []byte(fmt.Sprint((i+5)%13))))
		if i == 80 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	segs := segmentFiles(t, opts.Path)
	ahead := 0
	for _, p := range segs {
		if recordsEnd(t, p) < fileSize(t, p) {
			ahead++
		}
	}
	if ahead == 0 {
		t.Fatalf("none of %d segments was written ahead", len(segs))
	}
	want := dumpStore(t, s)
	image := filepath.Join(dir, "image.db")
	copyStoreImage(t, s, image)
	// A spare being written when the process died: half of it.
	if err := os.WriteFile(filepath.Join(journalDir(image), spareName), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	wantRecovered(t, image, want)
}

func fileSize(t *testing.T, path string) int {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Size())
}

// The first segment after an open is made, not written ahead, so it is
// short (a quarter of the segment size, at least 1 MiB): the journal
// reaches segments written ahead soon after a start.
func TestFirstSegmentAfterOpenIsShort(t *testing.T) {
	const segSize = 32 << 20
	opts, s := storeWithSegments(t, t.TempDir(), segSize)
	defer s.Close()
	value := make([]byte, 64<<10)
	var written int64
	for i := 0; len(segmentFiles(t, opts.Path)) < 2; i++ {
		if written > segSize/2 {
			t.Fatalf("no rotation after %d bytes of records", written)
		}
		mustAppend(t, s, Put("b", []byte(fmt.Sprint(i)), value))
		written += int64(len(value))
	}
	if first := recordsEnd(t, segmentFiles(t, opts.Path)[0]); first < segSize/4 || first > segSize/4+2*len(value) {
		t.Fatalf("the first segment was closed at %d bytes, want about %d", first, segSize/4)
	}
}

// storeWithSegments opens a store in dir whose journal segments close at
// segSize bytes, without automatic checkpoints.
func storeWithSegments(t *testing.T, dir string, segSize int64) (Options, *Store) {
	t.Helper()
	opts := testOptions(dir, func(o *Options) {
		noAutoCheckpoint(o)
		o.hooks.segmentSize = segSize
	})
	return opts, openStore(t, opts)
}
