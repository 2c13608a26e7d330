package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// migrateLegacy folds the journal of a legacyFormat file (records in the
// bbolt bucket "journal", keyed by big-endian LSN) into the entity buckets,
// then drops the bucket and records formatVersion. Each chunk folds its
// records, advances applied_lsn and deletes their entries in one
// transaction, so a crash during the migration is itself recoverable: the
// format stays legacy until the bucket is gone.
func (s *Store) migrateLegacy(applied *uint64) error {
	folded := 0
	for {
		n, err := s.legacyChunk(applied)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		folded += n
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(journalBucket)) != nil {
			if err := tx.DeleteBucket([]byte(journalBucket)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte(metaBucket)).Put(formatKey, []byte{formatVersion})
	})
	if err != nil {
		return err
	}
	s.log.Info("persistence: migrated the journal out of the bbolt file", "records", folded, "applied_lsn", *applied)
	return nil
}

// legacyChunk folds up to s.chunk entries of the legacy journal bucket,
// returning how many entries it consumed (0 when the bucket is empty).
func (s *Store) legacyChunk(applied *uint64) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		j := tx.Bucket([]byte(journalBucket))
		if j == nil {
			return nil
		}
		var keys [][]byte
		var recs []pendingRec
		c := j.Cursor()
		for k, v := c.First(); k != nil && len(keys) < s.chunk; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: journal key of %d bytes", ErrCorruptRecord, len(k))
			}
			keys = append(keys, bytes.Clone(k))
			lsn := binary.BigEndian.Uint64(k)
			if lsn <= *applied {
				continue // folded already; only its deletion was lost
			}
			if lsn != *applied+1 {
				return fmt.Errorf("%w: journal LSN %d follows %d", ErrCorruptRecord, lsn, *applied)
			}
			if _, err := DecodeRecord(v); err != nil {
				return fmt.Errorf("journal LSN %d: %w", lsn, err)
			}
			// A copy: a value read from the mmap must not be handed to
			// Put in the same transaction, since a remap during commit
			// would invalidate it.
			recs = append(recs, pendingRec{lsn: lsn, enc: bytes.Clone(v)})
			*applied = lsn
		}
		if len(keys) == 0 {
			return nil
		}
		if err := genOf(recs).fold(tx); err != nil {
			return err
		}
		if err := putApplied(tx, *applied); err != nil {
			return err
		}
		for _, k := range keys {
			if err := j.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	return n, err
}
