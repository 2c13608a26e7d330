package persistence

import (
	"bytes"
	"errors"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// scanChunk is how many bucket entries one short read transaction copies out.
// Short transactions matter: a long-lived bbolt read transaction blocks the
// remap a growing file needs, which would stall commits, and the callback
// must be free to call back into the store.
const scanChunk = 256

// bounds describes a scan's key range.
type bounds struct {
	prefix []byte // every visited key has this prefix
	upper  []byte // exclusive bound derived from prefix; nil = none
	from   []byte // inclusive start (forward: lower, reverse: upper); nil = none
}

func newBounds(prefix, from []byte) bounds {
	return bounds{prefix: prefix, upper: prefixEnd(prefix), from: from}
}

// prefixEnd returns the smallest key greater than every key with the given
// prefix, or nil when there is none (empty prefix or all 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// start is the forward scan's first candidate key: the larger of prefix and
// from.
func (b bounds) start() []byte {
	if b.from != nil && bytes.Compare(b.from, b.prefix) > 0 {
		return b.from
	}
	return b.prefix
}

func (b bounds) belowUpper(k string) bool {
	return b.upper == nil || k < string(b.upper)
}

// kv is a copied-out bucket entry.
type kv struct{ k, v []byte }

// Scan visits the live keys of bucket that start with prefix, in ascending
// key order, or descending when reverse is true. A non-nil from is an
// inclusive starting point: ascending scans begin at the first key >= from,
// descending scans at the last key <= from. Entries in the overlay shadow the
// bucket's (tombstones hide them). fn receives fresh copies of key and value
// that it may keep or modify; returning false stops the scan.
//
// fn runs with no store lock or transaction held, so it may call any Store
// method. Scan is not a point-in-time snapshot: every key that is live for
// the whole scan is visited exactly once, with a value that was durable at
// some moment during the scan; keys written concurrently may or may not be
// visited.
func (s *Store) Scan(bucket string, prefix, from []byte, reverse bool, fn func(key, value []byte) bool) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := checkReadable(bucket); err != nil {
		return err
	}
	b := newBounds(prefix, from)
	// The overlay range is copied before the first bucket read. Taking it
	// after could miss a key that a checkpoint moved from the overlay into
	// the bucket in between; in this order such a key is in the copy, and
	// anything checkpointed later is in the bucket when its chunk is read.
	ov := s.ov.snapshot(bucket, b, reverse)
	if h := s.hooks.scanGap; h != nil {
		h()
	}
	var (
		chunk     []kv
		ci        int
		exhausted bool
		last      []byte // last bucket key copied out; resume point
	)
	for {
		if ci == len(chunk) && !exhausted {
			var err error
			chunk, err = s.readChunk(bucket, b, reverse, last)
			if err != nil {
				return err
			}
			ci = 0
			if len(chunk) < scanChunk {
				exhausted = true
			}
			if len(chunk) > 0 {
				last = chunk[len(chunk)-1].k
			}
		}
		haveB, haveO := ci < len(chunk), len(ov) > 0
		if !haveB && !haveO {
			return nil
		}
		var key, val []byte
		switch {
		case haveB && haveO:
			c := bytes.Compare(chunk[ci].k, []byte(ov[0].key))
			if reverse {
				c = -c
			}
			switch {
			case c < 0:
				key, val = chunk[ci].k, chunk[ci].v
				ci++
			case c == 0:
				ci++ // the overlay's newer write shadows the bucket's
				fallthrough
			default:
				e := ov[0]
				ov = ov[1:]
				if e.del {
					continue
				}
				key, val = []byte(e.key), bytes.Clone(e.val)
			}
		case haveB:
			key, val = chunk[ci].k, chunk[ci].v
			ci++
		default:
			e := ov[0]
			ov = ov[1:]
			if e.del {
				continue
			}
			key, val = []byte(e.key), bytes.Clone(e.val)
		}
		if val == nil {
			val = []byte{}
		}
		if !fn(key, val) {
			return nil
		}
	}
}

// readChunk copies out up to scanChunk entries of bucket within b, continuing
// after the key last (nil: from the scan's start).
func (s *Store) readChunk(bucket string, b bounds, reverse bool, last []byte) ([]kv, error) {
	var out []kv
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucket))
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		var k, v []byte
		if !reverse {
			if last == nil {
				if start := b.start(); len(start) == 0 {
					k, v = c.First()
				} else {
					k, v = c.Seek(start)
				}
			} else if k, v = c.Seek(last); k != nil && bytes.Equal(k, last) {
				k, v = c.Next()
			}
			for ; k != nil && b.belowUpper(string(k)) && len(out) < scanChunk; k, v = c.Next() {
				out = append(out, kv{bytes.Clone(k), cloneNonNil(v)})
			}
			return nil
		}
		if last == nil {
			k, v = reverseStartCursor(c, b)
		} else if k, _ = c.Seek(last); k == nil {
			k, v = c.Last()
		} else {
			// c is at the first key >= last; the one before it is the
			// first key not yet visited.
			k, v = c.Prev()
		}
		for ; k != nil && bytes.Compare(k, b.prefix) >= 0 && len(out) < scanChunk; k, v = c.Prev() {
			out = append(out, kv{bytes.Clone(k), cloneNonNil(v)})
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, ErrClosed
	}
	return out, err
}

// reverseStartCursor positions c at the greatest key <= b.from (when set)
// and < b.upper (when set).
func reverseStartCursor(c *bolt.Cursor, b bounds) ([]byte, []byte) {
	var seek []byte
	inclusive := false
	switch {
	case b.from != nil && b.belowUpper(string(b.from)):
		seek, inclusive = b.from, true
	case b.upper != nil:
		seek = b.upper
	default:
		return c.Last()
	}
	k, v := c.Seek(seek)
	if k == nil {
		return c.Last()
	}
	if inclusive && bytes.Equal(k, seek) {
		return k, v
	}
	return c.Prev()
}

// cloneNonNil copies v, returning an empty non-nil slice for an empty value
// so callers can tell "present but empty" from "absent".
func cloneNonNil(v []byte) []byte {
	return append([]byte{}, v...)
}
