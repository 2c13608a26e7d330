package actors

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/agentpay/guard/persistence"
)

// Event retention. GET /v1/events serves the last EventRetention (30 days,
// spec 4.8), and nothing else reads an older event: webhook deliveries end
// within a day, receipt verification walks the same 30 days, and a spend's
// history is its own record. So an event leaves the disk once it is older
// than the retention and a day, without which the events bucket would grow
// with every payment for as long as the service runs. The day between keeps
// an event that a page near the 30-day edge may still show, on a clock that
// moved a little, from vanishing under it.
const (
	// EventDeleteAfter is the age, on its environment's clock, at which an
	// event is deleted.
	EventDeleteAfter = EventRetention + 24*time.Hour
	// eventSweepEvery is how often the retention sweep runs: often enough
	// that each run has a few minutes' events to delete, not a burst of an
	// hour's.
	eventSweepEvery = 10 * time.Minute
	// eventSweepPause separates the sweep's records, so that the payments'
	// commits and the checkpoints interleave with a large first sweep
	// instead of queueing behind it.
	eventSweepPause = 20 * time.Millisecond
	// eventSweepFirst is how long after the start the first sweep waits,
	// so that it never competes with the catch-up of a restart.
	eventSweepFirst = time.Minute
)

// eventSweepBatch bounds the events deleted by one journal record (two ops
// each): the sweep commits and waits between records, so a first sweep over
// months of history never floods the journal ahead of the payments. A
// variable so that a test can make records of a few events.
var eventSweepBatch atomic.Int64

func init() { eventSweepBatch.Store(1024) }

// startEventRetention runs the retention sweep every eventSweepEvery until
// Close.
func (s *System) startEventRetention() {
	s.work.Add(1)
	go func() {
		defer s.work.Done()
		t := time.NewTimer(eventSweepFirst)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
			s.busy.add(1)
			began := time.Now()
			n, err := s.sweepExpiredEvents(s.ctx)
			took := time.Since(began).Round(time.Millisecond)
			s.busy.add(-1)
			switch {
			case err != nil && s.ctx.Err() == nil:
				s.log.Error("deleting events past their retention failed; the next sweep tries again",
					"deleted", n, "err", err)
			case n > 0:
				s.log.Info("deleted events past their retention", "deleted", n,
					"older_than_days", int(EventDeleteAfter.Hours()/24), "took", took)
			}
			t.Reset(eventSweepEvery)
		}
	}()
}

// sweepExpiredEvents deletes, in every owner environment, the events older
// than EventDeleteAfter on that environment's clock (a practice clock moved
// ahead ages its events with it), with their id index entries. It returns
// how many it deleted.
func (s *System) sweepExpiredEvents(ctx context.Context) (int, error) {
	type envName struct {
		owner string
		env   Env
	}
	var envs []envName
	err := s.store.Scan(bEnvs, nil, nil, false, func(k, _ []byte) bool {
		if i := bytes.LastIndexByte(k, '|'); i > 0 {
			envs = append(envs, envName{owner: string(k[:i]), env: Env(k[i+1:])})
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("actors: listing environments: %w", err)
	}
	deleted := 0
	for _, e := range envs {
		n, err := s.sweepEnvEvents(ctx, e.owner, e.env)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// sweepEnvEvents deletes one environment's expired events, oldest first.
// Events are numbered in the order they were dated, so the scan stops at
// the first one young enough to keep. The environment's newest event is
// kept whatever its age: loading the environment reads its time, which new
// events must not predate (see env).
func (s *System) sweepEnvEvents(ctx context.Context, ownerID string, env Env) (int, error) {
	cutoff := s.nowFor(ownerID, env).Add(-EventDeleteAfter)
	var (
		ops     []persistence.Op
		deleted int
		failed  error
		// held is the oldest expired event not deleted yet: it goes once
		// a newer event shows it is not the newest.
		heldKey []byte
		heldID  string
		// kept is the sequence of the oldest event kept, 0 when none was
		// read.
		kept uint64
	)
	commit := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := s.store.Append(s.store.Gen(), persistence.Record{Ops: ops}).Wait(ctx)
		if err != nil {
			return err
		}
		deleted += len(ops) / 2
		s.eventsDeleted.Add(uint64(len(ops) / 2))
		ops = nil
		t := time.NewTimer(eventSweepPause)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	err := s.store.Scan(bEvents, prefixOf(ownerID, string(env)), nil, false, func(k, v []byte) bool {
		if heldKey != nil {
			ops = append(ops, persistence.Del(bEvents, heldKey), persistence.Del(bEventIDs, []byte(heldID)))
			heldKey = nil
			if int64(len(ops)) >= 2*eventSweepBatch.Load() {
				if failed = commit(); failed != nil {
					return false
				}
			}
		}
		var ev struct {
			ID      string    `json:"id"`
			Created time.Time `json:"created"`
		}
		if json.Unmarshal(v, &ev) != nil || ev.ID == "" || !ev.Created.Before(cutoff) {
			if len(k) >= 8 {
				kept = binary.BigEndian.Uint64(k[len(k)-8:])
			}
			return false // young enough, or undatable: kept, and so is every newer one
		}
		heldKey, heldID = k, ev.ID
		return ctx.Err() == nil
	})
	if failed == nil {
		failed = err
	}
	if failed == nil {
		failed = ctx.Err()
	}
	if failed == nil {
		failed = commit()
	}
	if failed == nil && deleted > 0 && kept > 0 {
		// The summaries of the blocks whose events are all deleted now.
		failed = s.dropEventBlocksBelow(ctx, prefixOf(ownerID, string(env)), kept)
	}
	if failed != nil {
		return deleted, fmt.Errorf("actors: deleting expired events of %s/%s: %w", ownerID, env, failed)
	}
	return deleted, nil
}

// EventsDeleted is how many events the retention sweep deleted since the
// start.
func (s *System) EventsDeleted() uint64 { return s.eventsDeleted.Load() }
