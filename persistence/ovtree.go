package persistence

import "sort"

// ovTree orders the entries of one bucket in one overlay generation: an
// insert-only B+ tree (a generation is dropped whole, never entry by entry).
// Its nodes keep their keys in arrays, so a search compares keys without
// chasing a pointer per step, as a skip list does; and an insert beyond the
// first key of the last leaf, the common case for the service's
// time-ordered ids, goes straight to that leaf.
type ovTree struct {
	root *treeNode
	last *treeNode // the rightmost leaf
	size int
}

// treeMax is the most entries of a leaf and children of an inner node.
const treeMax = 64

// treeNode is a leaf (ents set) or an inner node (kids set). A leaf's keys
// are its entries' keys; an inner node's keys[i] is the least key under
// kids[i+1].
type treeNode struct {
	keys       []string
	ents       []*ovNode
	kids       []*treeNode
	prev, next *treeNode // neighbouring leaves
}

// treePos is a position in the tree: entry i of leaf n, or nowhere (n nil).
type treePos struct {
	n *treeNode
	i int
}

func (p treePos) ok() bool         { return p.n != nil }
func (p treePos) entry() *ovNode   { return p.n.ents[p.i] }
func (p treePos) key() string      { return p.n.keys[p.i] }
func (t *ovTree) first() treePos   { return t.fix(t.leftmost(), 0) }
func (t *ovTree) lastPos() treePos { return t.fixBack(t.last, -1) }
func (t *ovTree) leftmost() *treeNode {
	n := t.root
	for n != nil && n.kids != nil {
		n = n.kids[0]
	}
	return n
}

// fix normalises a position that may be one past the end of its leaf.
func (t *ovTree) fix(n *treeNode, i int) treePos {
	for n != nil && i >= len(n.keys) {
		n, i = n.next, 0
	}
	return treePos{n, i}
}

// fixBack normalises a position that may be before the start of its leaf;
// i < 0 on entry means the leaf's last entry.
func (t *ovTree) fixBack(n *treeNode, i int) treePos {
	if n != nil && i < 0 {
		i = len(n.keys) - 1
	}
	for n != nil && i < 0 {
		n = n.prev
		if n != nil {
			i = len(n.keys) - 1
		}
	}
	return treePos{n, i}
}

func (t *ovTree) next(p treePos) treePos { return t.fix(p.n, p.i+1) }

func (t *ovTree) prev(p treePos) treePos {
	if p.i > 0 {
		return treePos{p.n, p.i - 1}
	}
	return t.fixBack(p.n.prev, -1)
}

// seekGE returns the first position with key >= k.
func (t *ovTree) seekGE(k string) treePos {
	n := t.root
	if n == nil {
		return treePos{}
	}
	for n.kids != nil {
		n = n.kids[upperBound(n.keys, k)]
	}
	return t.fix(n, lowerBound(n.keys, k))
}

// seekLT returns the last position with key < k.
func (t *ovTree) seekLT(k string) treePos {
	if p := t.seekGE(k); p.ok() {
		return t.prev(p)
	}
	return t.lastPos()
}

// lowerBound is the index of the first key >= k.
func lowerBound(keys []string, k string) int {
	return sort.Search(len(keys), func(i int) bool { return keys[i] >= k })
}

// upperBound is the index of the first key > k.
func upperBound(keys []string, k string) int {
	return sort.Search(len(keys), func(i int) bool { return keys[i] > k })
}

// insert adds an entry whose key is not in the tree yet.
func (t *ovTree) insert(e *ovNode) {
	t.size++
	if t.root == nil {
		leaf := &treeNode{keys: make([]string, 0, 8), ents: make([]*ovNode, 0, 8)}
		leaf.keys = append(leaf.keys, e.key)
		leaf.ents = append(leaf.ents, e)
		t.root, t.last = leaf, leaf
		return
	}
	if l := t.last; len(l.keys) < treeMax && e.key > l.keys[0] {
		leafInsert(l, upperBound(l.keys, e.key), e)
		return
	}
	right, sep := t.insertAt(t.root, e)
	if right != nil {
		t.root = &treeNode{keys: []string{sep}, kids: []*treeNode{t.root, right}}
	}
}

// insertAt inserts e under n; when n splits it returns the new right
// sibling and the least key under it.
func (t *ovTree) insertAt(n *treeNode, e *ovNode) (*treeNode, string) {
	if n.kids == nil {
		leafInsert(n, upperBound(n.keys, e.key), e)
		if len(n.keys) <= treeMax {
			return nil, ""
		}
		// An append-mostly leaf would stay half empty after an even split;
		// the rightmost one keeps most of its entries instead.
		h := len(n.keys) / 2
		if n == t.last {
			h = len(n.keys) - treeMax/8
		}
		right := &treeNode{
			keys: append(make([]string, 0, treeMax+1), n.keys[h:]...),
			ents: append(make([]*ovNode, 0, treeMax+1), n.ents[h:]...),
			prev: n, next: n.next,
		}
		clear(n.keys[h:])
		clear(n.ents[h:])
		n.keys, n.ents = n.keys[:h], n.ents[:h]
		if n.next != nil {
			n.next.prev = right
		} else {
			t.last = right
		}
		n.next = right
		return right, right.keys[0]
	}
	i := upperBound(n.keys, e.key)
	right, sep := t.insertAt(n.kids[i], e)
	if right == nil {
		return nil, ""
	}
	n.keys = insertAt(n.keys, i, sep)
	n.kids = insertAt(n.kids, i+1, right)
	if len(n.kids) <= treeMax {
		return nil, ""
	}
	h := len(n.kids) / 2
	up := n.keys[h-1]
	r := &treeNode{
		keys: append(make([]string, 0, treeMax), n.keys[h:]...),
		kids: append(make([]*treeNode, 0, treeMax+1), n.kids[h:]...),
	}
	clear(n.keys[h-1:])
	clear(n.kids[h:])
	n.keys, n.kids = n.keys[:h-1], n.kids[:h]
	return r, up
}

func leafInsert(n *treeNode, i int, e *ovNode) {
	n.keys = insertAt(n.keys, i, e.key)
	n.ents = insertAt(n.ents, i, e)
}

// insertAt inserts v at index i of s, growing it when full.
func insertAt[T any](s []T, i int, v T) []T {
	var zero T
	s = append(s, zero)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}
