package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Key rotation (spec 5.4, 8.2): the old key keeps working for an overlap
// of at most 7 days.
const (
	DefaultGracePeriodHours = 24
	MaxGracePeriodHours     = 168
)

// RotateKey replaces one of the owner's keys: a new key of the same kind,
// agent and environment, whose secret is returned once, while the old key
// keeps working for graceHours (0 to 168; 0 ends it at once, and a grace
// never outlives the key's own expiry) and then gets the 401 of any
// expired key. The old key's expires_at moves to the end of the grace
// period, so the ordinary expiry check ends it.
//
// The new key is not counted against the quota of keys per agent: during
// the overlap an agent may hold one key more than the quota allows (and
// cannot get another new key until the old one has ended), but never two:
// a rotation with a grace is refused while that many keys work. A revoked or
// expired key cannot be rotated, nor a key already rotated (rotate its
// successor instead). Emits api_key.created for the new key and
// api_key.rotated for the old one, whose object carries
// grace_period_ends_at, in one journal record.
func (s *System) RotateKey(ctx context.Context, p Principal, keyID string, graceHours int) (CreatedKey, error) {
	if p.Kind != KindOwner {
		return CreatedKey{}, errorf(CodeInvalidRequest, "Only an owner key can rotate keys.")
	}
	if graceHours < 0 || graceHours > MaxGracePeriodHours {
		return CreatedKey{}, &Error{Code: CodeParameterInvalid, Param: "grace_period_hours",
			Message: fmt.Sprintf("grace_period_hours must be a whole number from 0 to %d (7 days); omit it for %d.", MaxGracePeriodHours, DefaultGracePeriodHours)}
	}
	notFound := errorf(CodeNotFound, "No key %s exists.", keyID)
	if !ValidID("key", keyID) {
		return CreatedKey{}, notFound
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return CreatedKey{}, err
	}
	s.keyChangeMu.Lock()
	defer s.keyChangeMu.Unlock()
	var old APIKey
	if ok, err := s.getJSON(bKeys, []byte(keyID), &old); err != nil {
		return CreatedKey{}, ErrUnavailable
	} else if !ok {
		return CreatedKey{}, notFound
	} else if old.OwnerID != p.OwnerID || old.Livemode != p.Livemode {
		return CreatedKey{}, notFoundFor(p, "key", keyID, old.OwnerID, old.Livemode)
	}
	now := s.nowFor(p.OwnerID, p.Env())
	keyNow := s.keyNow(old.Kind, old.OwnerID, old.Livemode)
	switch {
	case old.RevokedAt != nil:
		return CreatedKey{}, &Error{Code: CodeConflict, Message: fmt.Sprintf("Key %s is revoked; it cannot be rotated. Create a new key instead.", keyID)}
	case !keyNow.Before(old.ExpiresAt):
		how := "Create a new key instead."
		if old.Kind == KindOwner {
			how = "Create a new owner key instead (POST /v1/owner_keys, or the console's Keys page when no owner key works)."
		}
		return CreatedKey{}, &Error{Code: CodeConflict, Message: fmt.Sprintf("Key %s has expired; it cannot be rotated. %s", keyID, how)}
	case old.GracePeriodEndsAt != nil:
		return CreatedKey{}, &Error{Code: CodeConflict,
			Message: fmt.Sprintf("Key %s was already rotated; it ends at %s. Rotate the key that replaced it instead.", keyID, old.GracePeriodEndsAt.Format(time.RFC3339))}
	}
	if old.Kind == KindAgent {
		var ag Agent
		if ok, err := s.getJSON(bAgents, []byte(old.AgentID), &ag); err != nil {
			return CreatedKey{}, ErrUnavailable
		} else if ok && ag.Status == AgentArchived {
			return CreatedKey{}, &Error{Code: CodeConflict, Message: "The key's agent is archived; its keys cannot be rotated."}
		}
	}
	// During the overlap the old key and its successor both work, one key
	// over the quota. A rotation while another overlap of the same quota
	// runs would add a second: a chain of rotations would keep any number
	// of secrets working.
	quota, whose := MaxKeysPerAgent, "agent "+old.AgentID+"'s keys"
	working, err := s.workingKeys(old.OwnerID, old.AgentID, old.Livemode)
	if old.Kind == KindOwner {
		quota, whose = MaxOwnerKeys, "the owner's owner keys (practice and live together)"
		var practice, live int
		practice, live, err = s.workingOwnerKeys(old.OwnerID)
		working = practice + live
	}
	if err != nil {
		return CreatedKey{}, ErrUnavailable
	}
	if graceHours > 0 && working > quota {
		return CreatedKey{}, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf(
			"%d of %s already work, the quota of %d and the one a rotation's overlap adds; rotate with grace_period_hours 0, revoke a rotated key, or wait until its grace ends.",
			working, whose, quota)}
	}
	nk, secret := newKey(old.Kind, old.OwnerID, old.AgentID, p.Env(), keyNow)
	// The grace cannot outlive the key: an end past its expiry would
	// promise the owner days it does not get.
	ends := minTime(keyNow.Add(time.Duration(graceHours)*time.Hour), old.ExpiresAt).UTC()
	old.GracePeriodEndsAt = &ends
	old.ExpiresAt = ends
	c := &change{}
	env.mu.Lock()
	c.putKey(nk)
	c.putRaw(bKeyDigests, []byte(nk.Digest), []byte(nk.ID))
	c.putKey(old)
	c.event(env, nk.AgentID, "api_key.created", s.keyView(nk), audienceOwner, now)
	c.event(env, old.AgentID, "api_key.rotated", s.keyView(old), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return CreatedKey{}, ErrUnavailable
	}
	// Only once durable: a rotation that failed leaves the old key as the
	// disk has it.
	s.forgetKey(old.Digest)
	s.logOwnerAction("key_rotated", p, slog.String("key", old.ID), slog.String("new_key", nk.ID), slog.String("kind", nk.Kind),
		slog.String("agent", nk.AgentID), slog.Time("old_key_ends_at", old.ExpiresAt))
	rotated := s.keyView(old)
	return CreatedKey{KeyView: s.keyView(nk), Secret: secret, RotatedKey: &rotated}, nil
}

// CreateOwnerKey creates another owner key for the principal's owner and
// environment. At most MaxOwnerKeys owner keys of the owner, practice and
// live together, may be active (neither revoked nor expired; a rotated key
// counts until its grace period ends). Emits api_key.created; the secret
// is returned once.
func (s *System) CreateOwnerKey(ctx context.Context, p Principal) (CreatedKey, error) {
	if p.Kind != KindOwner {
		return CreatedKey{}, errorf(CodeInvalidRequest, "Only an owner key can create owner keys.")
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return CreatedKey{}, err
	}
	s.keyChangeMu.Lock()
	defer s.keyChangeMu.Unlock()
	now, keyNow := s.nowFor(p.OwnerID, p.Env()), s.keyNow(KindOwner, p.OwnerID, p.Livemode)
	practice, live, err := s.workingOwnerKeys(p.OwnerID)
	if err != nil {
		return CreatedKey{}, ErrUnavailable
	}
	if active := practice + live; active >= MaxOwnerKeys {
		// A key of one environment does not see the other's keys: the
		// message says where the places went and where to free one.
		return CreatedKey{}, &Error{Code: CodeQuotaExceeded,
			Message: fmt.Sprintf("This owner already has %d active owner keys, practice and live together (%d practice, %d live), the most allowed (spec 8.3 counts them per owner); revoke one first. "+
				"An owner key lists its own environment's keys (GET /v1/keys); the console's Keys page shows each environment's.", active, practice, live)}
	}
	k, secret := newKey(KindOwner, p.OwnerID, "", p.Env(), keyNow)
	c := &change{}
	env.mu.Lock()
	c.putKey(k)
	c.putRaw(bKeyDigests, []byte(k.Digest), []byte(k.ID))
	c.event(env, "", "api_key.created", s.keyView(k), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return CreatedKey{}, ErrUnavailable
	}
	s.logOwnerAction("key_created", p, slog.String("key", k.ID), slog.String("kind", KindOwner))
	return CreatedKey{KeyView: s.keyView(k), Secret: secret}, nil
}

// workingKeys counts the keys that would authenticate now, neither revoked
// nor expired (a rotated key until its grace ends): one agent's, or, for
// agentID "", the owner keys of the owner's environment.
func (s *System) workingKeys(ownerID, agentID string, livemode bool) (int, error) {
	kind := KindAgent
	if agentID == "" {
		kind = KindOwner
	}
	now := s.keyNow(kind, ownerID, livemode)
	n := 0
	err := s.ownerKeys(ownerID, EnvOf(livemode), false, "", func(id string) bool { return id == agentID }, func(k APIKey) bool {
		if k.Kind == kind && k.RevokedAt == nil && now.Before(k.ExpiresAt) {
			n++
		}
		return true
	})
	return n, err
}

// workingOwnerKeys counts the owner keys of both environments that still
// work: the quota of spec 8.3 is per owner.
func (s *System) workingOwnerKeys(ownerID string) (practice, live int, err error) {
	if practice, err = s.workingKeys(ownerID, "", false); err != nil {
		return 0, 0, err
	}
	live, err = s.workingKeys(ownerID, "", true)
	return practice, live, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
