package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var errInjected = errors.New("injected disk failure")

func TestCommitFailure(t *testing.T) {
	var failNext atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	failures := make(chan error, 4)
	reentered := make(chan error, 4)
	opts := testOptions(t.TempDir(), nil)
	opts.MaxBatch = 4
	opts.hooks = &testHooks{noAutoCheckpoint: true, commit: func(int) error {
		if failNext.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
			return errInjected
		}
		return nil
	}}
	var s *Store
	opts.OnFailure = func(err error) {
		failures <- err
		// The callback runs outside every store lock: it may use the store,
		// even append at the new generation and wait for the disk.
		reentered <- waitTicket(t, s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("from-callback"), []byte("ok"))}}))
	}
	s = openStore(t, opts)

	mustAppend(t, s, Put("b", []byte("k"), []byte("checkpointed")), Put("b", []byte("gone"), []byte("x")))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Put("b", []byte("k"), []byte("v0")))
	lastGood := s.Stats().LastLSN

	gen := s.Gen()
	failNext.Store(true)
	batch := s.Append(gen, Record{Ops: []Op{Put("b", []byte("k"), []byte("failed")), Put("b", []byte("failed/batch"), nil)}})
	<-entered // the batch is inside its transaction
	var queued []*Ticket
	for i := range 10 {
		queued = append(queued, s.Append(gen, Record{Ops: []Op{
			Put("b", []byte(fmt.Sprint("failed/queued/", i)), nil), Del("b", []byte("gone")),
		}}))
	}
	close(release)

	if err := waitTicket(t, batch); !errors.Is(err, ErrCommitFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("batch ticket: %v", err)
	}
	if batch.LSN() != 0 {
		t.Fatalf("failed ticket has LSN %d", batch.LSN())
	}
	for i, tk := range queued {
		if err := waitTicket(t, tk); !errors.Is(err, ErrCommitFailed) {
			t.Fatalf("queued ticket %d: %v", i, err)
		}
	}
	if s.Gen() != gen+1 {
		t.Fatalf("Gen = %d, want %d", s.Gen(), gen+1)
	}
	select {
	case err := <-failures:
		if !errors.Is(err, ErrCommitFailed) {
			t.Fatalf("OnFailure got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("OnFailure not called")
	}
	if err := <-reentered; err != nil {
		t.Fatalf("append from OnFailure: %v", err)
	}

	// Stale generation: refused at once, never written.
	stale := s.Append(gen, Record{Ops: []Op{Put("b", []byte("failed/stale"), nil)}})
	select {
	case <-stale.Done():
	default:
		t.Fatalf("stale append not resolved at once")
	}
	if !errors.Is(stale.Err(), ErrStaleGeneration) {
		t.Fatalf("stale append: %v", stale.Err())
	}

	// Nothing of the failed batch or the queue behind it is visible.
	if v, _ := mustGet(t, s, "b", "k"); v != "v0" {
		t.Fatalf("k = %q after failure", v)
	}
	if v, _ := mustGet(t, s, "b", "gone"); v != "x" {
		t.Fatalf("delete from a failed record applied: %q", v)
	}
	assertNoFailed := func(d dump) {
		t.Helper()
		for k := range d["b"] {
			if strings.HasPrefix(k, "failed") {
				t.Fatalf("failed record visible: %q", k)
			}
		}
	}
	assertNoFailed(dumpStore(t, s))

	// The disk "recovered": the new generation commits, reusing the LSNs
	// the failed batch never took.
	ok := mustAppend(t, s, Put("b", []byte("k"), []byte("v2")))
	if ok.LSN() != lastGood+2 { // +1 was taken by the callback's record
		t.Fatalf("LSN after failure = %d, want %d", ok.LSN(), lastGood+2)
	}
	st := s.Stats()
	if st.Failures != 1 || st.FailedRecords != 11 || st.Gen != gen+1 {
		t.Fatalf("stats: %+v", st)
	}
	want := dumpStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDump(t, opts.Path)
	// The failed batch was truncated away, not merely overwritten.
	if _, data := rawJournal(t, opts.Path); bytes.Contains(data, []byte("failed")) {
		t.Fatalf("failed record in the journal files")
	}
	assertNoFailed(entityOnly(raw))

	opts.hooks, opts.OnFailure = nil, nil
	s = openStore(t, opts)
	defer s.Close()
	got := dumpStore(t, s)
	assertNoFailed(got)
	if d := diffDumps(want, got); d != "" {
		t.Fatalf("state after reopen differs: %s", d)
	}
	if s.Gen() != 1 {
		t.Fatalf("a new process starts at generation 1, got %d", s.Gen())
	}
}

func TestCheckpointFailure(t *testing.T) {
	var fail atomic.Bool
	opts := testOptions(t.TempDir(), nil)
	opts.hooks = &testHooks{noAutoCheckpoint: true, checkpoint: func() error {
		if fail.Load() {
			return errInjected
		}
		return nil
	}}
	s := openStore(t, opts)
	for i := range 10 {
		mustAppend(t, s, Put("b", []byte(fmt.Sprint(i)), []byte("v")))
	}
	fail.Store(true)
	if err := s.Checkpoint(); !errors.Is(err, errInjected) {
		t.Fatalf("Checkpoint: %v", err)
	}
	st := s.Stats()
	if st.CheckpointErrors != 1 || st.Pending != 10 || st.Gen != 1 {
		t.Fatalf("after failed checkpoint: %+v", st)
	}
	// Records stay durable and visible; appends go on.
	mustAppend(t, s, Put("b", []byte("after"), []byte("v")))
	if _, ok := mustGet(t, s, "b", "3"); !ok {
		t.Fatalf("record lost by a failed checkpoint")
	}
	fail.Store(false)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Pending != 0 || st.Overlay != 0 {
		t.Fatalf("after checkpoint: %+v", st)
	}
	want := dumpStore(t, s)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A failing final checkpoint makes Close report it, and loses nothing.
	opts.hooks = &testHooks{checkpoint: opts.hooks.checkpoint}
	opts.CheckpointInterval = time.Hour
	fail.Store(true)
	s = openStore(t, opts)
	mustAppend(t, s, Put("b", []byte("last"), []byte("v")))
	want["b"]["last"] = "v"
	if err := s.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close with failing checkpoint: %v", err)
	}
	opts.hooks = nil
	s = openStore(t, opts)
	defer s.Close()
	if d := diffDumps(want, dumpStore(t, s)); d != "" {
		t.Fatalf("state after reopen differs: %s", d)
	}
}
