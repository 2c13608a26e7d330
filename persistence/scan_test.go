package persistence

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// expectScan computes a scan's result from a model bucket.
func expectScan(m map[string]string, prefix, from []byte, reverse bool) []string {
	var keys []string
	for k := range m {
		if !strings.HasPrefix(k, string(prefix)) {
			continue
		}
		if from != nil && (!reverse && k < string(from) || reverse && k > string(from)) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if reverse {
		slices.Reverse(keys)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return out
}

func scanAll(t testing.TB, s *Store, bucket string, prefix, from []byte, reverse bool) []string {
	t.Helper()
	var out []string
	if err := s.Scan(bucket, prefix, from, reverse, func(k, v []byte) bool {
		out = append(out, string(k)+"="+string(v))
		return true
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

// TestScanMerge builds a bucket whose keys live partly in the entity bucket
// and partly in the overlay (new keys, overwrites, tombstones), with keys at
// the awkward edges of prefix ranges (0x00, 0xff), and compares every
// combination of prefix, from and direction with the model.
func TestScanMerge(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), noAutoCheckpoint))
	defer s.Close()
	model := map[string]string{}
	alphabet := []string{"a", "b", "\x00", "\xff"}
	var keys []string
	for _, x := range alphabet {
		keys = append(keys, x)
		for _, y := range alphabet {
			keys = append(keys, x+y)
		}
	}
	put := func(k, v string) Op { model[k] = v; return Put("s", []byte(k), []byte(v)) }
	del := func(k string) Op { delete(model, k); return Del("s", []byte(k)) }

	// Checkpointed layer: every other key.
	var ops []Op
	for i, k := range keys {
		if i%2 == 0 {
			ops = append(ops, put(k, "old"))
		}
	}
	mustAppend(t, s, ops...)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// Overlay layer: new keys between them, overwrites and tombstones.
	ops = nil
	for i, k := range keys {
		switch i % 6 {
		case 0:
			ops = append(ops, put(k, "new"))
		case 2:
			ops = append(ops, del(k))
		case 3, 5:
			ops = append(ops, put(k, "added"))
		}
	}
	ops = append(ops, del("not-there"))
	mustAppend(t, s, ops...)
	if s.Stats().Overlay == 0 {
		t.Fatal("overlay unexpectedly empty")
	}

	check := func(stage string) {
		t.Helper()
		probes := [][]byte{nil, {}, []byte("a"), []byte("b"), []byte("\x00"), []byte("\xff"), []byte("a\xff"), []byte("\xff\xff"), []byte("c")}
		froms := append(slices.Clone(probes), []byte("a\x00\x00"), []byte("\xff\xff\xff"), []byte("0"))
		for _, prefix := range probes {
			for _, from := range froms {
				for _, reverse := range []bool{false, true} {
					want := expectScan(model, prefix, from, reverse)
					got := scanAll(t, s, "s", prefix, from, reverse)
					if !slices.Equal(want, got) {
						t.Fatalf("%s: Scan(prefix %q, from %q, reverse %v)\n got %q\nwant %q", stage, prefix, from, reverse, got, want)
					}
				}
			}
		}
	}
	check("overlay over buckets")
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	check("all checkpointed")
	if got := scanAll(t, s, "missing", nil, nil, false); len(got) != 0 {
		t.Fatalf("scan of a missing bucket: %q", got)
	}
}

// TestScanLarge crosses the bucket read chunk size several times, with the
// overlay hiding and adding keys throughout, and stops early.
func TestScanLarge(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), noAutoCheckpoint))
	defer s.Close()
	model := map[string]string{}
	var ops []Op
	for i := range 3 * scanChunk {
		k := fmt.Sprintf("k%05d", 2*i)
		model[k] = "c"
		ops = append(ops, Put("s", []byte(k), []byte("c")))
	}
	mustAppend(t, s, ops...)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ops = nil
	for i := range 3 * scanChunk {
		if i%3 == 0 {
			k := fmt.Sprintf("k%05d", 2*i)
			delete(model, k)
			ops = append(ops, Del("s", []byte(k)))
		}
		if i%5 == 0 {
			k := fmt.Sprintf("k%05d", 2*i+1)
			model[k] = "o"
			ops = append(ops, Put("s", []byte(k), []byte("o")))
		}
	}
	mustAppend(t, s, ops...)
	for _, reverse := range []bool{false, true} {
		want := expectScan(model, []byte("k"), nil, reverse)
		if got := scanAll(t, s, "s", []byte("k"), nil, reverse); !slices.Equal(want, got) {
			t.Fatalf("reverse=%v: %d keys, want %d", reverse, len(got), len(want))
		}
		// Page through with early stops, resuming from the last key seen.
		var got []string
		var from []byte
		for {
			n := 0
			var last []byte
			err := s.Scan("s", []byte("k"), from, reverse, func(k, v []byte) bool {
				if from != nil && bytes.Equal(k, from) {
					return true // resume point, already seen
				}
				got = append(got, string(k)+"="+string(v))
				last = k
				n++
				return n < 97
			})
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			from = last
		}
		if !slices.Equal(want, got) {
			t.Fatalf("paged reverse=%v: %d keys, want %d", reverse, len(got), len(want))
		}
	}
}

func TestScanCallbackMayUseStore(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), nil))
	defer s.Close()
	for i := range 600 {
		mustAppend(t, s, Put("s", []byte(fmt.Sprintf("%04d", i)), []byte("v")))
	}
	n := 0
	err := s.Scan("s", nil, nil, false, func(k, v []byte) bool {
		if _, err := s.Get("s", k); err != nil {
			t.Error(err)
		}
		if n%100 == 0 {
			if err := waitTicket(t, s.Append(s.Gen(), Record{Ops: []Op{Put("other", k, v)}})); err != nil {
				t.Error(err)
			}
			if err := s.Checkpoint(); err != nil {
				t.Error(err)
			}
		}
		v[0] = 'X' // the copy is the callback's to keep and modify
		n++
		return true
	})
	if err != nil || n != 600 {
		t.Fatalf("Scan: %v after %d keys", err, n)
	}
	if v, _ := mustGet(t, s, "s", "0000"); v != "v" {
		t.Fatalf("callback modification leaked into the store: %q", v)
	}
}

// TestScanDuringCheckpoints checks the scan guarantee while records move
// from the overlay into the bucket underneath it: keys that exist for the
// whole scan are each visited exactly once, in order.
func TestScanDuringCheckpoints(t *testing.T) {
	s := openStore(t, testOptions(t.TempDir(), func(o *Options) {
		o.CheckpointRecords = 5
		o.hooks = &testHooks{chunkRecords: 3}
	}))
	defer s.Close()
	const n = 700
	for i := 0; i < n; i += 50 {
		var ops []Op
		for j := i; j < i+50; j++ {
			ops = append(ops, Put("s", []byte(fmt.Sprintf("%04d", j)), []byte("0")))
		}
		mustAppend(t, s, ops...)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; !stop.Load(); round++ {
			// Overwrite every key, one small record at a time, so that the
			// size trigger keeps checkpointing.
			for i := 0; i < n && !stop.Load(); i += 7 {
				if err := waitTicket(t, s.Append(s.Gen(), Record{Ops: []Op{Put("s", []byte(fmt.Sprintf("%04d", i)), []byte(fmt.Sprint(round)))}})); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for range 30 {
		for _, reverse := range []bool{false, true} {
			var keys []string
			if err := s.Scan("s", nil, nil, reverse, func(k, v []byte) bool {
				keys = append(keys, string(k))
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if len(keys) != n {
				t.Fatalf("scan saw %d keys, want %d", len(keys), n)
			}
			for i, k := range keys {
				want := i
				if reverse {
					want = n - 1 - i
				}
				if k != fmt.Sprintf("%04d", want) {
					t.Fatalf("position %d: key %q", i, k)
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if s.Stats().Checkpoints == 0 {
		t.Fatalf("no checkpoint ran during the scans")
	}
}

// TestScanCheckpointInGap folds the overlay into the bucket exactly between
// the two halves of a scan: the keys must be seen once, from one side or the
// other.
func TestScanCheckpointInGap(t *testing.T) {
	var s *Store
	var gaps atomic.Int32
	opts := testOptions(t.TempDir(), nil)
	opts.hooks = &testHooks{noAutoCheckpoint: true, scanGap: func() {
		if gaps.Add(1) == 1 {
			if err := s.Checkpoint(); err != nil {
				t.Error(err)
			}
		}
	}}
	s = openStore(t, opts)
	defer s.Close()
	mustAppend(t, s, Put("s", []byte("a"), []byte("1")), Put("s", []byte("c"), []byte("1")))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Put("s", []byte("b"), []byte("2")), Put("s", []byte("c"), []byte("2")), Del("s", []byte("a")))
	want := []string{"b=2", "c=2"}
	if got := scanAll(t, s, "s", nil, nil, false); !slices.Equal(got, want) {
		t.Fatalf("scan across a checkpoint: %q, want %q", got, want)
	}
	if s.Stats().Overlay != 0 {
		t.Fatalf("the checkpoint in the gap did not run")
	}
	if got := scanAll(t, s, "s", nil, nil, false); !slices.Equal(got, want) {
		t.Fatalf("scan after the checkpoint: %q, want %q", got, want)
	}
}
