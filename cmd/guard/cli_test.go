package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// cliRun runs the command line with env as its only environment.
func cliRun(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = Run(ctx, args, strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	return out.String(), errOut.String(), err
}

// cliOK runs a command against s with the owner key and wants success.
func cliOK(t *testing.T, s *guardtest.Server, key string, args ...string) string {
	t.Helper()
	out, errOut, err := cliRun(t, nil, append(args, "-server", s.URL, "-key", key)...)
	if err != nil {
		t.Fatalf("guard %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// cliJSON runs a command with -json and decodes its output.
func cliJSON(t *testing.T, s *guardtest.Server, key string, args ...string) map[string]any {
	t.Helper()
	out := cliOK(t, s, key, append(args, "--json")...)
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("guard %s --json printed no JSON object: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// lineWith returns the first output line that contains s.
func lineWith(out, s string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIAgentsKeysPolicy(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)

	// agents create, as JSON and as a summary.
	a1 := cliJSON(t, s, owner.TestKey, "agents", "create", "-name", "a1")
	id, _ := a1["id"].(string)
	if !strings.HasPrefix(id, "agt_") || a1["name"] != "a1" || a1["status"] != "active" {
		t.Fatalf("agents create -json printed %v", a1)
	}
	if _, ok := a1["policy"].(map[string]any); !ok {
		t.Errorf("agents create -json lost the policy: %v", a1)
	}
	pol := writeFile(t, "create.json", `{"per_spend_limit": "7.00"}`)
	out := cliOK(t, s, owner.TestKey, "agents", "create", "-name", "a2", "-policy", pol)
	if !strings.Contains(out, "created agent agt_") || !strings.Contains(out, `"a2"`) || !strings.Contains(out, "active") {
		t.Errorf("agents create printed %q", out)
	}

	// agents list shows both, one line each; the server and key may come
	// from the environment.
	env := map[string]string{"GUARD_SERVER": s.URL, "GUARD_OWNER_KEY": owner.TestKey}
	out, errOut, err := cliRun(t, env, "agents", "list")
	if err != nil {
		t.Fatalf("agents list with GUARD_SERVER and GUARD_OWNER_KEY: %v\n%s", err, errOut)
	}
	line := lineWith(out, id)
	if !strings.Contains(line, "a1") || !strings.Contains(line, "active") || lineWith(out, "a2") == "" {
		t.Errorf("agents list printed:\n%s", out)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 3 {
		t.Errorf("agents list printed %d lines, want a header and 2 agents:\n%s", n, out)
	}

	// pause and resume change the status.
	if out := cliOK(t, s, owner.TestKey, "agents", "pause", id); !strings.Contains(out, "paused") {
		t.Errorf("agents pause printed %q", out)
	}
	if line := lineWith(cliOK(t, s, owner.TestKey, "agents", "list"), id); !strings.Contains(line, "paused") {
		t.Errorf("agents list after pause: %q", line)
	}
	if v := cliJSON(t, s, owner.TestKey, "agents", "resume", id); v["status"] != "active" {
		t.Errorf("agents resume -json printed %v", v)
	}

	// keys create prints the secret once, with the warning.
	out, errOut, err = cliRun(t, nil, "keys", "create", id, "-server", s.URL, "-key", owner.TestKey)
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, errOut)
	}
	secretLine := lineWith(out, "secret: ")
	secret := strings.TrimSpace(strings.TrimPrefix(secretLine, "secret: "))
	if !strings.HasPrefix(secret, "svc_test_agent_") {
		t.Fatalf("keys create printed no agent secret:\n%s", out)
	}
	if !strings.Contains(errOut, "not shown again") {
		t.Errorf("keys create gave no warning that the secret is not shown again; stderr %q", errOut)
	}
	keyID := strings.Fields(strings.TrimPrefix(lineWith(out, "created key "), "created key "))[0]
	if !strings.HasPrefix(keyID, "key_") {
		t.Fatalf("keys create printed no key id:\n%s", out)
	}
	// The secret works.
	if r := s.Do(t, http.MethodGet, "/v1/balance", secret, nil, nil); r.Status != http.StatusOK {
		t.Errorf("the printed secret does not authenticate: %d %s", r.Status, r.Raw)
	}

	// keys list shows the key, its last4 and status, never the secret.
	out = cliOK(t, s, owner.TestKey, "keys", "list")
	line = lineWith(out, keyID)
	if !strings.Contains(line, id) || !strings.Contains(line, "active") || !strings.Contains(line, secret[len(secret)-4:]) {
		t.Errorf("keys list line for the new key: %q\n%s", line, out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("keys list printed the secret")
	}
	keys := cliJSON(t, s, owner.TestKey, "keys", "list")
	data, _ := keys["data"].([]any)
	if len(data) < 2 { // the environment's owner key and the agent key
		t.Errorf("keys list -json has %d keys: %v", len(data), keys)
	}
	for _, k := range data {
		if _, has := k.(map[string]any)["secret"]; has {
			t.Errorf("keys list -json holds a secret: %v", k)
		}
	}

	// keys revoke marks it.
	if out := cliOK(t, s, owner.TestKey, "keys", "revoke", keyID); !strings.Contains(out, "revoked key "+keyID) {
		t.Errorf("keys revoke printed %q", out)
	}
	if line := lineWith(cliOK(t, s, owner.TestKey, "keys", "list"), keyID); !strings.Contains(line, "revoked") {
		t.Errorf("keys list after revoke: %q", line)
	}

	// policy set from a file (a tightening applies at once), then show.
	file := writeFile(t, "policy.json", `{
  "per_spend_limit": "4.00",
  "blocked_destinations": ["bad.example.com"]
}`)
	out = cliOK(t, s, owner.TestKey, "policy", "set", id, "-file", file)
	if !strings.Contains(out, "published policy version 2") {
		t.Errorf("policy set printed:\n%s", out)
	}
	out = cliOK(t, s, owner.TestKey, "policy", "show", id)
	if !strings.Contains(lineWith(out, "per spend limit"), "4.00") || !strings.Contains(lineWith(out, "blocked"), "bad.example.com") {
		t.Errorf("policy show after set:\n%s", out)
	}
	p := cliJSON(t, s, owner.TestKey, "policy", "show", id)
	if p["per_spend_limit"] != "4.00" || p["version"] != float64(2) || p["agent_id"] != id {
		t.Errorf("policy show -json printed %v", p)
	}

	// archive.
	if v := cliJSON(t, s, owner.TestKey, "agents", "archive", id); v["status"] != "archived" {
		t.Errorf("agents archive -json printed %v", v)
	}
}

// recordingProxy forwards to target and records the path and query of
// every request, so a test can see how the command paged.
func recordingProxy(t *testing.T, target string) (proxyURL string, requests func() []string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := append([]string(nil), seen...)
		seen = nil
		return out
	}
}

func TestCLIAgentsListFollowsPages(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	// Seven agents, two of them archived (five stay within the active
	// quota), listed two per request: four pages.
	const n = 7
	for i := range n {
		r := s.Do(t, http.MethodPost, "/v1/agents", owner.TestKey, nil, fmt.Sprintf(`{"name":"bulk %d"}`, i))
		id, _ := r.Body["id"].(string)
		if r.Status != http.StatusCreated || id == "" {
			t.Fatalf("creating agent %d: %d %s", i, r.Status, r.Raw)
		}
		if i < 2 {
			if r := s.Do(t, http.MethodPost, "/v1/agents/"+id+"/archive", owner.TestKey, nil, nil); r.Status != http.StatusOK {
				t.Fatalf("archiving agent %d: %d %s", i, r.Status, r.Raw)
			}
		}
	}
	proxy, requests := recordingProxy(t, s.URL)
	out, errOut, err := cliRun(t, nil, "agents", "list", "-limit", "2", "-server", proxy, "-key", owner.TestKey)
	if err != nil {
		t.Fatalf("agents list -limit 2: %v\n%s", err, errOut)
	}
	if lines := strings.Count(out, "\n"); lines != n+1 {
		t.Errorf("agents list printed %d lines, want a header and %d agents:\n%s", lines, n, out)
	}
	for i := range n {
		if lineWith(out, fmt.Sprintf("bulk %d ", i)) == "" {
			t.Errorf("agents list is missing bulk %d", i)
		}
	}
	reqs := requests()
	if len(reqs) != 4 {
		t.Fatalf("agents list -limit 2 sent %d requests for %d agents, want 4: %v", len(reqs), n, reqs)
	}
	for i, r := range reqs {
		if !strings.HasPrefix(r, "GET /v1/agents?") || !strings.Contains(r, "limit=2") ||
			strings.Contains(r, "starting_after=agt_") != (i > 0) {
			t.Errorf("request %d of the listing: %s", i, r)
		}
	}

	v := cliJSON(t, s, owner.TestKey, "agents", "list", "--limit", "3")
	data, _ := v["data"].([]any)
	seen := map[string]bool{}
	for _, a := range data {
		seen[a.(map[string]any)["id"].(string)] = true
	}
	if len(data) != n || len(seen) != n || v["has_more"] != false || v["object"] != "list" {
		t.Errorf("agents list -json: %d items (%d distinct), has_more %v", len(data), len(seen), v["has_more"])
	}
	for _, bad := range []string{"0", "51", "x"} {
		if _, _, err := cliRun(t, nil, "agents", "list", "-limit", bad, "-server", s.URL, "-key", owner.TestKey); err == nil {
			t.Errorf("agents list -limit %s was accepted", bad)
		}
	}
}

func TestCLIAgentsRename(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	id := cliJSON(t, s, owner.TestKey, "agents", "create", "-name", "before")["id"].(string)
	out := cliOK(t, s, owner.TestKey, "agents", "rename", id, "research bot")
	if !strings.Contains(out, "renamed agent "+id) || !strings.Contains(out, `"research bot"`) {
		t.Errorf("agents rename printed %q", out)
	}
	if v := cliJSON(t, s, owner.TestKey, "agents", "rename", id, "after"); v["name"] != "after" || v["id"] != id {
		t.Errorf("agents rename -json printed %v", v)
	}
	if r := s.Do(t, http.MethodGet, "/v1/agents/"+id, owner.TestKey, nil, nil); r.Body["name"] != "after" {
		t.Errorf("the server has the agent named %v", r.Body["name"])
	}
	// The server's refusals come through as errors.
	cliOK(t, s, owner.TestKey, "agents", "archive", id)
	_, errOut, err := cliRun(t, nil, "agents", "rename", id, "again", "-server", s.URL, "-key", owner.TestKey)
	var se *serverError
	if !errors.As(err, &se) || se.Status != http.StatusConflict || !strings.Contains(errOut, "error: state_conflict: ") {
		t.Errorf("renaming an archived agent: %v, stderr %q", err, errOut)
	}
	env := map[string]string{"GUARD_OWNER_KEY": "k", "GUARD_SERVER": "http://127.0.0.1:1"}
	for _, args := range [][]string{{"agents", "rename", id}, {"agents", "rename", id, "a", "b"}, {"agents", "rename", id, " "}} {
		if _, _, err := cliRun(t, env, args...); err == nil {
			t.Errorf("guard %q succeeded", args)
		}
	}
}

func TestCLIAgentsPauseAll(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	a1, key1 := s.NewAgent(t, owner.TestKey, `{"trusted_destinations":["api.vendor.com"]}`)
	a2, _ := s.NewAgent(t, owner.TestKey, "")
	waiting := s.Do(t, http.MethodPost, "/v1/spends", key1, map[string]string{"Idempotency-Key": "w1"},
		`{"amount":"1.00","destination":"new.example.org","resource":{"url":"https://new.example.org/x"}}`)
	if waiting.Status != http.StatusCreated || waiting.Body["status"] != "pending_approval" {
		t.Fatalf("want a pending spend: %d %s", waiting.Status, waiting.Raw)
	}

	out := cliOK(t, s, owner.TestKey, "agents", "pause", "-all", "-reason", "leaked key")
	if !strings.Contains(out, "paused 2 agents; 0 were paused already") || lineWith(out, "paused "+a1) == "" || lineWith(out, "paused "+a2) == "" {
		t.Errorf("agents pause -all printed:\n%s", out)
	}
	for _, id := range []string{a1, a2} {
		r := s.Do(t, http.MethodGet, "/v1/agents/"+id, owner.TestKey, nil, nil)
		pd, _ := r.Body["pause_detail"].(map[string]any)
		if r.Body["status"] != "paused" || pd["emergency"] != true || pd["reason"] != "leaked key" {
			t.Errorf("agent %s after pause -all: %s", id, r.Raw)
		}
	}
	sp := s.Do(t, http.MethodGet, "/v1/spends/"+waiting.Body["id"].(string), owner.TestKey, nil, nil)
	if pd, _ := sp.Body["pause_detail"].(map[string]any); pd["scope"] != "owner" {
		t.Errorf("the waiting spend after pause -all: %s", sp.Raw)
	}
	// Again: nothing more to pause.
	v := cliJSON(t, s, owner.TestKey, "agents", "pause", "--all")
	if v["paused_count"] != float64(0) || len(v["already_paused"].([]any)) != 2 {
		t.Errorf("agents pause -all -json a second time: %v", v)
	}
	// The single pause still takes one id.
	if out := cliOK(t, s, owner.TestKey, "agents", "pause", a1); !strings.Contains(out, "paused") {
		t.Errorf("agents pause ID printed %q", out)
	}
	env := map[string]string{"GUARD_OWNER_KEY": "k", "GUARD_SERVER": "http://127.0.0.1:1"}
	for _, args := range [][]string{
		{"agents", "pause"},
		{"agents", "pause", "-all", a1},
		{"agents", "pause", a1, "-reason", "x"},
	} {
		if _, _, err := cliRun(t, env, args...); err == nil {
			t.Errorf("guard %q succeeded", args)
		}
	}
}

func TestCLIMissingKey(t *testing.T) {
	for _, args := range [][]string{
		{"agents", "list"},
		{"keys", "create", "agt_00000000000000000000000000000000"},
		{"policy", "show", "agt_00000000000000000000000000000000", "-json"},
	} {
		_, _, err := cliRun(t, map[string]string{"GUARD_SERVER": "http://127.0.0.1:1"}, args...)
		if err == nil || !strings.Contains(err.Error(), "-key") || !strings.Contains(err.Error(), "GUARD_OWNER_KEY") {
			t.Errorf("guard %s without a key: %v; want an error naming -key and GUARD_OWNER_KEY", strings.Join(args, " "), err)
		}
	}
}

func TestCLIServerError(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	unknown := "agt_00000000000000000000000000000000"
	want := s.Do(t, http.MethodPost, "/v1/agents/"+unknown+"/pause", owner.TestKey, nil, nil)
	e, _ := want.Body["error"].(map[string]any)
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if want.Status != http.StatusNotFound || code == "" || msg == "" {
		t.Fatalf("pausing an unknown agent answered %d %s", want.Status, want.Raw)
	}

	for _, jsonFlag := range []string{"", "-json"} {
		args := []string{"agents", "pause", unknown, "-server", s.URL, "-key", owner.TestKey}
		if jsonFlag != "" {
			args = append(args, jsonFlag)
		}
		out, errOut, err := cliRun(t, nil, args...)
		var se *serverError
		if !errors.As(err, &se) || se.Status != http.StatusNotFound || se.Code != code {
			t.Fatalf("agents pause %s %s: err %v, want the server's 404 %s", unknown, jsonFlag, err, code)
		}
		if wantLine := "error: " + code + ": " + msg; !strings.Contains(errOut, wantLine) {
			t.Errorf("stderr %q does not hold %q", errOut, wantLine)
		}
		if out != "" {
			t.Errorf("a failed command printed %q on stdout", out)
		}
	}

	// A wrong key is the server's error too.
	_, errOut, err := cliRun(t, nil, "keys", "list", "-server", s.URL, "-key", "svc_test_owner_nope")
	if err == nil || !strings.Contains(errOut, "error: invalid_api_key: ") {
		t.Errorf("keys list with a bad key: %v, stderr %q", err, errOut)
	}
	// An agent key may not administer.
	_, agentKey := s.NewAgent(t, owner.TestKey, "")
	_, errOut, err = cliRun(t, nil, "agents", "list", "-server", s.URL, "-key", agentKey)
	if err == nil || !strings.Contains(errOut, "error: key_kind_not_allowed: ") {
		t.Errorf("agents list with an agent key: %v, stderr %q", err, errOut)
	}
	// A policy the server refuses.
	id, _ := s.NewAgent(t, owner.TestKey, "")
	bad := writeFile(t, "bad.json", `{"per_spend_limit": "lots"}`)
	_, errOut, err = cliRun(t, nil, "policy", "set", id, "-file", bad, "-server", s.URL, "-key", owner.TestKey)
	if err == nil || !strings.HasPrefix(errOut, "error: ") {
		t.Errorf("policy set with a bad amount: %v, stderr %q", err, errOut)
	}
}

func TestCLIKeysRotate(t *testing.T) {
	// Against the real server: the route answers a new key, or, where it
	// does not exist yet, its 404 error cleanly.
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	id := cliJSON(t, s, owner.TestKey, "agents", "create", "-name", "r1")["id"].(string)
	keyID := cliJSON(t, s, owner.TestKey, "keys", "create", id)["id"].(string)
	out, errOut, err := cliRun(t, nil, "keys", "rotate", keyID, "-grace-hours", "2", "-server", s.URL, "-key", owner.TestKey)
	if err != nil {
		var se *serverError
		if !errors.As(err, &se) || se.Status != http.StatusNotFound || !strings.HasPrefix(errOut, "error: "+se.Code+": ") {
			t.Errorf("keys rotate: %v, stderr %q", err, errOut)
		}
	} else if !strings.Contains(out, "secret: svc_test_agent_") || !strings.Contains(errOut, "not shown again") ||
		!strings.Contains(out, "old key "+keyID+" works until ") {
		t.Errorf("keys rotate printed %q, stderr %q", out, errOut)
	}

	// Against a stand-in server: the request the command sends.
	var gotAuth, gotPath, gotBody, gotType string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotAuth, gotPath, gotBody, gotType = r.Header.Get("Authorization"), r.URL.Path, string(b), r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"key_1","object":"api_key","kind":"agent","agent_id":"agt_1","livemode":false,`+
			`"prefix":"svc_test_agent","last4":"WXYZ","scope":"full","expires_at":"2027-01-01T00:00:00Z",`+
			`"created_at":"2026-01-01T00:00:00Z","revoked_at":null,"secret":"svc_test_agent_abcWXYZ","request_id":"req_1"}`)
	}))
	defer fake.Close()
	env := map[string]string{"GUARD_SERVER": fake.URL + "/", "GUARD_OWNER_KEY": "svc_test_owner_k"}
	out, errOut, err = cliRun(t, env, "keys", "rotate", "-grace-hours", "12", "key_1")
	if err != nil {
		t.Fatalf("keys rotate against the stand-in: %v\n%s", err, errOut)
	}
	if gotAuth != "Bearer svc_test_owner_k" || gotPath != "/v1/keys/key_1/rotate" || gotBody != `{"grace_period_hours":12}` || gotType != "application/json" {
		t.Errorf("keys rotate sent %q %q %q %q", gotAuth, gotPath, gotBody, gotType)
	}
	if !strings.Contains(out, "secret: svc_test_agent_abcWXYZ") || !strings.Contains(errOut, "not shown again") {
		t.Errorf("keys rotate printed %q, stderr %q", out, errOut)
	}
	// The flag overrides the environment.
	_, _, err = cliRun(t, env, "keys", "rotate", "key_1", "-key", "svc_test_owner_flag")
	if err != nil || gotAuth != "Bearer svc_test_owner_flag" || gotBody != `{}` {
		t.Errorf("keys rotate -key: %v, sent %q %q", err, gotAuth, gotBody)
	}
	if _, _, err := cliRun(t, env, "keys", "rotate", "key_1", "-grace-hours", "169"); err == nil {
		t.Errorf("keys rotate -grace-hours 169 was accepted")
	}
}

func TestCLIUsageAndArguments(t *testing.T) {
	for _, g := range []string{"agents", "keys", "policy", "receipts"} {
		out, errOut, err := cliRun(t, nil, g)
		if err == nil || !strings.Contains(errOut, "usage: guard "+g) || out != "" {
			t.Errorf("guard %s: %v, stderr %q", g, err, errOut)
		}
		out, _, err = cliRun(t, nil, g, "-h")
		if err != nil || !strings.Contains(out, "usage: guard "+g) || !strings.Contains(out, "GUARD_OWNER_KEY") {
			t.Errorf("guard %s -h: %v, stdout %q", g, err, out)
		}
		if _, errOut, err := cliRun(t, nil, g, "frobnicate"); err == nil || !strings.Contains(errOut, "usage: guard "+g) {
			t.Errorf("guard %s frobnicate: %v", g, err)
		}
	}
	out, _, err := cliRun(t, nil, "keys", "rotate", "-h")
	if err != nil || !strings.Contains(out, "-grace-hours") {
		t.Errorf("keys rotate -h: %v, %q", err, out)
	}
	// verify says, in its usage, what -agent leaves unchecked.
	out, _, err = cliRun(t, nil, "receipts", "verify", "-h")
	if err != nil || !strings.Contains(out, "-agent AGENT_ID") || !strings.Contains(out, "not the chain's links") || !strings.Contains(out, "anchor") {
		t.Errorf("receipts verify -h: %v, %q", err, out)
	}
	out, _, err = cliRun(t, nil, "help")
	if err != nil || !strings.Contains(out, "guard agents pause|resume|archive AGENT_ID") || !strings.Contains(out, "guard receipts verify [-agent AGENT_ID]") {
		t.Errorf("guard help: %v, %q", err, out)
	}
	env := map[string]string{"GUARD_OWNER_KEY": "k", "GUARD_SERVER": "http://127.0.0.1:1"}
	for _, args := range [][]string{
		{"agents", "pause"},
		{"agents", "pause", "a", "b"},
		{"agents", "create"},
		{"agents", "create", "-name", "x", "-policy", filepath.Join(t.TempDir(), "missing.json")},
		{"agents", "create", "-name", "x", "-policy", writeFile(t, "list.json", `["no"]`)},
		{"policy", "set", "agt_1"},
		{"policy", "set", "agt_1", "-file", writeFile(t, "broken.json", `{"per_spend_limit":`)},
		{"keys", "list", "-bogus"},
	} {
		if _, _, err := cliRun(t, env, args...); err == nil {
			t.Errorf("guard %s succeeded", strings.Join(args, " "))
		}
	}
	if _, _, err := cliRun(t, map[string]string{"GUARD_OWNER_KEY": "k", "GUARD_SERVER": "ftp://x"}, "keys", "list"); err == nil ||
		!strings.Contains(err.Error(), "GUARD_SERVER") {
		t.Errorf("a non-http server address: %v", err)
	}
}
