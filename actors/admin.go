package actors

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// Quotas per owner (spec 8.3). Active agents are counted per environment,
// archived agents across both (a practice reset empties the practice
// ones).
const (
	MaxActiveAgentsPractice = 5
	MaxActiveAgentsLive     = 10
	MaxArchivedAgents       = 20
	MaxAgentNameLength      = 100
)

// CheckName checks an agent's or an owner's name as create and rename
// take it: trimmed, 1 to MaxAgentNameLength characters, printable, and
// returns it trimmed. A name reaches the
// console, e-mails, chat messages and terminals: a control character (a
// new line, an escape sequence) or an invisible one (a zero-width space,
// a right-to-left override) would forge or hide text there.
func CheckName(name string) (string, *Error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > MaxAgentNameLength {
		return "", &Error{Code: CodeParameterInvalid, Param: "name",
			Message: fmt.Sprintf("name must be 1 to %d characters (not only spaces).", MaxAgentNameLength)}
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "", &Error{Code: CodeParameterInvalid, Param: "name",
				Message: fmt.Sprintf("name must be printable text: no control or invisible formatting characters (it has U+%04X).", r)}
		}
	}
	return name, nil
}

// OwnerCreated is the answer of CreateOwner: the owner and one owner key
// per environment, whose secrets are shown only here.
type OwnerCreated struct {
	Owner Owner
	Keys  map[Env]string
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// CreateOwner creates an owner with a practice environment funded with the
// configured practice pool, an empty live environment, and an owner key
// for each.
func (s *System) CreateOwner(ctx context.Context, name, email, passwordHash string) (OwnerCreated, error) {
	name, nerr := CheckName(name)
	if nerr != nil {
		return OwnerCreated{}, nerr
	}
	email = strings.ToLower(strings.TrimSpace(email))
	if existing, err := s.store.Get(bOwnerEmails, []byte(email)); err != nil {
		return OwnerCreated{}, ErrUnavailable
	} else if existing != nil {
		return OwnerCreated{}, &Error{Code: CodeConflict, Param: "email", Message: "An owner with this e-mail already exists."}
	}
	now := s.clock.Now()
	o := Owner{ID: newUUID(), Name: name, Email: email, PasswordHash: passwordHash, CreatedAt: now}
	c := &change{}
	c.put(bOwners, []byte(o.ID), o)
	c.putRaw(bOwnerEmails, []byte(email), []byte(o.ID))
	out := OwnerCreated{Owner: o, Keys: map[Env]string{}}
	for _, env := range []Env{EnvTest, EnvLive} {
		st := EnvState{OwnerID: o.ID, Env: env}
		if env == EnvTest {
			st.Balance = s.cfg.PracticePool
		}
		c.put(bEnvs, join(o.ID, string(env)), st)
		k, secret := newKey(KindOwner, o.ID, "", env, now)
		c.putKey(k)
		c.putRaw(bKeyDigests, []byte(k.Digest), []byte(k.ID))
		out.Keys[env] = secret
	}
	t := s.store.Append(s.store.Gen(), persistence.Record{Ops: c.ops})
	if err := t.Wait(ctx); err != nil {
		return OwnerCreated{}, ErrUnavailable
	}
	s.logAction("owner_created", o.ID)
	return out, nil
}

// CreatedKey is a key with its secret, shown once.
type CreatedKey struct {
	KeyView
	Secret string `json:"secret"`
	// RotatedKey is, on a rotation, the key it replaced, with the end of
	// its grace period: when it stops working.
	RotatedKey *KeyView `json:"rotated_key,omitempty"`
}

// CreateAgent creates an agent of the owner's environment with rules (in
// effect at once, as version 1), and emits agent.created.
func (s *System) CreateAgent(ctx context.Context, p Principal, name string, in *policy.RulesInput) (Agent, policy.Policy, error) {
	if p.Kind != KindOwner {
		return Agent{}, policy.Policy{}, errorf(CodeInvalidRequest, "Only an owner key can create agents.")
	}
	name, nerr := CheckName(name)
	if nerr != nil {
		return Agent{}, policy.Policy{}, nerr
	}
	rules := policy.DefaultRules()
	if in != nil {
		var ferr *policy.FieldError
		if rules, ferr = in.Validate(rules); ferr != nil {
			return Agent{}, policy.Policy{}, &Error{Code: CodeParameterInvalid, Param: "policy." + ferr.Param, Message: ferr.Message}
		}
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return Agent{}, policy.Policy{}, err
	}
	now := s.nowFor(p.OwnerID, p.Env())
	if vu := rules.ValidUntil; vu != nil && !vu.After(now) {
		// As a publish refuses it: an agent whose rules ended before it
		// began would decline every payment, without a word.
		return Agent{}, policy.Policy{}, &Error{Code: CodeParameterInvalid, Param: "policy.valid_until", Message: fmt.Sprintf(
			"valid_until must be in the future (the agent's clock reads %s).", now.UTC().Format(time.RFC3339))}
	}
	ag := Agent{ID: NewID("agt", now), Object: "agent", OwnerID: p.OwnerID, Name: name, Status: AgentActive,
		Livemode: p.Livemode, PolicyVersion: 1, CreatedAt: now}
	pol := policy.NewPolicy(NewID("pol", now), ag.ID, 1, rules, p.Livemode, now, now)
	limit := MaxActiveAgentsPractice
	if p.Livemode {
		limit = MaxActiveAgentsLive
	}
	c := &change{}
	env.mu.Lock()
	if env.state.ActiveAgents >= limit {
		env.mu.Unlock()
		return Agent{}, policy.Policy{}, &Error{Code: CodeQuotaExceeded,
			Message: fmt.Sprintf("This environment already has %d active agents, the most allowed; archive one first.", limit)}
	}
	env.state.ActiveAgents++
	c.put(bAgents, []byte(ag.ID), ag)
	c.putRaw(bOwnerAgents, join(p.OwnerID, string(p.Env()), ag.ID), nil)
	c.put(bPolicies, versionKey(ag.ID, 1), pol)
	c.putRaw(bPolicyIDs, []byte(pol.ID), versionKey(ag.ID, 1))
	c.put(bLedgers, []byte(ag.ID), policy.Ledger{})
	c.event(env, ag.ID, "agent.created", ag, audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return Agent{}, policy.Policy{}, ErrUnavailable
	}
	s.logOwnerAction("agent_created", p, slog.String("agent", ag.ID), slog.String("rules_hash", pol.Hash))
	return ag, pol, nil
}

// CreateAgentKey creates a key for one of the owner's agents.
func (s *System) CreateAgentKey(ctx context.Context, p Principal, agentID string) (CreatedKey, error) {
	// Held until durable like the other key changes: the quota check and
	// its commit must not interleave, and a practice reset (which takes
	// this lock too) must not remove the agent between the check that it
	// exists and the new key's record.
	s.keyChangeMu.Lock()
	defer s.keyChangeMu.Unlock()
	ag, err := s.Agent(p, agentID)
	if err != nil {
		return CreatedKey{}, err
	}
	if ag.Status == AgentArchived {
		return CreatedKey{}, &Error{Code: CodeConflict, Message: "The agent is archived; it cannot get new keys."}
	}
	now := s.nowFor(p.OwnerID, p.Env())
	active, err := s.workingKeys(p.OwnerID, agentID, p.Livemode)
	if err != nil {
		return CreatedKey{}, ErrUnavailable
	}
	if active >= MaxKeysPerAgent {
		return CreatedKey{}, &Error{Code: CodeQuotaExceeded,
			Message: fmt.Sprintf("Agent %s already has %d active keys, the most allowed; revoke one first.", agentID, MaxKeysPerAgent)}
	}
	k, secret := newKey(KindAgent, p.OwnerID, agentID, p.Env(), now)
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return CreatedKey{}, err
	}
	c := &change{}
	env.mu.Lock()
	c.putKey(k)
	c.putRaw(bKeyDigests, []byte(k.Digest), []byte(k.ID))
	c.event(env, agentID, "api_key.created", s.keyView(k), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return CreatedKey{}, ErrUnavailable
	}
	s.logOwnerAction("key_created", p, slog.String("key", k.ID), slog.String("kind", KindAgent), slog.String("agent", agentID))
	return CreatedKey{KeyView: s.keyView(k), Secret: secret}, nil
}

// MaxWaitingPolicyChanges is how many versions of an agent's rules may wait
// to apply at once. Each holds a timer, and the list of what waits is
// answered whole; an owner who loosens this often within the hour cancels
// first.
const MaxWaitingPolicyChanges = 20

// PolicyEdit builds new rules from the newest published rules.
type PolicyEdit func(latest policy.Rules) (policy.Rules, *Error)

type publishPolicy struct {
	edit  PolicyEdit
	dest  *DestinationChange
	reply chan publishReply
}

// DestinationChange names one pattern added to or removed from a list, so
// the published version is also announced as destination.added/removed.
type DestinationChange struct {
	List    string
	Pattern string
	Added   bool
}

type publishReply struct {
	policy policy.Policy
	ticket *persistence.Ticket
	err    *Error
}

// PublishPolicy publishes a new version of an agent's rules. Tightening
// applies at once; loosening waits LoosenDelay and can be cancelled.
func (s *System) PublishPolicy(ctx context.Context, p Principal, agentID string, edit PolicyEdit, dest *DestinationChange) (policy.Policy, error) {
	if _, err := s.Agent(p, agentID); err != nil {
		return policy.Policy{}, err
	}
	r, err := ask(ctx, s, agentID, func(reply chan publishReply) any { return &publishPolicy{edit: edit, dest: dest, reply: reply} })
	if err != nil {
		return policy.Policy{}, err
	}
	if r.err != nil {
		return policy.Policy{}, r.err
	}
	if r.ticket != nil { // nil: nothing changed (see publish)
		if err := r.ticket.Wait(ctx); err != nil {
			return policy.Policy{}, ErrUnavailable
		}
		s.logOwnerAction("rules_published", p, slog.String("agent", agentID), slog.Int("version", r.policy.Version),
			slog.String("hash", r.policy.Hash), slog.Time("effective_at", r.policy.EffectiveAt))
	}
	return r.policy, nil
}

// sameTime reports whether two optional instants are the same.
func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// publish runs in the agent actor, so versions are numbered in order.
//
// An edit builds on the newest version that is not cancelled: a second
// loosening published while the first waits keeps the first. A cancelled
// version is never built on, so it cannot come back inside a later one.
// The result applies at once unless it loosens the rules in effect; then
// it waits LoosenDelay.
//
// An edit that tightens the rules in effect while a loosening waits (a
// block added, a limit lowered) is split: the edit applied to the rules in
// effect is published at once, and each waiting version gets the edit too
// and is renumbered after it, keeping its id and its effective_at (or is
// cancelled, if the edit does not apply to it). Built on the waiting
// version alone, the block would wait the loosening's hour; published
// alone, the waiting version would undo it when it came due. A version
// that applies at once without such a split supersedes the waiting ones:
// they are cancelled. So is a waiting version looser than a new one that
// waits too (see takenBack).
func (a *agentActor) publish(m *publishPolicy) {
	if a.agent.Status == AgentArchived {
		// Like its other changes: an archived agent's rules are its last.
		m.reply <- publishReply{err: &Error{Code: CodeConflict,
			Message: "The agent is archived; its rules and destinations can no longer change."}}
		return
	}
	now := a.now()
	hist, err := a.policyHistory(now)
	if err != nil {
		m.reply <- publishReply{err: ErrUnavailable}
		return
	}
	rules, aerr := m.edit(hist.base.Rules)
	if aerr != nil {
		m.reply <- publishReply{err: aerr}
		return
	}
	if m.dest != nil && rules.Hash() == hist.base.Rules.Hash() {
		// The pattern is already on the list, in effect or waiting: the
		// newest version is the answer. A copy of it under a new number
		// would tell the owner, by event, of a change that is none.
		pol := hist.base
		pol.Paused = a.agent.Status == AgentPaused
		m.reply <- publishReply{policy: pol}
		return
	}
	if vu := rules.ValidUntil; vu != nil && !vu.After(now) && !sameTime(vu, hist.base.ValidUntil) {
		// Rules that end before they start stop every payment at once,
		// without a word; a wrong year is the likely cause.
		m.reply <- publishReply{err: &Error{Code: CodeParameterInvalid, Param: "valid_until", Message: fmt.Sprintf(
			"valid_until must be in the future (the agent's clock reads %s); to stop the agent's payments now, pause it.",
			now.UTC().Format(time.RFC3339))}}
		return
	}
	loosens := policy.Loosens(a.policy.Rules, rules)
	var rebase []policy.Policy
	if loosens && len(hist.pending) > 0 {
		if inEffect, err := m.edit(a.policy.Rules); err == nil && !policy.Loosens(a.policy.Rules, inEffect) {
			rules, loosens, rebase = inEffect, false, hist.pending
		}
	}
	// An edit that tightens some rules and loosens others is split: what
	// tightens is published at once, as a version of its own, and the
	// whole edit follows it and waits. Waiting whole, a lowered cap would
	// wait the loosening's hour beside it. Like any version in effect, the
	// part supersedes the versions that waited before it.
	var atOnce *policy.Policy
	top := hist.top
	if loosens && rebase == nil {
		if part, ok := policy.TighteningPart(a.policy.Rules, rules); ok {
			p := policy.NewPolicy(NewID("pol", now), a.id, top+1, part, a.agent.Livemode, now, now)
			atOnce, top = &p, top+1
		}
	}
	// A new version that waits is the owner's newest word, yet the
	// versions waiting before it come due first. One of them looser than
	// it somewhere (a trusted destination the edit removed, a raise it
	// lowered again) would let the agent pay, until the new version's
	// time, what the owner has since taken back: it is cancelled, and
	// what the new version keeps of it waits with the new version.
	var takenBack []policy.Policy
	if loosens && atOnce == nil && rebase == nil {
		for _, w := range hist.pending {
			if policy.Loosens(rules, w.Rules) {
				takenBack = append(takenBack, w)
			}
		}
	}
	if loosens {
		waiting := len(hist.pending) - len(takenBack)
		if atOnce != nil {
			waiting = 0 // the part published at once cancels them all
		}
		if waiting >= MaxWaitingPolicyChanges {
			oldest := hist.pending[0]
			for _, w := range hist.pending {
				if !slices.ContainsFunc(takenBack, func(t policy.Policy) bool { return t.ID == w.ID }) {
					oldest = w
					break
				}
			}
			m.reply <- publishReply{err: &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf(
				"%d versions of agent %s's rules already wait to apply, the most allowed; cancel one (POST /v1/policy_changes/{id}/cancel; GET /v1/agents/%s/policy_changes lists them) or publish again after the oldest applies at %s.",
				waiting, a.id, a.id, oldest.EffectiveAt.UTC().Format(time.RFC3339))}}
			return
		}
	}
	eff := now
	if loosens {
		eff = now.Add(a.sys.cfg.LoosenDelay)
	}
	pol := policy.NewPolicy(NewID("pol", now), a.id, top+1, rules, a.agent.Livemode, now, eff)
	inEffect := &pol
	if loosens {
		inEffect = atOnce
	}
	if inEffect != nil && inEffect.DestinationWindowOver != nil && !a.windowLoaded {
		// The rule applies at once: its window must be whole before the
		// version is published, or the next decision would under-count.
		if err := a.loadWindow(now); err != nil {
			m.reply <- publishReply{err: ErrUnavailable}
			return
		}
	}
	c := &change{}
	a.env.mu.Lock()
	if atOnce != nil {
		c.put(bPolicies, versionKey(a.id, atOnce.Version), *atOnce)
		c.putRaw(bPolicyIDs, []byte(atOnce.ID), versionKey(a.id, atOnce.Version))
		a.agent.PolicyVersion = atOnce.Version
		c.put(bAgents, []byte(a.id), a.agent)
		c.event(a.env, a.id, "policy.updated", policyRef(atOnce), audienceBoth, now)
		for _, w := range hist.pending {
			a.cancelVersion(c, w, now)
		}
	}
	for _, w := range takenBack {
		a.cancelVersion(c, w, now)
	}
	c.put(bPolicies, versionKey(a.id, pol.Version), pol)
	c.putRaw(bPolicyIDs, []byte(pol.ID), versionKey(a.id, pol.Version))
	if loosens {
		c.event(a.env, a.id, "policy.change_requested", waitingChange(&pol), audienceOwner, now)
	} else {
		a.agent.PolicyVersion = pol.Version
		c.put(bAgents, []byte(a.id), a.agent)
		c.event(a.env, a.id, "policy.updated", policyRef(&pol), audienceBoth, now)
	}
	next := pol.Version
	for _, w := range rebase {
		edited, err := m.edit(w.Rules)
		if err != nil {
			// The edit does not fit this version: it cannot carry the
			// tightening, so it must not apply.
			a.cancelVersion(c, w, now)
			continue
		}
		c.del(bPolicies, versionKey(a.id, w.Version))
		next++
		moved := policy.NewPolicy(w.ID, a.id, next, edited, w.Livemode, now, w.EffectiveAt)
		c.put(bPolicies, versionKey(a.id, moved.Version), moved)
		c.putRaw(bPolicyIDs, []byte(moved.ID), versionKey(a.id, moved.Version))
		// The same change (same id and time) under its new number: a
		// receiver keeps the newest event of an id.
		c.event(a.env, a.id, "policy.change_requested", waitingChange(&moved), audienceOwner, now)
	}
	if !loosens && rebase == nil {
		// Published at once, and built on the newest version, yet not a
		// loosening: it undoes what the waiting versions loosen (a full
		// body sent while a loosening waited). They would never apply
		// behind a newer version in effect; they are cancelled, each with
		// its policy.change_cancelled, so the owner is told.
		for _, w := range hist.pending {
			a.cancelVersion(c, w, now)
		}
	}
	if d := m.dest; d != nil {
		typ := "destination.removed"
		if d.Added {
			typ = "destination.added"
		}
		c.event(a.env, a.id, typ, map[string]any{"id": NewID("dst", now), "object": "destination", "agent_id": a.id, "list": d.List,
			"pattern": d.Pattern, "policy_version": pol.Version, "effective_at": pol.EffectiveAt}, audienceOwner, now)
	}
	t := a.sys.commit(a.gen, a.env, c)
	a.env.mu.Unlock()
	if inEffect != nil {
		inEffect.Paused = a.agent.Status == AgentPaused
		a.policy = *inEffect
	}
	if loosens {
		// The new version is not durable yet, so the store cannot show it
		// to applyDuePolicy: arm its timer here.
		a.sys.sendAfter(eff.Sub(now), a.id, &reloadAgent{reply: make(chan error, 1)})
	}
	a.lastTicket, a.metaTicket = t, t
	a.publishView()
	m.reply <- publishReply{policy: pol, ticket: t}
}

// policyHistory is what a publish needs of the stored versions. Callers
// run after the actor's own changes to them are durable (see metaTicket).
type policyHistory struct {
	top     int             // the highest version number written, cancelled ones included
	base    policy.Policy   // the newest version not cancelled, waiting or in effect
	pending []policy.Policy // versions waiting, not cancelled, oldest first
}

func (a *agentActor) policyHistory(now time.Time) (policyHistory, error) {
	h := policyHistory{top: a.policy.Version, base: a.policy}
	baseFound := false
	err := a.sys.store.Scan(bPolicies, prefixOf(a.id), nil, true, func(_, v []byte) bool {
		var p policy.Policy
		if jsonUnmarshal(v, &p) != nil {
			return true
		}
		h.top = max(h.top, p.Version)
		if c, _ := a.sys.store.Get(bPolicyCancels, []byte(p.ID)); c != nil {
			return true
		}
		if !baseFound {
			h.base, baseFound = p, true
		}
		if !p.EffectiveAt.After(now) {
			return false // in effect: older versions are superseded
		}
		h.pending = append([]policy.Policy{p}, h.pending...)
		return true
	})
	return h, err
}

// cancelVersion adds the cancellation of a waiting version to c. Caller
// holds the environment lock.
func (a *agentActor) cancelVersion(c *change, p policy.Policy, now time.Time) PolicyChange {
	at, _ := now.MarshalText()
	c.putRaw(bPolicyCancels, []byte(p.ID), at)
	pc := waitingChange(&p)
	pc.Status, pc.CancelledAt = "cancelled", &now
	c.event(a.env, a.id, "policy.change_cancelled", pc, audienceOwner, now)
	return pc
}

// EditDestinations adds or removes a pattern on one list.
func EditDestinations(list, pattern string, add bool) (PolicyEdit, *DestinationChange, *Error) {
	pat, err := policy.ParsePattern(pattern)
	if err != nil {
		return nil, nil, &Error{Code: CodeParameterInvalid, Param: "pattern", Message: err.Error()}
	}
	pick := func(r *policy.Rules) *[]policy.Pattern {
		switch list {
		case "allowed":
			return &r.AllowedDestinations
		case "trusted":
			return &r.TrustedDestinations
		case "blocked":
			return &r.BlockedDestinations
		}
		return nil
	}
	if pick(&policy.Rules{}) == nil {
		return nil, nil, &Error{Code: CodeParameterInvalid, Param: "list", Message: `list must be "allowed", "trusted" or "blocked".`}
	}
	change := &DestinationChange{List: list, Pattern: pat.String(), Added: add}
	return func(r policy.Rules) (policy.Rules, *Error) {
		l := pick(&r)
		out := make([]policy.Pattern, 0, len(*l)+1)
		found := false
		for _, p := range *l {
			if p.String() == pat.String() {
				found = true
				if !add {
					continue
				}
			}
			out = append(out, p)
		}
		if add && !found {
			out = append(out, pat)
		}
		if !add && !found {
			return r, errorf(CodeNotFound, "%s is not on the %s list.", pat.String(), list)
		}
		*l = out
		return r, nil
	}, change, nil
}
