package actors

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// What the owner console needs beyond the owner API: finding an owner by
// e-mail to sign in, finding whose approval a signed link names, the
// pending loosening of an agent, and settled amounts per day for the
// balance chart. The console acts through OwnerPrincipal and the same
// methods the owner API calls, so quotas, events and durability are the
// same whichever door an owner uses.

// OwnerPrincipal is the principal of a signed-in owner acting in env. It
// carries no key: decisions and changes made with it are the owner's own.
func OwnerPrincipal(ownerID string, env Env) Principal {
	return Principal{Kind: KindOwner, OwnerID: ownerID, Livemode: env.Livemode()}
}

// OwnerByEmail finds an owner by sign-in e-mail (case-insensitive).
func (s *System) OwnerByEmail(email string) (Owner, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	notFound := errorf(CodeNotFound, "No owner has this e-mail.")
	if email == "" {
		return Owner{}, notFound
	}
	id, err := s.store.Get(bOwnerEmails, []byte(email))
	if err != nil {
		return Owner{}, ErrUnavailable
	}
	if id == nil {
		return Owner{}, notFound
	}
	return s.OwnerByID(string(id))
}

// OwnerByID reads an owner record.
func (s *System) OwnerByID(ownerID string) (Owner, error) {
	var o Owner
	ok, err := s.getJSON(bOwners, []byte(ownerID), &o)
	if err != nil {
		return Owner{}, ErrUnavailable
	}
	if !ok {
		return Owner{}, errorf(CodeNotFound, "No owner %s exists.", ownerID)
	}
	return o, nil
}

// SetOwnerPassword replaces an owner's console password hash (argon2id,
// PHC string) and ends every console session of the owner, in one durable
// record: a password is replaced because it leaked or was forgotten, and
// a browser signed in with the old one must not keep deciding approvals.
// by names what set it, for the operator's log.
func (s *System) SetOwnerPassword(ctx context.Context, ownerID, passwordHash, by string) error {
	return s.setOwnerPassword(ctx, ownerID, passwordHash, by, "", "", ConsoleSession{})
}

// ChangeOwnerPassword is SetOwnerPassword from a signed-in console: every
// session of the owner ends, and the browser that made the change goes on
// in cs, a fresh session stored under newDigest in the same record, in
// place of its session oldDigest. cs begins now (its CreatedAt and
// LastSeenAt are set here), so the change does not end it.
func (s *System) ChangeOwnerPassword(ctx context.Context, ownerID, passwordHash, oldDigest, newDigest string, cs ConsoleSession) error {
	if newDigest == "" || cs.OwnerID != ownerID {
		return errorf(CodeInvalidRequest, "The session that goes on after a password change must be a new one of the same owner.")
	}
	return s.setOwnerPassword(ctx, ownerID, passwordHash, "console", oldDigest, newDigest, cs)
}

func (s *System) setOwnerPassword(ctx context.Context, ownerID, passwordHash, by, oldDigest, newDigest string, cs ConsoleSession) error {
	o, err := s.OwnerByID(ownerID)
	if err != nil {
		return err
	}
	o.PasswordHash = passwordHash
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	digests, err := s.ownerSessionDigests(o.ID)
	if err != nil {
		return err
	}
	// The change time also ends the sessions this scan cannot see yet: a
	// sign-in with the old password whose session is not durable yet.
	now := s.clock.Now()
	at, err := json.Marshal(now)
	if err != nil {
		return err
	}
	ops := []persistence.Op{persistence.Put(bOwners, []byte(o.ID), b), persistence.Put(bConsoleSessionsEnded, []byte(o.ID), at)}
	others := 0
	for _, d := range digests {
		ops = append(ops, persistence.Del(bConsoleSessions, []byte(d)))
		if d != oldDigest {
			others++
		}
	}
	if newDigest != "" {
		cs.CreatedAt, cs.LastSeenAt = now, now
		kept, err := json.Marshal(cs)
		if err != nil {
			return err
		}
		ops = append(ops, persistence.Put(bConsoleSessions, []byte(newDigest), kept))
	}
	if err := s.waitOps(ctx, ops...); err != nil {
		return err
	}
	s.logAction("console_password_set", o.ID, slog.String("by", by), slog.Int("sessions_ended", others))
	return nil
}

// ApprovalOwner names the owner and environment of an approval, so that a
// signed link, which carries only the approval id, can be checked against
// the approval as its owner sees it.
func (s *System) ApprovalOwner(approvalID string) (ownerID string, env Env, err error) {
	notFound := errorf(CodeNotFound, "No approval %s exists.", approvalID)
	if !ValidID("apr", approvalID) {
		return "", "", notFound
	}
	spendID, gerr := s.store.Get(bApprovals, []byte(approvalID))
	if gerr != nil {
		return "", "", ErrUnavailable
	}
	if spendID == nil {
		return "", "", notFound
	}
	var sp policy.Spend
	if ok, gerr := s.getJSON(bSpends, spendID, &sp); gerr != nil {
		return "", "", ErrUnavailable
	} else if !ok {
		return "", "", notFound
	}
	var ag Agent
	if ok, gerr := s.getJSON(bAgents, []byte(sp.AgentID), &ag); gerr != nil {
		return "", "", ErrUnavailable
	} else if !ok {
		return "", "", notFound
	}
	return ag.OwnerID, EnvOf(sp.Livemode), nil
}

// EnvNow is the time of the principal's environment: the practice clock
// in practice, the service clock in live.
func (s *System) EnvNow(p Principal) time.Time { return s.nowFor(p.OwnerID, p.Env()) }

// KeyNow is the time the principal's keys of a kind age by (see keyNow).
func (s *System) KeyNow(p Principal, kind string) time.Time {
	return s.keyNow(kind, p.OwnerID, p.Livemode)
}

// PendingPolicy is the agent's published loosening that waits for its
// effective_at, if any.
func (s *System) PendingPolicy(p Principal, agentID string) (policy.Policy, bool, error) {
	ag, err := s.Agent(p, agentID)
	if err != nil {
		return policy.Policy{}, false, err
	}
	pol, ok := nextPending(s.store, agentID, s.nowFor(ag.OwnerID, EnvOf(ag.Livemode)))
	return pol, ok, nil
}

// DaySpend is what an agent paid on one UTC day.
type DaySpend struct {
	Day     time.Time // 00:00 UTC
	Settled policy.Amount
	Count   int
}

// DailySpend sums the settled amounts of an agent per UTC day (by the
// time each spend settled) for the days days ending today on the
// environment's clock, oldest first. It reads the agent's spend index
// newest first and stops a day before the window: a spend settles within
// its settle timeout, so none created earlier settles inside it.
func (s *System) DailySpend(p Principal, agentID string, days int) ([]DaySpend, error) {
	ag, err := s.Agent(p, agentID)
	if err != nil {
		return nil, err
	}
	now := s.nowFor(ag.OwnerID, EnvOf(ag.Livemode))
	today := now.UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -(days - 1))
	out := make([]DaySpend, days)
	for i := range out {
		out[i] = DaySpend{Day: first.AddDate(0, 0, i), Settled: policy.MustAmount("0.00")}
	}
	stop := first.Add(-24 * time.Hour)
	var loadErr error
	err = s.store.Scan(bAgentSpends, prefixOf(agentID), nil, true, func(k, _ []byte) bool {
		var sp policy.Spend
		ok, err := s.getJSON(bSpends, k[len(prefixOf(agentID)):], &sp)
		if err != nil {
			loadErr = err
			return false
		}
		if !ok {
			return true
		}
		if sp.CreatedAt.Before(stop) {
			return false
		}
		if sp.Status != policy.StatusSettled || sp.AmountSettled == nil {
			return true
		}
		at := sp.UpdatedAt.UTC()
		if at.Before(first) || !at.Before(today.Add(24*time.Hour)) {
			return true
		}
		i := int(at.Sub(first) / (24 * time.Hour))
		out[i].Settled = out[i].Settled.Add(*sp.AmountSettled)
		out[i].Count++
		return true
	})
	if err == nil {
		err = loadErr
	}
	if err != nil {
		return nil, ErrUnavailable
	}
	return out, nil
}

// LoosenDelay is how long a loosening policy version waits.
func (s *System) LoosenDelay() time.Duration { return s.cfg.LoosenDelay }
