package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		opts  Options
		field string
	}{
		{Options{}, "Options.Path"},
		{Options{Path: "x", OpenTimeout: -1}, "Options.OpenTimeout"},
		{Options{Path: "x", InitialMmapSize: -1}, "Options.InitialMmapSize"},
		{Options{Path: "x", MaxBatch: -1}, "Options.MaxBatch"},
		{Options{Path: "x", MaxBatch: maxMaxBatch + 1}, "Options.MaxBatch"},
		{Options{Path: "x", CheckpointInterval: -1}, "Options.CheckpointInterval"},
		{Options{Path: "x", CheckpointRecords: -1}, "Options.CheckpointRecords"},
	}
	for _, c := range cases {
		err := c.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: err = %v, want mention of %s", c.opts, err, c.field)
		}
	}
	if err := (Options{Path: "x"}).Validate(); err != nil {
		t.Errorf("minimal options: %v", err)
	}
	if _, err := Open(Options{}); err == nil {
		t.Errorf("Open accepted options without a path")
	}
}

func TestOpenTimeoutOnLockedFile(t *testing.T) {
	opts := testOptions(t.TempDir(), nil)
	s := openStore(t, opts)
	defer s.Close()
	opts.OpenTimeout = 50 * time.Millisecond
	if s2, err := Open(opts); err == nil {
		s2.Close()
		t.Fatalf("second Open of a locked file succeeded")
	}
}

func TestAppendGetOverlayAndCheckpoint(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), noAutoCheckpoint))
	defer s.Close()

	if v, err := s.Get("acct", []byte("a")); v != nil || err != nil {
		t.Fatalf("Get on empty store = %q, %v", v, err)
	}
	mustAppend(t, s, Put("acct", []byte("a"), []byte("1")), Put("acct", []byte("b"), []byte("2")))
	mustAppend(t, s, Put("acct", []byte("empty"), nil), Put("hold", []byte("h"), []byte("x")))

	st := s.Stats()
	if st.Overlay != 4 || st.Pending != 2 || st.AppliedLSN != 0 || st.LastLSN != 2 {
		t.Fatalf("before checkpoint: %+v", st)
	}
	check := func(stage string) {
		t.Helper()
		for _, c := range []struct{ b, k, v string }{{"acct", "a", "1"}, {"acct", "b", "2"}, {"hold", "h", "x"}} {
			if v, ok := mustGet(t, s, c.b, c.k); !ok || v != c.v {
				t.Fatalf("%s: %s/%s = %q, %v", stage, c.b, c.k, v, ok)
			}
		}
		v, err := s.Get("acct", []byte("empty"))
		if err != nil || v == nil || len(v) != 0 {
			t.Fatalf("%s: empty value = %#v, %v; want present and empty", stage, v, err)
		}
	}
	check("overlay")

	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st = s.Stats()
	if st.Overlay != 0 || st.Pending != 0 || st.AppliedLSN != 2 || st.Checkpoints == 0 {
		t.Fatalf("after checkpoint: %+v", st)
	}
	check("buckets")

	// A tombstone in the overlay hides the checkpointed value; an overwrite
	// shadows it.
	mustAppend(t, s, Del("acct", []byte("a")), Put("acct", []byte("b"), []byte("22")))
	if _, ok := mustGet(t, s, "acct", "a"); ok {
		t.Fatalf("deleted key visible through tombstone")
	}
	if v, _ := mustGet(t, s, "acct", "b"); v != "22" {
		t.Fatalf("overwrite not visible: %q", v)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustGet(t, s, "acct", "a"); ok {
		t.Fatalf("deleted key visible after checkpoint")
	}
	if v, _ := mustGet(t, s, "acct", "b"); v != "22" {
		t.Fatalf("overwrite lost by checkpoint: %q", v)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestGetAndAppendCopy(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), noAutoCheckpoint))
	defer s.Close()
	key, val := []byte("k"), []byte("value")
	tk := s.Append(s.Gen(), Record{Ops: []Op{Put("b", key, val)}})
	copy(val, "XXXXX") // the caller may reuse its buffers once Append returns
	key[0] = 'z'
	if err := waitTicket(t, tk); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Get("b", []byte("k"))
	if string(v) != "value" {
		t.Fatalf("Get = %q; Append did not copy", v)
	}
	v[0] = 'X' // nor may the caller's copy alias the store's
	if v2, _ := mustGet(t, s, "b", "k"); v2 != "value" {
		t.Fatalf("Get returned an alias: %q", v2)
	}
}

func TestTicketBeforeResolution(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.hooks = &testHooks{noAutoCheckpoint: true, commit: func(int) error {
			entered <- struct{}{}
			<-release
			return nil
		}}
	}))
	defer s.Close()
	tk := s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte("v"))}})
	<-entered
	if tk.Err() == nil || tk.LSN() != 0 {
		t.Fatalf("unresolved ticket: Err = %v, LSN = %d", tk.Err(), tk.LSN())
	}
	select {
	case <-tk.Done():
		t.Fatalf("ticket done before its commit")
	default:
	}
	close(release)
	if err := waitTicket(t, tk); err != nil || tk.LSN() != 1 {
		t.Fatalf("resolved ticket: %v, LSN %d", err, tk.LSN())
	}
}

// TestDurableBeforeVisible holds a group commit inside its transaction and
// checks that readers do not see the batch until the commit has returned.
func TestDurableBeforeVisible(t *testing.T) {
	var block sync.Mutex
	blocking := false
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.hooks = &testHooks{noAutoCheckpoint: true, commit: func(int) error {
			block.Lock()
			b := blocking
			block.Unlock()
			if b {
				entered <- struct{}{}
				<-release
			}
			return nil
		}}
	}))
	defer s.Close()
	mustAppend(t, s, Put("b", []byte("k"), []byte("old")))
	block.Lock()
	blocking = true
	block.Unlock()
	tk := s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte("new")), Put("b", []byte("k2"), []byte("x"))}})
	<-entered
	if v, _ := mustGet(t, s, "b", "k"); v != "old" {
		t.Fatalf("uncommitted write visible: %q", v)
	}
	n := 0
	if err := s.Scan("b", nil, nil, false, func(k, v []byte) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("scan saw %d keys (%v); uncommitted write visible", n, err)
	}
	block.Lock()
	blocking = false
	block.Unlock()
	close(release)
	if err := waitTicket(t, tk); err != nil {
		t.Fatal(err)
	}
	if v, _ := mustGet(t, s, "b", "k"); v != "new" {
		t.Fatalf("committed write invisible after its ticket: %q", v)
	}
}

func TestOrdering(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) { o.MaxBatch = 16 }))
	defer s.Close()
	const writers, perWriter = 8, 200
	lsns := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tickets := make([]*Ticket, perWriter)
			for i := range perWriter {
				// Every writer overwrites the same key: the last value must
				// be the one appended last. Also one key per record.
				tickets[i] = s.Append(s.Gen(), Record{Ops: []Op{
					Put(fmt.Sprint("w", w), []byte("last"), []byte(fmt.Sprint(i))),
					Put(fmt.Sprint("w", w), []byte(fmt.Sprintf("seq/%04d", i)), nil),
				}})
			}
			for _, tk := range tickets {
				if err := waitTicket(t, tk); err != nil {
					t.Error(err)
					return
				}
				lsns[w] = append(lsns[w], tk.LSN())
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for w, l := range lsns {
		for i := range l {
			if i > 0 && l[i] <= l[i-1] {
				t.Fatalf("writer %d: LSN %d after %d", w, l[i], l[i-1])
			}
			if seen[l[i]] {
				t.Fatalf("LSN %d assigned twice", l[i])
			}
			seen[l[i]] = true
		}
		if v, _ := mustGet(t, s, fmt.Sprint("w", w), "last"); v != fmt.Sprint(perWriter-1) {
			t.Fatalf("writer %d: last = %s", w, v)
		}
	}
	for lsn := uint64(1); lsn <= writers*perWriter; lsn++ {
		if !seen[lsn] {
			t.Fatalf("LSN %d missing: LSNs are not contiguous", lsn)
		}
	}
}

func TestCloseFlushesAndIsIdempotent(t *testing.T) {
	opts := testOptions(t.TempDir(), func(o *Options) { o.MaxBatch = 7 })
	s := openStore(t, opts)
	const n = 1000
	tickets := make([]*Ticket, n)
	for i := range n {
		tickets[i] = s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte(fmt.Sprintf("%04d", i)), []byte(fmt.Sprint(i)))}})
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Close() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	for i, tk := range tickets {
		select {
		case <-tk.Done():
		default:
			t.Fatalf("ticket %d unresolved after Close", i)
		}
		if tk.Err() != nil {
			t.Fatalf("ticket %d: %v", i, tk.Err())
		}
	}
	raw := rawDump(t, opts.Path)
	if u := unfolded(t, opts.Path); u != 0 || len(raw["b"]) != n || raw[journalBucket] != nil {
		t.Fatalf("after Close: %d unfolded journal records, %d keys, journal bucket %v", u, len(raw["b"]), raw[journalBucket])
	}
	if got := raw[metaBucket][string(appliedKey)]; got != string(lsnKey(n)) {
		t.Fatalf("applied_lsn = %x", got)
	}
	// Everything refuses politely after Close.
	if err := waitTicket(t, s.Append(s.Gen(), Record{})); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := s.Get("b", []byte("0001")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := s.Scan("b", nil, nil, false, func(k, v []byte) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Scan after Close: %v", err)
	}
	if err := s.Checkpoint(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Checkpoint after Close: %v", err)
	}
	if err := s.Check(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Check after Close: %v", err)
	}
}

func TestInvalidRecordRejected(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), nil))
	defer s.Close()
	tk := s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), nil), Put("meta", []byte("k"), nil)}})
	if err := waitTicket(t, tk); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("err = %v", err)
	}
	if _, ok := mustGet(t, s, "b", "k"); ok {
		t.Fatalf("part of an invalid record was applied")
	}
	if s.Gen() != 1 {
		t.Fatalf("invalid record changed the generation")
	}
	// The reserved buckets are not readable either.
	if _, err := s.Get("meta", appliedKey); err == nil {
		t.Fatalf("Get on the meta bucket succeeded")
	}
	if err := s.Scan("journal", nil, nil, false, func(k, v []byte) bool { return true }); err == nil {
		t.Fatalf("Scan of the journal succeeded")
	}
}

// TestBackPressure fills the queue while a commit is held and checks that
// the blocked appender proceeds, in order, once the committer moves on.
func TestBackPressure(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.MaxBatch = 1 // queue capacity 4
		o.hooks = &testHooks{noAutoCheckpoint: true, commit: func(int) error {
			once.Do(func() { entered <- struct{}{}; <-release })
			return nil
		}}
	}))
	defer s.Close()
	put := func(i int) *Ticket {
		return s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte(fmt.Sprint(i)))}})
	}
	first := put(0)
	<-entered
	var queued []*Ticket
	for i := 1; i <= s.maxQueued; i++ {
		queued = append(queued, put(i))
	}
	blocked := make(chan *Ticket)
	go func() { blocked <- put(s.maxQueued + 1) }()
	close(release)
	last := <-blocked
	for _, tk := range append(append([]*Ticket{first}, queued...), last) {
		if err := waitTicket(t, tk); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := mustGet(t, s, "b", "k"); v != fmt.Sprint(s.maxQueued+1) {
		t.Fatalf("final value %s", v)
	}
	if last.LSN() != uint64(s.maxQueued+2) {
		t.Fatalf("blocked appender got LSN %d", last.LSN())
	}
}

func TestAutomaticCheckpointBySize(t *testing.T) {
	const threshold = 50
	folded := make(chan uint64, 4096) // more than the folds 2400 records can take
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.CheckpointInterval = time.Hour
		o.CheckpointRecords = threshold
		o.MaxBatch = 8
		o.hooks = &testHooks{trimmed: func(applied uint64) {
			select {
			case folded <- applied:
			default:
			}
		}}
	}))
	defer s.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := []byte(fmt.Sprintf("%d/%d", w, i%40))
				if err := waitTicket(t, s.Append(s.Gen(), Record{Ops: []Op{Put("b", k, k)}})); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// The checkpointer runs beside the committer: once the appenders stop
	// it catches up, without a timer (an hour) or a Checkpoint call, until
	// at most threshold records await folding.
	last := s.Stats().LastLSN
	for {
		select {
		case applied := <-folded:
			if last-applied <= threshold {
				if st := s.Stats(); st.Checkpoints == 0 || st.Overlay > 2*threshold {
					t.Fatalf("after size-triggered checkpoints: %+v", st)
				}
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("backlog never folded below the threshold: %+v", s.Stats())
		}
	}
}

func TestAutomaticCheckpointByTimer(t *testing.T) {
	ran := make(chan struct{}, 1)
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.CheckpointInterval = 5 * time.Millisecond
		o.hooks = &testHooks{checkpoint: func() error {
			select {
			case ran <- struct{}{}:
			default:
			}
			return nil
		}}
	}))
	defer s.Close()
	mustAppend(t, s, Put("b", []byte("k"), []byte("v")))
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatalf("timer checkpoint never ran")
	}
}

func TestRecoveryReplaysJournal(t *testing.T) {
	opts := testOptions(t.TempDir(), noAutoCheckpoint)
	s := openStore(t, opts)
	mustAppend(t, s, Put("b", []byte("gone"), []byte("x")))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint("k", i)), []byte(fmt.Sprint(i))), Put("c", []byte("n"), []byte(fmt.Sprint(i))))
	}
	mustAppend(t, s, Del("b", []byte("gone")))
	before := dumpStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDump(t, opts.Path)
	if u := unfolded(t, opts.Path); u != 21 || len(raw["b"]) != 1 || raw["b"]["gone"] != "x" {
		t.Fatalf("without checkpoint expected 21 journal records and only the first key folded: journal %d, b %v",
			u, raw["b"])
	}

	opts.hooks = &testHooks{noAutoCheckpoint: true, chunkRecords: 4} // replay in several chunks
	s = openStore(t, opts)
	if d := diffDumps(before, dumpStore(t, s)); d != "" {
		t.Fatalf("state after replay differs: %s", d)
	}
	if st := s.Stats(); st.Overlay != 0 || st.AppliedLSN != 22 || st.LastLSN != 22 {
		t.Fatalf("after replay: %+v", st)
	}
	// New LSNs continue after the replayed ones.
	if tk := mustAppend(t, s, Put("b", []byte("new"), nil)); tk.LSN() != 23 {
		t.Fatalf("LSN after replay = %d", tk.LSN())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw = rawDump(t, opts.Path)
	if u := unfolded(t, opts.Path); u != 1 {
		t.Fatalf("journal after replay holds %d unfolded records, want only the new one", u)
	}
	// The key appended after the replay is still only in the journal.
	if d := diffDumps(before, entityOnly(raw)); d != "" {
		t.Fatalf("buckets after replay differ: %s", d)
	}
}

// TestRecoveryFromCrashImage copies the file while the store is running with
// un-checkpointed records (a consistent image, as a crash would leave it)
// and opens the copy.
func TestRecoveryFromCrashImage(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, testOptions(dir, noAutoCheckpoint))
	defer s.Close()
	for i := range 50 {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint(i%7)), []byte(fmt.Sprint(i))), Del("b", []byte(fmt.Sprint((i+3)%7))))
		if i == 20 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := dumpStore(t, s)
	image := dir + "/image.db"
	copyStoreImage(t, s, image)
	wantRecovered(t, image, want)
}

func TestReopenSameState(t *testing.T) {
	opts := testOptions(t.TempDir(), func(o *Options) {
		o.CheckpointRecords = 30
		o.CheckpointInterval = time.Hour
	})
	s := openStore(t, opts)
	var tickets []*Ticket
	for i := range 500 {
		k := []byte{byte(i % 61), byte(i % 7)}
		var op Op
		switch i % 5 {
		case 0:
			op = Del("b", k)
		case 1:
			op = Put("c", k, bytes.Repeat([]byte{byte(i)}, i%13))
		default:
			op = Put("b", k, []byte(fmt.Sprint(i)))
		}
		tickets = append(tickets, s.Append(s.Gen(), Record{Ops: []Op{op}}))
	}
	for _, tk := range tickets {
		if err := waitTicket(t, tk); err != nil {
			t.Fatal(err)
		}
	}
	before := dumpStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw1 := rawDump(t, opts.Path)
	if d := diffDumps(before, entityOnly(raw1)); d != "" {
		t.Fatalf("file after Close differs from the live view: %s", d)
	}
	s = openStore(t, opts)
	if d := diffDumps(before, dumpStore(t, s)); d != "" {
		t.Fatalf("state after reopen differs: %s", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := diffDumps(raw1, rawDump(t, opts.Path)); d != "" {
		t.Fatalf("file changed across an idle reopen: %s", d)
	}
}

// TestOrderAcrossGoroutines: when one Append returns before another starts,
// the first record commits first, even though neither waits for the disk.
func TestOrderAcrossGoroutines(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) { o.MaxBatch = 3 }))
	defer s.Close()
	const rounds = 200
	turn := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	tickets := make([]*Ticket, 2*rounds)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				<-turn[g]
				n := 2*i + g
				tickets[n] = s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte(fmt.Sprint(n)))}})
				turn[1-g] <- struct{}{}
			}
		}()
	}
	turn[0] <- struct{}{}
	wg.Wait()
	for n, tk := range tickets {
		if err := waitTicket(t, tk); err != nil {
			t.Fatal(err)
		}
		if n > 0 && tk.LSN() != tickets[n-1].LSN()+1 {
			t.Fatalf("record %d got LSN %d after %d", n, tk.LSN(), tickets[n-1].LSN())
		}
	}
	if v, _ := mustGet(t, s, "b", "k"); v != fmt.Sprint(2*rounds-1) {
		t.Fatalf("last writer lost: %s", v)
	}
}

// TestCommitDurations checks the distribution of commit durations: every
// successful group commit is in it and no failed one, each duration covers
// the whole commit (the hook runs between the write and the fdatasync and
// holds every batch), and a copy does not move with later commits.
func TestCommitDurations(t *testing.T) {
	const hold = 3 * time.Millisecond
	calls := 0 // only the committer calls the hook
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.hooks = &testHooks{noAutoCheckpoint: true, commit: func(int) error {
			calls++
			if calls == 3 {
				return errors.New("injected: disk full")
			}
			time.Sleep(hold)
			return nil
		}}
	}))
	defer s.Close()
	if d := s.CommitDurations(); d.Count() != 0 {
		t.Fatalf("a new store reports %d commits", d.Count())
	}
	for i := range 5 {
		tk := s.Append(s.Gen(), Record{Ops: []Op{Put("b", fmt.Appendf(nil, "k%d", i), []byte("v"))}})
		if err := waitTicket(t, tk); (err != nil) != (i == 2) {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	d, st := s.CommitDurations(), s.Stats()
	if st.Commits != 4 || st.Failures != 1 || d.Count() != st.Commits {
		t.Fatalf("%d durations for %d commits and %d failures, want 4, 4 and 1", d.Count(), st.Commits, st.Failures)
	}
	if d.Min() < hold || d.Sum() < 4*hold {
		t.Errorf("durations from %v, %v in all: shorter than the %v each commit was held", d.Min(), d.Sum(), hold)
	}
	mustAppend(t, s, Put("b", []byte("later"), []byte("v")))
	if d.Count() != 4 {
		t.Errorf("the copy moved with a later commit: %d durations", d.Count())
	}
	// A window's extremes are bucket bounds, within 1% of the values.
	if w := s.CommitDurations().Since(d); w.Count() != 1 || w.Min() < hold*99/100 {
		t.Errorf("the window after the copy: %d durations from %v, want one of about %v or more", w.Count(), w.Min(), hold)
	}
}

// A store another process holds is refused after OpenTimeout with a
// message that says what to do, not a bare "timeout".
func TestOpenHeldStoreSaysWhy(t *testing.T) {
	dir := t.TempDir()
	held := openStore(t, testOptions(dir, nil))
	defer held.Close()
	_, err := Open(testOptions(dir, func(o *Options) { o.OpenTimeout = 50 * time.Millisecond }))
	if err == nil || !strings.Contains(err.Error(), "is a server already running on this data directory?") {
		t.Fatalf("opening a held store: %v", err)
	}
}

// A new file gets filePageSize pages; a file made with bbolt's default 4 KiB
// pages, as files were before, keeps them and its data.
func TestPageSizeOfNewAndExistingFiles(t *testing.T) {
	fresh := testOptions(t.TempDir(), nil)
	s := openStore(t, fresh)
	if got := s.db.Info().PageSize; got != filePageSize {
		t.Errorf("new file: page size %d, want %d", got, filePageSize)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	old := testOptions(t.TempDir(), nil)
	db, err := bolt.Open(old.Path, 0o600, &bolt.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, old)
	mustAppend(t, s, Put("spends", []byte("spd_1"), []byte("kept")))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, old)
	defer s.Close()
	if got := s.db.Info().PageSize; got != 4096 {
		t.Errorf("existing file: page size %d, want the 4096 it was made with", got)
	}
	if v, ok := mustGet(t, s, "spends", "spd_1"); !ok || v != "kept" {
		t.Errorf("existing file: spd_1 = %q, %v after a close and reopen", v, ok)
	}
}
