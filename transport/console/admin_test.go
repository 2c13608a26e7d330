package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// policyForm is the policy form with every field, from the defaults.
func policyForm(token string, change map[string]string) url.Values {
	v := url.Values{"csrf": {token}, "per_spend_limit": {"10.00"}, "daily_cap": {"50.00"}, "monthly_cap": {"500.00"},
		"lifetime_cap": {""}, "approval_over": {"5.00"}, "destination_window_over": {""}, "max_pending": {"5"},
		"approval_ttl_minutes": {"15"}, "unknown_destination": {"ask"}, "trusted_destinations": {""},
		"allowed_destinations": {""}, "blocked_destinations": {""}, "valid_until": {""}}
	for k, s := range change {
		v.Set(k, s)
	}
	return v
}

func TestPolicyEditShowsTighteningAndLoosening(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	agentID, _ := srv.NewAgent(t, o.testKey, "")
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	edit := map[string]string{"daily_cap": "20.00", "trusted_destinations": "api.vendor.com\r\n*.data-vendor.com"}
	p := c.post("/console/agents/"+agentID+"/policy/preview", policyForm(token, edit), "")
	if p.status != http.StatusOK {
		t.Fatalf("preview: %d\n%s", p.status, p.body)
	}
	row := func(label string) string {
		m := regexp.MustCompile(`<tr><td>` + regexp.QuoteMeta(label) + `</td>.*?</tr>`).FindString(strings.ReplaceAll(p.body, "\n", " "))
		return m
	}
	if r := row("Daily cap"); !strings.Contains(r, "tightens") {
		t.Errorf("daily cap row: %q", r)
	}
	if r := row("Trusted destinations"); !strings.Contains(r, "loosens") {
		t.Errorf("trusted row: %q", r)
	}
	if strings.Contains(p.body, "Per spend limit</td>") {
		t.Error("an unchanged rule is listed")
	}
	// Nothing is published by a preview.
	if r := srv.Do(t, http.MethodGet, "/v1/agents/"+agentID+"/policy", o.testKey, nil, nil); r.Body["version"] != float64(1) {
		t.Fatalf("preview published version %v", r.Body["version"])
	}
	p = c.post("/console/agents/"+agentID+"/policy", policyForm(token, edit), "")
	if p.status != http.StatusSeeOther || !strings.HasSuffix(p.location(), "?done=loosen") {
		t.Fatalf("publish: %d %q\n%s", p.status, p.location(), p.body)
	}
	// The tightening part is in effect now; the loosening waits.
	r := srv.Do(t, http.MethodGet, "/v1/agents/"+agentID+"/policy", o.testKey, nil, nil)
	if r.Body["daily_cap"] != "20.00" || len(r.Body["trusted_destinations"].([]any)) != 0 {
		t.Fatalf("in effect: daily %v trusted %v", r.Body["daily_cap"], r.Body["trusted_destinations"])
	}
	page := c.get("/console/agents/" + agentID)
	if !strings.Contains(page.body, "A loosening waits") || !strings.Contains(page.body, "*.data-vendor.com") {
		t.Fatalf("agent page does not show the waiting change:\n%s", page.body)
	}
	// Reviewing a tightening while it waits warns that publishing cancels
	// it, naming what it would have changed.
	warn := c.post("/console/agents/"+agentID+"/policy/preview", policyForm(token, map[string]string{"daily_cap": "15.00"}), "")
	if warn.status != http.StatusOK || !strings.Contains(warn.body, "Publishing cancels the change that waits") ||
		!strings.Contains(warn.body, "*.data-vendor.com") {
		t.Fatalf("the review of a tightening does not say it cancels the waiting change:\n%s", warn.body)
	}
	// A valid_until already past is refused at the review, on the form,
	// with what was typed kept.
	past := c.post("/console/agents/"+agentID+"/policy/preview", policyForm(token, map[string]string{"valid_until": "2020-01-01T00:00:00Z", "per_spend_limit": "7.00"}), "")
	if past.status != http.StatusBadRequest || !strings.Contains(past.body, "must be in the future") || !strings.Contains(past.body, `aria-invalid="true"`) ||
		!strings.Contains(past.body, `value="7.00"`) {
		t.Fatalf("a past valid_until at the review: %d\n%s", past.status, past.body)
	}
	// It can be cancelled from the page.
	cancelPath := regexp.MustCompile(`action="(/console/policy_changes/pol_[0-9a-f]{32}/cancel)"`).FindStringSubmatch(page.body)
	if cancelPath == nil {
		t.Fatal("no cancel form")
	}
	if p := c.post(cancelPath[1], url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("cancel: %d\n%s", p.status, p.body)
	}
	if strings.Contains(c.get("/console/agents/"+agentID).body, "A loosening waits") {
		t.Fatal("the cancelled change still shows")
	}
	// A bad field is named, and nothing is published.
	p = c.post("/console/agents/"+agentID+"/policy/preview", policyForm(token, map[string]string{"daily_cap": "lots"}), "")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Daily cap") || !strings.Contains(p.body, `value="lots"`) {
		t.Fatalf("bad field: %d\n%s", p.status, p.body)
	}
	// A bad line of a list is named by its label and line, counted from 1.
	p = c.post("/console/agents/"+agentID+"/policy/preview", policyForm(token, map[string]string{"trusted_destinations": "api.vendor.com\r\nnot a host"}), "")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Trusted destinations, line 2:") {
		t.Fatalf("bad list line: %d\n%s", p.status, p.body)
	}
	// Every refused field is named at once, beside itself, in the form's
	// order; a cross-field check waits until each field is valid alone.
	p = c.post("/console/agents/"+agentID+"/policy/preview", policyForm(token, map[string]string{
		"max_pending": "many", "daily_cap": "lots", "blocked_destinations": "ok.example.com\r\n-bad-", "monthly_cap": "1.00"}), "")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "3 fields need fixing. Daily cap: ") ||
		strings.Count(p.body, `aria-invalid="true"`) != 3 ||
		!regexp.MustCompile(`(?s)Daily cap: .*; Most payments waiting: must be a whole number; Blocked destinations, line 2: `).MatchString(p.body) ||
		!strings.Contains(p.body, `<span class="error" id="p-max_pending">must be a whole number</span>`) ||
		!strings.Contains(p.body, `aria-describedby="p-daily_cap h-daily_cap"`) || strings.Contains(p.body, "must not be") {
		t.Fatalf("several bad fields: %d\n%s", p.status, p.body)
	}
}

func TestPauseAndResume(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	agentID, _ := srv.NewAgent(t, o.testKey, "")
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	for _, tc := range []struct{ action, want string }{{"pause", "paused"}, {"resume", "active"}} {
		if p := c.post("/console/agents/"+agentID+"/"+tc.action, url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther {
			t.Fatalf("%s: %d", tc.action, p.status)
		}
		if r := srv.Do(t, http.MethodGet, "/v1/agents/"+agentID, o.testKey, nil, nil); r.Body["status"] != tc.want {
			t.Fatalf("after %s: %v", tc.action, r.Body["status"])
		}
	}
	ev := srv.Do(t, http.MethodGet, "/v1/events?type=agent.*", o.testKey, nil, nil)
	if n := len(ev.Body["data"].([]any)); n != 3 { // created, paused, resumed
		t.Fatalf("agent events: %d, want 3", n)
	}
}

var secretShown = regexp.MustCompile(`value="(svc_test_agent_[0-9A-Za-z]{43})"`)

func TestKeysCreateRotateRevoke(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	agentID, _ := srv.NewAgent(t, o.testKey, "")
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	p := c.post("/console/keys", url.Values{"csrf": {token}, "agent_id": {agentID}}, "")
	m := secretShown.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("create: %d\n%s", p.status, p.body)
	}
	secret := m[1]
	if r := srv.Do(t, http.MethodGet, "/v1/balance", secret, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("new key: %d", r.Status)
	}
	list := c.get("/console/keys")
	if strings.Contains(list.body, secret) || !strings.Contains(list.body, secret[len(secret)-4:]) {
		t.Fatal("the key list must show last4, never the secret")
	}
	keyID := regexp.MustCompile(`action="/console/keys/(key_[0-9a-f]{32})/rotate"`).FindAllStringSubmatch(list.body, -1)
	if len(keyID) < 2 {
		t.Fatalf("rotate forms: %v", keyID)
	}
	var newest string
	for _, k := range keyID { // the created key is the newest: its id sorts last
		if k[1] > newest {
			newest = k[1]
		}
	}
	p = c.post("/console/keys/"+newest+"/rotate", url.Values{"csrf": {token}, "grace_period_hours": {"0"}}, "")
	m = secretShown.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil || m[1] == secret {
		t.Fatalf("rotate: %d\n%s", p.status, p.body)
	}
	rotated := m[1]
	if r := srv.Do(t, http.MethodGet, "/v1/balance", secret, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("old key after rotation without grace: %d", r.Status)
	}
	active := regexp.MustCompile(`action="/console/keys/(key_[0-9a-f]{32})/rotate"`).FindStringSubmatch(c.get("/console/keys").body)
	if active == nil {
		t.Fatal("no active key to rotate")
	}
	if p := c.post("/console/keys/"+active[1]+"/rotate", url.Values{"csrf": {token}, "grace_period_hours": {"500"}}, ""); p.status != http.StatusBadRequest ||
		!strings.Contains(p.body, "from 0 to 168") || !strings.Contains(p.body, `value="500"`) || !strings.Contains(p.body, "Create key") {
		t.Fatalf("grace 500 h: %d (want the keys page, the value kept)\n%s", p.status, p.body)
	}
	list = c.get("/console/keys")
	ids := regexp.MustCompile(`href="/console/keys/(key_[0-9a-f]{32})/revoke"`).FindAllStringSubmatch(list.body, -1)
	var last string
	for _, k := range ids {
		if k[1] > last {
			last = k[1]
		}
	}
	if confirm := c.get("/console/keys/" + last + "/revoke"); !strings.Contains(confirm.body, "cannot be undone") {
		t.Fatalf("revoke confirmation:\n%s", confirm.body)
	}
	if p := c.post("/console/keys/"+last+"/revoke", url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d\n%s", p.status, p.body)
	}
	if r := srv.Do(t, http.MethodGet, "/v1/balance", rotated, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d", r.Status)
	}
}

func TestSpendListFiltersAndSpendPage(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	settled := spend(t, srv, agentKey, "0.50", "list-1")
	pending := spend(t, srv, agentKey, "2.00", "list-2")
	c := newClient(t, srv)
	c.mustSignIn(o)
	all := c.get("/console/spends")
	if !strings.Contains(all.body, settled["id"].(string)) || !strings.Contains(all.body, pending["id"].(string)) {
		t.Fatal("the list misses a spend")
	}
	only := c.get("/console/spends?status=settled")
	if !strings.Contains(only.body, settled["id"].(string)) || strings.Contains(only.body, pending["id"].(string)) {
		t.Fatal("the status filter does not filter")
	}
	for _, bad := range []string{"status=lost", "destination=not+a+host", "from=yesterday", "agent_id=nope", "from=2026-11-24&to=2026-11-22"} {
		if p := c.get("/console/spends?" + bad); p.status != http.StatusBadRequest || !strings.Contains(p.body, `class="error"`) {
			t.Errorf("%s: %d", bad, p.status)
		}
	}
	page := c.get("/console/spends/" + settled["id"].(string))
	for _, want := range []string{"spend.settled", "verified", "0.50"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("spend page lacks %q", want)
		}
	}
	if p := c.get("/console/spends/spd_00000000000000000000000000000000"); p.status != http.StatusNotFound {
		t.Fatalf("unknown spend: %d", p.status)
	}
}

func TestBalanceChart(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, `{"daily_cap":"10.00","trusted_destinations":["api.vendor.com"]}`)
	spend(t, srv, agentKey, "2.00", "chart-1")
	c := newClient(t, srv)
	c.mustSignIn(o)
	p := c.get("/console/balance")
	if p.status != http.StatusOK {
		t.Fatalf("balance: %d", p.status)
	}
	if n := strings.Count(p.body, `<rect class="bar`); n != 14 {
		t.Fatalf("bars: %d, want 14", n)
	}
	// Today's row of the table counts the one payment.
	for _, want := range []string{`role="img"`, "against its daily cap of 10.00", `class="cap"`, "<table",
		`<td class="num">1</td><td class="num">10.00</td></tr></tbody>`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("balance page lacks %q", want)
		}
	}
}

var ownerSecretShown = regexp.MustCompile(`value="(svc_test_owner_[0-9A-Za-z]{43})"`)

// The console, signed in with the password, is the way back to the API
// when every owner key has expired: no key could make another then.
func TestOwnerKeyFromTheConsoleWhenNoneWorks(t *testing.T) {
	clock := guardtest.NewFakeClock(time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC))
	srv := guardtest.Start(t, guardtest.WithClock(clock))
	o := newOwner(t, srv)
	clock.Advance(91 * 24 * time.Hour) // past every practice key's 90 days
	if r := srv.Do(t, http.MethodGet, "/v1/me", o.testKey, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("an owner key past its life: %d", r.Status)
	}
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	if p := c.post("/console/owner_keys", url.Values{}, ""); p.status != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d", p.status)
	}
	p := c.post("/console/owner_keys", url.Values{"csrf": {token}}, "")
	m := ownerSecretShown.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("create: %d\n%s", p.status, p.body)
	}
	r := srv.Do(t, http.MethodGet, "/v1/me", m[1], nil, nil)
	if r.Status != http.StatusOK || r.Body["key"].(map[string]any)["kind"] != "owner" {
		t.Fatalf("the new owner key: %d %s", r.Status, r.Raw)
	}
}
