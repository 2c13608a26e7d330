package persistence

import (
	"reflect"
	"testing"
)

// A checkpoint applies only the last write of each key of its chunk, in
// bucket and key order; the buckets end in the state the records, applied
// one by one, would have left.
func TestFinalOpsKeepsTheLastWriteOfEachKey(t *testing.T) {
	recs := []pendingRec{
		{lsn: 1, ops: []Op{Put("b", []byte("k2"), []byte("1")), Put("a", []byte("x"), []byte("1"))}},
		{lsn: 2, ops: []Op{Put("b", []byte("k1"), []byte("2")), Del("b", []byte("k2"))}},
		{lsn: 3, ops: []Op{Put("b", []byte("k2"), []byte("3")), Put("a", []byte("x"), []byte("3")), Del("a", []byte("y"))}},
		{lsn: 4, ops: []Op{Del("b", []byte("k1"))}},
	}
	want := []Op{
		Put("a", []byte("x"), []byte("3")),
		Del("a", []byte("y")),
		Del("b", []byte("k1")),
		Put("b", []byte("k2"), []byte("3")),
	}
	if got := finalOps(recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("finalOps:\n got %+v\nwant %+v", got, want)
	}
}
