package persistence

import (
	"reflect"
	"slices"
	"testing"
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
}
