package actors

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// idAt is a spend id of the millisecond ms with the given tail bytes.
func idAt(ms uint64, tail byte) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	for i := 6; i < 16; i++ {
		b[i] = tail
	}
	return "spd_" + hex.EncodeToString(b[:])
}

// TestHourBoundsLieBetweenTheHours: the key a walk goes on from to pass
// over an hour lies before every id of that hour and after every id of
// the hour before it (newest first), or after every id of the hour and
// at or before the first of the next (oldest first).
func TestHourBoundsLieBetweenTheHours(t *testing.T) {
	prefix := prefixOf("agt_x")
	const h = 493_000 // an hour of 2026
	start := uint64(h) * millisPerHour
	key := func(ms uint64, tail byte) []byte { return append(append([]byte{}, prefix...), idAt(ms, tail)...) }
	firstOfHour, lastOfHour := key(start, 0x00), key(start+millisPerHour-1, 0xff)
	lastBefore, firstAfter := key(start-1, 0xff), key(start+millisPerHour, 0x00)
	for _, id := range [][]byte{firstOfHour, lastOfHour} {
		if got, ok := spendHour(id[len(prefix):]); !ok || got != h {
			t.Fatalf("the hour of %s is %d (%v), want %d", id, got, ok, h)
		}
	}
	back := hourBound(prefix, h, true)
	if !(bytes.Compare(lastBefore, back) <= 0 && bytes.Compare(back, firstOfHour) < 0) {
		t.Errorf("newest first: %s is not between %s and %s", back, lastBefore, firstOfHour)
	}
	forth := hourBound(prefix, h, false)
	if !(bytes.Compare(lastOfHour, forth) < 0 && bytes.Compare(forth, firstAfter) <= 0) {
		t.Errorf("oldest first: %s is not between %s and %s", forth, lastOfHour, firstAfter)
	}
	if hourBound(prefix, 0, true) != nil {
		t.Error("newest first from the first hour there is: want nowhere to go on from")
	}
	if _, ok := spendHour([]byte("spd_zz")); ok {
		t.Error("a key that is no id has an hour")
	}
	// The ids NewID makes fall in the hour of their time.
	at := time.Date(2026, 12, 2, 7, 59, 59, 999e6, time.UTC)
	if got, _ := spendHour([]byte(NewID("spd", at))); got != uint32(at.UnixMilli()/millisPerHour) {
		t.Errorf("NewID at %v: hour %d, want %d", at, got, at.UnixMilli()/millisPerHour)
	}
}

// TestHourSummaryNeverLeavesOutWhatItHolds: every status and destination
// added may be held (whatever the case of the destination asked), a
// status never added may not, and a summary saturates rather than lie.
func TestHourSummaryNeverLeavesOutWhatItHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var h hourSummary
	var added []string
	for i := range 300 {
		d := fmt.Sprintf("api%d.vendor-%d.example", i, rng.IntN(1000))
		h.add(policy.StatusSettled, d)
		added = append(added, d)
		for _, a := range added {
			if !h.mayHold(policy.StatusSettled, strings.ToUpper(a)) || !h.mayHold("", a) {
				t.Fatalf("after %d destinations, %s is left out", i+1, a)
			}
		}
	}
	if h.mayHold(policy.StatusDeclined, "") || h.mayHold(policy.StatusDeclined, added[0]) {
		t.Error("a status never added may be held")
	}
	// Few destinations leave most others out.
	var few hourSummary
	for _, d := range added[:5] {
		few.add(policy.StatusDeclined, d)
	}
	out := 0
	for i := range 1000 {
		if !few.mayHold("", fmt.Sprintf("elsewhere%d.example", i)) {
			out++
		}
	}
	if out < 950 {
		t.Errorf("a summary of 5 destinations left out %d of 1000 others, want most", out)
	}
	// A destination not plain ASCII may equal one that is without case
	// (U+212A KELVIN SIGN folds to k): neither passes an hour over.
	var odd hourSummary
	odd.add(policy.StatusSettled, "\u212Aey.example")
	if !odd.mayHold("", "key.example") || !odd.mayHold("", "anything.example") {
		t.Error("an hour with a destination not plain ASCII was passed over")
	}
	var plain hourSummary
	plain.add(policy.StatusSettled, "key.example")
	if !plain.mayHold("", "\u212Aey.example") {
		t.Error("a destination asked not plain ASCII passed over an hour")
	}
	// A status without a bit makes the hour hold every status.
	var other hourSummary
	other.add("refunded_later", "a.example")
	if !other.mayHold(policy.StatusDeclined, "") {
		t.Error("an unknown status let an hour be passed over")
	}
	if h.add(policy.StatusSettled, added[0]) {
		t.Error("adding what the summary holds changed it")
	}
	var sat hourSummary
	saturate(sat[:])
	if !sat.mayHold(policy.StatusExpired, "never.example") {
		t.Error("a saturated summary passes over an hour")
	}
}

// TestBlockBoundsLieBetweenTheBlocks: as for the hours, for the blocks of
// an environment's events.
func TestBlockBoundsLieBetweenTheBlocks(t *testing.T) {
	prefix := prefixOf("own", "test")
	const b = 7
	first, last := seqKey(prefix, b*eventBlockSize), seqKey(prefix, (b+1)*eventBlockSize-1)
	if !bytes.Equal(blockKeyOf(first), blockKeyOf(last)) || bytes.Equal(blockKeyOf(last), blockKeyOf(seqKey(prefix, (b+1)*eventBlockSize))) {
		t.Fatal("the first and last sequence of a block are not alone in one block")
	}
	if got := blockBound(prefix, b, true); !bytes.Equal(got, seqKey(prefix, b*eventBlockSize-1)) {
		t.Errorf("newest first: %x, want the last sequence of the block before", got)
	}
	if got := blockBound(prefix, b, false); !bytes.Equal(got, seqKey(prefix, (b+1)*eventBlockSize)) {
		t.Errorf("oldest first: %x, want the first sequence of the next block", got)
	}
	if blockBound(prefix, 0, true) != nil {
		t.Error("newest first from the first block: want nowhere to go on from")
	}
}

// TestSummaryCacheStaysBounded: an environment that touches ever more
// hours keeps at most maxSummaryEntries of their summaries in memory, and
// one dropped is read again from the store as it was written.
func TestSummaryCacheStaysBounded(t *testing.T) {
	sys, store := openSystem(t, filepath.Join(t.TempDir(), "j.db"), SystemClock{}, nil)
	defer closeSystem(t, sys, store)
	e := &envLedger{key: []byte("own|test")}
	first := hourKey(hoursOfEnv, prefixOf("own", "test"), 1)
	ent := sys.cachedSummary(&e.hours, bSpendHours, first, len(hourSummary{}))
	(*hourSummary)(ent.b).add(policy.StatusDeclined, "a.example")
	if err := store.Append(store.Gen(), persistence.Record{Ops: []persistence.Op{
		persistence.Put(bSpendHours, first, bytes.Clone(ent.b))}}).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for h := range uint32(4 * maxSummaryEntries) {
		sys.cachedSummary(&e.hours, bSpendHours, hourKey(hoursOfEnv, prefixOf("own", "test"), 100+h), len(hourSummary{}))
		if len(e.hours) > maxSummaryEntries+1 {
			t.Fatalf("%d summaries in memory after %d hours, want at most %d", len(e.hours), h+1, maxSummaryEntries+1)
		}
	}
	if e.hours[string(first)] != nil {
		t.Fatal("the first hour's summary is still in memory")
	}
	again := sys.cachedSummary(&e.hours, bSpendHours, first, len(hourSummary{}))
	if !(*hourSummary)(again.b).mayHold(policy.StatusDeclined, "A.example") || (*hourSummary)(again.b).mayHold(policy.StatusSettled, "") {
		t.Fatal("the summary read again is not the one written")
	}
}
