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
// It is a list of generations, oldest first. The committer applies committed
// records to the newest, open generation; sealing it opens a new one. A
// checkpoint folds one sealed generation per bbolt transaction and then drops
// it whole, so trimming costs nothing per key, and the fold takes its writes,
// one per key and in (bucket, key) order, straight from the generation's
// ordered index instead of sorting the records' ops. A key may live in
// several generations; the newest one holds its latest write.
//
// Only the committer (applying batches) and the publisher (sealing,
// dropping) write, under mu, and only the open generation changes:
// a sealed one never changes, so the checkpointer reads it without a lock.
// Readers take the read lock only long enough to look up a key or copy out
// a range.
type overlay struct {
	mu   sync.RWMutex
	gens []*ovGen // oldest first; the last one is open, the others are sealed
	// sealAt is the number of records after which the committer seals the
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
	// sizes holds the entries per bucket of the generation before, whose
	// successor most likely needs as many: its maps start at that size
	// instead of growing step by step. A copy, so that a dropped
	// generation is not kept alive by the next one.
	sizes map[string]int
	slab  []ovNode // backs the next entries; see node
}

// ovNode is one key's latest write in a generation. The tree and the index
// share it, so an overwrite updates it in place.
type ovNode struct {
	key string
	val []byte // nil for a tombstone
	del bool   // tombstone: the key is deleted even if the bucket has it
}

// ovEntry is a copied-out view of an overlay entry, used by scans.
type ovEntry struct {
	key string
	val []byte
	del bool
}

// ovList is one bucket's entries in one generation: a map for point reads
// and a tree for order. Entries are only ever added or overwritten: a
// generation is dropped whole.
type ovList struct {
	tree  ovTree
	index map[string]*ovNode
}

func newOverlay(sealAt int) *overlay {
	return &overlay{gens: []*ovGen{newOvGen(nil)}, sealAt: sealAt}
}

func newOvGen(prev *ovGen) *ovGen {
	g := &ovGen{buckets: make(map[string]*ovList)}
	if prev != nil {
		g.sizes = make(map[string]int, len(prev.buckets))
		for name, l := range prev.buckets {
			g.sizes[name] = len(l.index)
		}
	}
	return g
}

func newOvList(size int) *ovList {
	return &ovList{index: make(map[string]*ovNode, size)}
}

// apply records the ops of the record with the given LSN and encoding in
// the open generation. Caller holds mu.
func (o *overlay) apply(enc []byte, lsn uint64) {
	o.size.Add(int64(o.gens[len(o.gens)-1].apply(enc, lsn)))
}

// maxGens bounds the generations that sealing by size builds up while
// checkpoints fail or fall behind: reads look through every generation, so
// past this many the open one grows instead (its fold is then a larger
// transaction). Checkpoints that keep up leave two or three.
const maxGens = 16

// sealFull seals the open generation once it holds sealAt records. The
// committer calls it between batches. Caller holds mu.
func (o *overlay) sealFull() {
	if o.gens[len(o.gens)-1].records >= o.sealAt && len(o.gens) < maxGens {
		o.seal()
	}
}

// seal closes the open generation, unless it is empty, and opens a new one.
// Caller holds mu.
func (o *overlay) seal() {
	if g := o.gens[len(o.gens)-1]; g.records > 0 {
		o.gens = append(o.gens, newOvGen(g))
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

// apply records the ops of the record with the given LSN and encoding (a
// valid one, never changed afterwards) and returns the number of entries it
// added.
func (g *ovGen) apply(enc []byte, lsn uint64) int {
	added := 0
	var l *ovList
	var name string
	r := readOps(enc)
	for {
		bucket, key, val, del, ok := r.next()
		if !ok {
			break
		}
		// Records mostly touch a few buckets, often several ops in a row.
		if l == nil || bucket != name {
			name = bucket
			if l = g.buckets[name]; l == nil {
				l = newOvList(g.sizes[name])
				g.buckets[name] = l
			}
		}
		if n := l.index[key]; n != nil {
			n.val, n.del = val, del
			continue
		}
		// Key and value alias the record's encoding, so the entry needs
		// no copy of its own.
		n := g.node()
		*n = ovNode{key: key, val: val, del: del}
		l.tree.insert(n)
		l.index[key] = n
		added++
	}
	g.last = lsn
	g.records++
	g.entries += added
	return added
}

// node returns a new entry, allocated with a few hundred others: they all
// live exactly as long as the generation.
func (g *ovGen) node() *ovNode {
	if len(g.slab) == cap(g.slab) {
		g.slab = make([]ovNode, 0, min(256, 16+g.entries))
	}
	g.slab = g.slab[:len(g.slab)+1]
	return &g.slab[len(g.slab)-1]
}

// fold writes the generation into the entity buckets of tx, in the order
// of walk. Buckets are created on first use.
func (g *ovGen) fold(tx *bolt.Tx) error {
	return foldEntries(tx, g.foldParts(0)[0])
}

// foldEntry is one key's latest write in a generation, as foldParts cuts
// them.
type foldEntry struct {
	bucket string
	n      *ovNode
}

// foldParts returns the generation's latest writes in fold order, cut into
// parts of about partBytes of keys and values each (one part when
// partBytes <= 0), and into maxCheckpointParts at most: a large generation
// gets larger parts, so that the fdatasyncs of its transactions, two
// each, cannot leave the checkpoints behind the journal. A part is folded
// in a bbolt transaction of its own: see Options.CheckpointTxBytes.
func (g *ovGen) foldParts(partBytes int) [][]foldEntry {
	var all []foldEntry
	total := 0
	_ = g.walk(func(name string, _ bool, n *ovNode) error {
		all = append(all, foldEntry{bucket: name, n: n})
		total += len(n.key) + len(n.val)
		return nil
	})
	if partBytes <= 0 {
		return [][]foldEntry{all}
	}
	partBytes = max(partBytes, (total+maxCheckpointParts-1)/maxCheckpointParts)
	var parts [][]foldEntry
	start, size := 0, 0
	for i, e := range all {
		size += len(e.n.key) + len(e.n.val)
		if size >= partBytes {
			parts = append(parts, all[start:i+1])
			start, size = i+1, 0
		}
	}
	if start < len(all) || len(parts) == 0 {
		parts = append(parts, all[start:])
	}
	return parts
}

// maxCheckpointParts bounds the transactions of one generation's fold.
const maxCheckpointParts = 32

// foldEntries writes entries, in fold order, into tx.
func foldEntries(tx *bolt.Tx, entries []foldEntry) error {
	var b *bolt.Bucket
	name := ""
	for _, e := range entries {
		if b == nil || e.bucket != name {
			var err error
			if b, err = tx.CreateBucketIfNotExists([]byte(e.bucket)); err != nil {
				return fmt.Errorf("bucket %q: %w", e.bucket, err)
			}
			// Pages are split 90% full instead of bbolt's 50%: entity
			// keys of this service mostly grow (ledger entries, events,
			// spends by time), and half-empty pages would double the
			// pages every checkpoint writes. Random keys lose little.
			b.FillPercent = entityFillPercent
			name = e.bucket
		}
		// bbolt copies the key; the value is read at commit, from a
		// record buffer that never changes.
		key := unsafe.Slice(unsafe.StringData(e.n.key), len(e.n.key))
		var err error
		if e.n.del {
			err = b.Delete(key)
		} else {
			err = b.Put(key, e.n.val)
		}
		if err != nil {
			return fmt.Errorf("bucket %q: %w", e.bucket, err)
		}
	}
	return nil
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
		t := &g.buckets[name].tree
		start := true
		for p := t.first(); p.ok(); p = t.next(p) {
			if err := fn(name, start, p.entry()); err != nil {
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
	t := &l.tree
	if !reverse {
		for p := t.seekGE(string(b.start())); p.ok() && b.belowUpper(p.key()); p = t.next(p) {
			n := p.entry()
			out = append(out, ovEntry{key: n.key, val: n.val, del: n.del})
		}
		return out
	}
	for p := l.reverseStart(b); p.ok() && p.key() >= string(b.prefix); p = t.prev(p) {
		n := p.entry()
		out = append(out, ovEntry{key: n.key, val: n.val, del: n.del})
	}
	return out
}

// reverseStart returns the greatest position that is <= b.from (when set)
// and < b.upper (when set).
func (l *ovList) reverseStart(b bounds) treePos {
	t := &l.tree
	if b.from != nil && b.belowUpper(string(b.from)) {
		p := t.seekGE(string(b.from))
		if !p.ok() {
			return t.lastPos()
		}
		if p.key() == string(b.from) {
			return p
		}
		return t.prev(p)
	}
	if b.upper != nil {
		return t.seekLT(string(b.upper))
	}
	return t.lastPos()
}
