package persistence

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func encOps(ops ...Op) []byte { return EncodeRecord(Record{Ops: ops}) }

// genWrites lists what folding g writes, in the order it writes it.
func genWrites(g *ovGen) []Op {
	var out []Op
	_ = g.walk(func(bucket string, _ bool, n *ovNode) error {
		op := Op{Bucket: bucket, Key: []byte(n.key), Delete: n.del}
		if !n.del {
			op.Value = n.val
		}
		out = append(out, op)
		return nil
	})
	return out
}

// A checkpoint applies only the last write of each key of its generation,
// in bucket and key order; the buckets end in the state the records,
// applied one by one, would have left.
func TestGenerationFoldsTheLastWriteOfEachKeyInOrder(t *testing.T) {
	recs := []pendingRec{
		{lsn: 1, enc: encOps(Put("b", []byte("k2"), []byte("1")), Put("a", []byte("x"), []byte("1")))},
		{lsn: 2, enc: encOps(Put("b", []byte("k1"), []byte("2")), Del("b", []byte("k2")))},
		{lsn: 3, enc: encOps(Put("b", []byte("k2"), []byte("3")), Put("a", []byte("x"), []byte("3")), Del("a", []byte("y")))},
		{lsn: 4, enc: encOps(Del("b", []byte("k1")), Put("a", []byte("w"), []byte("4")), Put("b", []byte("k0"), []byte("")))},
	}
	want := []Op{
		Put("a", []byte("w"), []byte("4")),
		Put("a", []byte("x"), []byte("3")),
		Del("a", []byte("y")),
		Put("b", []byte("k0"), []byte{}),
		Del("b", []byte("k1")),
		Put("b", []byte("k2"), []byte("3")),
	}
	g := genOf(recs)
	if got := genWrites(g); !reflect.DeepEqual(got, want) {
		t.Fatalf("fold order:\n got %+v\nwant %+v", got, want)
	}
	if g.last != 4 || g.records != 4 || g.entries != len(want) {
		t.Fatalf("generation: last %d, records %d, entries %d", g.last, g.records, g.entries)
	}
}

// Reads see, for every key, the write of the newest generation holding it,
// whatever older generations hold; a dropped generation's keys fall through
// to the buckets (found is false).
func TestOverlayNewestGenerationWins(t *testing.T) {
	o := newOverlay(1000)
	o.apply(encOps(Put("s", []byte("a"), []byte("1")), Put("s", []byte("b"), []byte("1")),
		Put("s", []byte("c"), []byte("1")), Put("s", []byte("e"), []byte("1"))), 1)
	o.seal()
	o.apply(encOps(Del("s", []byte("b")), Put("s", []byte("c"), []byte("2")), Put("s", []byte("d"), []byte("2"))), 2)
	o.seal()
	o.seal() // an empty open generation is not sealed again
	o.apply(encOps(Put("s", []byte("b"), []byte("3")), Put("s", []byte("a"), []byte("3")), Del("s", []byte("d"))), 3)
	if len(o.gens) != 3 || o.entries() != 10 {
		t.Fatalf("%d generations, %d entries", len(o.gens), o.entries())
	}
	if g := o.sealedAfter(0); g != o.gens[0] {
		t.Fatalf("oldest sealed generation after 0: %+v", g)
	}
	if g := o.sealedAfter(2); g != nil {
		t.Fatalf("a sealed generation after 2: %+v", g)
	}

	get := func(key string) string {
		v, del, ok := o.get("s", []byte(key))
		switch {
		case !ok:
			return "-"
		case del:
			return "del"
		}
		return string(v)
	}
	scan := func(prefix, from string, reverse bool) []string {
		var p, f []byte
		if prefix != "" {
			p = []byte(prefix)
		}
		if from != "" {
			f = []byte(from)
		}
		var out []string
		for _, e := range o.snapshot("s", newBounds(p, f), reverse) {
			if e.del {
				out = append(out, e.key+"=del")
			} else {
				out = append(out, e.key+"="+string(e.val))
			}
		}
		return out
	}
	check := func(when string, gets map[string]string, fwd []string) {
		t.Helper()
		for k, want := range gets {
			if got := get(k); got != want {
				t.Errorf("%s: get(%s) = %s, want %s", when, k, got, want)
			}
		}
		if got := scan("", "", false); !slices.Equal(got, fwd) {
			t.Errorf("%s: forward scan %q, want %q", when, got, fwd)
		}
		rev := slices.Clone(fwd)
		slices.Reverse(rev)
		if got := scan("", "", true); !slices.Equal(got, rev) {
			t.Errorf("%s: reverse scan %q, want %q", when, got, rev)
		}
	}
	check("three generations",
		map[string]string{"a": "3", "b": "3", "c": "2", "d": "del", "e": "1", "f": "-"},
		[]string{"a=3", "b=3", "c=2", "d=del", "e=1"})
	if got, want := scan("", "c", false), []string{"c=2", "d=del", "e=1"}; !slices.Equal(got, want) {
		t.Errorf("forward scan from c: %q, want %q", got, want)
	}
	if got, want := scan("", "c", true), []string{"c=2", "b=3", "a=3"}; !slices.Equal(got, want) {
		t.Errorf("reverse scan from c: %q, want %q", got, want)
	}

	o.drop(o.gens[0])
	check("first generation dropped",
		map[string]string{"a": "3", "b": "3", "c": "2", "d": "del", "e": "-"},
		[]string{"a=3", "b=3", "c=2", "d=del"})
	o.drop(o.gens[0])
	check("second generation dropped",
		map[string]string{"a": "3", "b": "3", "c": "-", "d": "del"},
		[]string{"a=3", "b=3", "d=del"})
	if o.entries() != 3 {
		t.Fatalf("%d entries left", o.entries())
	}
}

// The publisher seals the open generation by itself once it holds sealAt
// records, which bounds what one checkpoint transaction folds.
func TestOverlaySealsFullGeneration(t *testing.T) {
	o := newOverlay(3)
	for lsn := uint64(1); lsn <= 7; lsn++ {
		o.apply(encOps(Put("s", []byte{byte(lsn)}, nil)), lsn)
		o.sealFull()
	}
	var lasts []uint64
	for _, g := range o.gens {
		lasts = append(lasts, g.last)
	}
	if want := []uint64{3, 6, 7}; !slices.Equal(lasts, want) {
		t.Fatalf("generations end at %v, want %v", lasts, want)
	}
	// While nothing is folded, sealing by size stops at maxGens: the open
	// generation grows instead, so reads never look through more.
	for lsn := uint64(8); lsn <= 3*maxGens+40; lsn++ {
		o.apply(encOps(Put("s", []byte{byte(lsn)}, nil)), lsn)
		o.sealFull()
	}
	if len(o.gens) != maxGens || o.gens[maxGens-1].records < 40 {
		t.Fatalf("%d generations, the open one of %d records", len(o.gens), o.gens[len(o.gens)-1].records)
	}
}

// While an older generation is folded and dropped and a newer one is not,
// reads still see the newer generation's writes over the bucket's: an
// overwrite, a delete of a folded key, a key new in the newer generation.
func TestStoreReadsNewerGenerationOverFoldedOne(t *testing.T) {
	var folds atomic.Int32
	opts := testOptions(t.TempDir(), func(o *Options) {
		noAutoCheckpoint(o)
		o.hooks.chunkRecords = 2 // a generation per two records
		o.hooks.checkpoint = func() error {
			if folds.Add(1) > 1 {
				return errInjected // only the first generation is folded
			}
			return nil
		}
	})
	s := openStore(t, opts)
	defer s.Close()
	mustAppend(t, s, Put("b", []byte("k"), []byte("1")), Put("b", []byte("x"), []byte("1")))
	mustAppend(t, s, Put("b", []byte("y"), []byte("1")))
	mustAppend(t, s, Put("b", []byte("k"), []byte("2")), Del("b", []byte("x")))
	mustAppend(t, s, Put("b", []byte("z"), []byte("2")))
	if err := s.Checkpoint(); !errors.Is(err, errInjected) {
		t.Fatalf("Checkpoint: %v", err)
	}
	if st := s.Stats(); st.AppliedLSN != 2 || st.Overlay != 3 {
		t.Fatalf("after folding the first generation only: %+v", st)
	}
	if raw := rawBucket(t, s, "b"); !maps.Equal(raw, map[string]string{"k": "1", "x": "1", "y": "1"}) {
		t.Fatalf("bucket after the first fold: %v", raw)
	}
	want := []string{"k=2", "y=1", "z=2"}
	if got := scanAll(t, s, "b", nil, nil, false); !slices.Equal(got, want) {
		t.Fatalf("scan: %q, want %q", got, want)
	}
	for key, want := range map[string]string{"k": "2", "x": "", "y": "1", "z": "2"} {
		if got, _ := mustGet(t, s, "b", key); got != want {
			t.Fatalf("Get(%s) = %q, want %q", key, got, want)
		}
	}
	folds.Store(-10)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if raw := rawBucket(t, s, "b"); !maps.Equal(raw, map[string]string{"k": "2", "y": "1", "z": "2"}) {
		t.Fatalf("bucket after the second fold: %v", raw)
	}
}

// A checkpoint writes a generation in parts of about CheckpointTxBytes,
// each a bbolt transaction, and moves applied_lsn with the last. Stopped
// after some parts, the store still reads the newest values, applied_lsn
// has not moved, and a crash image taken then recovers to the same state
// as the store: the replay writes every record after applied_lsn again.
func TestCheckpointInPartsSurvivesAStopBetweenThem(t *testing.T) {
	var parts atomic.Int32
	failAt := int32(1 << 30)
	opts := testOptions(t.TempDir(), func(o *Options) {
		noAutoCheckpoint(o)
		o.CheckpointTxBytes = 8 // a key or two per part
		o.hooks.checkpoint = func() error {
			if parts.Add(1) == failAt {
				return errInjected
			}
			return nil
		}
	})
	s := openStore(t, opts)
	defer s.Close()
	// Folded first, whole: values the next generation overwrites or
	// deletes.
	for i := range 8 {
		mustAppend(t, s, Put("b", fmt.Appendf(nil, "k%02d", i), []byte("old")))
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	applied := s.Stats().AppliedLSN
	parts.Store(0)
	for i := range 8 {
		key := fmt.Appendf(nil, "k%02d", i)
		if i%3 == 0 {
			mustAppend(t, s, Del("b", key))
		} else {
			mustAppend(t, s, Put("b", key, []byte("mid")), Put("c", key, []byte("new")))
			mustAppend(t, s, Put("b", key, []byte("new")))
		}
	}
	want := dumpStore(t, s)
	failAt = 3 // two parts are written, the third fails
	if err := s.Checkpoint(); !errors.Is(err, errInjected) {
		t.Fatalf("Checkpoint: %v", err)
	}
	if got := s.Stats().AppliedLSN; got != applied {
		t.Fatalf("applied_lsn %d after a checkpoint stopped between parts, want %d (unmoved)", got, applied)
	}
	raw := rawBucket(t, s, "b")
	newer := 0
	for _, v := range raw {
		if v == "new" {
			newer++
		}
	}
	if newer == 0 || raw["k07"] != "old" {
		t.Fatalf("the file after two parts: %v; want some keys written and the last not", raw)
	}
	if d := diffDumps(want, dumpStore(t, s)); d != "" {
		t.Fatalf("reads changed when a checkpoint stopped between parts: %s", d)
	}
	image := filepath.Join(t.TempDir(), "crash.db")
	copyStoreImage(t, s, image)
	wantRecovered(t, image, want)

	// The next checkpoint writes it all.
	failAt = 1 << 30
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if raw := rawBucket(t, s, "b"); len(raw) != 5 || raw["k07"] != "new" || raw["k00"] != "" {
		t.Fatalf("the file after the checkpoint: %v", raw)
	}
	if n := parts.Load(); n < 4 {
		t.Fatalf("the checkpoint took %d transactions, want it in parts", n)
	}
}

// A generation is cut into parts of about the bytes asked, in fold order,
// every write in exactly one part, and into maxCheckpointParts at most:
// a large generation gets larger parts rather than more transactions.
func TestFoldPartsCoverTheGenerationInBoundedParts(t *testing.T) {
	var recs []pendingRec
	for i := range 1000 {
		recs = append(recs, pendingRec{lsn: uint64(i + 1), enc: encOps(Put("b", fmt.Appendf(nil, "k%04d", i), make([]byte, 96)))})
	}
	g := genOf(recs)
	want := genWrites(g)
	for _, c := range []struct{ partBytes, parts int }{
		{-1, 1}, {1 << 20, 1}, {10_000, 10}, {64, maxCheckpointParts},
	} {
		parts := g.foldParts(c.partBytes)
		var got []Op
		for _, p := range parts {
			for _, e := range p {
				got = append(got, Op{Bucket: e.bucket, Key: []byte(e.n.key), Value: e.n.val, Delete: e.n.del})
			}
		}
		if len(parts) != c.parts || !reflect.DeepEqual(got, want) {
			t.Errorf("parts of %d bytes: %d parts holding %d writes; want %d parts holding the %d writes in fold order",
				c.partBytes, len(parts), len(got), c.parts, len(want))
		}
	}
}

// rawBucket reads a bucket of an open store's file, overlay aside.
func rawBucket(t *testing.T, s *Store, bucket string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucket)); b != nil {
			return b.ForEach(func(k, v []byte) error {
				out[string(k)] = string(v)
				return nil
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
