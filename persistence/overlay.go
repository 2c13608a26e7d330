package persistence

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// overlay holds the latest durable write of every key whose record has been
// committed to the journal but not yet folded into the entity buckets by a
// checkpoint. Readers consult it before the buckets.
//
// It is a list of generations, oldest first. The publisher applies committed
// records to the newest, open generation; sealing it opens a new one. A
// checkpoint folds one sealed generation per bbolt transaction and then drops
// it whole, so trimming costs nothing per key, and the fold takes its writes,
// one per key and in (bucket, key) order, straight from the generation's
// ordered index instead of sorting the records' ops. A key may live in
// several generations; the newest one holds its latest write.
//
// The publisher is the only writer, and it writes only the open generation:
// a sealed one never changes, so the checkpointer reads it without a lock.
// Readers take the read lock only long enough to look up a key or copy out
// a range.
type overlay struct {
	mu   sync.RWMutex
	gens []*ovGen // oldest first; the last one is open, the others are sealed
	// sealAt is the number of records after which the publisher seals the
	// open generation by itself, which bounds a checkpoint transaction.
	sealAt int
	size   atomic.Int64 // total entries of all generations, for Stats without the lock
}

// ovGen is one generation: the latest write, within its records, of each
// key they touched.
type ovGen struct {
	last    uint64 // LSN of the newest record applied to it; 0 while empty
	records int    // records applied to it
	entries int    // keys held
	buckets map[string]*ovList
}

type ovNode struct {
	key  string
	val  []byte // nil for a tombstone
	del  bool   // tombstone: the key is deleted even if the bucket has it
	prev *ovNode
	next []*ovNode
	// tower backs next for the ~94% of nodes with at most two levels,
	// saving an allocation per entry.
	tower [2]*ovNode
}

// ovEntry is a copied-out view of an overlay entry, used by scans.
type ovEntry struct {
	key string
	val []byte
	del bool
}

// maxLevel suits far more entries than a generation ever holds (branching
// factor 4: 4^16 entries).
const maxLevel = 16

// ovList is one bucket's entries in one generation. Entries are only ever
// added or overwritten: a generation is dropped whole.
type ovList struct {
	head  ovNode // sentinel; head.next has maxLevel slots
	tail  *ovNode
	level int
	index map[string]*ovNode
	rnd   uint64
}

func newOverlay(sealAt int) *overlay {
	return &overlay{gens: []*ovGen{newOvGen()}, sealAt: sealAt}
}

func newOvGen() *ovGen {
	return &ovGen{buckets: make(map[string]*ovList)}
}

func newOvList() *ovList {
	l := &ovList{level: 1, index: make(map[string]*ovNode), rnd: 0x9e3779b97f4a7c15}
	l.head.next = make([]*ovNode, maxLevel)
	return l
}

// apply records the ops of the record with the given LSN in the open
// generation. Caller holds mu.
func (o *overlay) apply(ops []Op, lsn uint64) {
	o.size.Add(int64(o.gens[len(o.gens)-1].apply(ops, lsn)))
}

// sealFull seals the open generation once it holds sealAt records. The
// publisher calls it between batches. Caller holds mu.
func (o *overlay) sealFull() {
	if o.gens[len(o.gens)-1].records >= o.sealAt {
		o.seal()
	}
}

// seal closes the open generation, unless it is empty, and opens a new one.
// Caller holds mu.
func (o *overlay) seal() {
	if o.gens[len(o.gens)-1].records > 0 {
		o.gens = append(o.gens, newOvGen())
	}
}

// sealedAfter returns the oldest sealed generation holding records after
// applied, or nil. The generations at or below applied are folded already;
// their drop may still be on its way through the publisher.
func (o *overlay) sealedAfter(applied uint64) *ovGen {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, g := range o.gens[:len(o.gens)-1] {
		if g.last > applied {
			return g
		}
	}
	return nil
}

// drop removes the oldest generation, which must be g: a checkpoint has
// folded it into the entity buckets. Caller holds mu.
func (o *overlay) drop(g *ovGen) {
	if o.gens[0] != g {
		panic("persistence: overlay generations dropped out of order")
	}
	o.gens[0] = nil
	o.gens = o.gens[1:]
	o.size.Add(-int64(g.entries))
}

// get returns the overlay's entry for key. found is false when the overlay
// has no opinion and the entity bucket decides.
func (o *overlay) get(bucket string, key []byte) (val []byte, del, found bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for i := len(o.gens) - 1; i >= 0; i-- {
		if l := o.gens[i].buckets[bucket]; l != nil {
			if n := l.index[string(key)]; n != nil {
				return n.val, n.del, true
			}
		}
	}
	return nil, false, false
}

// snapshot copies out, in scan order, every entry (tombstones included)
// within the bounds, each key once with its newest write. Values still
// alias immutable record buffers.
func (o *overlay) snapshot(bucket string, b bounds, reverse bool) []ovEntry {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []ovEntry
	for i := len(o.gens) - 1; i >= 0; i-- {
		l := o.gens[i].buckets[bucket]
		if l == nil {
			continue
		}
		part := l.collect(b, reverse)
		if out == nil {
			out = part
		} else if len(part) > 0 {
			out = mergeEntries(out, part, reverse)
		}
	}
	return out
}

// mergeEntries merges two runs in scan order; on equal keys the newer run's
// entry wins.
func mergeEntries(newer, older []ovEntry, reverse bool) []ovEntry {
	out := make([]ovEntry, 0, len(newer)+len(older))
	i, j := 0, 0
	for i < len(newer) && j < len(older) {
		c := strings.Compare(newer[i].key, older[j].key)
		if reverse {
			c = -c
		}
		switch {
		case c < 0:
			out = append(out, newer[i])
			i++
		case c > 0:
			out = append(out, older[j])
			j++
		default:
			out = append(out, newer[i])
			i++
			j++
		}
	}
	out = append(out, newer[i:]...)
	return append(out, older[j:]...)
}

// entries returns the number of entries held; safe without the lock. A key
// present in several generations counts once for each.
func (o *overlay) entries() int { return int(o.size.Load()) }

// apply records the ops of the record with the given LSN and returns the
// number of entries it added.
func (g *ovGen) apply(ops []Op, lsn uint64) int {
	added := 0
	var l *ovList
	var name string
	for _, op := range ops {
		// Records mostly touch a few buckets, often several ops in a row.
		if l == nil || op.Bucket != name {
			name = op.Bucket
			if l = g.buckets[name]; l == nil {
				l = newOvList()
				g.buckets[name] = l
			}
		}
		if n := l.index[string(op.Key)]; n != nil {
			n.val, n.del = op.Value, op.Delete
			continue
		}
		// The key aliases the record's encoding, like the value: that buffer
		// is never written after encoding, so it is as immutable as a
		// string, and the entry needs no copy of its own.
		key := unsafe.String(unsafe.SliceData(op.Key), len(op.Key))
		l.insert(&ovNode{key: key, val: op.Value, del: op.Delete})
		added++
	}
	g.last = lsn
	g.records++
	g.entries += added
	return added
}

// fold writes the generation into the entity buckets of tx, in the order
// of walk. Buckets are created on first use.
func (g *ovGen) fold(tx *bolt.Tx) error {
	var b *bolt.Bucket
	return g.walk(func(name string, start bool, n *ovNode) error {
		var err error
		if start {
			if b, err = tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("bucket %q: %w", name, err)
			}
			// Pages are split 90% full instead of bbolt's 50%: entity
			// keys of this service mostly grow (ledger entries,
			// idempotency keys), and half-empty pages would double the
			// pages every checkpoint writes. Random keys lose little.
			b.FillPercent = entityFillPercent
		}
		// bbolt copies the key; the value is read at commit, from a record
		// buffer that never changes.
		key := unsafe.Slice(unsafe.StringData(n.key), len(n.key))
		if n.del {
			err = b.Delete(key)
		} else {
			err = b.Put(key, n.val)
		}
		if err != nil {
			return fmt.Errorf("bucket %q: %w", name, err)
		}
		return nil
	})
}

// walk calls fn with the latest write of each key of the generation, bucket
// by bucket in name order and in key order within a bucket, so that bbolt
// visits each page once; start is set for a bucket's first entry. It stops
// at the first error.
func (g *ovGen) walk(fn func(bucket string, start bool, n *ovNode) error) error {
	names := make([]string, 0, len(g.buckets))
	for name := range g.buckets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		start := true
		for n := g.buckets[name].head.next[0]; n != nil; n = n.next[0] {
			if err := fn(name, start, n); err != nil {
				return err
			}
			start = false
		}
	}
	return nil
}

// collect copies out, in scan order, the entries within the bounds.
func (l *ovList) collect(b bounds, reverse bool) []ovEntry {
	var out []ovEntry
	if !reverse {
		for n := l.seekGE(string(b.start())); n != nil && b.belowUpper(n.key); n = n.next[0] {
			out = append(out, ovEntry{key: n.key, val: n.val, del: n.del})
		}
		return out
	}
	for n := l.reverseStart(b); n != nil && n.key >= string(b.prefix); n = n.prev {
		out = append(out, ovEntry{key: n.key, val: n.val, del: n.del})
	}
	return out
}

// seekGE returns the first node with key >= k, or nil.
func (l *ovList) seekGE(k string) *ovNode {
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < k {
			x = x.next[i]
		}
	}
	return x.next[0]
}

// seekLT returns the last node with key < k, or nil.
func (l *ovList) seekLT(k string) *ovNode {
	if n := l.seekGE(k); n != nil {
		return n.prev
	}
	return l.tail
}

// reverseStart returns the greatest node that is <= b.from (when set) and
// < b.upper (when set).
func (l *ovList) reverseStart(b bounds) *ovNode {
	if b.from != nil && b.belowUpper(string(b.from)) {
		n := l.seekGE(string(b.from))
		if n == nil {
			return l.tail
		}
		if n.key == string(b.from) {
			return n
		}
		return n.prev
	}
	if b.upper != nil {
		return l.seekLT(string(b.upper))
	}
	return l.tail
}

func (l *ovList) randomLevel() int {
	// xorshift64: the list only needs a cheap, roughly geometric spread.
	l.rnd ^= l.rnd << 13
	l.rnd ^= l.rnd >> 7
	l.rnd ^= l.rnd << 17
	r, lvl := l.rnd, 1
	for lvl < maxLevel && r&3 == 0 {
		lvl++
		r >>= 2
	}
	return lvl
}

// insert links a node whose key is not yet present.
func (l *ovList) insert(n *ovNode) {
	var update [maxLevel]*ovNode
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < n.key {
			x = x.next[i]
		}
		update[i] = x
	}
	lvl := l.randomLevel()
	for i := l.level; i < lvl; i++ {
		update[i] = &l.head
	}
	if lvl > l.level {
		l.level = lvl
	}
	if lvl <= len(n.tower) {
		n.next = n.tower[:lvl]
	} else {
		n.next = make([]*ovNode, lvl)
	}
	for i := range lvl {
		n.next[i] = update[i].next[i]
		update[i].next[i] = n
	}
	if update[0] != &l.head {
		n.prev = update[0]
	}
	if n.next[0] != nil {
		n.next[0].prev = n
	} else {
		l.tail = n
	}
	l.index[n.key] = n
}
