package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// Agent state changes an owner can make.
const (
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionArchive = "archive"
)

type agentAction struct {
	action string
	reply  chan agentActionReply
}

type agentActionReply struct {
	agent   Agent
	ticket  *persistence.Ticket
	revoked []string // digests of keys revoked with the agent
	err     *Error
}

// ChangeAgent pauses, resumes or archives one of the owner's agents. The
// change runs in the agent's actor, so it is ordered with the agent's
// spends: a spend decided after the pause is declined agent_paused.
func (s *System) ChangeAgent(ctx context.Context, p Principal, agentID, action string) (Agent, error) {
	if _, err := s.Agent(p, agentID); err != nil {
		return Agent{}, err
	}
	r, err := ask(ctx, s, agentID, func(reply chan agentActionReply) any { return &agentAction{action: action, reply: reply} })
	if err != nil {
		return Agent{}, err
	}
	if r.err != nil {
		return Agent{}, r.err
	}
	if r.ticket != nil {
		if err := r.ticket.Wait(ctx); err != nil {
			return Agent{}, ErrUnavailable
		}
	}
	for _, d := range r.revoked {
		s.forgetKey(d)
	}
	return r.agent, nil
}

// changeAgent runs in the agent actor.
func (a *agentActor) changeAgent(m *agentAction) {
	now := a.now()
	ag := a.agent
	if ag.Status == AgentArchived {
		m.reply <- agentActionReply{err: &Error{Code: CodeConflict, Message: "The agent is archived; it can no longer change."}}
		return
	}
	var typ string
	switch m.action {
	case ActionPause:
		if ag.Status == AgentPaused {
			m.reply <- agentActionReply{agent: ag} // already paused: same state
			return
		}
		ag.Status, ag.PausedAt, typ = AgentPaused, &now, "agent.paused"
	case ActionResume:
		if ag.Status == AgentActive {
			m.reply <- agentActionReply{agent: ag}
			return
		}
		ag.Status, ag.PausedAt, typ = AgentActive, nil, "agent.resumed"
	case ActionArchive:
		for _, sp := range a.active {
			if sp.Status != policy.StatusPendingApproval {
				m.reply <- agentActionReply{err: &Error{Code: CodeConflict,
					Message: fmt.Sprintf("Spend %s is being paid; archive the agent once it has settled or failed.", sp.ID)}}
				return
			}
		}
		ag.Status, ag.ArchivedAt, typ = AgentArchived, &now, "agent.archived"
	default:
		m.reply <- agentActionReply{err: errorf(CodeInvalidRequest, "Unknown agent action %q.", m.action)}
		return
	}

	c := &change{}
	var revoked []string
	a.env.mu.Lock()
	switch m.action {
	case ActionPause:
		// Payments waiting for the owner stay waiting, marked with the
		// pause; an approval given during the pause is not paid until the
		// agent resumes (the rules decline paused agents).
		for _, sp := range a.active {
			if sp.Status == policy.StatusPendingApproval {
				sp.PauseDetail = &policy.PauseDetail{Scope: "agent", PausedAt: now,
					Message: "The owner paused this agent while the payment waited for approval."}
				sp.UpdatedAt = now
				c.putRaw(bSpends, []byte(sp.ID), mustJSON(sp))
				c.spends = append(c.spends, sp.ID)
			}
		}
	case ActionArchive:
		// Archiving revokes the agent's keys and ends what still waits.
		for _, sp := range a.active {
			a.ledger.Release(sp.ID, now)
			a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
			sp.Cancel(now)
			sp.Message = "The owner archived the agent; nothing was paid and the allowance was released."
			c.putRaw(bSpends, []byte(sp.ID), mustJSON(sp))
			c.del(bActive, join(a.id, sp.ID))
			c.spends = append(c.spends, sp.ID)
			c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
			a.sys.timers.cancel(sp.ID)
		}
		c.put(bLedgers, []byte(a.id), a.ledger.Counters())
		a.env.state.ActiveAgents--
		c.putRaw(bOwnerAgents, join(ag.OwnerID, string(EnvOf(ag.Livemode)), ag.ID), []byte(AgentArchived))
		for _, k := range a.sys.agentKeys(a.id) {
			if k.RevokedAt == nil {
				k.RevokedAt = &now
				c.put(bKeys, []byte(k.ID), k)
				c.event(a.env, a.id, "api_key.revoked", k.View(), audienceOwner, now)
				revoked = append(revoked, k.Digest)
			}
		}
	}
	c.put(bAgents, []byte(a.id), ag)
	audience := audienceBoth
	if m.action == ActionArchive {
		audience = audienceOwner
	}
	c.event(a.env, a.id, typ, ag, audience, now)
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	if m.action == ActionArchive {
		for id := range a.active {
			delete(a.active, id)
		}
	}
	a.agent = ag
	a.policy.Paused = ag.Status == AgentPaused
	a.lastTicket = t
	m.reply <- agentActionReply{agent: ag, ticket: t, revoked: revoked}
}

// agentKeys lists the stored keys of one agent.
func (s *System) agentKeys(agentID string) []APIKey {
	var out []APIKey
	_ = s.store.Scan(bKeys, nil, nil, false, func(_, v []byte) bool {
		var k APIKey
		if json.Unmarshal(v, &k) == nil && k.AgentID == agentID {
			out = append(out, k)
		}
		return true
	})
	return out
}

// ListAgents lists the owner's agents of the key's environment, newest
// first.
func (s *System) ListAgents(p Principal, q ListParams) (Page, error) {
	q.Limit = normalizeLimit(q.Limit)
	cursor, err := cursorOf(q, "agt", "an agent")
	if err != nil {
		return Page{}, err
	}
	pg := pager{sys: s, q: q, bucket: bOwnerAgents, prefix: prefixOf(p.OwnerID, string(p.Env()))}
	pg.load = func(k, _ []byte) ([]byte, time.Time, bool, error) {
		raw, err := s.store.Get(bAgents, k[len(pg.prefix):])
		if err != nil {
			return nil, time.Time{}, false, err
		}
		var ag Agent
		if raw == nil || json.Unmarshal(raw, &ag) != nil {
			return nil, time.Time{}, false, nil
		}
		return raw, ag.CreatedAt, true, nil
	}
	if cursor != "" {
		return pg.run(pg.start(cursor))
	}
	return pg.run(nil)
}

// RevokeKey revokes one of the owner's keys at once. A revoked key gets
// the same 401 as any other bad key.
func (s *System) RevokeKey(ctx context.Context, p Principal, keyID string) (KeyView, error) {
	var k APIKey
	notFound := errorf(CodeNotFound, "No key %s exists.", keyID)
	if !ValidID("key", keyID) {
		return KeyView{}, notFound
	}
	if ok, err := s.getJSON(bKeys, []byte(keyID), &k); err != nil {
		return KeyView{}, ErrUnavailable
	} else if !ok || k.OwnerID != p.OwnerID || k.Livemode != p.Livemode {
		return KeyView{}, notFound
	}
	if k.RevokedAt != nil {
		return k.View(), nil
	}
	if k.ID == p.KeyID {
		return KeyView{}, &Error{Code: CodeConflict, Message: "A key cannot revoke itself; use another owner key."}
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return KeyView{}, err
	}
	s.keyChangeMu.Lock()
	defer s.keyChangeMu.Unlock()
	// Read again under the lock: a rotation may have changed the key.
	if ok, err := s.getJSON(bKeys, []byte(keyID), &k); err != nil || !ok {
		return KeyView{}, ErrUnavailable
	}
	if k.RevokedAt != nil {
		return k.View(), nil
	}
	now := s.nowFor(p.OwnerID, p.Env())
	k.RevokedAt = &now
	c := &change{}
	env.mu.Lock()
	c.put(bKeys, []byte(k.ID), k)
	c.event(env, k.AgentID, "api_key.revoked", k.View(), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return KeyView{}, ErrUnavailable
	}
	s.forgetKey(k.Digest) // only once durable: a failed revocation keeps the key working, as the disk says
	return k.View(), nil
}

// ListKeys lists the owner's keys of the environment (never secrets).
func (s *System) ListKeys(p Principal) ([]KeyView, error) {
	var out []KeyView
	err := s.store.Scan(bKeys, nil, nil, true, func(_, v []byte) bool {
		var k APIKey
		if json.Unmarshal(v, &k) == nil && k.OwnerID == p.OwnerID && k.Livemode == p.Livemode {
			out = append(out, k.View())
		}
		return true
	})
	if err != nil {
		return nil, ErrUnavailable
	}
	return out, nil
}
