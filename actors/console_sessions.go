package actors

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentpay/guard/persistence"
)

// Console sessions are kept in the journal, so a restart keeps owners
// signed in and a sign-out is as durable as any other change. Only the
// SHA-256 digest of a session id is stored: a copy of the journal does not
// let anyone act as a signed-in owner. The console decides the timeouts;
// this file only stores.

const (
	bConsoleSessions = "console_sessions" // sha256(session id) hex -> ConsoleSession
	// owner id -> time of the owner's last password change: sessions of
	// the owner that began before it are over (see endedByPasswordChange).
	bConsoleSessionsEnded = "console_sessions_ended"
)

// ConsoleSession is one signed-in browser.
type ConsoleSession struct {
	OwnerID string `json:"owner_id"`
	// Env is the environment the owner is looking at (practice or live).
	Env Env `json:"env"`
	// CSRF is the synchronizer token every state-changing form carries.
	CSRF       string    `json:"csrf"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// PutConsoleSession stores (or replaces) a session under its digest.
func (s *System) PutConsoleSession(ctx context.Context, digest string, cs ConsoleSession) error {
	b, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	return s.waitOps(ctx, persistence.Put(bConsoleSessions, []byte(digest), b))
}

// ConsoleSessionByDigest reads a session; found is false when there is
// none, or when a password change ended it.
func (s *System) ConsoleSessionByDigest(digest string) (cs ConsoleSession, found bool, err error) {
	found, err = s.getJSON(bConsoleSessions, []byte(digest), &cs)
	if err != nil {
		return ConsoleSession{}, false, ErrUnavailable
	}
	if found {
		ended, err := s.endedByPasswordChange(cs)
		if err != nil {
			return ConsoleSession{}, false, ErrUnavailable
		}
		if ended {
			return ConsoleSession{}, false, nil
		}
	}
	return cs, found, nil
}

// endedByPasswordChange reports whether cs began before its owner's
// password last changed. The change deleted every such session in its own
// record; this check keeps one from coming back when a request that read
// it just before the change writes it again (the last-seen update of a
// page view), which would otherwise undo the sign-out. The record left
// behind goes at the console's sweep, once idle. A change time ahead of
// the clock (the clock was set back) is not applied: it would refuse
// every new sign-in until the clock caught up.
func (s *System) endedByPasswordChange(cs ConsoleSession) (bool, error) {
	var changed time.Time
	ok, err := s.getJSON(bConsoleSessionsEnded, []byte(cs.OwnerID), &changed)
	if err != nil || !ok {
		return false, err
	}
	return cs.CreatedAt.Before(changed) && !changed.After(s.clock.Now()), nil
}

// ownerSessionDigests lists the digests of an owner's sessions.
func (s *System) ownerSessionDigests(ownerID string) ([]string, error) {
	var out []string
	err := s.store.Scan(bConsoleSessions, nil, nil, false, func(k, v []byte) bool {
		var cs ConsoleSession
		if json.Unmarshal(v, &cs) == nil && cs.OwnerID == ownerID {
			out = append(out, string(k))
		}
		return true
	})
	if err != nil {
		return nil, ErrUnavailable
	}
	return out, nil
}

// DeleteConsoleSessions removes sessions (sign-out, timeouts).
func (s *System) DeleteConsoleSessions(ctx context.Context, digests ...string) error {
	if len(digests) == 0 {
		return nil
	}
	ops := make([]persistence.Op, len(digests))
	for i, d := range digests {
		ops[i] = persistence.Del(bConsoleSessions, []byte(d))
	}
	return s.waitOps(ctx, ops...)
}

// ConsoleSessionDigests lists the digests of sessions for which stale
// reports true, so the console can sweep sessions nobody came back to.
func (s *System) ConsoleSessionDigests(stale func(ConsoleSession) bool) ([]string, error) {
	var out []string
	err := s.store.Scan(bConsoleSessions, nil, nil, false, func(k, v []byte) bool {
		var cs ConsoleSession
		if json.Unmarshal(v, &cs) != nil || stale(cs) {
			out = append(out, string(k))
		}
		return true
	})
	if err != nil {
		return nil, ErrUnavailable
	}
	return out, nil
}

// waitOps appends one record and waits until it is durable.
func (s *System) waitOps(ctx context.Context, ops ...persistence.Op) error {
	t := s.store.Append(s.store.Gen(), persistence.Record{Ops: ops})
	if err := t.Wait(ctx); err != nil {
		return ErrUnavailable
	}
	return nil
}
