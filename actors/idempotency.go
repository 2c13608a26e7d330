package actors

import (
	"bytes"
	"encoding/hex"
	"hash/maphash"
	"time"

	"github.com/agentpay/guard/internal/fastjson"
)

// IdempotencyMemory is how long an agent's Idempotency-Key answers with the
// spend it made, by the clock of the agent's environment: twice the 24
// hours spec 8.2 asks for at the least. A key used again later makes a new
// payment.
const IdempotencyMemory = 48 * time.Hour

// The idempotency record of a spend is the value of its entry in the
// agent's index (agent id|spend id): the key, a zero byte (keys are
// printable ASCII, so it cannot be part of one), then the idemRecord JSON.
// Spend ids sort by time, so every spend appends to the end of its agent's
// part of the index. A bucket keyed by agent|Idempotency-Key took the same
// record at a random place: each insert dirtied a page of its own, which a
// checkpoint rewrote whole (16 KiB for a 300-byte record, a quarter of the
// bytes a busy service wrote), and every new key cost a lookup in the
// store. The actor instead keeps a hash of each key of the memory window
// (idemIndex) and reads the entry back only when the hash matches.
//
// Entries written before this layout have an empty value and their record
// in bIdem; an agent with such entries inside the window also looks there
// (legacyIdemUntil).

// appendIdemEntry appends the index entry of a spend made under key.
func appendIdemEntry(b []byte, key string, r *idemRecord) []byte {
	b = append(b, key...)
	b = append(b, 0)
	return appendIdemRecord(b, r)
}

// parseIdemEntry splits an index entry into its key and record; ok is false
// for an entry of the old layout (empty) or one that does not parse.
func parseIdemEntry(v []byte) (key []byte, rec []byte, ok bool) {
	i := bytes.IndexByte(v, 0)
	if i <= 0 {
		return nil, nil, false
	}
	return v[:i], v[i+1:], true
}

// idemSeed hashes the keys of every agent's index. The hashes live only in
// memory, rebuilt at each activation, so one seed per process suffices.
var idemSeed = maphash.MakeSeed()

// idemSpend is a spend id in its 16 bytes (NewID's hex, decoded): what the
// index keeps of each spend, a quarter of the id as a string.
type idemSpend [16]byte

// idemEntry is one key of the window, in creation order.
type idemEntry struct {
	hash  uint64
	spend idemSpend
}

// idemIndex maps the hash of each Idempotency-Key the agent used within
// IdempotencyMemory to the spend made under it. A hash shared by two keys
// (a 64-bit collision) keeps the later spends in more; lookups compare
// the stored key, so a collision costs a read, never a wrong answer.
type idemIndex struct {
	first map[uint64]idemSpend
	more  map[uint64][]idemSpend
	order []idemEntry // oldest first; order[head:] are in the window
	head  int
	// legacyUntil (Unix milliseconds): until then an entry of the old
	// layout may still be in the window, and a key not found here is
	// looked up in bIdem.
	legacyUntil int64
}

func hashIdemKey(key []byte) uint64 { return maphash.Bytes(idemSeed, key) }

func spendOfID(id string) (idemSpend, bool) {
	var s idemSpend
	if len(id) != len("spd_")+32 || id[:4] != "spd_" {
		return s, false
	}
	_, err := hex.Decode(s[:], []byte(id[4:]))
	return s, err == nil
}

func (s idemSpend) id() string { return "spd_" + hex.EncodeToString(s[:]) }

func (s idemSpend) millis() int64 {
	return int64(s[0])<<40 | int64(s[1])<<32 | int64(s[2])<<24 | int64(s[3])<<16 | int64(s[4])<<8 | int64(s[5])
}

// add notes a spend made under the key of hash h.
func (x *idemIndex) add(h uint64, s idemSpend) {
	if x.first == nil {
		x.first = map[uint64]idemSpend{}
	}
	if _, taken := x.first[h]; taken {
		if x.more == nil {
			x.more = map[uint64][]idemSpend{}
		}
		x.more[h] = append(x.more[h], s)
	} else {
		x.first[h] = s
	}
	x.order = append(x.order, idemEntry{hash: h, spend: s})
}

// candidates lists the spends whose key has hash h, oldest first.
func (x *idemIndex) candidates(h uint64) []idemSpend {
	if x == nil {
		return nil
	}
	s, ok := x.first[h]
	if !ok {
		return nil
	}
	return append([]idemSpend{s}, x.more[h]...)
}

// forget drops the keys of spends made before cut (Unix milliseconds).
func (x *idemIndex) forget(cut int64) {
	for x.head < len(x.order) && x.order[x.head].spend.millis() < cut {
		e := x.order[x.head]
		x.order[x.head] = idemEntry{}
		x.head++
		if x.first[e.hash] == e.spend {
			if rest := x.more[e.hash]; len(rest) > 0 {
				x.first[e.hash] = rest[0]
				x.setMore(e.hash, rest[1:])
			} else {
				delete(x.first, e.hash)
			}
			continue
		}
		rest := x.more[e.hash]
		for i, s := range rest {
			if s == e.spend {
				x.setMore(e.hash, append(rest[:i:i], rest[i+1:]...))
				break
			}
		}
	}
	// Move the window to the front once most of the slice is behind it,
	// so the slice does not grow with every key ever used.
	if x.head > 64 && x.head*2 > len(x.order) {
		n := copy(x.order, x.order[x.head:])
		clear(x.order[n:])
		x.order, x.head = x.order[:n], 0
	}
	if len(x.first) == 0 {
		x.first, x.more, x.order, x.head = nil, nil, nil, 0
	}
}

func (x *idemIndex) setMore(h uint64, rest []idemSpend) {
	if len(rest) == 0 {
		delete(x.more, h)
		if len(x.more) == 0 {
			x.more = nil
		}
		return
	}
	x.more[h] = rest
}

// loadIdem builds the index from the agent's spends of the window.
func (a *agentActor) loadIdem(now time.Time) error {
	a.idem = nil
	x := &idemIndex{}
	prefix := prefixOf(a.id)
	from := append(append([]byte{}, prefix...), idTimePrefix("spd", now.Add(-IdempotencyMemory))...)
	var legacy int64
	err := a.sys.store.Scan(bAgentSpends, prefix, from, false, func(k, v []byte) bool {
		s, ok := spendOfID(string(k[len(prefix):]))
		if !ok {
			return true // not a spend id: nothing of NewID's
		}
		key, _, ok := parseIdemEntry(v)
		if !ok {
			legacy = max(legacy, s.millis())
			return true
		}
		x.add(hashIdemKey(key), s)
		return true
	})
	if legacy > 0 {
		x.legacyUntil = legacy + IdempotencyMemory.Milliseconds()
	}
	if len(x.first) > 0 || legacy > 0 {
		a.idem = x
	}
	return err
}

// findIdem returns the durable record of the spend made under key within
// the window, if any. Keys of spends whose record is not durable yet are in
// recentKeys, which the caller reads first.
func (a *agentActor) findIdem(key string, now time.Time) (rec idemRecord, found bool, err error) {
	if a.idem == nil {
		return rec, false, nil
	}
	a.idem.forget(now.Add(-IdempotencyMemory).UnixMilli())
	legacy := now.UnixMilli() < a.idem.legacyUntil
	if len(a.idem.first) == 0 && !legacy {
		a.idem = nil // an agent idle for the whole window keeps nothing
		return rec, false, nil
	}
	for _, s := range a.idem.candidates(hashIdemKey([]byte(key))) {
		v, err := a.sys.store.Get(bAgentSpends, join(a.id, s.id()))
		if err != nil {
			return rec, false, err
		}
		k, raw, ok := parseIdemEntry(v)
		if !ok || string(k) != key {
			continue // another key with the same hash
		}
		if err := fastjson.Unmarshal(raw, &rec); err != nil {
			return rec, false, err
		}
		return rec, true, nil
	}
	if legacy {
		return a.findLegacyIdem(key)
	}
	return rec, false, nil
}

// findLegacyIdem reads the record of a key used before the index held
// idempotency records.
func (a *agentActor) findLegacyIdem(key string) (rec idemRecord, found bool, err error) {
	found, err = a.sys.getJSON(bIdem, join(a.id, key), &rec)
	return rec, found, err
}

// noteIdem adds the spend made under key to the index.
func (a *agentActor) noteIdem(key, spendID string) {
	if s, ok := spendOfID(spendID); ok {
		if a.idem == nil {
			a.idem = &idemIndex{}
		}
		a.idem.add(hashIdemKey([]byte(key)), s)
	}
}
