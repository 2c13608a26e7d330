package actors

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// effectivePolicy is the newest version of an agent's rules already in
// effect and not cancelled. A loosening waits until its effective_at and
// can be cancelled until then; a cancelled version never applies.
func effectivePolicy(store *persistence.Store, agentID string, now time.Time) (policy.Policy, bool, error) {
	var out policy.Policy
	found := false
	err := store.Scan(bPolicies, prefixOf(agentID), nil, true, func(_, v []byte) bool {
		var p policy.Policy
		if json.Unmarshal(v, &p) != nil || p.EffectiveAt.After(now) {
			return true
		}
		if c, _ := store.Get(bPolicyCancels, []byte(p.ID)); c != nil {
			return true
		}
		out, found = p, true
		return false
	})
	return out, found, err
}

// nextPending is the earliest version still waiting to take effect.
func nextPending(store *persistence.Store, agentID string, now time.Time) (policy.Policy, bool) {
	var out policy.Policy
	found := false
	_ = store.Scan(bPolicies, prefixOf(agentID), nil, true, func(_, v []byte) bool {
		var p policy.Policy
		if json.Unmarshal(v, &p) != nil {
			return true
		}
		if !p.EffectiveAt.After(now) {
			return false // older versions are all in effect or superseded
		}
		if c, _ := store.Get(bPolicyCancels, []byte(p.ID)); c == nil {
			out, found = p, true // keep going: an earlier pending one may exist
		}
		return true
	})
	return out, found
}

// applyDuePolicy announces a version that took effect since the agent's
// record last said so (policy.updated), and arms a timer for the next
// waiting one. Called on activation and on every reload, so a version that
// came due while the service was down is announced when it starts.
func (a *agentActor) applyDuePolicy() {
	now := a.now()
	if a.policy.Version > a.agent.PolicyVersion {
		// Every version that came due since the last announced one is
		// announced, oldest first: a practice clock moved past several
		// waiting loosenings at once (or a service down while they came
		// due) applied each in turn, and each policy.change_requested
		// ends in its policy.updated or policy.change_cancelled.
		due, err := a.dueVersions(now)
		if err != nil {
			due = nil
		}
		if len(due) == 0 || due[len(due)-1].Version != a.policy.Version {
			due = append(due, a.policy)
		}
		ag := a.agent
		ag.PolicyVersion = a.policy.Version
		c := &change{}
		a.env.mu.Lock()
		c.put(bAgents, []byte(a.id), ag)
		for i := range due {
			c.event(a.env, a.id, "policy.updated", policyRef(&due[i]), audienceBoth, now)
		}
		t := a.sys.commit(a.gen, a.env, c)
		a.env.mu.Unlock()
		a.agent = ag
		a.lastTicket, a.metaTicket = t, t
	}
	if next, ok := nextPending(a.sys.store, a.id, now); ok {
		a.sys.sendAfter(next.EffectiveAt.Sub(now), a.id, &reloadAgent{reply: make(chan error, 1)})
	}
}

// dueVersions are the versions after the last announced one, up to the
// one in effect, that were not cancelled, oldest first.
func (a *agentActor) dueVersions(now time.Time) ([]policy.Policy, error) {
	var due []policy.Policy
	err := a.sys.store.Scan(bPolicies, prefixOf(a.id), versionKey(a.id, a.agent.PolicyVersion+1), false, func(_, v []byte) bool {
		var p policy.Policy
		if jsonUnmarshal(v, &p) != nil {
			return true
		}
		if p.Version > a.policy.Version || p.EffectiveAt.After(now) {
			return false
		}
		if c, _ := a.sys.store.Get(bPolicyCancels, []byte(p.ID)); c == nil {
			due = append(due, p)
		}
		return true
	})
	return due, err
}

func policyRef(p *policy.Policy) map[string]any {
	return map[string]any{"id": p.ID, "object": "policy", "agent_id": p.AgentID, "version": p.Version,
		"hash": p.Hash, "effective_at": p.EffectiveAt}
}

// waitingChange is the policy_change object of a version that waits to
// apply (spec 6.2: policy.change_requested carries a policy_change).
func waitingChange(p *policy.Policy) PolicyChange {
	return PolicyChange{ID: p.ID, Object: "policy_change", AgentID: p.AgentID, Version: p.Version, Hash: p.Hash,
		Status: "pending", EffectiveAt: p.EffectiveAt, CreatedAt: p.CreatedAt, Rules: p.Rules}
}

// PolicyChange is a published version that waits, or waited, to apply.
type PolicyChange struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	AgentID     string     `json:"agent_id"`
	Version     int        `json:"version"`
	Hash        string     `json:"hash"`
	Status      string     `json:"status"` // pending, applied, cancelled
	EffectiveAt time.Time  `json:"effective_at"`
	CreatedAt   time.Time  `json:"created_at"`
	CancelledAt *time.Time `json:"cancelled_at"`
	// Rules are the version's whole rules: what applies at effective_at,
	// which the owner reads before deciding to let it or cancel it.
	Rules policy.Rules `json:"rules"`
}

// PolicyChanges lists the agent's versions that wait to apply, oldest
// first: what the owner may still cancel. A version applies at its
// effective_at unless cancelled, and each is built on the one before.
func (s *System) PolicyChanges(p Principal, agentID string) ([]PolicyChange, error) {
	ag, err := s.Agent(p, agentID)
	if err != nil {
		return nil, err
	}
	now := s.nowFor(ag.OwnerID, EnvOf(ag.Livemode))
	out := []PolicyChange{}
	err = s.store.Scan(bPolicies, prefixOf(agentID), nil, true, func(_, v []byte) bool {
		var pol policy.Policy
		if jsonUnmarshal(v, &pol) != nil {
			return true
		}
		if !pol.EffectiveAt.After(now) {
			return false // in effect: every older version is too, or superseded
		}
		if c, _ := s.store.Get(bPolicyCancels, []byte(pol.ID)); c == nil {
			out = append(out, waitingChange(&pol))
		}
		return true
	})
	if err != nil {
		return nil, ErrUnavailable
	}
	slices.Reverse(out)
	return out, nil
}

// PolicyChange reads one published version as a policy_change: pending
// while it waits, applied once its effective_at passed, or cancelled.
func (s *System) PolicyChange(p Principal, policyID string) (PolicyChange, error) {
	ag, ref, err := s.policyVersionOf(p, policyID)
	if err != nil {
		return PolicyChange{}, err
	}
	var pol policy.Policy
	if ok, err := s.getJSON(bPolicies, ref, &pol); err != nil {
		return PolicyChange{}, ErrUnavailable
	} else if !ok || pol.ID != policyID {
		return PolicyChange{}, errorf(CodeNotFound, "No policy change %s exists.", policyID)
	}
	pc := waitingChange(&pol)
	if raw, err := s.store.Get(bPolicyCancels, []byte(pol.ID)); err != nil {
		return PolicyChange{}, ErrUnavailable
	} else if raw != nil {
		var at time.Time
		_ = at.UnmarshalText(raw)
		pc.Status, pc.CancelledAt = "cancelled", &at
	} else if !pol.EffectiveAt.After(s.nowFor(ag.OwnerID, EnvOf(ag.Livemode))) {
		pc.Status = "applied"
	}
	return pc, nil
}

// policyVersionOf finds a published version by its id: the agent it
// belongs to, which the principal must see, and its key in bPolicies.
func (s *System) policyVersionOf(p Principal, policyID string) (Agent, []byte, error) {
	notFound := errorf(CodeNotFound, "No policy change %s exists.", policyID)
	if !ValidID("pol", policyID) {
		return Agent{}, nil, notFound
	}
	ref, err := s.store.Get(bPolicyIDs, []byte(policyID))
	if err != nil {
		return Agent{}, nil, ErrUnavailable
	}
	if len(ref) < 9 {
		return Agent{}, nil, notFound
	}
	ag, err := s.Agent(p, string(ref[:len(ref)-9]))
	if isElsewhere(err) {
		return Agent{}, nil, s.notFound(p, "policy change", policyID, ag.ID, ag.Livemode)
	}
	if err != nil {
		return Agent{}, nil, notFound
	}
	return ag, ref, nil
}

type cancelPolicyChange struct {
	policyID string
	reply    chan policyChangeReply
}

type policyChangeReply struct {
	change PolicyChange
	ticket *persistence.Ticket
	err    *Error
}

// CancelPolicyChange cancels a loosening before it takes effect. Cancelling
// a cancelled change answers it unchanged; one already in effect cannot be
// cancelled (publish a tightening instead).
func (s *System) CancelPolicyChange(ctx context.Context, p Principal, policyID string) (PolicyChange, error) {
	ag, _, err := s.policyVersionOf(p, policyID)
	if err != nil {
		return PolicyChange{}, err
	}
	r, err := ask(ctx, s, ag.ID, func(reply chan policyChangeReply) any {
		return &cancelPolicyChange{policyID: policyID, reply: reply}
	})
	if err != nil {
		return PolicyChange{}, err
	}
	if r.err != nil {
		return PolicyChange{}, r.err
	}
	if r.ticket != nil {
		if err := r.ticket.Wait(ctx); err != nil {
			return PolicyChange{}, ErrUnavailable
		}
		s.logOwnerAction("rules_change_cancelled", p, slog.String("policy", policyID))
	}
	return r.change, nil
}

func (a *agentActor) cancelChange(m *cancelPolicyChange) {
	ref, err := a.sys.store.Get(bPolicyIDs, []byte(m.policyID))
	var pol policy.Policy
	if err == nil && len(ref) >= 9 {
		_, err = a.sys.getJSON(bPolicies, versionKey(a.id, int(binary.BigEndian.Uint64(ref[len(ref)-8:]))), &pol)
	}
	if err != nil || pol.ID != m.policyID {
		m.reply <- policyChangeReply{err: ErrUnavailable}
		return
	}
	now := a.now()
	pc := waitingChange(&pol)
	if raw, _ := a.sys.store.Get(bPolicyCancels, []byte(pol.ID)); raw != nil {
		var at time.Time
		_ = at.UnmarshalText(raw)
		pc.Status, pc.CancelledAt = "cancelled", &at
		m.reply <- policyChangeReply{change: pc}
		return
	}
	if !pol.EffectiveAt.After(now) {
		pc.Status = "applied"
		m.reply <- policyChangeReply{err: &Error{Code: CodeConflict,
			Message: "This policy version is already in effect; publish a new version to change the rules."}}
		return
	}
	// A version published while this one waited was built on it and
	// carries its change: it goes too, or the change would apply anyway.
	hist, err := a.policyHistory(now)
	if err != nil {
		m.reply <- policyChangeReply{err: ErrUnavailable}
		return
	}
	c := &change{}
	a.env.mu.Lock()
	pc = a.cancelVersion(c, pol, now)
	for _, w := range hist.pending {
		if w.Version > pol.Version {
			a.cancelVersion(c, w, now)
		}
	}
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	a.lastTicket, a.metaTicket = t, t
	m.reply <- policyChangeReply{change: pc, ticket: t}
}

// sendAfter delivers msg to an agent after d, unless the system closed
// meanwhile.
func (s *System) sendAfter(d time.Duration, agentID string, msg any) {
	s.clock.AfterFunc(d, func() {
		if !s.closed.Load() {
			s.send(agentID, msg)
		}
	})
}
