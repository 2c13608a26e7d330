package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
)

// Events leave the disk a day after the 30 days the list serves, on their
// environment's clock, except an environment's newest; the lists, a restart
// and the numbering go on as before.
func TestEventsPastRetentionLeaveTheDisk(t *testing.T) {
	// Records of two events: the sweep goes on after each commit.
	defer actors.SetEventSweepBatch(2)()
	f := newIdemFixture(t)
	ctx := context.Background()
	owner := f.owner.OwnerID
	// Each spend waits for the owner (the vendor is not trusted) and is
	// cancelled at once, so that no expiry dates an event later.
	spend := func(i int) {
		t.Helper()
		id, _, err := f.spend(t, vendorSpend("1.00", fmt.Sprintf("/r%d", i), fmt.Sprintf("k-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.h.sys.CancelSpend(ctx, f.agent, id); err != nil {
			t.Fatal(err)
		}
	}
	sweep := func(want int) {
		t.Helper()
		n, err := f.h.sys.SweepExpiredEvents(ctx)
		if err != nil || n != want {
			t.Fatalf("the sweep deleted %d events (%v), want %d", n, err, want)
		}
	}
	advance := func(by time.Duration) {
		t.Helper()
		if _, err := f.h.sys.AdvanceClock(ctx, f.owner, by); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		spend(i)
	}
	oldSeqs, oldIDs := f.h.sys.EventKeys(owner, actors.EnvTest)
	if len(oldSeqs) < 4 {
		t.Fatalf("the setup made %d practice events, want at least 4", len(oldSeqs))
	}
	newest := oldSeqs[len(oldSeqs)-1]
	liveSeqs, _ := f.h.sys.EventKeys(owner, actors.EnvLive)

	advance(actors.EventDeleteAfter - time.Hour)
	sweep(0)
	if seqs, _ := f.h.sys.EventKeys(owner, actors.EnvTest); !slices.Equal(seqs, oldSeqs) {
		t.Fatalf("within the retention and its day the events are %v, want %v", seqs, oldSeqs)
	}

	// Past it: all go but the newest, which loading the environment reads.
	advance(2 * time.Hour)
	sweep(len(oldSeqs) - 1)
	if seqs, _ := f.h.sys.EventKeys(owner, actors.EnvTest); !slices.Equal(seqs, []uint64{newest}) {
		t.Fatalf("after the sweep the practice events are %v, want only the newest %d", seqs, newest)
	}
	if kept := f.h.sys.IndexedEventIDs(oldIDs); !slices.Equal(kept, oldIDs[len(oldIDs)-1:]) {
		t.Fatalf("the id index still holds %v, want only the newest event's id", kept)
	}
	// The live clock did not move: its events stay.
	if seqs, _ := f.h.sys.EventKeys(owner, actors.EnvLive); !slices.Equal(seqs, liveSeqs) {
		t.Fatalf("the live events are %v after the sweep, want %v", seqs, liveSeqs)
	}
	if got := f.h.sys.EventsDeleted(); got != uint64(len(oldSeqs)-1) {
		t.Fatalf("EventsDeleted is %d, want %d", got, len(oldSeqs)-1)
	}
	sweep(0)

	// A newer event lets the kept one go; a restart loads the environment
	// and the numbering goes on after the deleted events.
	spend(3)
	sweep(1)
	f.restart(t)
	spend(4)
	seqs, _ := f.h.sys.EventKeys(owner, actors.EnvTest)
	if len(seqs) < 2 || seqs[0] <= newest {
		t.Fatalf("after a new spend, a sweep and a restart the practice events are %v, want them all after %d", seqs, newest)
	}
	page, err := f.h.sys.ListEvents(f.owner, actors.ListParams{Limit: actors.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != len(seqs) {
		t.Fatalf("the list shows %d events, the disk holds %d", len(page.Items), len(seqs))
	}
	var last struct {
		Sequence uint64 `json:"sequence"`
	}
	if err := json.Unmarshal(page.Items[0], &last); err != nil || last.Sequence != seqs[len(seqs)-1] {
		t.Fatalf("the newest listed event is number %d (%v), want %d", last.Sequence, err, seqs[len(seqs)-1])
	}
}
