package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// benchAgentPrefix begins the name of every agent the bench makes on a
// running server. A later run knows the agent by it as the bench's, with
// every key it holds, and reuses it: an owner may keep only 5 active
// practice agents and 20 archived ones (spec 8.3), so neither a new agent
// per run nor archiving the last run's agents would last.
const benchAgentPrefix = "guard-bench-"

// legacyAgentName matches the names earlier versions of the bench gave
// their agents ("bench-<unix time>-<owner>-<n>") and left active. Reused
// like the others, they no longer hold the owner's quota against the
// bench.
var legacyAgentName = regexp.MustCompile(`^bench-[0-9]+-[0-9]+-[0-9]+$`)

// isBenchAgent reports whether an agent's name says the bench made it.
func isBenchAgent(name string) bool {
	return strings.HasPrefix(name, benchAgentPrefix) || legacyAgentName.MatchString(name)
}

// listPage is one page of a list answer.
type listPage[T any] struct {
	Data    []T  `json:"data"`
	HasMore bool `json:"has_more"`
}

// agentItem is an agent as the owner's agent list shows it.
type agentItem struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// keyItem is a key as the owner's key list shows it (never its secret).
type keyItem struct {
	ID        string     `json:"id"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// policyItem is the part of a policy the setup reads.
type policyItem struct {
	Version     int       `json:"version"`
	Hash        string    `json:"hash"`
	EffectiveAt time.Time `json:"effective_at"`
	CreatedAt   time.Time `json:"created_at"`
}

// listPageSize is how many items the setup asks of each page of a list:
// the most the service gives (spec 8.2). A test lowers it to see the
// pages followed.
var listPageSize = actors.MaxPageSize

// listAll reads every page of an owner list, each page starting after the
// last item of the one before.
func listAll[T any](ctx context.Context, c *fasthttp.HostClient, key, path string, query url.Values, id func(T) string) ([]T, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(listPageSize))
	var out []T
	for {
		var pg listPage[T]
		if err := callJSON(ctx, c, "GET", path+"?"+q.Encode(), key, nil, &pg); err != nil {
			return out, err
		}
		out = append(out, pg.Data...)
		if !pg.HasMore || len(pg.Data) == 0 {
			return out, nil
		}
		q.Set("starting_after", id(pg.Data[len(pg.Data)-1]))
	}
}

// madeKey is an agent key a run made, and the owner key that revokes it.
type madeKey struct {
	id, agentID, ownerKey string
}

// targetSetup is what a run against a running server set up, and what it
// must undo when the run ends: the agent keys it made.
type targetSetup struct {
	client   *fasthttp.HostClient
	progress func(format string, args ...any)
	// policyHash is the hash of the load's rules, as the bench computes
	// it until the service has published them once in this run, and as
	// the service computes it from then on.
	policyHash string
	agents     []agentCred
	reused     int
	created    int
	// paused counts the bench's agents left out because they are paused:
	// every spend of a paused agent is declined, and resuming it is the
	// owner's decision, not the bench's.
	paused int
	// deposited is what the setup put in the owners' practice pools.
	deposited policy.Amount
	// floors are the owners' reserve_floor, in the order of their keys.
	floors []policy.Amount
	// republished counts the reused agents whose rules the setup
	// published again.
	republished int
	// keys are the keys this run made and has not revoked yet; made and
	// revoked count them all, left are those it could not revoke, and
	// earlierRevoked the keys of earlier runs it revoked on its agents.
	keys           []madeKey
	made, revoked  int
	left           []string
	earlierRevoked int
	// owners are the owner keys that gave agents, and pools their pools'
	// balances as the load began (see startPools).
	owners []string
	pools  []policy.Amount
}

// setupTarget readies up to n agents, each with a key of its own, from
// the owners one after the other: first the active agents earlier runs
// made, their rules confirmed, then new ones while the owner has room. An
// owner with neither is skipped; it is an error only when no owner gave
// an agent. The setup comes back even with an error: its keys must still
// be revoked.
func setupTarget(ctx context.Context, c *fasthttp.HostClient, ownerKeys []string, n int, progress func(string, ...any)) (*targetSetup, error) {
	t := &targetSetup{client: c, progress: progress, policyHash: loadPolicyHash(), deposited: policy.MustAmount("0")}
	namePrefix := fmt.Sprintf("%s%d", benchAgentPrefix, time.Now().Unix())
	for i, key := range ownerKeys {
		if len(t.agents) >= n {
			break
		}
		if err := t.setupOwner(ctx, key, namePrefix, n-len(t.agents)); err != nil {
			return t, fmt.Errorf("setting up agents on %s with owner key %d of %d: %w", c.Addr, i+1, len(ownerKeys), err)
		}
	}
	if len(t.agents) == 0 {
		return t, fmt.Errorf("no owner has an active agent of an earlier bench run (named %s...) to reuse, nor room for a new one: each of the %d owner(s) already has the most active practice agents allowed (%d). Archive agents no longer needed (POST /v1/agents/{id}/archive; an owner keeps at most %d archived ones), or give another owner key with -owner-key%s",
			benchAgentPrefix, len(ownerKeys), actors.MaxActiveAgentsPractice, actors.MaxArchivedAgents, t.pausedHint())
	}
	return t, nil
}

// pausedHint names the paused agents of the bench, for a message that
// says why there were too few agents; "" when there are none.
func (t *targetSetup) pausedHint() string {
	if t.paused == 0 {
		return ""
	}
	return fmt.Sprintf("; %d agent(s) of earlier bench runs are paused and were left out: resume them (POST /v1/agents/{id}/resume) and the bench reuses them", t.paused)
}

// setupOwner readies up to want agents of one owner: its active bench
// agents first, the oldest first so that runs asking for as many agents
// take the same ones, then new agents until the owner's quota is full.
func (t *targetSetup) setupOwner(ctx context.Context, key, namePrefix string, want int) error {
	all, err := listAll(ctx, t.client, key, "/v1/agents", nil, func(a agentItem) string { return a.ID })
	if err != nil {
		return fmt.Errorf("listing the owner's agents: %w", err)
	}
	var reuse []agentItem
	for _, a := range all {
		if !isBenchAgent(a.Name) {
			continue
		}
		switch a.Status {
		case actors.AgentActive:
			reuse = append(reuse, a)
		case actors.AgentPaused:
			t.paused++
		}
	}
	slices.SortFunc(reuse, func(a, b agentItem) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	reuse = reuse[:min(len(reuse), want)]
	if err := t.fundOwner(ctx, key); err != nil {
		return err
	}
	t.owners = append(t.owners, key)
	for _, a := range reuse {
		if err := t.confirmPolicy(ctx, key, a); err != nil {
			return err
		}
		if err := t.revokeEarlierKeys(ctx, key, a); err != nil {
			return err
		}
		if err := t.addAgent(ctx, key, a.ID); err != nil {
			return err
		}
		t.reused++
	}
	for i := len(reuse); i < want; i++ {
		var ag struct {
			ID string `json:"id"`
		}
		err := callJSON(ctx, t.client, "POST", "/v1/agents", key,
			map[string]any{"name": fmt.Sprintf("%s-%d", namePrefix, i), "policy": loadPolicy()}, &ag)
		if isCode(err, string(actors.CodeQuotaExceeded)) {
			return nil // no room left: the next owner's turn
		}
		if err != nil {
			return err
		}
		t.created++
		if err := t.addAgent(ctx, key, ag.ID); err != nil {
			return err
		}
	}
	return nil
}

// fundOwner fills the owner's practice pool up to the most a practice pool
// may hold (a simulated deposit, practice keys only). A new owner starts
// with 1,000.00, which a run at thousands of spends a second drains in
// well under a second: every spend after that is declined for the pool,
// and the run would measure the decline path, not settled payments. The
// owner's reserve_floor stays out of the load's reach however full the
// pool is; the report names it, and a run declined for funds says why.
func (t *targetSetup) fundOwner(ctx context.Context, key string) error {
	var f struct {
		Balance      string `json:"balance"`
		ReserveFloor string `json:"reserve_floor"`
		Livemode     bool   `json:"livemode"`
	}
	if err := callJSON(ctx, t.client, "GET", "/v1/funding", key, nil, &f); err != nil {
		return fmt.Errorf("reading the owner's funding: %w", err)
	}
	if f.Livemode {
		return errors.New("the owner key is a live key; the bench pays practice money only: give practice owner keys (svc_test_owner_...)")
	}
	balance, err := policy.ParseAmount(f.Balance)
	if err != nil {
		return fmt.Errorf("the owner's balance %q: %w", f.Balance, err)
	}
	floor := policy.MustAmount("0")
	if f.ReserveFloor != "" {
		if floor, err = policy.ParseAmount(f.ReserveFloor); err != nil {
			return fmt.Errorf("the owner's reserve_floor %q: %w", f.ReserveFloor, err)
		}
	}
	t.floors = append(t.floors, floor)
	if floor.Sign() > 0 {
		t.progress("an owner keeps a reserve_floor of %s (GET /v1/funding): the load may spend at most %s of a full pool", floor.Display(), actors.PracticeBalanceCeiling.Sub(floor).Display())
	}
	gap := actors.PracticeBalanceCeiling.Sub(balance)
	if gap.Sign() <= 0 {
		return nil
	}
	if err := callJSON(ctx, t.client, "POST", "/v1/test/deposits", key, map[string]any{"amount": gap.Display()}, nil); err != nil {
		return fmt.Errorf("depositing %s practice USDC so that the load is not declined for an empty pool: %w", gap.Display(), err)
	}
	t.deposited = t.deposited.Add(gap)
	t.progress("deposited %s practice USDC into an owner's pool, which now holds %s, the most a practice pool may", gap.Display(), actors.PracticeBalanceCeiling.Display())
	return nil
}

// reserveFloors are the owners' reserve floors for the report, or nil
// when none is above zero.
func (t *targetSetup) reserveFloors() []string {
	if !slices.ContainsFunc(t.floors, func(a policy.Amount) bool { return a.Sign() > 0 }) {
		return nil
	}
	out := make([]string, len(t.floors))
	for i, f := range t.floors {
		out[i] = f.Display()
	}
	return out
}

// poolBalances reads the balance of each owner's practice pool that gave
// agents.
func (t *targetSetup) poolBalances(ctx context.Context) ([]policy.Amount, error) {
	out := make([]policy.Amount, 0, len(t.owners))
	for _, key := range t.owners {
		var f struct {
			Balance string `json:"balance"`
		}
		if err := callJSON(ctx, t.client, "GET", "/v1/funding", key, nil, &f); err != nil {
			return nil, err
		}
		b, err := policy.ParseAmount(f.Balance)
		if err != nil {
			return nil, fmt.Errorf("the owner's balance %q: %w", f.Balance, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// startPools notes the pools' balances as the load begins, for spent.
func (t *targetSetup) startPools(ctx context.Context) {
	t.pools, _ = t.poolBalances(ctx)
}

// spent is how much the pools went down since startPools, or "" when
// either reading failed (the server stopped answering).
func (t *targetSetup) spent(ctx context.Context) string {
	if t.pools == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
	defer cancel()
	now, err := t.poolBalances(ctx)
	if err != nil {
		return ""
	}
	sum := policy.MustAmount("0")
	for i := range now {
		sum = sum.Add(t.pools[i].Sub(now[i]))
	}
	return sum.Display()
}

// changes is what the run did to the target, for the report.
func (t *targetSetup) changes() *TargetChanges {
	return &TargetChanges{Deposited: t.deposited.Display(), ReserveFloors: t.reserveFloors(),
		RulesRepublished: t.republished, KeysMade: t.made, KeysRevoked: t.revoked,
		KeysLeftActive: t.left, EarlierKeysRevoked: t.earlierRevoked}
}

// confirmPolicy makes sure the rules in effect of a reused agent are the
// load's, publishing them again when someone changed them since.
func (t *targetSetup) confirmPolicy(ctx context.Context, key string, a agentItem) error {
	var cur policyItem
	if err := callJSON(ctx, t.client, "GET", "/v1/agents/"+a.ID+"/policy", key, nil, &cur); err != nil {
		return fmt.Errorf("reading the rules of agent %s (%s): %w", a.ID, a.Name, err)
	}
	if cur.Hash == t.policyHash {
		return nil
	}
	var pub policyItem
	if err := callJSON(ctx, t.client, "POST", "/v1/agents/"+a.ID+"/policy", key, loadPolicy(), &pub); err != nil {
		return fmt.Errorf("publishing the load's rules again on agent %s (%s), whose rules changed since an earlier run made it: %w", a.ID, a.Name, err)
	}
	// A server of another version may hash the rules, or fill in their
	// defaults, otherwise: what it published is the reference.
	t.policyHash = pub.Hash
	if pub.EffectiveAt.After(pub.CreatedAt) {
		return fmt.Errorf("agent %s (%s), made by an earlier run, has had its rules tightened since; the bench published its own again, but the service delays every loosening (%s), so they apply only at %s. Run the bench again after that, or archive the agent (POST /v1/agents/%s/archive) and the bench makes a new one",
			a.ID, a.Name, pub.EffectiveAt.Sub(pub.CreatedAt).Round(time.Second), pub.EffectiveAt.UTC().Format(time.RFC3339), a.ID)
	}
	t.republished++
	t.progress("agent %s (%s): its rules had changed since an earlier run; the load's are in effect again (version %d)", a.ID, a.Name, pub.Version)
	return nil
}

// revokeEarlierKeys revokes the keys earlier runs left active on one of
// the bench's agents (a run killed before its own revocation, or one
// whose revocation failed): the agent is the bench's, so are its keys,
// and left active they would work for anyone who holds them. Two runs at
// once against the same owner therefore revoke each other's keys: run
// them against different owners.
func (t *targetSetup) revokeEarlierKeys(ctx context.Context, ownerKey string, a agentItem) error {
	keys, err := listAll(ctx, t.client, ownerKey, "/v1/keys", url.Values{"agent_id": {a.ID}},
		func(k keyItem) string { return k.ID })
	if err != nil {
		return fmt.Errorf("listing the keys of agent %s (%s) to revoke those earlier runs left: %w", a.ID, a.Name, err)
	}
	n := 0
	for _, k := range keys {
		if k.RevokedAt != nil {
			continue
		}
		if err := callJSON(ctx, t.client, "POST", "/v1/keys/"+k.ID+"/revoke", ownerKey, nil, nil); err != nil {
			return fmt.Errorf("revoking key %s that an earlier run left on agent %s (%s): %w", k.ID, a.ID, a.Name, err)
		}
		n++
	}
	if n > 0 {
		t.earlierRevoked += n
		t.progress("agent %s (%s): revoked %d key(s) earlier runs left active", a.ID, a.Name, n)
	}
	return nil
}

// addAgent makes a key for an agent and adds the agent to the load.
func (t *targetSetup) addAgent(ctx context.Context, ownerKey, agentID string) error {
	var k struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	err := callJSON(ctx, t.client, "POST", "/v1/agents/"+agentID+"/keys", ownerKey, nil, &k)
	if isCode(err, string(actors.CodeQuotaExceeded)) {
		return fmt.Errorf("making a key for agent %s: %w; the bench revoked the keys earlier runs left on it and still has no room, so another run against the same owner holds them: let it end, or give other owner keys", agentID, err)
	}
	if err != nil {
		return fmt.Errorf("making a key for agent %s: %w", agentID, err)
	}
	t.keys = append(t.keys, madeKey{id: k.ID, agentID: agentID, ownerKey: ownerKey})
	t.agents = append(t.agents, agentCred{ID: agentID, Key: k.Secret})
	t.made++
	return nil
}

// revokeTimeout bounds the revocations at the end of a run, which may
// start after ctx has ended (Ctrl-C): short, so that an operator who
// interrupted a run against a frozen server is not kept waiting, and
// told which keys are left instead.
var revokeTimeout = 10 * time.Second

// revokeKeys revokes the agent keys the run made, however it ended: left
// active, they would fill the agents' quota of keys over a few runs, and
// work for anyone who holds them. Those it cannot revoke are named, with
// how to revoke them.
func (t *targetSetup) revokeKeys(ctx context.Context) error {
	if t == nil || len(t.keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
	defer cancel()
	t.progress("revoking the %d agent keys this run made", len(t.keys))
	var first error
	for _, k := range t.keys {
		if err := t.revokeKey(ctx, k); err != nil {
			t.left = append(t.left, k.id)
			first = cmp.Or(first, err)
			continue
		}
		t.revoked++
	}
	t.keys = nil
	if len(t.left) == 0 {
		return nil
	}
	return fmt.Errorf("could not revoke %d agent key(s) this run made, which are still active: %s (%w). Revoke each with POST /v1/keys/{id}/revoke and the owner key of its agent, as in: curl -X POST -H \"Authorization: Bearer $OWNER_KEY\" http://%s/v1/keys/%s/revoke; or run the bench again with the same -owner-key: it revokes them as it reuses their agents",
		len(t.left), strings.Join(t.left, ", "), first, t.client.Addr, t.left[0])
}

// revokeKey revokes one key the run made. A failure to reach the server
// is tried once more on a fresh connection: after a server restart the
// client's kept-alive connections are dead, and the first request on one
// fails without reaching the server. Revoking a revoked key succeeds, so
// the second try is safe even if the first arrived; a 404 means the key
// went with its agent (a practice reset).
func (t *targetSetup) revokeKey(ctx context.Context, k madeKey) error {
	revoke := func() error {
		return callJSON(ctx, t.client, "POST", "/v1/keys/"+k.id+"/revoke", k.ownerKey, nil, nil)
	}
	err := revoke()
	var ae *apiCallError
	if err != nil && !errors.As(err, &ae) && ctx.Err() == nil {
		t.client.CloseIdleConnections()
		err = revoke()
	}
	if err == nil || errors.As(err, &ae) && ae.status == fasthttp.StatusNotFound {
		return nil
	}
	return err
}
