package actors

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"

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
	bloomBits  = bloomBytes * 8
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
		for _, i := range bloomIndexes(sum) {
			h[3+i/8] |= 1 << (i % 8)
		}
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
		sum, ok := destinationHash(destination)
		if ok {
			for _, i := range bloomIndexes(sum) {
				if h[3+i/8]&(1<<(i%8)) == 0 {
					return false
				}
			}
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

// bloomIndexes are the filter's bits of a hash (double hashing).
func bloomIndexes(sum uint64) [bloomProbe]uint {
	a, b := uint(sum), uint(sum>>32)|1
	var out [bloomProbe]uint
	for i := range out {
		out[i] = (a + uint(i)*b) % bloomBits
	}
	return out
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

// hourEntry is a summary as the environment's last record left it.
type hourEntry struct {
	sum hourSummary
	// written is the record that wrote it, nil when read from the store;
	// the entry is kept at least until that record is done, since a read
	// of the store would not see it before.
	written *persistence.Ticket
}

// maxHourEntries bounds an environment's summaries in memory: past it,
// those whose records are done are dropped (and read again when needed).
const maxHourEntries = 1024

// summarize adds the change's spend states to the summaries of their
// hours and writes those that changed. Caller holds e.mu, so the
// summaries of the environment's hours change in journal order.
func (s *System) summarize(e *envLedger, c *change) []*hourEntry {
	if len(c.marks) == 0 {
		return nil
	}
	var touched []*hourEntry
	// The keys are built in a scratch buffer: most spends change no
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
			ent := s.hourEntry(e, k)
			if ent.sum.add(m.status, m.destination) {
				c.putRaw(bSpendHours, bytes.Clone(k), append([]byte(nil), ent.sum[:]...))
				touched = append(touched, ent)
			}
		}
	}
	return touched
}

// hourEntry is the summary under k, from memory or the store; an entry
// that does not decode is taken as saturated (it passes over nothing).
func (s *System) hourEntry(e *envLedger, k []byte) *hourEntry {
	if ent := e.hours[string(k)]; ent != nil {
		return ent
	}
	if len(e.hours) >= maxHourEntries {
		for key, ent := range e.hours {
			if ent.written == nil || isDone(ent.written) {
				delete(e.hours, key)
			}
		}
	}
	ent := &hourEntry{}
	if v, err := s.store.Get(bSpendHours, k); err != nil || v != nil && len(v) != len(ent.sum) {
		saturate(&ent.sum)
	} else {
		copy(ent.sum[:], v)
	}
	if e.hours == nil {
		e.hours = make(map[string]*hourEntry)
	}
	e.hours[string(k)] = ent
	return ent
}

// saturate makes a summary that passes over nothing.
func saturate(h *hourSummary) {
	for i := range h {
		h[i] = 0xff
	}
}

// hourFilter is what a list of spends passes over: nil when the list has
// no filter the summaries answer.
type hourFilter struct {
	sys         *System
	index       byte
	status      policy.Status
	destination string
	// the hour seen last and whether it may hold a match
	hour    uint32
	seen    bool
	mayHold bool
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
	if !f.seen || hour != f.hour {
		f.seen, f.hour, f.mayHold = true, hour, true
		v, err := f.sys.store.Get(bSpendHours, hourKey(f.index, prefix, hour))
		var h hourSummary
		if err == nil && len(v) == len(h) {
			copy(h[:], v)
			f.mayHold = h.mayHold(f.status, f.destination)
		}
	}
	if f.mayHold {
		return nil, false
	}
	next := hourBound(prefix, hour, newestFirst)
	if next != nil {
		f.sys.hoursPassedOver.Add(1)
	}
	return next, next != nil
}

// indexSpendHours summarizes the hours of every spend, once: on a store
// that has no spendHoursIndexed mark. The summaries go in records of at
// most sweepRecordOps ops, the mark with the last, so a start cut short
// does it again from the beginning (a summary written twice is the same).
// New calls it before any list reads them; no spend is written meanwhile.
func (s *System) indexSpendHours(ctx context.Context) error {
	mark, err := s.store.Get(bMeta, []byte(spendHoursIndexed))
	if err != nil {
		return fmt.Errorf("actors: reading the mark of the spends' hours: %w", err)
	}
	if mark != nil {
		return nil
	}
	envOf := map[string][]byte{} // agent id -> owner id|env|
	err = s.store.Scan(bAgents, nil, nil, false, func(_, v []byte) bool {
		var a Agent
		if jsonUnmarshal(v, &a) == nil && a.ID != "" {
			envOf[a.ID] = prefixOf(a.OwnerID, string(EnvOf(a.Livemode)))
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("actors: reading the agents to summarize their spends: %w", err)
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
	if err != nil {
		return fmt.Errorf("actors: reading the spends to summarize their hours: %w", err)
	}
	w := &sweepWriter{s: s, gen: s.store.Gen()}
	for k, h := range sums {
		w.add(persistence.Put(bSpendHours, []byte(k), append([]byte(nil), h[:]...)))
	}
	w.add(persistence.Put(bMeta, []byte(spendHoursIndexed), []byte("1")))
	if err := w.finish(ctx); err != nil {
		return fmt.Errorf("actors: writing the summaries of the spends' hours: %w", err)
	}
	if n > 0 {
		s.log.Info("summarized the hours of the spends", "spends", n, "hours", len(sums))
	}
	return nil
}
