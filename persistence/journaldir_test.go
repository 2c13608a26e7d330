package persistence

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// putN appends n records, one key each, to bucket "b".
func putN(t *testing.T, s *Store, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		mustAppend(t, s, Put("b", []byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("v%d", i))))
	}
}

// wantKeys checks that keys k000 .. k(n-1) read back.
func wantKeys(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		if v, ok := mustGet(t, s, "b", fmt.Sprintf("k%03d", i)); !ok || v != fmt.Sprintf("v%d", i) {
			t.Fatalf("k%03d = %q (present %v) after reopening", i, v, ok)
		}
	}
}

func withJournal(dir string, mods ...func(*Options)) func(*Options) {
	return func(o *Options) {
		o.JournalDir = dir
		for _, m := range mods {
			m(o)
		}
	}
}

func wantOpenError(t *testing.T, opts Options, parts ...string) {
	t.Helper()
	s, err := Open(opts)
	if err == nil {
		s.Close()
		t.Fatalf("Open with journal directory %q succeeded; want a refusal", opts.JournalDir)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

// A journal in a directory of its own takes the records and replays them
// after a stop that folded nothing; nothing is written beside the data file.
func TestJournalInItsOwnDirectory(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, "fast-disk", "journal")
	opts := testOptions(dir, withJournal(jdir, noAutoCheckpoint))
	s := openStore(t, opts)
	putN(t, s, 0, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if segs, _ := filepath.Glob(filepath.Join(jdir, "*.wal")); len(segs) == 0 {
		t.Fatalf("no segment in %s", jdir)
	}
	if _, err := os.Stat(journalDir(opts.Path)); !os.IsNotExist(err) {
		t.Fatalf("a journal directory beside the data file exists (%v)", err)
	}
	if n, _, err := recordsAfter(jdir, rawApplied(t, opts.Path)); err != nil || n != 5 {
		t.Fatalf("%d records to replay (%v), want 5", n, err)
	}
	s = openStore(t, opts)
	wantKeys(t, s, 5)
	s.Close()
}

// While the last journal holds records not yet folded, Open refuses any
// other directory, the default one included, and changes nothing; moving
// the files over is accepted.
func TestJournalMoveRefusedWhileRecordsUnfolded(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	opts := testOptions(dir, withJournal(a, noAutoCheckpoint))
	s := openStore(t, opts)
	putN(t, s, 0, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	wantOpenError(t, testOptions(dir, withJournal(b, noAutoCheckpoint)), "holds 3 records not yet folded", a, "set the journal directory back to")
	wantOpenError(t, testOptions(dir, noAutoCheckpoint), "holds 3 records not yet folded", a)
	if segs, _ := filepath.Glob(filepath.Join(b, "*.wal")); len(segs) != 0 {
		t.Fatalf("a refused open left segments in %s: %v", b, segs)
	}

	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, testOptions(dir, withJournal(b, noAutoCheckpoint)))
	wantKeys(t, s, 3)
	s.Close()
}

// Once every record is folded (a clean stop), the journal may move, and
// back beside the data file; a directory of the moves keeps working.
func TestJournalMoveAfterFolding(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	s := openStore(t, testOptions(dir, withJournal(a)))
	putN(t, s, 0, 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, testOptions(dir, withJournal(b, noAutoCheckpoint)))
	wantKeys(t, s, 4)
	putN(t, s, 4, 2) // left unfolded in b
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// b, not a, is now the journal: a is refused, b is not.
	wantOpenError(t, testOptions(dir, withJournal(a)), "holds 2 records not yet folded", b)
	s = openStore(t, testOptions(dir, withJournal(b)))
	wantKeys(t, s, 6)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, testOptions(dir, nil)) // beside the data file again
	wantKeys(t, s, 6)
	s.Close()
	if v := rawDump(t, filepath.Join(dir, "guard.db"))[metaBucket][string(journalDirKey)]; v != "" {
		t.Errorf("back beside the data file, the meta bucket still names %q", v)
	}
}

// A directory holding another data file's records after this one's last
// folded record is not its journal, while its own journal still exists.
func TestJournalDirOfAnotherStoreRefused(t *testing.T) {
	dir := t.TempDir()
	a, other := filepath.Join(dir, "a"), filepath.Join(dir, "other")
	s := openStore(t, testOptions(dir, withJournal(a)))
	putN(t, s, 0, 2)
	if err := s.Close(); err != nil { // folds: applied is 2
		t.Fatal(err)
	}
	o := openStore(t, Options{Path: filepath.Join(dir, "other.db"), JournalDir: other, InitialMmapSize: 1 << 20,
		hooks: &testHooks{noAutoCheckpoint: true}})
	putN(t, o, 0, 5) // LSNs 1 to 5, unfolded
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, testOptions(dir, withJournal(other)), "is not its journal", a)
	s = openStore(t, testOptions(dir, withJournal(a)))
	wantKeys(t, s, 2)
	if _, ok := mustGet(t, s, "b", "k004"); ok {
		t.Error("a record of the other store leaked in")
	}
	s.Close()
}

// Two open stores cannot share one journal directory: the second is
// refused while the first holds it, and may open once it is closed.
func TestJournalDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "journal")
	first := openStore(t, testOptions(dir, withJournal(shared)))
	second := Options{Path: filepath.Join(dir, "second.db"), JournalDir: shared, InitialMmapSize: 1 << 20}
	wantOpenError(t, second, "in use by another open store", shared)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, second) // a fresh data file, and nothing unfolded in shared
	s.Close()
}

// A new data file is refused a journal directory that already holds
// records: they are another data file's, which still needs them.
func TestNewDataFileRefusesAnotherJournal(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, "journal")
	s := openStore(t, testOptions(dir, withJournal(jdir, noAutoCheckpoint)))
	putN(t, s, 0, 3) // left unfolded: a crash, as far as the journal knows
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	newcomer := Options{Path: filepath.Join(dir, "new.db"), JournalDir: jdir, InitialMmapSize: 1 << 20}
	wantOpenError(t, newcomer, "holds 3 records, but the data file", "is new")
	s = openStore(t, testOptions(dir, withJournal(jdir)))
	wantKeys(t, s, 3)
	s.Close()
}

// A journal directory that is not the data file's journal (its disk not
// mounted, or the directory removed, leaving it empty) is refused, beside
// the data file or apart, until it is this journal again; writing the
// identity by hand, as the message says, starts a new journal.
func TestJournalWithoutItsIdentityRefused(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, "mnt", "journal")
	for _, tc := range []struct {
		name    string
		journal string
		opts    Options
	}{
		{"apart", jdir, testOptions(dir, withJournal(jdir, noAutoCheckpoint))},
		{"beside", journalDir(filepath.Join(dir, "beside.db")), Options{Path: filepath.Join(dir, "beside.db"), InitialMmapSize: 1 << 20,
			hooks: &testHooks{noAutoCheckpoint: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.opts)
			putN(t, s, 0, 3)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The disk did not mount: an empty directory in its place.
			if err := os.Rename(tc.journal, tc.journal+".unmounted"); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(tc.journal, 0o700); err != nil {
				t.Fatal(err)
			}
			wantOpenError(t, tc.opts, "is not the journal of", "is its disk mounted")
			// Mounted again: the journal and its records are back.
			if err := os.RemoveAll(tc.journal); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tc.journal+".unmounted", tc.journal); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, tc.opts)
			wantKeys(t, s, 3)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Lost for good: the operator writes the identity, as told.
			id, err := readStoreID(tc.journal)
			if err != nil || id == "" {
				t.Fatalf("identity %q, %v", id, err)
			}
			if err := os.RemoveAll(tc.journal); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(tc.journal, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tc.journal, storeIDName), []byte(id+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, tc.opts)
			s.Close()
		})
	}
}

// A journal directory naming another data file is refused even where the
// journal may otherwise move.
func TestJournalOfAnotherIdentityRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	s := openStore(t, testOptions(dir, withJournal(a)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeStoreID(b, newStoreID()); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, testOptions(dir, withJournal(b)), "belongs to another data file")
}

// After a crash, a start whose last journal directory is missing or empty
// (a disk that did not mount, a setting left out) is refused, even though
// the data file had folded everything when it was last checkpointed: a
// crashed service may have acknowledged records after that, and they
// would be only in the missing journal. After a clean stop, which folds
// every record, the same start is a safe move.
func TestJournalMoveAfterACrashNeedsTheLastJournal(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, noAutoCheckpoint)
	s := openStore(t, opts)
	putN(t, s, 0, 3)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "guard.db")
	copyStoreImage(t, s, crashed) // as a kill -9 would leave it
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	elsewhere := withJournal(filepath.Join(dir, "elsewhere"), noAutoCheckpoint)

	// The crashed image: its journal gone, then an empty directory in its
	// place.
	moveAway := func(t *testing.T) {
		if err := os.Rename(journalDir(crashed), journalDir(crashed)+".unmounted"); err != nil {
			t.Fatal(err)
		}
	}
	moveAway(t)
	crashedOpts := func(mod func(*Options)) Options {
		o := testOptions(filepath.Dir(crashed), mod)
		o.Path = crashed
		return o
	}
	wantOpenError(t, crashedOpts(elsewhere), journalDir(crashed), "is missing", "did not stop cleanly", "Nothing was changed")
	if err := os.MkdirAll(journalDir(crashed), 0o700); err != nil {
		t.Fatal(err)
	}
	wantOpenError(t, crashedOpts(elsewhere), "is not its journal", "is its disk mounted")
	if segs, _ := filepath.Glob(filepath.Join(dir, "elsewhere", "*.wal")); len(segs) != 0 {
		t.Fatalf("a refused open left segments: %v", segs)
	}
	// Mounted again, it vouches for itself: it holds nothing unfolded, so
	// the journal may move.
	if err := os.RemoveAll(journalDir(crashed)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(journalDir(crashed)+".unmounted", journalDir(crashed)); err != nil {
		t.Fatal(err)
	}
	c := openStore(t, crashedOpts(elsewhere))
	wantKeys(t, c, 3)
	c.Close()

	// The clean stop of the original: its journal may be gone.
	if err := os.RemoveAll(journalDir(opts.Path)); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, testOptions(dir, elsewhere))
	wantKeys(t, s, 3)
	s.Close()
}
