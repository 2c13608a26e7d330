package persistence

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every test closes its stores; a goroutine left behind (committer,
	// OnFailure callback) is a bug.
	goleak.VerifyTestMain(m)
}

// testOptions returns options for a store in dir with a small mmap (tests
// open many stores) and applies mod.
func testOptions(dir string, mod func(*Options)) Options {
	o := Options{
		Path:            filepath.Join(dir, "guard.db"),
		InitialMmapSize: 1 << 20,
	}
	if mod != nil {
		mod(&o)
	}
	return o
}

func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// noAutoCheckpoint is an option modifier that keeps records in the journal.
func noAutoCheckpoint(o *Options) {
	if o.hooks == nil {
		o.hooks = &testHooks{}
	}
	o.hooks.noAutoCheckpoint = true
}

// waitTicket waits for t with a generous timeout so that a hang fails the
// test instead of the whole run.
func waitTicket(t testing.TB, tk *Ticket) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := tk.Wait(ctx)
	if err == context.DeadlineExceeded {
		t.Fatalf("ticket did not resolve")
	}
	return err
}

func mustAppend(t testing.TB, s *Store, ops ...Op) *Ticket {
	t.Helper()
	tk := s.Append(s.Gen(), Record{Ops: ops})
	if err := waitTicket(t, tk); err != nil {
		t.Fatalf("append: %v", err)
	}
	return tk
}

func mustGet(t testing.TB, s *Store, bucket, key string) (string, bool) {
	t.Helper()
	v, err := s.Get(bucket, []byte(key))
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", bucket, key, err)
	}
	return string(v), v != nil
}

type dump map[string]map[string]string

// dumpStore reads every entity bucket through the store's read path
// (overlay merged with buckets).
func dumpStore(t testing.TB, s *Store) dump {
	t.Helper()
	names := map[string]bool{}
	s.ov.mu.RLock()
	for _, g := range s.ov.gens {
		for name := range g.buckets {
			names[name] = true
		}
	}
	s.ov.mu.RUnlock()
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if n := string(name); n != journalBucket && n != metaBucket {
				names[n] = true
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	out := dump{}
	for name := range names {
		m := map[string]string{}
		if err := s.Scan(name, nil, nil, false, func(k, v []byte) bool {
			m[string(k)] = string(v)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			out[name] = m
		}
	}
	return out
}

// rawDump reads every bucket of a closed store's file directly, journal and
// meta included.
func rawDump(t testing.TB, path string) dump {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("raw open: %v", err)
	}
	defer db.Close()
	out := dump{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			m := map[string]string{}
			if err := b.ForEach(func(k, v []byte) error {
				m[string(k)] = string(v)
				return nil
			}); err != nil {
				return err
			}
			out[string(name)] = m
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// entityOnly drops the reserved buckets and empty buckets from a raw dump.
func entityOnly(d dump) dump {
	out := dump{}
	for name, m := range d {
		if name != journalBucket && name != metaBucket && len(m) > 0 {
			out[name] = m
		}
	}
	return out
}

func diffDumps(a, b dump) string {
	var diffs []string
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	for n := range names {
		keys := map[string]bool{}
		for k := range a[n] {
			keys[k] = true
		}
		for k := range b[n] {
			keys[k] = true
		}
		for k := range keys {
			av, aok := a[n][k]
			bv, bok := b[n][k]
			if aok != bok || av != bv {
				diffs = append(diffs, fmt.Sprintf("%s/%q: %v %q vs %v %q", n, k, aok, av, bok, bv))
			}
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}

// rawJournal reads the journal files of a closed store (or a copy) and
// returns every frame in them, in file and LSN order, and their raw bytes.
func rawJournal(t testing.TB, path string) ([]frame, []byte) {
	t.Helper()
	dir := journalDir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("journal directory: %v", err)
	}
	var frames []frame
	var all []byte
	for _, e := range entries { // ReadDir sorts by name, which is LSN order
		if !segmentName.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var first uint64
		if _, err := fmt.Sscanf(e.Name(), "%016x.wal", &first); err != nil {
			t.Fatal(err)
		}
		fs, end, err := parseSegment(data, first)
		if err != nil && !allZero(data[end:]) { // zeros: written ahead (spare.go)
			t.Fatalf("segment %s: %v", e.Name(), err)
		}
		frames = append(frames, fs...)
		all = append(all, data[:end]...)
	}
	return frames, all
}

// unfolded counts the journal records of a closed store after its
// applied_lsn: those a reopen has to replay.
func unfolded(t testing.TB, path string) int {
	t.Helper()
	applied := rawApplied(t, path)
	frames, _ := rawJournal(t, path)
	n := 0
	for _, f := range frames {
		if f.lsn > applied {
			n++
		}
	}
	return n
}

func rawApplied(t testing.TB, path string) uint64 {
	t.Helper()
	v := rawDump(t, path)[metaBucket][string(appliedKey)]
	if v == "" {
		return 0
	}
	return binary.BigEndian.Uint64([]byte(v))
}

// segmentFiles lists the journal's segment files, oldest first.
func segmentFiles(t testing.TB, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(journalDir(path), "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// copyStoreImage copies a store's bbolt file and journal files (segments and
// the data file's identity) to dst while the store runs, as a crash would
// leave them: bbolt first, so the journal copy holds everything after the
// copied applied_lsn (no checkpoint may delete segments meanwhile).
func copyStoreImage(t testing.TB, s *Store, dst string) {
	t.Helper()
	if err := s.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(dst, 0o600) }); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(journalDir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(segmentFiles(t, s.opts.Path), filepath.Join(journalDir(s.opts.Path), storeIDName)) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(journalDir(dst), filepath.Base(p)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// wantRecovered opens the crash image at image and checks that it
// recovers to the dump want and passes Check.
func wantRecovered(t *testing.T, image string, want dump) {
	t.Helper()
	s := openStore(t, Options{Path: image, InitialMmapSize: 1 << 20})
	defer s.Close()
	if d := diffDumps(want, dumpStore(t, s)); d != "" {
		t.Fatalf("crash image recovered to a different state: %s", d)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}
