package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// Agent state changes an owner can make.
const (
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionArchive = "archive"
	ActionRename  = "rename"
)

type agentAction struct {
	action string
	name   string      // rename: the new name, already checked
	pause  *AgentPause // pause: how (nil is a plain pause)
	reply  chan agentActionReply
}

type agentActionReply struct {
	agent   Agent
	ticket  *persistence.Ticket // nil when nothing changed
	revoked []string            // digests of keys revoked with the agent
	err     *Error
}

// ChangeAgent pauses, resumes or archives one of the owner's agents. The
// change runs in the agent's actor, so it is ordered with the agent's
// spends: a spend decided after the pause is declined agent_paused.
func (s *System) ChangeAgent(ctx context.Context, p Principal, agentID, action string) (Agent, error) {
	ag, changed, err := s.changeAgent(ctx, p, agentID, &agentAction{action: action})
	if changed {
		s.logOwnerAction("agent_"+action+"d", p, slog.String("agent", agentID)) // paused, resumed, archived
	}
	return ag, err
}

// RenameAgent gives one of the owner's agents a new name (1 to 100
// characters, trimmed). Renaming to the current name changes nothing; an
// archived agent cannot be renamed. No event is emitted: spec 6.2 has no
// type for it, and the agent.* types are fixed.
func (s *System) RenameAgent(ctx context.Context, p Principal, agentID, name string) (Agent, error) {
	name, nerr := CheckName(name)
	if nerr != nil {
		return Agent{}, nerr
	}
	ag, _, err := s.changeAgent(ctx, p, agentID, &agentAction{action: ActionRename, name: name})
	return ag, err
}

// changeAgent sends m to the agent's actor and waits until its change is
// durable; changed is false when the agent already was as asked.
func (s *System) changeAgent(ctx context.Context, p Principal, agentID string, m *agentAction) (ag Agent, changed bool, err error) {
	if _, err := s.Agent(p, agentID); err != nil {
		return Agent{}, false, err
	}
	r, err := ask(ctx, s, agentID, func(reply chan agentActionReply) any { m.reply = reply; return m })
	if err != nil {
		return Agent{}, false, err
	}
	if r.err != nil {
		return Agent{}, false, r.err
	}
	if r.ticket != nil {
		if err := r.ticket.Wait(ctx); err != nil {
			return Agent{}, false, ErrUnavailable
		}
	}
	for _, d := range r.revoked {
		s.forgetKey(d)
	}
	if m.action == ActionArchive && r.ticket != nil {
		if err := s.revokeLateKeys(ctx, r.agent); err != nil {
			return Agent{}, false, err
		}
	}
	return r.agent, r.ticket != nil, nil
}

// revokeLateKeys revokes the keys of an archived agent that its archive
// did not see: a key made while the archive was being decided, durable
// after the actor read the agent's keys. Under keyChangeMu, once the
// archive is durable, no such key can appear any more: a key change holds
// the lock until its key is durable, and one that starts after reads the
// agent archived and refuses. Almost always there is none, and nothing is
// written.
func (s *System) revokeLateKeys(ctx context.Context, ag Agent) error {
	s.keyChangeMu.Lock()
	defer s.keyChangeMu.Unlock()
	env := EnvOf(ag.Livemode)
	keys, err := s.agentKeys(ag.OwnerID, env, ag.ID)
	if err != nil {
		return ErrUnavailable
	}
	var late []APIKey
	for _, k := range keys {
		if k.RevokedAt == nil {
			late = append(late, k)
		}
	}
	if len(late) == 0 {
		return nil
	}
	e, err := s.env(ag.OwnerID, env)
	if err != nil {
		return err
	}
	now := s.nowFor(ag.OwnerID, env)
	c := &change{}
	e.mu.Lock()
	for _, k := range late {
		revoked := s.keyNow(k.Kind, k.OwnerID, k.Livemode)
		k.RevokedAt = &revoked
		c.putKey(k)
		c.event(e, ag.ID, "api_key.revoked", s.keyView(k), audienceOwner, now)
	}
	t := s.commit(s.store.Gen(), e, c)
	e.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return ErrUnavailable
	}
	for _, k := range late {
		s.forgetKey(k.Digest)
	}
	s.log.Info("revoked keys made while their agent was being archived", "agent", ag.ID, "keys", len(late))
	return nil
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
		how := m.pause
		if how == nil {
			how = &AgentPause{}
		}
		ag.Status, ag.PausedAt, ag.PauseDetail, typ = AgentPaused, &now, how, "agent.paused"
	case ActionResume:
		if ag.Status == AgentActive {
			m.reply <- agentActionReply{agent: ag}
			return
		}
		ag.Status, ag.PausedAt, ag.PauseDetail, typ = AgentActive, nil, nil, "agent.resumed"
	case ActionRename:
		if ag.Name == m.name {
			m.reply <- agentActionReply{agent: ag}
			return
		}
		ag.Name = m.name // no event: spec 6.2 has no type for a rename
	case ActionArchive:
		ag.Status, ag.ArchivedAt, ag.PauseDetail, typ = AgentArchived, &now, nil, "agent.archived"
	default:
		m.reply <- agentActionReply{err: errorf(CodeInvalidRequest, "Unknown agent action %q.", m.action)}
		return
	}

	c := &change{}
	var revoked []string
	elsewhere := 0 // archived agents of the owner's other environment
	var waiting []policy.Policy
	var keys []APIKey // the agent's, which an archive revokes
	if m.action == ActionArchive {
		// An archived agent's rules are its last: the loosenings still
		// waiting will never apply, and the owner hears so now, not an
		// hour later from a version nobody can use.
		hist, err := a.policyHistory(now)
		if err != nil {
			m.reply <- agentActionReply{err: ErrUnavailable}
			return
		}
		waiting = hist.pending
		if keys, err = a.sys.agentKeys(ag.OwnerID, EnvOf(ag.Livemode), a.id); err != nil {
			m.reply <- agentActionReply{err: ErrUnavailable}
			return
		}
		// The quota is per owner (spec 8.3), practice and live together.
		// archiveMu orders every archive, so two agents archived at once,
		// in either environment, cannot both take the last place; the
		// other environment's count can meanwhile only fall (a practice
		// reset), which errs on the safe side.
		a.sys.archiveMu.Lock()
		defer a.sys.archiveMu.Unlock()
		n, err := a.sys.archivedAgents(ag.OwnerID, EnvOf(!ag.Livemode))
		if err != nil {
			m.reply <- agentActionReply{err: ErrUnavailable}
			return
		}
		elsewhere = n
	}
	a.env.mu.Lock()
	if m.action == ActionArchive && a.env.state.ArchivedAgents+elsewhere >= MaxArchivedAgents {
		a.env.mu.Unlock()
		msg := fmt.Sprintf("This owner already keeps %d archived agents, practice and live together, the most allowed; pause the agent instead (a paused agent cannot spend).", MaxArchivedAgents)
		if a.env.state.ArchivedAgents > 0 && !a.agent.Livemode || elsewhere > 0 && a.agent.Livemode {
			msg += " A practice reset (POST /v1/test/reset) removes every practice agent."
		}
		m.reply <- agentActionReply{err: &Error{Code: CodeQuotaExceeded, Message: msg}}
		return
	}
	var written []writtenSpend
	var ended []string // spends the archive cancelled
	switch m.action {
	case ActionPause:
		// Payments waiting for the owner stay waiting, marked with the
		// pause; an approval given during the pause is not paid until the
		// agent resumes (the rules decline paused agents).
		detail := policy.PauseDetail{Scope: "agent", PausedAt: now,
			Message: "The owner paused this agent while the payment waited for approval."}
		if ag.PauseDetail.Emergency {
			detail.Scope = "owner"
			detail.Message = "The owner paused every agent (an emergency pause) while the payment waited for approval."
		}
		for _, sp := range a.active {
			if sp.Status == policy.StatusPendingApproval {
				d := detail
				sp.PauseDetail = &d
				sp.UpdatedAt = now
				written = append(written, writtenSpend{sp, spendJSON(sp)})
			}
		}
	case ActionResume:
		// The pause no longer holds the waiting payments back: a
		// pause_detail left on them would tell the agent it still does.
		for _, sp := range a.active {
			if sp.Status == policy.StatusPendingApproval && sp.PauseDetail != nil {
				sp.PauseDetail = nil
				sp.UpdatedAt = now
				written = append(written, writtenSpend{sp, spendJSON(sp)})
			}
		}
	case ActionArchive:
		// Archiving revokes the agent's keys and ends what still waits for
		// the owner. A payment already approved may be with the vendor
		// (after a restart, this incarnation cannot know whether the last
		// one sent it): it goes on to settle or fail, holding its
		// allowance until then, as it would have without the archive.
		for _, sp := range a.active {
			if sp.Status != policy.StatusPendingApproval {
				continue
			}
			ended = append(ended, sp.ID)
			a.ledger.Release(sp.ID, now)
			a.env.state.Held = a.env.state.Held.Sub(sp.Amount)
			sp.Cancel(now)
			sp.Message = "The owner archived the agent; nothing was paid and the allowance was released."
			written = append(written, writtenSpend{sp, spendJSON(sp)})
			c.del(bActive, join(a.id, sp.ID))
			c.event(a.env, a.id, sp.Status.EventType(), spendRef(sp), audienceBoth, now)
			a.sys.timers.cancel(sp.ID)
		}
		c.putLedger([]byte(a.id), &a.ledger)
		a.env.state.ActiveAgents--
		a.env.state.ArchivedAgents++
		c.putRaw(bOwnerAgents, join(ag.OwnerID, string(EnvOf(ag.Livemode)), ag.ID), []byte(AgentArchived))
		for _, w := range waiting {
			a.cancelVersion(c, w, now)
		}
		for _, k := range keys {
			if k.RevokedAt == nil {
				k.RevokedAt = &now
				c.putKey(k)
				c.event(a.env, a.id, "api_key.revoked", a.sys.keyView(k), audienceOwner, now)
				revoked = append(revoked, k.Digest)
			}
		}
	}
	for _, w := range written {
		c.putSpend(w.sp, w.body)
		c.spends = append(c.spends, w.sp.ID)
	}
	c.put(bAgents, []byte(a.id), ag)
	audience := audienceBoth
	if m.action == ActionArchive {
		audience = audienceOwner
	}
	if typ != "" {
		c.event(a.env, a.id, typ, ag, audience, now)
	}
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	for _, w := range written {
		// What the actor answers for a spend until the store has it (a
		// replay, a refused cancel or decision) must be this state.
		a.appended(t, w.sp, w.body)
	}
	for _, id := range ended {
		delete(a.active, id)
	}
	a.agent = ag
	a.policy.Paused = ag.Status == AgentPaused
	a.lastTicket, a.metaTicket = t, t
	a.publishView()
	m.reply <- agentActionReply{agent: ag, ticket: t, revoked: revoked}
}

// archivedAgents is the count of the owner's archived agents in env.
func (s *System) archivedAgents(ownerID string, env Env) (int, error) {
	e, err := s.env(ownerID, env)
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state.ArchivedAgents, nil
}

// writtenSpend is a spend an agent action changed, with its new body.
type writtenSpend struct {
	sp   *policy.Spend
	body []byte
}

// agentKeys lists the stored keys of one agent.
func (s *System) agentKeys(ownerID string, env Env, agentID string) ([]APIKey, error) {
	var out []APIKey
	err := s.ownerKeys(ownerID, env, false, "", func(id string) bool { return id == agentID }, func(k APIKey) bool {
		out = append(out, k)
		return true
	})
	return out, err
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
		key, err := pg.startAt(q, cursor, "an agent")
		if err != nil {
			return Page{}, err
		}
		return pg.run(key)
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
	} else if !ok {
		return KeyView{}, notFound
	} else if k.OwnerID != p.OwnerID || k.Livemode != p.Livemode {
		return KeyView{}, notFoundFor(p, "key", keyID, k.OwnerID, k.Livemode)
	}
	if k.RevokedAt != nil {
		return s.keyView(k), nil
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
		return s.keyView(k), nil
	}
	now := s.nowFor(p.OwnerID, p.Env())
	revoked := s.keyNow(k.Kind, k.OwnerID, k.Livemode)
	k.RevokedAt = &revoked
	c := &change{}
	env.mu.Lock()
	c.putKey(k)
	c.event(env, k.AgentID, "api_key.revoked", s.keyView(k), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return KeyView{}, ErrUnavailable
	}
	s.forgetKey(k.Digest) // only once durable: a failed revocation keeps the key working, as the disk says
	s.logOwnerAction("key_revoked", p, slog.String("key", k.ID), slog.String("kind", k.Kind), slog.String("agent", k.AgentID))
	return s.keyView(k), nil
}

// ListKeyPage lists one page of the owner's keys of the environment,
// newest first (never secrets), optionally of one agent. Revoked and
// rotated keys stay listed, so the list only grows: it is paged like the
// others. The page walks the owner's index of keys (keys_index.go), whose
// ids sort by creation time.
func (s *System) ListKeyPage(p Principal, q ListParams) (Page, error) {
	q.Limit = normalizeLimit(q.Limit)
	cursor, err := cursorOf(q, "key", "a key")
	if err != nil {
		return Page{}, err
	}
	if q.AgentID != "" {
		if _, err := s.Agent(p, q.AgentID); err != nil {
			return Page{}, &Error{Code: CodeParameterInvalid, Param: "agent_id", Message: "agent_id names no agent of this owner and environment."}
		}
	}
	pg := pager{sys: s, q: q, bucket: bOwnerKeys, prefix: prefixOf(p.OwnerID, string(p.Env()))}
	pg.load = func(key, agentID []byte) ([]byte, time.Time, bool, error) {
		if q.AgentID != "" && string(agentID) != q.AgentID {
			return nil, time.Time{}, false, nil
		}
		var k APIKey
		if found, err := s.getJSON(bKeys, key[len(pg.prefix):], &k); err != nil {
			return nil, time.Time{}, false, err
		} else if !found {
			return nil, time.Time{}, false, nil // deleted since: a practice reset's sweep
		}
		raw, err := json.Marshal(s.keyView(k))
		return raw, k.CreatedAt, true, err
	}
	if cursor == "" {
		return pg.run(nil)
	}
	// The cursor must be a key this list holds, from an earlier page: an
	// id of another owner's key would otherwise place the page.
	var k APIKey
	if ok, err := s.getJSON(bKeys, []byte(cursor), &k); err != nil {
		return Page{}, ErrUnavailable
	} else if !ok || k.OwnerID != p.OwnerID || k.Livemode != p.Livemode || q.AgentID != "" && k.AgentID != q.AgentID {
		return Page{}, &Error{Code: CodeParameterInvalid, Param: cursorParam(q),
			Message: "The cursor must be the id of a key this list holds, from an earlier page; " + cursor + " is not one."}
	}
	return pg.run(pg.start(cursor))
}

// ListKeys lists all of the owner's keys of the environment (never
// secrets), for the console's one page of keys.
func (s *System) ListKeys(p Principal) ([]KeyView, error) {
	var out []KeyView
	err := s.ownerKeys(p.OwnerID, p.Env(), true, "", func(string) bool { return true }, func(k APIKey) bool {
		out = append(out, s.keyView(k))
		return true
	})
	if err != nil {
		return nil, ErrUnavailable
	}
	return out, nil
}
