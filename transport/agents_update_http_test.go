package transport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Renaming an agent changes its name durably (read back from the store,
// shown to its own key), trims spaces, validates like create, and emits no
// event; an archived agent cannot be renamed.
func TestRenameAgent(t *testing.T) {
	e := start(t)
	events, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?limit=50")
	r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, `{"name":"  research bot  "}`)
	mustStatus(t, r, http.StatusOK)
	if r.Body["name"] != "research bot" || r.Body["id"] != e.agentID || r.Body["status"] != "active" {
		t.Fatalf("rename answered %s", r.Raw)
	}
	if g := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, nil); g.Body["name"] != "research bot" {
		t.Fatalf("GET after the rename: %s", g.Raw)
	}
	if me := call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil); obj(t, me.Body, "agent")["name"] != "research bot" {
		t.Fatalf("the agent's own key sees %s", me.Raw)
	}
	// The same name again changes nothing.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, `{"name":"research bot"}`), http.StatusOK)
	if after, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?limit=50"); len(after) != len(events) {
		t.Errorf("a rename emitted %d events; spec 6.2 has no type for it", len(after)-len(events))
	}
	// The agent keeps working under its new name.
	if sp := created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/r")); sp["status"] != "settled" {
		t.Errorf("a spend after the rename: %v", sp["status"])
	}

	for _, c := range []struct {
		body, code string
	}{
		{`{}`, "parameter_missing"},
		{`{"name":""}`, "parameter_invalid"},
		{`{"name":"   "}`, "parameter_invalid"},
		{`{"name":"` + strings.Repeat("n", 101) + `"}`, "parameter_invalid"},
		{`{"name":7}`, "parameter_invalid"},
		{`{"name":"x","livemode":true}`, "parameter_unknown"},
		// Control and invisible characters would forge or hide text where
		// names are shown (console, e-mail, chat, terminals).
		{`{"name":"bad\u0000name"}`, "parameter_invalid"},
		{`{"name":"line1\nline2"}`, "parameter_invalid"},
		{`{"name":"red\u001b[31m"}`, "parameter_invalid"},
		{`{"name":"\u200b"}`, "parameter_invalid"},
		{`{"name":"pay \u202egnp.exe"}`, "parameter_invalid"},
	} {
		r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, c.body)
		if r.Status != http.StatusBadRequest || errorOf(t, r)["code"] != c.code {
			t.Errorf("%s answered %d: %s", c.body, r.Status, r.Raw)
		}
	}
	if g := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, nil); g.Body["name"] != "research bot" {
		t.Fatalf("a refused rename changed the name: %s", g.Raw)
	}
	// A name of exactly 100 characters, counted as characters.
	long := strings.Repeat("é", 100)
	if r := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, `{"name":"`+long+`"}`); r.Status != http.StatusOK {
		t.Errorf("a 100-character name answered %d: %s", r.Status, r.Raw)
	}

	other := e.srv.NewOwner(t)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, other.TestKey, nil, `{"name":"x"}`), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.owner.LiveKey, nil, `{"name":"x"}`), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.agentKey, nil, `{"name":"x"}`), 403, "permission_error", "key_kind_not_allowed", "")
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/archive", e.owner.TestKey, nil, nil), http.StatusOK)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, `{"name":"x"}`), 409, "invalid_request_error", "state_conflict", "")
	// Nor can its rules or destinations change, and no event says they did.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/policy", e.owner.TestKey, nil, `{"per_spend_limit":"1.00"}`),
		409, "invalid_request_error", "state_conflict", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/destinations", e.owner.TestKey, nil,
		`{"list":"blocked","pattern":"a.example.com"}`), 409, "invalid_request_error", "state_conflict", "")
	for _, typ := range []string{"policy.updated", "policy.change_requested", "destination.added"} {
		if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type="+typ); len(ids) != 0 {
			t.Errorf("%d %s events after the archive's refusals", len(ids), typ)
		}
	}
}

// The emergency pause pauses every active agent of the key's environment
// as a single pause does, says so in each agent.paused event, and is
// idempotent; the live environment and archived agents are not touched.
func TestPauseAllAgents(t *testing.T) {
	e := start(t)
	waiting := created(t, e.srv, e.agentKey, spendBody("1.00", "untrusted.example.org", "/w"))
	if waiting["status"] != "pending_approval" {
		t.Fatalf("want a pending spend, got %v", waiting["status"])
	}
	paused, _ := e.srv.NewAgent(t, e.owner.TestKey, "")
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+paused+"/pause", e.owner.TestKey, nil, nil), http.StatusOK)
	archived, _ := e.srv.NewAgent(t, e.owner.TestKey, "")
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+archived+"/archive", e.owner.TestKey, nil, nil), http.StatusOK)
	third, _ := e.srv.NewAgent(t, e.owner.TestKey, "")
	live, liveKey := e.srv.NewAgent(t, e.owner.LiveKey, "")
	before, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=agent.paused")

	r := call(t, e.srv, http.MethodPost, "/v1/agents/pause_all", e.owner.TestKey, nil, `{"reason":"a key leaked"}`)
	mustStatus(t, r, http.StatusOK)
	want := []string{e.agentID, third}
	if third < e.agentID {
		want = []string{third, e.agentID}
	}
	if got := fmt.Sprint(r.Body["paused"]); got != fmt.Sprint(want) || r.Body["paused_count"] != float64(2) ||
		fmt.Sprint(r.Body["already_paused"]) != fmt.Sprint([]string{paused}) || r.Body["reason"] != "a key leaked" {
		t.Fatalf("pause_all answered %s; want paused %v, already %s", r.Raw, want, paused)
	}
	for _, id := range want {
		g := call(t, e.srv, http.MethodGet, "/v1/agents/"+id, e.owner.TestKey, nil, nil)
		pd, _ := g.Body["pause_detail"].(map[string]any)
		if g.Body["status"] != "paused" || g.Body["paused_at"] == nil || pd["emergency"] != true || pd["reason"] != "a key leaked" {
			t.Errorf("agent %s after pause_all: %s", id, g.Raw)
		}
	}
	if g := call(t, e.srv, http.MethodGet, "/v1/agents/"+paused, e.owner.TestKey, nil, nil); obj(t, g.Body, "pause_detail")["emergency"] != false {
		t.Errorf("the agent paused before keeps its own pause: %s", g.Raw)
	}
	// As a single pause: the waiting spend is marked, new spends declined.
	w := getSpend(t, e.srv, e.agentKey, waiting["id"].(string), "")
	if pd, _ := w.Body["pause_detail"].(map[string]any); w.Body["status"] != "pending_approval" || pd["scope"] != "owner" {
		t.Errorf("the waiting spend after pause_all: %s", w.Raw)
	}
	sp := created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/p"))
	if pd, _ := sp["pause_detail"].(map[string]any); sp["decline_reason"] != "agent_paused" || pd["scope"] != "owner" {
		t.Errorf("a spend after pause_all: %v %v %v", sp["status"], sp["decline_reason"], sp["pause_detail"])
	}
	// One agent.paused per agent paused, with the emergency in its data.
	ev := call(t, e.srv, http.MethodGet, "/v1/events?type=agent.paused", e.owner.TestKey, nil, nil)
	data := ev.Body["data"].([]any)
	if len(data) != len(before)+2 {
		t.Fatalf("%d agent.paused events, want %d", len(data), len(before)+2)
	}
	for _, d := range data[:2] {
		o := obj(t, obj(t, d.(map[string]any), "data"), "object")
		if pd, _ := o["pause_detail"].(map[string]any); pd["emergency"] != true || pd["reason"] != "a key leaked" {
			t.Errorf("agent.paused carries %v", o)
		}
	}
	// The agent sees its own pause event.
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/events?type=agent.paused"); len(ids) != 1 {
		t.Errorf("the agent sees %d agent.paused events, want 1", len(ids))
	}
	// The live environment is another environment.
	if g := call(t, e.srv, http.MethodGet, "/v1/agents/"+live, e.owner.LiveKey, nil, nil); g.Body["status"] != "active" {
		t.Errorf("a live agent after a practice pause_all: %s", g.Raw)
	}
	if b := balance(t, e.srv, liveKey); b["livemode"] != true {
		t.Errorf("the live agent's balance: %v", b)
	}

	// Again, without a body: nothing more to pause, no new event.
	again := call(t, e.srv, http.MethodPost, "/v1/agents/pause_all", e.owner.TestKey, nil, nil)
	mustStatus(t, again, http.StatusOK)
	if again.Body["paused_count"] != float64(0) || len(again.Body["already_paused"].([]any)) != 3 || again.Body["reason"] != nil {
		t.Errorf("pause_all a second time answered %s", again.Raw)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=agent.paused"); len(ids) != len(before)+2 {
		t.Errorf("a repeated pause_all emitted events: %d", len(ids))
	}
	// Resuming one ends its emergency pause.
	res := call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/resume", e.owner.TestKey, nil, nil)
	if res.Body["status"] != "active" || res.Body["pause_detail"] != nil {
		t.Errorf("resume after pause_all: %s", res.Raw)
	}

	for _, body := range []string{`{"reason":""}`, `{"reason":"` + strings.Repeat("r", 501) + `"}`, `{"reason":5}`, `{"all":true}`, `[]`} {
		r := call(t, e.srv, http.MethodPost, "/v1/agents/pause_all", e.owner.TestKey, nil, body)
		if r.Status != http.StatusBadRequest {
			t.Errorf("%s answered %d: %s", body, r.Status, r.Raw)
		}
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/pause_all", e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
	// GET of the path names the route, not an agent "pause_all".
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/agents/pause_all", e.owner.TestKey, nil, nil), 404, "not_found_error", "route_not_found", "")
}

// An owner keeps at most 20 archived agents, practice and live together
// (spec 8.3): archiving a 21st, in either environment, is a 409
// quota_exceeded that changes nothing (the agent stays active, its key
// works); the active quota still applies to creation.
func TestArchivedAgentsQuota(t *testing.T) {
	e := start(t)
	for i := range 19 {
		id, _ := e.srv.NewAgent(t, e.owner.TestKey, "")
		r := call(t, e.srv, http.MethodPost, "/v1/agents/"+id+"/archive", e.owner.TestKey, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("archiving agent %d: %d %s", i, r.Status, r.Raw)
		}
	}
	live, _ := e.srv.NewAgent(t, e.owner.LiveKey, "")
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+live+"/archive", e.owner.LiveKey, nil, nil), http.StatusOK)
	e2 := wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/archive", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "quota_exceeded", "")
	if msg, _ := e2["message"].(string); !strings.Contains(msg, "20 archived agents, practice and live together") {
		t.Errorf("the quota message does not say what the limit is: %q", msg)
	}
	if g := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, nil); g.Body["status"] != "active" {
		t.Fatalf("a refused archive changed the agent: %s", g.Raw)
	}
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK)
	another, _ := e.srv.NewAgent(t, e.owner.LiveKey, "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+another+"/archive", e.owner.LiveKey, nil, nil),
		409, "invalid_request_error", "quota_exceeded", "")
	// Pausing is the way out.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/pause", e.owner.TestKey, nil, nil), http.StatusOK)
	// Creating beyond the active quota (5 practice agents) is refused as before.
	for i := 0; ; i++ {
		r := call(t, e.srv, http.MethodPost, "/v1/agents", e.owner.TestKey, nil, `{"name":"more"}`)
		if r.Status == http.StatusConflict {
			wantError(t, r, 409, "invalid_request_error", "quota_exceeded", "")
			if i != 4 {
				t.Errorf("the active quota refused the agent %d after the first; want 5 active agents", i+1)
			}
			break
		}
		mustStatus(t, r, http.StatusCreated)
		if i > 5 {
			t.Fatal("no active agent quota")
		}
	}
	list := call(t, e.srv, http.MethodGet, "/v1/agents?limit=50", e.owner.TestKey, nil, nil)
	if n := len(list.Body["data"].([]any)); n != 24 {
		t.Errorf("GET /v1/agents lists %d agents, want 19 archived and 5 others", n)
	}
}

// The actions without parameters take no body or an empty object, as
// clients that always send a JSON body do; a field is refused, named.
func TestActionsTakeAnEmptyObject(t *testing.T) {
	e := start(t)
	agent := "/v1/agents/" + e.agentID
	for _, path := range []string{agent + "/pause", agent + "/resume"} {
		mustStatus(t, call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, `{}`), http.StatusOK)
	}
	wantError(t, call(t, e.srv, http.MethodPost, agent+"/pause", e.owner.TestKey, nil, `{"reason":"x"}`),
		400, "invalid_request_error", "parameter_unknown", "reason")
	if r := call(t, e.srv, http.MethodGet, agent, e.owner.TestKey, nil, nil); r.Body["status"] != "active" {
		t.Fatalf("a refused pause paused the agent: %v", r.Body["status"])
	}
	_, key := e.srv.NewAgent(t, e.owner.TestKey, "")
	keys := call(t, e.srv, http.MethodGet, "/v1/keys", e.owner.TestKey, nil, nil)
	var keyID string
	for _, k := range keys.Body["data"].([]any) {
		if km := k.(map[string]any); km["last4"] == key[len(key)-4:] {
			keyID = km["id"].(string)
		}
	}
	if keyID == "" {
		t.Fatal("the new key is not listed")
	}
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+keyID+"/revoke", e.owner.TestKey, nil, `{}`), http.StatusOK)
}
