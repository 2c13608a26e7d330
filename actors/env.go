package actors

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// envLedger is one owner environment's pool and event sequence, shared by
// the agents of that environment. Its lock is held only for a pure decision
// and an append to the journal queue (never for I/O), which keeps three
// things in one order: the pool check, the sequence numbers, and the journal
// records that carry them. A round trip through an owner actor would split
// each spend's decision in two halves that could interleave.
type envLedger struct {
	mu    sync.Mutex
	key   []byte
	state EnvState
	// offset mirrors state.ClockOffset (practice clock) and eventFloor
	// state.EventFloor (practice reset) for lock-free reads.
	offset     atomic.Int64
	eventFloor atomic.Uint64
	// commits counts the records appended for this environment (under mu),
	// so a practice reset can tell that nothing changed while it read the
	// store; resetMu runs one reset of the environment at a time.
	commits uint64
	resetMu sync.Mutex
	// lastEventAt is the created time of the newest event (under mu).
	// Events take their sequence under mu but their time from callers
	// that read the clock before taking it, so without this a later
	// sequence could carry an earlier time, and a created[gte] filter,
	// which stops at the first event older than its bound, would miss it.
	lastEventAt time.Time
	// durable is the state as of the newest record of this environment
	// that is on disk; pending holds the records appended after it, in
	// journal order, each with the state it carries. Reads that make no
	// change of their own (balance, check, funding) answer from durable,
	// so nobody hears of a hold or a settlement before its record is on
	// disk, and an answered write is seen by the next read (its ticket
	// is done, so the read moves durable past it).
	durable  atomic.Pointer[EnvState]
	pendMu   sync.Mutex
	pending  []pendingState
	npending atomic.Int32
	// hours and blocks are summaries of the spends' hours and of the
	// events' blocks (under mu; spend_hours.go, event_blocks.go).
	hours, blocks map[string]*summaryEntry
}

type pendingState struct {
	ticket *persistence.Ticket
	state  *EnvState
}

// appended notes a record of this environment. Caller holds mu, so
// records are noted in journal order.
func (e *envLedger) appended(t *persistence.Ticket, st *EnvState) {
	e.pendMu.Lock()
	e.advanceLocked()
	e.pending = append(e.pending, pendingState{ticket: t, state: st})
	e.npending.Store(int32(len(e.pending)))
	e.pendMu.Unlock()
}

// advanceLocked moves durable past every record whose ticket is done.
// Tickets complete in journal order, so it stops at the first that is
// not. A failed record never becomes durable state (the service reloads
// every environment after a failed commit).
func (e *envLedger) advanceLocked() {
	n := 0
	for _, p := range e.pending {
		select {
		case <-p.ticket.Done():
		default:
			goto trim
		}
		if p.ticket.Err() == nil {
			e.durable.Store(p.state)
		}
		n++
	}
trim:
	if n > 0 {
		rest := copy(e.pending, e.pending[n:])
		clear(e.pending[rest:])
		e.pending = e.pending[:rest]
		e.npending.Store(int32(rest))
	}
}

// durableState is the environment's state as the journal has it now.
func (e *envLedger) durableState() *EnvState {
	if e.npending.Load() > 0 {
		e.pendMu.Lock()
		e.advanceLocked()
		e.pendMu.Unlock()
	}
	return e.durable.Load()
}

// durablePool is the pool as the journal has it.
func (e *envLedger) durablePool() policy.Pool { return poolOf(e.durableState()) }

// poolOf is the pool an environment state describes.
func poolOf(st *EnvState) policy.Pool {
	return policy.Pool{Available: st.Balance.Sub(st.Held), ReserveFloor: st.ReserveFloor, Held: st.Held}
}

func (s *System) env(ownerID string, env Env) (*envLedger, error) {
	k := string(join(ownerID, string(env)))
	// Every request looks its environment up (the practice clock ages its
	// key), so the common case takes no lock.
	if e, ok := s.envs.Load(k); ok {
		return e.(*envLedger), nil
	}
	s.envMu.Lock()
	defer s.envMu.Unlock()
	if e, ok := s.envs.Load(k); ok {
		return e.(*envLedger), nil
	}
	e := &envLedger{key: []byte(k)}
	found, err := s.getJSON(bEnvs, e.key, &e.state)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errorf(CodeNotFound, "The owner environment %s/%s does not exist.", ownerID, env)
	}
	e.offset.Store(int64(e.state.ClockOffset))
	e.eventFloor.Store(e.state.EventFloor)
	// The newest event's time carries over a restart: a wall clock set
	// back meanwhile must not date new events before it.
	if e.state.Sequence > e.state.EventFloor {
		var last StoredEvent
		if _, err := s.getJSON(bEvents, seqKey(prefixOf(ownerID, string(env)), e.state.Sequence), &last); err != nil {
			return nil, err
		}
		e.lastEventAt = last.Created
	}
	st := e.state // read from the store: durable
	e.durable.Store(&st)
	s.envs.Store(k, e)
	return e, nil
}

// pool is the pool as a spend sees it. Caller holds mu.
func (e *envLedger) pool() policy.Pool {
	return poolOf(&e.state)
}

// change accumulates the ops of one journal record.
type change struct {
	ops    []persistence.Op
	events []StoredEvent
	spends []string // spends whose state changes, for watchers
	// marks are the spend states written (putSpend), for the summaries
	// of their hours (see spend_hours.go).
	marks []spendMark
	// buf holds the values encoded by hand (see appendTo), nil until the
	// first one.
	buf *[]byte
}

func (c *change) put(bucket string, key []byte, v any) {
	b, err := fastjson.Marshal(v)
	if err != nil {
		panic(err) // our own types always encode
	}
	c.ops = append(c.ops, persistence.Put(bucket, key, b))
}

func (c *change) putRaw(bucket string, key, v []byte) {
	c.ops = append(c.ops, persistence.Put(bucket, key, v))
}

func (c *change) del(bucket string, key []byte) {
	c.ops = append(c.ops, persistence.Del(bucket, key))
}

// event adds an event with the environment's next sequence. Caller holds
// e.mu, so sequence order is journal order.
func (c *change) event(e *envLedger, agentID, typ string, obj any, audience []string, now time.Time) {
	e.state.Sequence++
	if now.Before(e.lastEventAt) {
		now = e.lastEventAt // created never goes back as sequence goes up
	}
	e.lastEventAt = now
	ev := StoredEvent{Event: Event{ID: NewID("evt", now), Object: "event", Type: typ, APIVersion: APIVersion,
		Created: now.UTC(), Livemode: e.state.Env.Livemode(), Sequence: e.state.Sequence, AgentID: agentID,
		Data: EventData{Object: obj}}, AudienceList: audience, OwnerID: e.state.OwnerID}
	c.appendTo(bEvents, seqKey(prefixOf(e.state.OwnerID, string(e.state.Env)), ev.Sequence),
		func(b []byte) []byte { return appendStoredEvent(b, &ev) })
	c.putRaw(bEventIDs, []byte(ev.ID), seqKey(nil, ev.Sequence))
	c.events = append(c.events, ev)
}

// commit appends the record with the environment state as it is now.
// Caller holds e.mu so records of one environment enter the journal in
// sequence order.
func (s *System) commit(gen uint64, e *envLedger, c *change) *persistence.Ticket {
	var touched []*summaryEntry
	if e != nil {
		touched = s.summarize(e, c)
		c.putEnvState(e.key, &e.state)
		e.commits++
	}
	t := s.store.Append(gen, persistence.Record{Ops: c.ops})
	for _, ent := range touched {
		ent.written = t
	}
	c.release()
	if e != nil {
		st := e.state
		e.appended(t, &st)
	}
	if len(c.spends) > 0 || len(c.events) > 0 {
		s.hub.published(t, c.spends, c.events)
	}
	return t
}

// chainHash is the link a receipt leaves for the next one of its owner
// (the receipt package's ChainHash, which the actors do not import).
func chainHash(jws string) string {
	// Hashed in place: a token is over a kilobyte, and every settled spend
	// hashes one.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(jws), len(jws)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

var (
	audienceBoth  = []string{"agent", "owner"}
	audienceOwner = []string{"owner"}
)

func spendRef(sp *policy.Spend) SpendRef {
	r := SpendRef{ID: sp.ID, Object: "spend", Status: sp.Status, Amount: sp.Amount, AmountSettled: sp.AmountSettled,
		Destination: sp.Destination}
	// A settled spend's event carries settlement.receipt_id (spec 6.2),
	// null when its receipt could not be signed, so that a receiver
	// walking the receipts sees the gap rather than a missing member.
	if sp.Settlement != nil && (sp.Settlement.ReceiptID != nil || sp.Status == policy.StatusSettled) {
		r.Settlement = &struct {
			ReceiptID *string `json:"receipt_id"`
		}{sp.Settlement.ReceiptID}
	}
	return r
}

func jsonUnmarshal(b []byte, v any) error { return fastjson.Unmarshal(b, v) }
