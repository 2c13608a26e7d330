package actors

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/agentpay/guard/persistence"
)

// CommitPracticeResetOnly commits a practice reset and stops before its
// sweep, as a crash right after the commit would.
func (s *System) CommitPracticeResetOnly(ctx context.Context, p Principal) error {
	e, err := s.env(p.OwnerID, EnvTest)
	if err != nil {
		return err
	}
	e.resetMu.Lock()
	defer e.resetMu.Unlock()
	_, _, err = s.fenceAndCommitReset(ctx, e, p.OwnerID)
	return err
}

// SlowViewPublication delays every publication of an agent's snapshot by d
// until the returned func is called.
func SlowViewPublication(d time.Duration) (restore func()) {
	publishDelay.Store(int64(d))
	return func() { publishDelay.Store(0) }
}

// The hand-written encoders of the stored forms, for the test that holds
// them to encoding/json.
var (
	AppendEnvState    = appendEnvState
	AppendReceipt     = appendReceipt
	AppendStoredEvent = appendStoredEvent
	AppendSpendRef    = appendSpendRef
)

// IdemRecord and ActiveRecord expose the unexported stored forms.
type (
	IdemRecord   = idemRecord
	ActiveRecord = activeRecord
)

var (
	AppendIdemRecord   = appendIdemRecord
	AppendActiveRecord = appendActiveRecord
)

// PingAgent returns once the agent's actor has handled every message sent
// to it before.
func (s *System) PingAgent(ctx context.Context, agentID string) error {
	_, err := ask(ctx, s, agentID, func(reply chan *persistence.Ticket) any { return &pingAgent{reply: reply} })
	return err
}

// Reload asks an agent's actor to reload its rules, as a loosening coming
// due does.
func (s *System) Reload(agentID string) { s.send(agentID, &reloadAgent{reply: make(chan error, 1)}) }

// SweepExpiredEvents runs the event retention sweep now.
func (s *System) SweepExpiredEvents(ctx context.Context) (int, error) {
	return s.sweepExpiredEvents(ctx)
}

// EventKeys lists the sequences of an environment's stored events, and
// IndexedEventIDs which of ids the id index still holds: what the disk has,
// whatever the lists show.
func (s *System) EventKeys(ownerID string, env Env) (seqs []uint64, ids []string) {
	prefix := prefixOf(ownerID, string(env))
	_ = s.store.Scan(bEvents, prefix, nil, false, func(k, v []byte) bool {
		var ev StoredEvent
		if json.Unmarshal(v, &ev) == nil {
			seqs = append(seqs, ev.Sequence)
			ids = append(ids, ev.ID)
		}
		return true
	})
	return seqs, ids
}

// EventBlocks are the blocks of an environment's events that have a
// summary.
func (s *System) EventBlocks(ownerID string, env Env) []uint64 {
	prefix := prefixOf(ownerID, string(env))
	var out []uint64
	_ = s.store.Scan(bEventBlocks, prefix, nil, false, func(k, _ []byte) bool {
		out = append(out, binary.BigEndian.Uint64(k[len(prefix):]))
		return true
	})
	return out
}

func (s *System) IndexedEventIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if v, err := s.store.Get(bEventIDs, []byte(id)); err == nil && v != nil {
			out = append(out, id)
		}
	}
	return out
}

// SetEventSweepBatch makes the retention sweep delete at most n events a
// journal record until restore is called.
func SetEventSweepBatch(n int) (restore func()) {
	old := eventSweepBatch.Swap(int64(n))
	return func() { eventSweepBatch.Store(old) }
}

// DropOwnerKeyIndex removes the owners' index of keys and its mark, as a
// store written before the index existed has neither.
func (s *System) DropOwnerKeyIndex(ctx context.Context) error {
	return s.dropBuilt(ctx, ownerKeysIndexed, bOwnerKeys)
}

// PassedOver is how many hours of spend indexes and blocks of events the
// lists have passed over without reading them.
func (s *System) PassedOver() int64 { return s.partsPassedOver.Load() }

// DropEventBlocks removes the summaries of the events' blocks and their
// mark, as a store written before the summaries existed has neither.
func (s *System) DropEventBlocks(ctx context.Context) error {
	return s.dropBuilt(ctx, eventBlocksIndexed, bEventBlocks)
}

// DropSpendHours removes the summaries of the spends' hours and their
// mark, as a store written before the summaries existed has neither.
func (s *System) DropSpendHours(ctx context.Context) error {
	return s.dropBuilt(ctx, spendHoursIndexed, bSpendHours)
}

// AddKeyBehindArchive writes an agent key as a key change racing the
// agent's archive would leave it: made, durable, not revoked, after the
// archive read the agent's keys. It returns the secret.
func (s *System) AddKeyBehindArchive(ctx context.Context, ownerID, agentID string, livemode bool) (string, error) {
	env := EnvOf(livemode)
	k, secret := newKey(KindAgent, ownerID, agentID, env, s.nowFor(ownerID, env))
	c := &change{}
	c.putKey(k)
	c.putRaw(bKeyDigests, []byte(k.Digest), []byte(k.ID))
	return secret, s.store.Append(s.store.Gen(), persistence.Record{Ops: c.ops}).Wait(ctx)
}

// RevokeLateKeys runs the archive's second look at an archived agent's
// keys.
func (s *System) RevokeLateKeys(ctx context.Context, p Principal, agentID string) error {
	ag, err := s.Agent(p, agentID)
	if err != nil {
		return err
	}
	return s.revokeLateKeys(ctx, ag)
}

// dropBuilt removes what indexOnce built in bucket, and its mark.
func (s *System) dropBuilt(ctx context.Context, mark, bucket string) error {
	ops := []persistence.Op{persistence.Del(bMeta, []byte(mark))}
	_ = s.store.Scan(bucket, nil, nil, false, func(k, _ []byte) bool {
		ops = append(ops, persistence.Del(bucket, k))
		return true
	})
	return s.store.Append(s.store.Gen(), persistence.Record{Ops: ops}).Wait(ctx)
}
