package actors

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/persistence"
)

// The blocks of the events. An environment's events are numbered in one
// sequence, and every list of them walks that sequence newest first: an
// agent's key lists its own agent's events, an owner may name an agent or
// a type. An agent that is quiet among busy ones, or a type that is rare,
// would have the list read 30 days of the environment's events for a
// page. bEventBlocks keeps, for each block of eventBlockSize sequence
// numbers, a Bloom filter of its events' types, type families and agents
// (apart for the events an agent may see); the walk passes over a block
// that cannot hold a match. Like the spends' hours (spend_hours.go), a
// summary only gains, is written in the record of the events it adds and
// only when it changes.

// eventBlocksIndexed marks, in bMeta, a store whose events all have their
// block summarized (indexEventBlocks).
const eventBlocksIndexed = "index:event_blocks"

// eventBlockSize is the number of sequence numbers a summary covers.
const eventBlockSize = 1024

// eventSummary is a Bloom filter of 2,048 bits: a block of a thousand
// events of a hundred agents leaves most bits of other agents unset.
type eventSummary [256]byte

// The kinds of entries in an eventSummary, each a prefix of what is hashed.
const (
	entryType       = 't' // the exact type
	entryFamily     = 'f' // the type up to its first dot ("spend.")
	entryAgent      = 'a' // the event's agent
	entryAgentShown = 'g' // the event's agent, for an event agents may see
)

// eventEntryHash is FNV-1a of a kind byte and a string.
func eventEntryHash(kind byte, v string) uint64 {
	sum := uint64(14695981039346656037)
	sum = (sum ^ uint64(kind)) * 1099511628211
	for i := 0; i < len(v); i++ {
		sum = (sum ^ uint64(v[i])) * 1099511628211
	}
	return sum
}

// family is a type's first part and its dot ("spend."), or "" for a type
// without a dot.
func family(typ string) string {
	if i := strings.IndexByte(typ, '.'); i > 0 {
		return typ[:i+1]
	}
	return ""
}

// add records an event of the block; it reports whether the summary
// changed.
func (b *eventSummary) add(ev *StoredEvent) bool {
	before := *b
	bloomAdd(b[:], eventEntryHash(entryType, ev.Type))
	if f := family(ev.Type); f != "" {
		bloomAdd(b[:], eventEntryHash(entryFamily, f))
	}
	if ev.AgentID != "" {
		bloomAdd(b[:], eventEntryHash(entryAgent, ev.AgentID))
		if hasAudience(ev.AudienceList, "agent") {
			bloomAdd(b[:], eventEntryHash(entryAgentShown, ev.AgentID))
		}
	}
	return *b != before
}

// mayHold reports whether an event of the block may pass a list's
// filters: the type filter (exact, "family.*" or "" for none), an agent
// ("" for none), and whether the agent must be one shown to agents.
func (b *eventSummary) mayHold(typeFilter, agentID string, shownToAgent bool) bool {
	if typeFilter != "" {
		if p, wild := strings.CutSuffix(typeFilter, "*"); !wild {
			if !bloomHas(b[:], eventEntryHash(entryType, typeFilter)) {
				return false
			}
		} else if p != "" && family(p) == p && !bloomHas(b[:], eventEntryHash(entryFamily, p)) {
			// Only a whole family is summarized; "spend.se*" reads on.
			return false
		}
	}
	if agentID != "" {
		kind := byte(entryAgent)
		if shownToAgent {
			kind = entryAgentShown
		}
		if !bloomHas(b[:], eventEntryHash(kind, agentID)) {
			return false
		}
	}
	return true
}

// eventFilter passes over the blocks of an environment's events that
// cannot hold a match of a list.
type eventFilter struct {
	sys          *System
	typeFilter   string
	agentID      string
	shownToAgent bool
	at           partCache // the block of the last entry
}

// newEventFilter is the filter of a list, or nil when the list has no
// filter a summary answers.
func newEventFilter(s *System, typeFilter, agentID string, shownToAgent bool) *eventFilter {
	if agentID == "" && (typeFilter == "" || typeFilter == "*") {
		return nil
	}
	return &eventFilter{sys: s, typeFilter: typeFilter, agentID: agentID, shownToAgent: shownToAgent}
}

func (f *eventFilter) passOver(prefix, rest []byte, newestFirst bool) ([]byte, bool) {
	if len(rest) != 8 {
		return nil, false
	}
	block := binary.BigEndian.Uint64(rest) / eventBlockSize
	if f.at.enter(block) {
		v, err := f.sys.store.Get(bEventBlocks, binary.BigEndian.AppendUint64(bytes.Clone(prefix), block))
		var b eventSummary
		if err == nil && len(v) == len(b) {
			copy(b[:], v)
			f.at.mayHold = b.mayHold(f.typeFilter, f.agentID, f.shownToAgent)
		}
	}
	if f.at.mayHold {
		return nil, false
	}
	return f.at.passed(f.sys, blockBound(prefix, block, newestFirst))
}

// blockBound is the event key a walk goes on from to pass over a block:
// the last sequence of the block before when walking newest first, the
// first of the next otherwise (scans start inclusive); nil when there is
// nothing before.
func blockBound(prefix []byte, block uint64, newestFirst bool) []byte {
	if !newestFirst {
		return seqKey(prefix, (block+1)*eventBlockSize)
	}
	if block == 0 {
		return nil
	}
	return seqKey(prefix, block*eventBlockSize-1)
}

// indexEventBlocks summarizes the blocks of every event, once: on a store
// that has no eventBlocksIndexed mark (see indexOnce).
func (s *System) indexEventBlocks(ctx context.Context) error {
	return s.indexOnce(ctx, eventBlocksIndexed, "the summaries of the events' blocks", "summarized the blocks of the events",
		func(add func(persistence.Op)) ([]any, error) {
			sums := map[string]*eventSummary{}
			n := 0
			err := s.store.Scan(bEvents, nil, nil, false, func(k, v []byte) bool {
				var ev StoredEvent
				if len(k) < 9 || fastjson.Unmarshal(v, &ev) != nil {
					return true
				}
				key := blockKeyOf(k)
				b := sums[string(key)]
				if b == nil {
					b = &eventSummary{}
					sums[string(key)] = b
				}
				b.add(&ev)
				n++
				return true
			})
			if err != nil || n == 0 {
				return nil, err
			}
			for k, b := range sums {
				add(persistence.Put(bEventBlocks, []byte(k), bytes.Clone(b[:])))
			}
			return []any{"events", n, "blocks", len(sums)}, nil
		})
}

// blockKeyOf is the summary key of the block of an event key
// (owner id|env|sequence(8)).
func blockKeyOf(eventKey []byte) []byte {
	prefix := eventKey[:len(eventKey)-8]
	seq := binary.BigEndian.Uint64(eventKey[len(eventKey)-8:])
	return binary.BigEndian.AppendUint64(bytes.Clone(prefix), seq/eventBlockSize)
}

// dropEventBlocksBelow deletes an environment's block summaries whose
// every sequence number is below first (their events are gone: the
// retention sweep or a practice reset deleted them).
func (s *System) dropEventBlocksBelow(ctx context.Context, prefix []byte, first uint64) error {
	var ops []persistence.Op
	err := s.store.Scan(bEventBlocks, prefix, nil, false, func(k, _ []byte) bool {
		if len(k) != len(prefix)+8 || (binary.BigEndian.Uint64(k[len(prefix):])+1)*eventBlockSize > first {
			return false
		}
		ops = append(ops, persistence.Del(bEventBlocks, bytes.Clone(k)))
		return len(ops) < sweepRecordOps
	})
	if err != nil || len(ops) == 0 {
		return err
	}
	return s.store.Append(s.store.Gen(), persistence.Record{Ops: ops}).Wait(ctx)
}
