package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// startTarget is a running server for target runs, its pool large enough
// for any number of them, and a practice owner key of a new owner.
func startTarget(t *testing.T) (*guardtest.Server, string) {
	t.Helper()
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.PracticePool = benchPool }))
	return srv, srv.NewOwner(t).TestKey
}

// runTarget runs the spends phase briefly against srv with the owner key.
func runTarget(t *testing.T, srv *guardtest.Server, ownerKey string, agents int) (*Report, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Run(ctx, Config{Target: srv.URL, OwnerKey: ownerKey, Agents: agents, Conns: 2,
		Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond, Phases: []string{"spends"}, Progress: &progress})
	return rep, progress.String(), err
}

// ownerAgents lists the owner's agents by id, every page.
func ownerAgents(t *testing.T, srv *guardtest.Server, ownerKey string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	path := "/v1/agents?limit=2" // small pages: the listing must follow has_more
	for {
		r := srv.Do(t, http.MethodGet, path, ownerKey, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
		}
		data, _ := r.Body["data"].([]any)
		for _, d := range data {
			a := d.(map[string]any)
			out[a["id"].(string)] = a
		}
		if r.Body["has_more"] != true || len(data) == 0 {
			return out
		}
		path = "/v1/agents?limit=2&starting_after=" + data[len(data)-1].(map[string]any)["id"].(string)
	}
}

// activeKeys are the ids of an agent's keys not revoked, oldest first.
func activeKeys(t *testing.T, srv *guardtest.Server, ownerKey, agentID string) []string {
	t.Helper()
	r := srv.Do(t, http.MethodGet, "/v1/keys?limit=50&agent_id="+agentID, ownerKey, nil, nil)
	if r.Status != http.StatusOK || r.Body["has_more"] != false {
		t.Fatalf("GET /v1/keys of %s: %d %s", agentID, r.Status, r.Raw)
	}
	var out []string
	for _, d := range r.Body["data"].([]any) {
		if k := d.(map[string]any); k["revoked_at"] == nil {
			out = append(out, k["id"].(string))
		}
	}
	slices.Reverse(out) // the list is newest first
	return out
}

// policyOf is an agent's policy in effect.
func policyOf(t *testing.T, srv *guardtest.Server, ownerKey, agentID string) map[string]any {
	t.Helper()
	r := srv.Do(t, http.MethodGet, "/v1/agents/"+agentID+"/policy", ownerKey, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET the policy of %s: %d %s", agentID, r.Status, r.Raw)
	}
	return r.Body
}

// newAgent creates an agent of the owner by hand, named name, with policy
// (nil: the defaults) and no key.
func newAgent(t *testing.T, srv *guardtest.Server, ownerKey, name string, policy map[string]any) string {
	t.Helper()
	body := map[string]any{"name": name}
	if policy != nil {
		body["policy"] = policy
	}
	r := srv.Do(t, http.MethodPost, "/v1/agents", ownerKey, nil, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("creating agent %q: %d %s", name, r.Status, r.Raw)
	}
	return r.Body["id"].(string)
}

// advancePractice moves the owner's practice clock forward.
func advancePractice(t *testing.T, srv *guardtest.Server, ownerKey string, d time.Duration) {
	t.Helper()
	r := srv.Do(t, http.MethodPost, "/v1/test/clock/advance", ownerKey, nil, map[string]any{"seconds": int64(d / time.Second)})
	if r.Status != http.StatusOK {
		t.Fatalf("advancing the practice clock: %d %s", r.Status, r.Raw)
	}
}

// TestTargetRunsReuseTheirAgents: runs against the same server reuse the
// agents the first one made (and one an earlier version of the bench
// left), create none, touch no agent of the owner's own, and revoke the
// keys they made. A run after one that was killed revokes every key it
// left on the agents it reuses, and agents whose rules changed since get
// the load's rules again.
func TestTargetRunsReuseTheirAgents(t *testing.T) {
	// Pages of two: the agents and the keys the setup looks through span
	// several.
	defer func(n int) { listPageSize = n }(listPageSize)
	listPageSize = 2
	srv, owner := startTarget(t)
	mineID, mineKey := srv.NewAgent(t, owner, "")
	legacyID := newAgent(t, srv, owner, "bench-1700000000-0-0", loadPolicy())
	// With the owner's agent, the bench's four fill the practice quota: a
	// run that made new agents again would be refused.
	const asked = 4

	checkAfter := func(run string, rep *Report, progress string, err error, want TargetAgents) map[string]map[string]any {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v\n%s", run, err, progress)
		}
		if rep.Agents != asked || rep.TargetAgents == nil || *rep.TargetAgents != want {
			t.Errorf("%s: %d agents, %+v, want %d, %+v", run, rep.Agents, rep.TargetAgents, asked, want)
		}
		if rep.Spends.Statuses["settled"] == 0 || rep.Spends.Statuses["settled"] != rep.Spends.OK {
			t.Errorf("%s: spends %v, declines %v, errors %v; want every one settled", run,
				rep.Spends.Statuses, rep.Spends.Declines, rep.Spends.Errors)
		}
		all := ownerAgents(t, srv, owner)
		bench := map[string]map[string]any{}
		for id, a := range all {
			if id != mineID {
				bench[id] = a
			}
			if a["status"] != "active" {
				t.Errorf("%s: agent %s is %v", run, id, a["status"])
			}
		}
		if len(bench) != asked || bench[legacyID] == nil {
			t.Errorf("%s: the bench's agents are %v, want %d of them, the earlier version's %s among them",
				run, slices.Collect(maps.Keys(bench)), asked, legacyID)
		}
		for id := range bench {
			if keys := activeKeys(t, srv, owner, id); len(keys) > 0 {
				t.Errorf("%s: agent %s still has active keys %v after the run", run, id, keys)
			}
		}
		if r := srv.Do(t, http.MethodGet, "/v1/me", mineKey, nil, nil); r.Status != http.StatusOK {
			t.Errorf("%s: the key of the owner's own agent answers %d", run, r.Status)
		}
		return bench
	}

	rep, progress, err := runTarget(t, srv, owner, asked)
	first := checkAfter("first run", rep, progress, err, TargetAgents{Reused: 1, Created: 3})
	versions := map[string]any{}
	for id := range first {
		versions[id] = policyOf(t, srv, owner, id)["version"]
	}

	rep, progress, err = runTarget(t, srv, owner, asked)
	second := checkAfter("second run", rep, progress, err, TargetAgents{Reused: 4, Created: 0})
	if !maps.Equal(mapKeys(first), mapKeys(second)) {
		t.Errorf("the second run used agents %v, the first %v", mapKeys(second), mapKeys(first))
	}
	for id, v := range versions {
		if got := policyOf(t, srv, owner, id)["version"]; got != v {
			t.Errorf("agent %s: policy version %v after the second run, %v before; its rules were the load's already", id, got, v)
		}
	}

	// A killed run left an agent with the most keys allowed, and another
	// with one; someone raised a third agent's monthly cap, and the
	// loosening came into force.
	ids := slices.Sorted(maps.Keys(first))
	full, one, changed := ids[0], ids[3], ids[1]
	var stale []string
	for _, id := range []string{full, full, full, one} {
		r := srv.Do(t, http.MethodPost, "/v1/agents/"+id+"/keys", owner, nil, nil)
		if r.Status != http.StatusCreated {
			t.Fatalf("a key for %s: %d %s", id, r.Status, r.Raw)
		}
		stale = append(stale, r.Body["id"].(string))
	}
	looser := loadPolicy()
	looser["monthly_cap"] = "2000000.00"
	if r := srv.Do(t, http.MethodPost, "/v1/agents/"+changed+"/policy", owner, nil, looser); r.Status != http.StatusOK {
		t.Fatalf("loosening the rules of %s: %d %s", changed, r.Status, r.Raw)
	}
	advancePractice(t, srv, owner, 2*time.Hour)
	if got := policyOf(t, srv, owner, changed)["monthly_cap"]; got != "2000000.00" {
		t.Fatalf("the raised monthly cap is not in force: %v", got)
	}

	// The agents are the bench's, and so are the keys left on them: the
	// run revokes every one of them as it reuses the agents, not only
	// those in the way of its own.
	rep, progress, err = runTarget(t, srv, owner, asked)
	if err != nil {
		t.Fatalf("third run: %v\n%s", err, progress)
	}
	if c := rep.Changes; c == nil || c.EarlierKeysRevoked != len(stale) || c.KeysMade != asked || c.KeysRevoked != asked || c.RulesRepublished != 1 {
		t.Errorf("third run: changes %+v, want %d earlier keys revoked, %d made and revoked, 1 agent's rules published again", c, len(stale), asked)
	}
	third := checkAfter("third run", rep, progress, nil, TargetAgents{Reused: 4, Created: 0})
	if !maps.Equal(mapKeys(first), mapKeys(third)) {
		t.Errorf("the third run used agents %v, the first %v", mapKeys(third), mapKeys(first))
	}
	if p := policyOf(t, srv, owner, changed); p["monthly_cap"] != loadCap || p["hash"] != policyOf(t, srv, owner, ids[2])["hash"] {
		t.Errorf("agent %s kept the changed rules: %v", changed, p)
	}
}

// mapKeys is the set of a map's keys.
func mapKeys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// TestTargetRunOnTightenedRulesSaysWhen: a reused agent whose rules were
// tightened cannot get the load's back at once (the service delays every
// loosening), so the run stops and says when they apply, revoking the
// keys it already made; once they apply, the agent is reused as it is.
func TestTargetRunOnTightenedRulesSaysWhen(t *testing.T) {
	srv, owner := startTarget(t)
	if _, progress, err := runTarget(t, srv, owner, 2); err != nil {
		t.Fatalf("first run: %v\n%s", err, progress)
	}
	var ids []string
	for id := range ownerAgents(t, srv, owner) {
		ids = append(ids, id)
	}
	slices.Sort(ids) // ids begin with their time: the last is the newest, the bench's last
	tight := loadPolicy()
	tight["per_spend_limit"] = "1.00"
	if r := srv.Do(t, http.MethodPost, "/v1/agents/"+ids[1]+"/policy", owner, nil, tight); r.Status != http.StatusOK {
		t.Fatalf("tightening the rules of %s: %d %s", ids[1], r.Status, r.Raw)
	}
	_, progress, err := runTarget(t, srv, owner, 2)
	if err == nil || !strings.Contains(err.Error(), "apply only at") || !strings.Contains(err.Error(), "/v1/agents/"+ids[1]+"/archive") {
		t.Fatalf("a run on tightened rules: %v, want an error that says when the load's rules apply\n%s", err, progress)
	}
	for _, id := range ids {
		if keys := activeKeys(t, srv, owner, id); len(keys) > 0 {
			t.Errorf("agent %s still has active keys %v after the failed run", id, keys)
		}
	}
	advancePractice(t, srv, owner, 2*time.Hour)
	rep, progress, err := runTarget(t, srv, owner, 2)
	if err != nil {
		t.Fatalf("a run once the rules apply: %v\n%s", err, progress)
	}
	if *rep.TargetAgents != (TargetAgents{Reused: 2}) || rep.Spends.Statuses["settled"] != rep.Spends.OK {
		t.Errorf("a run once the rules apply: %+v, spends %v", rep.TargetAgents, rep.Spends.Statuses)
	}
}

// TestTargetRunWithoutRoomSaysWhatToDo: an owner whose quota is full of
// its own agents and a paused bench agent gets an error naming the quota
// and what frees it; the bench archives and resumes nothing itself.
func TestTargetRunWithoutRoomSaysWhatToDo(t *testing.T) {
	srv, owner := startTarget(t)
	for i := range 4 {
		newAgent(t, srv, owner, fmt.Sprintf("mine %d", i), nil)
	}
	paused := newAgent(t, srv, owner, benchAgentPrefix+"1-0", loadPolicy())
	if r := srv.Do(t, http.MethodPost, "/v1/agents/"+paused+"/pause", owner, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("pausing %s: %d %s", paused, r.Status, r.Raw)
	}
	_, progress, err := runTarget(t, srv, owner, 2)
	for _, want := range []string{"most active practice agents allowed (5)", "/v1/agents/{id}/archive", "1 agent(s) of earlier bench runs are paused", "/resume"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q\n%s", err, want, progress)
		}
	}
	for id, a := range ownerAgents(t, srv, owner) {
		if want := map[bool]string{true: "paused", false: "active"}[id == paused]; a["status"] != want {
			t.Errorf("agent %s (%v) is %v, want %s", id, a["name"], a["status"], want)
		}
	}
}

// cancelWhen is a progress writer that calls cancel, once, when a line
// says what it waits for.
type cancelWhen struct {
	mu     sync.Mutex
	text   strings.Builder
	want   string
	cancel func()
	done   bool
}

func (w *cancelWhen) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(p)
	if !w.done && strings.Contains(w.text.String(), w.want) {
		w.done = true
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelWhen) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text.String()
}

// TestTargetRunCancelledRevokesItsKeys: a run interrupted in the middle of
// its load (Ctrl-C ends its context) still revokes the keys it made.
func TestTargetRunCancelledRevokesItsKeys(t *testing.T) {
	srv, owner := startTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progress := &cancelWhen{want: "spends: ", cancel: cancel}
	_, err := Run(ctx, Config{Target: srv.URL, OwnerKey: owner, Agents: 3, Conns: 2,
		Duration: time.Minute, Phases: []string{"spends"}, Progress: progress})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted run: %v, want context.Canceled\n%s", err, progress)
	}
	agents := ownerAgents(t, srv, owner)
	if len(agents) != 3 {
		t.Errorf("%d agents, want the 3 the run made", len(agents))
	}
	for id := range agents {
		if keys := activeKeys(t, srv, owner, id); len(keys) > 0 {
			t.Errorf("agent %s still has active keys %v after the interrupted run", id, keys)
		}
	}
	if !strings.Contains(progress.String(), "revoking the 3 agent keys") {
		t.Errorf("the run did not say it revoked its keys:\n%s", progress)
	}
}

// An owner whose practice pool is nearly empty gets it filled before the
// load: otherwise every spend after the first few is declined for the
// pool, and the run measures declines.
func TestTargetRunFillsAnEmptyPracticePool(t *testing.T) {
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.PracticePool = "1.00" }))
	owner := srv.NewOwner(t).TestKey
	rep, progress, err := runTarget(t, srv, owner, 2)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress)
	}
	if rep.Spends.Statuses["settled"] == 0 || rep.Spends.Statuses["settled"] != rep.Spends.OK {
		t.Errorf("spends %v, declines %v, errors %v; want every one settled", rep.Spends.Statuses, rep.Spends.Declines, rep.Spends.Errors)
	}
	if !strings.Contains(progress, "deposited 999999.00 practice USDC") {
		t.Errorf("the progress does not tell of the deposit:\n%s", progress)
	}
	r := srv.Do(t, http.MethodGet, "/v1/funding", owner, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/funding: %d %s", r.Status, r.Raw)
	}
	b, err := policy.ParseAmount(r.Body["balance"].(string))
	if err != nil || b.Cmp(policy.MustAmount("999000.00")) < 0 {
		t.Errorf("the pool holds %v after the run, want nearly 1,000,000.00", r.Body["balance"])
	}

	// What the run did to the target is in the report, not only in the
	// progress lines.
	spent := actors.PracticeBalanceCeiling.Sub(b).Display()
	want := TargetChanges{Deposited: "999999.00", Spent: spent, KeysMade: 2, KeysRevoked: 2}
	if c := rep.Changes; c == nil || c.Deposited != want.Deposited || c.Spent != want.Spent || c.KeysMade != 2 || c.KeysRevoked != 2 || len(c.KeysLeftActive) != 0 {
		t.Errorf("changes %+v, want %+v", c, want)
	}
	if spent == "0.00" {
		t.Errorf("the run spent nothing: %+v", rep.Spends)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, line := range []string{"deposited 999999.00, spent " + spent, "0 reused, 2 created", "2 made, 2 revoked at the end"} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("the text report lacks %q:\n%s", line, text.String())
		}
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(js, &top); err != nil {
		t.Fatal(err)
	}
	if top["num_cpu"] != float64(runtime.NumCPU()) || top["rate_limited"] != false || top["mostly_declined"] != false || top["server_failed"] != false || top["interrupted"] != false {
		t.Errorf("JSON report lacks the core count or the verdicts: %s", js)
	}
	if c, _ := top["target_changes"].(map[string]any); c == nil || c["deposited"] != "999999.00" || c["keys_revoked"] != float64(2) {
		t.Errorf("JSON report lacks what the run did to the target: %s", js)
	}
}

// An owner whose reserve_floor keeps most of a full pool out of reach
// gets its spends declined for funds: the error says the floor is why,
// and the report names it.
func TestTargetRunNamesTheReserveFloor(t *testing.T) {
	srv := guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.PracticePool = "1000000.00" }))
	owner := srv.NewOwner(t).TestKey
	if r := srv.Do(t, http.MethodPost, "/v1/funding", owner, nil, map[string]any{"reserve_floor": "999999.90"}); r.Status != http.StatusOK {
		t.Fatalf("setting the reserve floor: %d %s", r.Status, r.Raw)
	}
	rep, progress, err := runTarget(t, srv, owner, 2)
	if err == nil || !strings.Contains(err.Error(), "reserve_floor (999999.90") || !strings.Contains(err.Error(), "POST /v1/funding") {
		t.Fatalf("a run against a pool held by its floor: %v, want an error naming the reserve_floor\n%s", err, progress)
	}
	if !rep.MostlyDeclined || rep.Changes == nil || !slices.Equal(rep.Changes.ReserveFloors, []string{"999999.90"}) {
		t.Errorf("mostly declined %v, changes %+v; want the floor in the report", rep.MostlyDeclined, rep.Changes)
	}
	if !strings.Contains(progress, "reserve_floor of 999999.90") {
		t.Errorf("the progress does not tell of the floor:\n%s", progress)
	}
}

// staleServer answers its first connection's one request, then closes
// that connection once idle, as a restarted server leaves a client's
// kept-alive connection; later connections get every request answered
// with answer. It returns its address, a channel closed once the first
// connection is closed, and the requests' first lines.
func staleServer(t *testing.T, answer string) (string, <-chan struct{}, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	closed, lines := make(chan struct{}), make(chan string, 16)
	ok := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	go func() {
		for n := 0; ; n++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					lines <- req.Method + " " + req.URL.Path
					if n == 0 {
						_, _ = conn.Write([]byte(ok))
						_ = conn.Close()
						close(closed)
						return
					}
					_, _ = conn.Write([]byte(answer))
				}
			}()
		}
	}()
	return ln.Addr().String(), closed, lines
}

// TestRevokeRetriesOnAFreshConnection: after a server restart the
// client's kept-alive connection is dead; the revocation that goes out on
// it fails, and is sent again on a new connection instead of leaving the
// key active.
func TestRevokeRetriesOnAFreshConnection(t *testing.T) {
	addr, closed, lines := staleServer(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	c := newClient(addr, 1)
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if err := callJSON(ctx, c, "GET", "/v1/funding", "svc_test_owner_x", nil, nil); err != nil {
		t.Fatal(err)
	}
	<-closed
	var progress bytes.Buffer
	tgt := &targetSetup{client: c, progress: func(f string, a ...any) { fmt.Fprintf(&progress, f+"\n", a...) },
		keys: []madeKey{{id: "key_1", agentID: "agt_1", ownerKey: "svc_test_owner_x"}}}
	if err := tgt.revokeKeys(ctx); err != nil {
		t.Fatalf("revoking after the server closed the kept-alive connection: %v", err)
	}
	if tgt.revoked != 1 || len(tgt.left) != 0 {
		t.Errorf("revoked %d, left %v", tgt.revoked, tgt.left)
	}
	<-lines // the setup's GET
	if got := <-lines; got != "POST /v1/keys/key_1/revoke" {
		t.Errorf("request %q, want the revocation", got)
	}
}

// TestRevokeSaysWhichKeysAreLeft: against a server that no longer
// answers, the revocation gives up at a short deadline and names each key
// left active, with how to revoke it.
func TestRevokeSaysWhichKeysAreLeft(t *testing.T) {
	if revokeTimeout > 15*time.Second {
		t.Errorf("the revocation waits %v for a frozen server; an interrupted run must end sooner", revokeTimeout)
	}
	defer func(d time.Duration) { revokeTimeout = d }(revokeTimeout)
	revokeTimeout = 100 * time.Millisecond
	addr := frozenServer(t)
	tgt := &targetSetup{client: newClient(addr, 1), progress: func(string, ...any) {},
		keys: []madeKey{{id: "key_a", agentID: "agt_1", ownerKey: "svc_test_owner_x"}, {id: "key_b", agentID: "agt_2", ownerKey: "svc_test_owner_x"}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C: the revocation still runs, on a deadline of its own
	err := tgt.revokeKeys(ctx)
	for _, want := range []string{"could not revoke 2 agent key(s)", "key_a, key_b", "POST /v1/keys/{id}/revoke and the owner key",
		"http://" + addr + "/v1/keys/key_a/revoke", "run the bench again with the same -owner-key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q", err, want)
		}
	}
	if !slices.Equal(tgt.left, []string{"key_a", "key_b"}) || tgt.revoked != 0 {
		t.Errorf("left %v, revoked %d", tgt.left, tgt.revoked)
	}
}

// A spends phase most of whose answers were declines is an error that
// names the reasons; a few declines are reported as they are.
func TestMostlyDeclinedIsAnError(t *testing.T) {
	rep := &Report{Spends: PhaseReport{Name: "spends", Requests: 1000, OK: 1000,
		Statuses: map[string]int64{"settled": 100, "declined": 900}, Declines: map[string]int64{"insufficient_pool": 900}}}
	if err := rep.mostlyDeclinedError(); err == nil || !strings.Contains(err.Error(), "insufficient_pool 900") {
		t.Fatalf("900 of 1000 declined: %v", err)
	}
	rep.Spends.Statuses = map[string]int64{"settled": 990, "declined": 10}
	if err := rep.mostlyDeclinedError(); err != nil {
		t.Fatalf("10 of 1000 declined: %v", err)
	}
}
