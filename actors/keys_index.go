package actors

import (
	"context"

	"github.com/agentpay/guard/persistence"
)

// The owners' index of keys. Keys live in one bucket ordered by id across
// every owner, so what one owner asks of its keys (the quota checks of a
// key's creation or rotation, the list of keys, an archive's or a practice
// reset's revocations) would read every key of the service. bOwnerKeys
// holds an entry per key under its owner and environment, ids in creation
// order, valued with the key's agent id: an owner's questions read its own
// keys only, whatever the number of owners.

// ownerKeysIndexed marks, in bMeta, a store whose keys all have their
// entry in bOwnerKeys. A store written before the index existed gets the
// entries once, at the start (indexOwnerKeys).
const ownerKeysIndexed = "index:owner_keys"

// ownerKeyEntry is k's key in bOwnerKeys.
func ownerKeyEntry(k *APIKey) []byte {
	return join(k.OwnerID, string(EnvOf(k.Livemode)), k.ID)
}

// putKey writes a key and its entry in the owners' index. Every write of a
// key goes through it, so an entry never lacks for a key written since.
func (c *change) putKey(k APIKey) {
	c.put(bKeys, []byte(k.ID), k)
	c.putRaw(bOwnerKeys, ownerKeyEntry(&k), []byte(k.AgentID))
}

// delKey deletes a key, its digest's entry and its entry in the owners'
// index.
func (c *change) delKey(k *APIKey) {
	c.del(bKeys, []byte(k.ID))
	c.del(bKeyDigests, []byte(k.Digest))
	c.del(bOwnerKeys, ownerKeyEntry(k))
}

// ownerKeys visits the keys of an owner's environment whose agent id
// passes match ("" is an owner key), oldest first, or newest first when
// reverse, until fn returns false. Keys of other agents are skipped
// without being read. A non-empty since starts an oldest-first walk at the
// first id not below it: ids begin with their creation time (idTimePrefix).
func (s *System) ownerKeys(ownerID string, env Env, reverse bool, since string, match func(agentID string) bool, fn func(APIKey) bool) error {
	prefix := prefixOf(ownerID, string(env))
	var from []byte
	if since != "" {
		from = append(append([]byte{}, prefix...), since...)
	}
	var readErr error
	err := s.store.Scan(bOwnerKeys, prefix, from, reverse, func(k, v []byte) bool {
		if !match(string(v)) {
			return true
		}
		var key APIKey
		found, err := s.getJSON(bKeys, k[len(prefix):], &key)
		if err != nil {
			readErr = err
			return false
		}
		if !found {
			return true // deleted since the entry was read: a practice reset's sweep
		}
		return fn(key)
	})
	if err == nil {
		err = readErr
	}
	return err
}

// indexOwnerKeys gives every key its entry in the owners' index, once: on
// a store that has no ownerKeysIndexed mark (see indexOnce).
func (s *System) indexOwnerKeys(ctx context.Context) error {
	return s.indexOnce(ctx, ownerKeysIndexed, "the owners' key index", "indexed the keys by owner",
		func(add func(persistence.Op)) ([]any, error) {
			n := 0
			err := s.store.Scan(bKeys, nil, nil, false, func(_, v []byte) bool {
				var k APIKey
				if jsonUnmarshal(v, &k) == nil && k.ID != "" && k.OwnerID != "" {
					add(persistence.Put(bOwnerKeys, ownerKeyEntry(&k), []byte(k.AgentID)))
					n++
				}
				return true
			})
			if err != nil || n == 0 {
				return nil, err
			}
			return []any{"keys", n}, nil
		})
}
