package persistence

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// overlay holds the latest durable write of every key whose record has been
// committed to the journal but not yet folded into the entity buckets by a
// checkpoint. Readers consult it before the buckets.
//
// Each bucket's entries are kept twice: in a map for O(1) point reads and in
// a skip list for ordered scans. Values alias the encoded record buffers,
// which are never modified after encoding, so entries cost no extra copy.
//
// The committer is the only writer; readers take the read lock only long
// enough to look up a key or copy out a range.
type overlay struct {
	mu      sync.RWMutex
	buckets map[string]*ovList
	size    atomic.Int64 // total entries, for Stats without the lock
}

type ovNode struct {
	key  string
	val  []byte // nil for a tombstone
	del  bool   // tombstone: the key is deleted even if the bucket has it
	lsn  uint64 // record that wrote this entry last
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

// maxLevel suits far more entries than a checkpoint ever leaves behind
// (branching factor 4: 4^16 entries).
const maxLevel = 16

type ovList struct {
	head  ovNode // sentinel; head.next has maxLevel slots
	tail  *ovNode
	level int
	index map[string]*ovNode
	rnd   uint64
}

func newOverlay() *overlay {
	return &overlay{buckets: make(map[string]*ovList)}
}

func newOvList() *ovList {
	l := &ovList{level: 1, index: make(map[string]*ovNode), rnd: 0x9e3779b97f4a7c15}
	l.head.next = make([]*ovNode, maxLevel)
	return l
}

// apply records the ops of the record with the given LSN. Caller holds mu.
func (o *overlay) apply(ops []Op, lsn uint64) {
	for _, op := range ops {
		l := o.buckets[op.Bucket]
		if l == nil {
			l = newOvList()
			o.buckets[op.Bucket] = l
		}
		if n := l.index[string(op.Key)]; n != nil {
			n.val, n.del, n.lsn = op.Value, op.Delete, lsn
			continue
		}
		// The key aliases the record's encoding, like the value: that buffer
		// is never written after encoding, so it is as immutable as a
		// string, and the entry needs no copy of its own.
		key := unsafe.String(unsafe.SliceData(op.Key), len(op.Key))
		l.insert(&ovNode{key: key, val: op.Value, del: op.Delete, lsn: lsn})
		o.size.Add(1)
	}
}

// drop removes the entries written by ops whose latest write is at or below
// upTo: those are now in the entity buckets. An entry overwritten by a later
// record stays, because the buckets do not have that later value yet.
// Caller holds mu.
func (o *overlay) drop(ops []Op, upTo uint64) {
	for _, op := range ops {
		l := o.buckets[op.Bucket]
		if l == nil {
			continue
		}
		n := l.index[string(op.Key)]
		if n == nil || n.lsn > upTo {
			continue
		}
		l.remove(n)
		o.size.Add(-1)
		if len(l.index) == 0 {
			delete(o.buckets, op.Bucket)
		}
	}
}

// get returns the overlay's entry for key. found is false when the overlay
// has no opinion and the entity bucket decides.
func (o *overlay) get(bucket string, key []byte) (val []byte, del, found bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	l := o.buckets[bucket]
	if l == nil {
		return nil, false, false
	}
	n := l.index[string(key)]
	if n == nil {
		return nil, false, false
	}
	return n.val, n.del, true
}

// snapshot copies out, in scan order, every entry (tombstones included)
// within the bounds. Values still alias immutable record buffers.
func (o *overlay) snapshot(bucket string, b bounds, reverse bool) []ovEntry {
	o.mu.RLock()
	defer o.mu.RUnlock()
	l := o.buckets[bucket]
	if l == nil {
		return nil
	}
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

// entries returns the number of keys held; safe without the lock.
func (o *overlay) entries() int { return int(o.size.Load()) }

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

// remove unlinks a node that is present.
func (l *ovList) remove(n *ovNode) {
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < n.key {
			x = x.next[i]
		}
		if i < len(n.next) && x.next[i] == n {
			x.next[i] = n.next[i]
		}
	}
	if n.next[0] != nil {
		n.next[0].prev = n.prev
	} else {
		l.tail = n.prev
	}
	for l.level > 1 && l.head.next[l.level-1] == nil {
		l.level--
	}
	delete(l.index, n.key)
	n.prev, n.next, n.tower = nil, nil, [2]*ovNode{}
}
