package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// closedWithJournal leaves n single-key records (b/0..b/n-1, LSNs 1..n) in
// the journal files of a closed store, none of them folded.
func closedWithJournal(t *testing.T, n int, mod func(*Options)) Options {
	t.Helper()
	opts := testOptions(t.TempDir(), func(o *Options) {
		noAutoCheckpoint(o)
		if mod != nil {
			mod(o)
		}
	})
	s := openStore(t, opts)
	for i := range n {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint(i)), []byte(fmt.Sprint("v", i))))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := unfolded(t, opts.Path); u != n {
		t.Fatalf("%d records left in the journal, want %d", u, n)
	}
	return opts
}

// frameOffsets returns the offset of every frame in a segment file.
func frameOffsets(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int
	for off := 0; off < len(data) && !allZero(data[off:]); { // a zero rest was written ahead (spare.go)
		_, n, err := parseFrame(data[off:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, off, err)
		}
		offs = append(offs, off)
		off += n
	}
	return offs
}

// recordsEnd returns the offset where the records of a segment file end:
// its size, or where the zeros written ahead of them begin.
func recordsEnd(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, path)
	if len(offs) == 0 {
		return 0
	}
	last := offs[len(offs)-1]
	_, n, err := parseFrame(data[last:])
	if err != nil {
		t.Fatal(err)
	}
	return last + n
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A batch whose fdatasync never returned may leave any prefix of its bytes,
// or garbage, at the end of the last segment. Open cuts it off and recovers
// every record before it.
func TestTornTailTruncatedOnOpen(t *testing.T) {
	const n = 10
	cases := map[string]struct {
		damage func(data []byte, last int) []byte
		keep   int // records that survive
	}{
		"cut inside the last record":  {func(d []byte, last int) []byte { return d[:len(d)-3] }, n - 1},
		"cut inside the last header":  {func(d []byte, last int) []byte { return d[:last+5] }, n - 1},
		"zeros after the last record": {func(d []byte, _ int) []byte { return append(d, make([]byte, 300)...) }, n},
		"garbage after the last record": {func(d []byte, _ int) []byte {
			return append(d, []byte("\x00\x00\x00\x20 not a frame at all, just noise")...)
		}, n},
		"last record's checksum wrong": {func(d []byte, _ int) []byte {
			d[len(d)-1] ^= 0xff
			return d
		}, n - 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := closedWithJournal(t, n, nil)
			segs := segmentFiles(t, opts.Path)
			lastSeg := segs[len(segs)-1]
			offs := frameOffsets(t, lastSeg)
			rewrite(t, lastSeg, func(d []byte) []byte { return tc.damage(d, offs[len(offs)-1]) })

			s := openStore(t, opts)
			defer s.Close()
			for i := range n {
				v, ok := mustGet(t, s, "b", fmt.Sprint(i))
				if want := i < tc.keep; ok != want || (ok && v != fmt.Sprint("v", i)) {
					t.Fatalf("key %d: %q, %v; want present=%v", i, v, ok, want)
				}
			}
			if st := s.Stats(); st.LastLSN != uint64(tc.keep) {
				t.Fatalf("LastLSN %d, want %d", st.LastLSN, tc.keep)
			}
			if tk := mustAppend(t, s, Put("b", []byte("next"), nil)); tk.LSN() != uint64(tc.keep+1) {
				t.Fatalf("next LSN %d, want %d", tk.LSN(), tc.keep+1)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Damage followed by intact records, or anywhere but the end of the last
// segment, is in acknowledged records: Open refuses, names the file and the
// offset, and changes nothing.
func TestCorruptionInsideJournalRefused(t *testing.T) {
	small := func(o *Options) { o.hooks.segmentSize = 256 }
	cases := map[string]struct {
		mod    func(*Options)
		seg    func(segs []string) string
		damage func(t *testing.T, path string) int // returns the offset named
	}{
		"flipped byte in the middle of the last segment": {
			seg: func(segs []string) string { return segs[len(segs)-1] },
			damage: func(t *testing.T, path string) int {
				off := frameOffsets(t, path)[3]
				rewrite(t, path, func(d []byte) []byte { d[off+frameHeaderSize+2] ^= 0x01; return d })
				return off
			},
		},
		"zeroed header in the middle of the last segment": {
			seg: func(segs []string) string { return segs[len(segs)-1] },
			damage: func(t *testing.T, path string) int {
				off := frameOffsets(t, path)[5]
				rewrite(t, path, func(d []byte) []byte { clear(d[off : off+frameHeaderSize]); return d })
				return off
			},
		},
		"torn end of an older segment": {
			mod: small,
			seg: func(segs []string) string { return segs[0] },
			damage: func(t *testing.T, path string) int {
				offs := frameOffsets(t, path)
				rewrite(t, path, func(d []byte) []byte { return d[:recordsEnd(t, path)-2] })
				return offs[len(offs)-1]
			},
		},
		"torn end of an older segment written ahead": {
			mod: small,
			seg: func(segs []string) string { return segs[1] },
			damage: func(t *testing.T, path string) int {
				offs := frameOffsets(t, path)
				end := recordsEnd(t, path)
				rewrite(t, path, func(d []byte) []byte {
					if len(d) == end {
						t.Fatalf("%s was not written ahead: no zeros after its records", path)
					}
					clear(d[end-2 : end]) // the zeros reach into the last record
					return d
				})
				return offs[len(offs)-1]
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := closedWithJournal(t, 40, tc.mod)
			segs := segmentFiles(t, opts.Path)
			if tc.mod != nil && len(segs) < 3 {
				t.Fatalf("want several segments, got %d", len(segs))
			}
			path := tc.seg(segs)
			off := tc.damage(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Open(opts)
			if !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
				t.Fatalf("Open: %v; want a corrupt-journal error naming %s at offset %d", err, path, off)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(after) != string(before) || len(segmentFiles(t, opts.Path)) != len(segs) {
				t.Fatalf("a refused Open changed the journal")
			}
		})
	}
}

// smallSegments opens a store with segments of 256 bytes and no automatic
// checkpoints, and writes n records over 30 keys: a journal of many
// segments.
func smallSegments(t *testing.T, n int) (Options, *Store) {
	t.Helper()
	opts := testOptions(t.TempDir(), func(o *Options) {
		noAutoCheckpoint(o)
		o.hooks.segmentSize = 256
	})
	s := openStore(t, opts)
	for i := range n {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint(i%30)), []byte(fmt.Sprint(i))))
	}
	return opts, s
}

// Segments whose records are all folded are deleted by the checkpoint; the
// active one stays. Check verifies the journal files too.
func TestSegmentsDeletedAfterCheckpoint(t *testing.T) {
	opts, s := smallSegments(t, 100)
	segs := segmentFiles(t, opts.Path)
	if len(segs) < 5 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	want := dumpStore(t, s)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	left := segmentFiles(t, opts.Path)
	if len(left) != 1 || left[0] != segs[len(segs)-1] {
		t.Fatalf("after checkpoint: %v, want only the active %s", left, segs[len(segs)-1])
	}
	mustAppend(t, s, Put("b", []byte("after"), []byte("x")))
	want["b"]["after"] = "x"
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// Damage in a durable frame is found by Check.
	rewrite(t, left[0], func(d []byte) []byte { d[frameHeaderSize+1] ^= 0x40; return d })
	if err := s.Check(); !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), left[0]) {
		t.Fatalf("Check of a damaged segment: %v", err)
	}
	rewrite(t, left[0], func(d []byte) []byte { d[frameHeaderSize+1] ^= 0x40; return d })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The folded segments were retired (renamed) by the checkpoint and
	// removed by Close at the latest; the lock and identity files stay.
	entries, err := os.ReadDir(journalDir(opts.Path))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != journalLockName && e.Name() != storeIDName {
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 || names[0] != filepath.Base(left[0]) {
		t.Fatalf("after Close the journal directory holds %v besides its lock and identity files, want only %s", names, filepath.Base(left[0]))
	}
	s = openStore(t, opts)
	defer s.Close()
	if d := diffDumps(want, dumpStore(t, s)); d != "" {
		t.Fatalf("state after reopen differs: %s", d)
	}
}

// A segment retired before a stop and not yet removed (renamed, perhaps
// shortened) is no part of the journal: Open removes it and recovers the
// same state.
func TestOpenRemovesRetiredLeftovers(t *testing.T) {
	opts, s := smallSegments(t, 60)
	want := dumpStore(t, s)
	segs := segmentFiles(t, opts.Path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A copy of a real segment cut mid-frame, as the remover leaves one,
	// and a stray retired name: neither may be read as records.
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	leftovers := []string{segs[0] + retiredSuffix, filepath.Join(journalDir(opts.Path), "00000000000fffff.wal"+retiredSuffix)}
	if err := os.WriteFile(leftovers[0], data[:len(data)/2+3], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftovers[1], []byte("not a segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, opts)
	defer s.Close()
	for _, p := range leftovers {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("retired leftover %s still there after Open (%v)", filepath.Base(p), err)
		}
	}
	if d := diffDumps(want, dumpStore(t, s)); d != "" {
		t.Fatalf("state after reopen differs: %s", d)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// shrinkFile cuts a file down step by step, pausing between steps only.
func TestShrinkFileStepsDown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 10), 0o600); err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	err := shrinkFile(path, 3, func() {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != 0 || !slices.Equal(sizes, []int64{7, 4, 1}) {
		t.Fatalf("sizes at the pauses %v, final %v (%v); want [7 4 1] and an empty file", sizes, st, err)
	}
}

// A checkpoint runs on its own goroutine: while one is stuck inside its
// bbolt transaction, group commits go on, tickets resolve in order, and
// what they wrote is readable. Only the checkpoint waits.
func TestCommitsProceedDuringCheckpoint(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	opts := testOptions(t.TempDir(), func(o *Options) {
		noAutoCheckpoint(o)
		o.hooks.checkpoint = func() error {
			select {
			case entered <- struct{}{}:
				<-release
			default:
			}
			return nil
		}
	})
	s := openStore(t, opts)
	defer s.Close()
	for i := range 20 {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint("old", i)), []byte("v")))
	}
	ckpt := make(chan error, 1)
	go func() { ckpt <- s.Checkpoint() }()
	<-entered // the checkpoint holds bbolt's write transaction

	var prev uint64
	for i := range 50 {
		tk := s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte(fmt.Sprint("new", i)), []byte(fmt.Sprint(i)))}})
		if err := waitTicket(t, tk); err != nil {
			t.Fatal(err)
		}
		if tk.LSN() <= prev {
			t.Fatalf("ticket %d: LSN %d after %d", i, tk.LSN(), prev)
		}
		prev = tk.LSN()
		if v, _ := mustGet(t, s, "b", fmt.Sprint("new", i)); v != fmt.Sprint(i) {
			t.Fatalf("record %d not visible after its ticket: %q", i, v)
		}
	}
	select {
	case err := <-ckpt:
		t.Fatalf("checkpoint finished while its transaction was held: %v", err)
	default:
	}
	if st := s.Stats(); st.AppliedLSN != 0 || st.LastLSN != 70 || st.Commits < 70 {
		t.Fatalf("during the checkpoint: %+v", st)
	}
	close(release)
	if err := <-ckpt; err != nil {
		t.Fatal(err)
	}
	// Checkpoint covers what was appended before the call, at least.
	if st := s.Stats(); st.AppliedLSN < 20 {
		t.Fatalf("after the checkpoint: %+v", st)
	}
	if v, _ := mustGet(t, s, "b", "old3"); v != "v" {
		t.Fatalf("folded key lost: %q", v)
	}
}

// A file written by the legacy layout (journal records in the bbolt bucket
// "journal", format 1) opens with every record folded, the bucket gone and
// the format moved on; LSNs continue after the legacy ones.
func TestLegacyLayoutOpens(t *testing.T) {
	opts := testOptions(t.TempDir(), nil)
	db, err := bolt.Open(opts.Path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	legacy := map[uint64]Record{
		2: {Ops: []Op{Put("b", []byte("stale"), []byte("folded before"))}}, // <= applied: only its deletion was lost
		3: {Ops: []Op{Put("b", []byte("x"), []byte("1")), Put("c", []byte("y"), []byte("2"))}},
		4: {Ops: []Op{Del("b", []byte("a"))}},
		5: {Ops: []Op{Put("b", []byte("x"), []byte("3"))}},
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, _ := tx.CreateBucket([]byte(metaBucket))
		if err := m.Put(formatKey, []byte{legacyFormat}); err != nil {
			return err
		}
		if err := m.Put(appliedKey, lsnKey(2)); err != nil {
			return err
		}
		b, _ := tx.CreateBucket([]byte("b"))
		if err := b.Put([]byte("a"), []byte("old")); err != nil {
			return err
		}
		if err := b.Put([]byte("keep"), []byte("k")); err != nil {
			return err
		}
		j, _ := tx.CreateBucket([]byte(journalBucket))
		for lsn, r := range legacy {
			if err := j.Put(lsnKey(lsn), EncodeRecord(r)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	want := dump{"b": {"keep": "k", "x": "3"}, "c": {"y": "2"}}
	s := openStore(t, opts)
	if d := diffDumps(want, dumpStore(t, s)); d != "" {
		t.Fatalf("legacy state: %s", d)
	}
	if st := s.Stats(); st.LastLSN != 5 || st.AppliedLSN != 5 {
		t.Fatalf("after migration: %+v", st)
	}
	if tk := mustAppend(t, s, Put("b", []byte("new"), []byte("n"))); tk.LSN() != 6 {
		t.Fatalf("first new LSN %d, want 6", tk.LSN())
	}
	want["b"]["new"] = "n"
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDump(t, opts.Path)
	if _, ok := raw[journalBucket]; ok {
		t.Fatalf("legacy journal bucket still present")
	}
	if f := raw[metaBucket][string(formatKey)]; f != string([]byte{formatVersion}) {
		t.Fatalf("format %x after migration", f)
	}
	if d := diffDumps(want, entityOnly(raw)); d != "" {
		t.Fatalf("file after migration and Close: %s", d)
	}
}

// When a failed write cannot be cut off the segment, nothing may be appended
// behind it (a shorter later batch would leave the failed batch's tail to be
// read as records): every later commit fails with a clear error.
func TestUntruncatableJournalRefusesAppends(t *testing.T) {
	var failNext atomic.Bool
	failures := make(chan error, 8)
	opts := testOptions(t.TempDir(), func(o *Options) {
		noAutoCheckpoint(o)
		o.hooks.commit = func(int) error {
			if failNext.CompareAndSwap(true, false) {
				return errInjected
			}
			return nil
		}
		o.hooks.truncate = func(*os.File, int64) error { return errors.New("read-only file system") }
		o.OnFailure = func(err error) { failures <- err }
	})
	s := openStore(t, opts)
	defer s.Close()
	mustAppend(t, s, Put("b", []byte("k"), []byte("v")))
	failNext.Store(true)
	if err := waitTicket(t, s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte("lost"))}})); !errors.Is(err, errInjected) {
		t.Fatalf("failing commit: %v", err)
	}
	for range 2 {
		err := waitTicket(t, s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte("after"))}}))
		if !errors.Is(err, ErrCommitFailed) || !strings.Contains(err.Error(), "could not be truncated") {
			t.Fatalf("append behind an untruncatable failure: %v", err)
		}
	}
	if v, _ := mustGet(t, s, "b", "k"); v != "v" {
		t.Fatalf("k = %q", v)
	}
	if st := s.Stats(); st.Gen != 4 || st.Failures != 3 {
		t.Fatalf("stats: %+v", st)
	}
	for range 3 {
		select {
		case <-failures:
		case <-time.After(30 * time.Second):
			t.Fatal("OnFailure not called for every failed commit")
		}
	}
}
