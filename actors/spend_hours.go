package actors

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// The hours of the spend indexes. A list filtered by a final status
// (declined, failed…) or by destination walks an index of spends newest
// first and keeps those that match; when few match, it reads a long
// history for a page. bSpendHours keeps, for each hour of each index (an
// agent's, an environment's), which statuses its spends have had and a
// Bloom filter of their destinations. The walk passes over an hour whose
// summary shows that none of its spends can match, without reading them.
//
// A summary only ever gains: a spend that moves on leaves its old status
// set, and a practice reset leaves an environment's hours as they were.
// That makes a summary a superset of its hour, which is all the walk needs
// (it may read an hour for nothing, never pass over a match), and it makes
// a record that fails to commit harmless (the memory is ahead of the disk
// by bits that only cost a read). Each summary is written in the record
// that writes the spend state it adds, and only when it changes: an hour
// whose statuses and destinations are all seen already costs nothing more.

// spendHoursIndexed marks, in bMeta, a store whose spends all have their
// hours summarized. A store written before the summaries existed gets them
// once, at the start (indexSpendHours).
const spendHoursIndexed = "index:spend_hours"

// The index a summary key belongs to: its first byte.
const (
	hoursOfAgent = 'a' // bAgentSpends, keyed by agent id|
	hoursOfEnv   = 'e' // bEnvSpends, keyed by owner id|env|
)

// millisPerHour is the width of a summary's slice of an index.
const millisPerHour = 3_600_000

// hourSummary is the value of a summary: the statuses' bits (two bytes),
// flags (one byte) and a Bloom filter of the destinations.
type hourSummary [3 + bloomBytes]byte

const (
	bloomBytes = 64 // 512 bits: a few hundred destinations an hour before it saturates
	bloomProbe = 4
	// summary flags: a spend whose destination is not plain ASCII, which
	// the filter's case-folding hash cannot place; a status with no bit.
	hourOddDestination = 1 << 0
	hourOddStatus      = 1 << 1
)

// statusBit numbers the statuses a summary records.
var statusBit = map[policy.Status]uint16{
	policy.StatusPendingApproval: 1 << 0, policy.StatusApproved: 1 << 1, policy.StatusDeclined: 1 << 2,
	policy.StatusProcessing: 1 << 3, policy.StatusSettled: 1 << 4, policy.StatusFailed: 1 << 5,
	policy.StatusExpired: 1 << 6, policy.StatusCancelled: 1 << 7, policy.StatusRefunded: 1 << 8,
	policy.StatusDisputed: 1 << 9,
}

// add records a spend of the hour; it reports whether the summary changed.
func (h *hourSummary) add(status policy.Status, destination string) bool {
	before := *h
	if bit, ok := statusBit[status]; ok {
		binary.BigEndian.PutUint16(h[0:2], binary.BigEndian.Uint16(h[0:2])|bit)
	} else {
		h[2] |= hourOddStatus
	}
	if sum, ok := destinationHash(destination); ok {
		bloomAdd(h[3:], sum)
	} else {
		h[2] |= hourOddDestination
	}
	return *h != before
}

// mayHold reports whether a spend of the hour may have the status (none:
// "") and the destination (none: ""), compared without case as the list
// compares them.
func (h *hourSummary) mayHold(status policy.Status, destination string) bool {
	if status != "" && h[2]&hourOddStatus == 0 {
		bit, ok := statusBit[status]
		if ok && binary.BigEndian.Uint16(h[0:2])&bit == 0 {
			return false
		}
	}
	if destination != "" && h[2]&hourOddDestination == 0 {
		// A destination that is not plain ASCII may equal, without case,
		// one that is (the Kelvin sign and k): no hour is passed over.
		if sum, ok := destinationHash(destination); ok && !bloomHas(h[3:], sum) {
			return false
		}
	}
	return true
}

// destinationHash is FNV-1a of a plain ASCII destination in lower case,
// or false for one that is not plain ASCII.
func destinationHash(d string) (uint64, bool) {
	sum := uint64(14695981039346656037)
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c >= 0x80 {
			return 0, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		sum ^= uint64(c)
		sum *= 1099511628211
	}
	return sum, true
}

// bloomIndexes are the bits of a hash in a Bloom filter of n bits
// (double hashing).
func bloomIndexes(sum uint64, n uint) [bloomProbe]uint {
	a, b := uint(sum), uint(sum>>32)|1
	var out [bloomProbe]uint
	for i := range out {
		out[i] = (a + uint(i)*b) % n
	}
	return out
}

// bloomAdd sets a hash's bits in the filter bits.
func bloomAdd(bits []byte, sum uint64) {
	for _, i := range bloomIndexes(sum, uint(len(bits))*8) {
		bits[i/8] |= 1 << (i % 8)
	}
}

// bloomHas reports whether every bit of a hash is set in the filter bits.
func bloomHas(bits []byte, sum uint64) bool {
	for _, i := range bloomIndexes(sum, uint(len(bits))*8) {
		if bits[i/8]&(1<<(i%8)) == 0 {
			return false
		}
	}
	return true
}

// spendHour is the hour, since 1970, of a spend id's time (its first six
// bytes are milliseconds: NewID), or false for a string that is no id.
func spendHour(id []byte) (uint32, bool) {
	const at = len("spd_")
	if len(id) < at+12 {
		return 0, false
	}
	var ms [8]byte
	if _, err := hex.Decode(ms[2:], id[at:at+12]); err != nil {
		return 0, false
	}
	return uint32(binary.BigEndian.Uint64(ms[:]) / millisPerHour), true
}

// hourKey is the summary key of an index's hour.
func hourKey(index byte, prefix []byte, hour uint32) []byte {
	k := make([]byte, 0, 1+len(prefix)+4)
	k = append(k, index)
	k = append(k, prefix...)
	return binary.BigEndian.AppendUint32(k, hour)
}

// hourBound is the key of an index (prefix) that a walk continues from to
// pass over an hour: the last id before the hour when walking newest
// first, the first id of the next hour otherwise. Scans start inclusive.
func hourBound(prefix []byte, hour uint32, newestFirst bool) []byte {
	var b [6]byte
	ms := uint64(hour) * millisPerHour
	tail := "00000000000000000000" // the 20 hex digits after the time
	if newestFirst {
		if ms == 0 {
			return nil
		}
		ms--
		tail = "ffffffffffffffffffff"
	} else {
		ms += millisPerHour
	}
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	k := append(append([]byte{}, prefix...), "spd_"...)
	k = hex.AppendEncode(k, b[:])
	return append(k, tail...)
}

// spendMark is a spend state that a change writes, for the summaries of
// its hour.
type spendMark struct {
	agentID, spendID string
	status           policy.Status
	destination      string
}

// putSpend writes a spend's JSON and notes its state for the summaries,
// which commit writes. Every write of a spend goes through it.
func (c *change) putSpend(sp *policy.Spend, body []byte) {
	c.putRaw(bSpends, []byte(sp.ID), body)
	c.marks = append(c.marks, spendMark{agentID: sp.AgentID, spendID: sp.ID, status: sp.Status, destination: sp.Destination})
}

// summaryEntry is a summary (of a spend hour or an event block) as the
// environment's last record left it.
type summaryEntry struct {
	b []byte
	// written is the record that wrote it, nil when read from the store;
	// the entry is kept at least until that record is done, since a read
	// of the store would not see it before.
	written *persistence.Ticket
}

// maxSummaryEntries bounds an environment's summaries of one kind in
// memory: past it, those whose records are done are dropped (and read
// again from the store when needed, a lookup in memory for the recent
// ones). Low, so that every busy environment of a long-running service
// holds tens of kilobytes of them, not megabytes.
const maxSummaryEntries = 256

// summarize adds the change's spend states and events to the summaries
// of their hours and blocks, and writes those that changed. Caller holds
// e.mu, so the environment's summaries change in journal order.
func (s *System) summarize(e *envLedger, c *change) []*summaryEntry {
	if len(c.marks) == 0 && len(c.events) == 0 {
		return nil
	}
	var touched []*summaryEntry
	// The keys are built in a scratch buffer: most records change no
	// summary, and a lookup by a converted key does not copy it.
	var scratch [160]byte
	for _, m := range c.marks {
		hour, ok := spendHour([]byte(m.spendID))
		if !ok {
			continue
		}
		for _, index := range []byte{hoursOfAgent, hoursOfEnv} {
			k := append(scratch[:0], index)
			if index == hoursOfAgent {
				k = append(append(k, m.agentID...), '|')
			} else {
				k = append(append(k, e.key...), '|')
			}
			k = binary.BigEndian.AppendUint32(k, hour)
			ent := s.cachedSummary(&e.hours, bSpendHours, k, len(hourSummary{}))
			if (*hourSummary)(ent.b).add(m.status, m.destination) {
				c.putRaw(bSpendHours, bytes.Clone(k), bytes.Clone(ent.b))
				touched = append(touched, ent)
			}
		}
	}
	for i := range c.events {
		ev := &c.events[i]
		k := append(append(scratch[:0], e.key...), '|')
		k = binary.BigEndian.AppendUint64(k, ev.Sequence/eventBlockSize)
		ent := s.cachedSummary(&e.blocks, bEventBlocks, k, len(eventSummary{}))
		if (*eventSummary)(ent.b).add(ev) {
			c.putRaw(bEventBlocks, bytes.Clone(k), bytes.Clone(ent.b))
			touched = append(touched, ent)
		}
	}
	return touched
}

// cachedSummary is the summary of size bytes under k in bucket, from the
// cache m or the store; one that does not decode is taken as saturated
// (it passes over nothing).
func (s *System) cachedSummary(m *map[string]*summaryEntry, bucket string, k []byte, size int) *summaryEntry {
	if ent := (*m)[string(k)]; ent != nil {
		return ent
	}
	if len(*m) >= maxSummaryEntries {
		for key, ent := range *m {
			if ent.written == nil || isDone(ent.written) {
				delete(*m, key)
			}
		}
	}
	ent := &summaryEntry{b: make([]byte, size)}
	if v, err := s.store.Get(bucket, k); err != nil || v != nil && len(v) != size {
		saturate(ent.b)
	} else {
		copy(ent.b, v)
	}
	if *m == nil {
		*m = make(map[string]*summaryEntry)
	}
	(*m)[string(k)] = ent
	return ent
}

// saturate makes a summary that passes over nothing.
func saturate(b []byte) {
	for i := range b {
		b[i] = 0xff
	}
}

// hourFilter is what a list of spends passes over: nil when the list has
// no filter the summaries answer.
type hourFilter struct {
	sys         *System
	index       byte
	status      policy.Status
	destination string
	at          partCache // the hour of the last entry
}

// newHourFilter is the filter of a list of pg's index, or nil.
func newHourFilter(s *System, pg pager, status policy.Status, destination string) *hourFilter {
	if status == "" && destination == "" {
		return nil
	}
	index := byte(hoursOfEnv)
	if pg.bucket == bAgentSpends {
		index = hoursOfAgent
	}
	return &hourFilter{sys: s, index: index, status: status, destination: destination}
}

// passOver reports whether the walk may pass over the hour of the index
// entry whose spend id is id, and where to continue if so.
func (f *hourFilter) passOver(prefix, id []byte, newestFirst bool) ([]byte, bool) {
	hour, ok := spendHour(id)
	if !ok {
		return nil, false
	}
	if f.at.enter(uint64(hour)) {
		v, err := f.sys.store.Get(bSpendHours, hourKey(f.index, prefix, hour))
		var h hourSummary
		if err == nil && len(v) == len(h) {
			copy(h[:], v)
			f.at.mayHold = h.mayHold(f.status, f.destination)
		}
	}
	if f.at.mayHold {
		return nil, false
	}
	return f.at.passed(f.sys, hourBound(prefix, hour, newestFirst))
}

// indexSpendHours summarizes the hours of every spend, once: on a store
// that has no spendHoursIndexed mark (see indexOnce).
func (s *System) indexSpendHours(ctx context.Context) error {
	return s.indexOnce(ctx, spendHoursIndexed, "the summaries of the spends' hours", "summarized the hours of the spends",
		func(add func(persistence.Op)) ([]any, error) {
			envOf := map[string][]byte{} // agent id -> owner id|env|
			err := s.store.Scan(bAgents, nil, nil, false, func(_, v []byte) bool {
				var a Agent
				if jsonUnmarshal(v, &a) == nil && a.ID != "" {
					envOf[a.ID] = prefixOf(a.OwnerID, string(EnvOf(a.Livemode)))
				}
				return true
			})
			if err != nil {
				return nil, err
			}
			sums := map[string]*hourSummary{}
			n := 0
			err = s.store.Scan(bSpends, nil, nil, false, func(k, v []byte) bool {
				var sp policy.Spend
				hour, ok := spendHour(k)
				if !ok || fastjson.Unmarshal(v, &sp) != nil || envOf[sp.AgentID] == nil {
					return true
				}
				for _, key := range [][]byte{hourKey(hoursOfAgent, prefixOf(sp.AgentID), hour), hourKey(hoursOfEnv, envOf[sp.AgentID], hour)} {
					h := sums[string(key)]
					if h == nil {
						h = &hourSummary{}
						sums[string(key)] = h
					}
					h.add(sp.Status, sp.Destination)
				}
				n++
				return true
			})
			if err != nil || n == 0 {
				return nil, err
			}
			for k, h := range sums {
				add(persistence.Put(bSpendHours, []byte(k), bytes.Clone(h[:])))
			}
			return []any{"spends", n, "hours", len(sums)}, nil
		})
}
