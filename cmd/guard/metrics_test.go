package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeMetricsListener runs the server with an operator listener and
// checks that /metrics counts what the API did: the request by its route
// pattern and status, the spend's event once durable, the journal's
// commits; that the profiles answer; and that the listener closes with
// the server.
func TestServeMetricsListener(t *testing.T) {
	t.Chdir(t.TempDir())
	srv := serveInBackground(t, "-dev", "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0", "-data", "data")
	defer srv.stop()
	m := srv.waitForLog(regexp.MustCompile(`msg=serving addr=(127\.0\.0\.1:\d+) .* metrics=(http://127\.0\.0\.1:\d+)/metrics`))
	api, operator := "http://"+m[1], m[2]

	var creds struct {
		AgentKey string `json:"agent_key"`
	}
	raw, err := os.ReadFile(filepath.Join("data", "dev-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &creds); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, api+"/v1/spends",
		strings.NewReader(`{"amount":"0.50","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/report"}}`))
	req.Header.Set("Authorization", "Bearer "+creds.AgentKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "metrics-1")
	if body, status := do(t, req); status != http.StatusCreated || !strings.Contains(body, `"status":"settled"`) {
		t.Fatalf("spend: %d %s", status, body)
	}
	missing, _ := http.NewRequest(http.MethodGet, api+"/v1/spends/spd_nothing/at/all", nil)
	if _, status := do(t, missing); status != http.StatusNotFound {
		t.Fatalf("no route: %d, want 404", status)
	}

	// The event reaches the counters after the journal holds it, which
	// the 201 already waited for; the hub hands it on just after.
	want := []string{
		`guard_http_requests_total{method="POST",route="/v1/spends",status="201"} 1`,
		`guard_http_requests_total{method="GET",route="(none)",status="404"} 1`,
		`guard_http_request_duration_seconds_count{method="POST",route="/v1/spends"} 1`,
		`guard_events_total{livemode="false",type="spend.settled"} 1`,
		`guard_agents_active 1`,
		`guard_events_deleted_total 0`,
		`guard_journal_commit_failures_total 0`,
	}
	var metrics string
	for deadline := time.Now().Add(10 * time.Second); ; {
		get, _ := http.NewRequest(http.MethodGet, operator+"/metrics", nil)
		var status int
		metrics, status = do(t, get)
		if status != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", status, metrics)
		}
		if missingLine(metrics, want) == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if line := missingLine(metrics, want); line != "" {
		t.Fatalf("/metrics lacks %q:\n%s", line, grepGuard(metrics))
	}
	if commits := regexp.MustCompile(`(?m)^guard_journal_commits_total (\d+)$`).FindStringSubmatch(metrics); commits == nil || commits[1] == "0" {
		t.Fatalf("/metrics counts no journal commit after a spend:\n%s", grepGuard(metrics))
	}
	if strings.Contains(metrics, "spd_") || strings.Contains(metrics, creds.AgentKey) {
		t.Fatalf("/metrics names an id or a key:\n%s", grepGuard(metrics))
	}
	pprofIndex, _ := http.NewRequest(http.MethodGet, operator+"/debug/pprof/", nil)
	if body, status := do(t, pprofIndex); status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("GET /debug/pprof/: %d %.200s", status, body)
	}
	// The API does not serve the operator's pages.
	apiMetrics, _ := http.NewRequest(http.MethodGet, api+"/metrics", nil)
	if _, status := do(t, apiMetrics); status != http.StatusNotFound {
		t.Fatalf("GET /metrics on the API: %d, want 404", status)
	}

	srv.stop()
	if resp, err := http.Get(operator + "/metrics"); err == nil {
		resp.Body.Close()
		t.Fatalf("the operator listener still answers after the server stopped: %d", resp.StatusCode)
	}
}

func do(t *testing.T, req *http.Request) (string, int) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// missingLine is the first of want that is not a line of text, or "".
func missingLine(text string, want []string) string {
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			return w
		}
	}
	return ""
}

func grepGuard(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "guard_") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
