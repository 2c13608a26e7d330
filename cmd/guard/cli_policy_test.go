package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// policyRuleFields are the rules of a policy as show -json prints them.
var policyRuleFields = []string{"per_spend_limit", "daily_cap", "monthly_cap", "lifetime_cap", "allowed_destinations",
	"trusted_destinations", "blocked_destinations", "unknown_destination", "approval_over", "destination_window_over",
	"max_pending", "approval_ttl_minutes", "valid_until"}

// editJSON decodes a JSON object, lets edit change it and encodes it again.
func editJSON(t *testing.T, doc string, edit func(map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, doc)
	}
	edit(m)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What policy show -json prints, policy set takes back: as it is, it
// publishes the same rules; edited, the edit. Its read-only fields are
// checked, not ignored: a file shown before another version took effect,
// a changed paused and another agent's file publish nothing.
func TestCLIPolicyShowSetRoundTrip(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	validUntil := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	// Every rule away from its default, the null-able ones set, so that
	// each field's round trip counts.
	id, _ := s.NewAgent(t, owner.TestKey, `{"per_spend_limit":"8.00","daily_cap":"40.00","monthly_cap":"300.00",`+
		`"lifetime_cap":"900.00","allowed_destinations":["api.vendor.com"],"trusted_destinations":["*.trusted-vendor.com"],`+
		`"blocked_destinations":["bad.example.com"],"unknown_destination":"decline","approval_over":"3.00",`+
		`"destination_window_over":"20.00","max_pending":3,"approval_ttl_minutes":30,"valid_until":"`+validUntil+`"}`)
	other, _ := s.NewAgent(t, owner.TestKey, "")

	shown := cliOK(t, s, owner.TestKey, "policy", "show", "-json", id)
	before := map[string]any{}
	if err := json.Unmarshal([]byte(shown), &before); err != nil {
		t.Fatal(err)
	}
	shownFile := writeFile(t, "rules.json", shown)

	// As shown: the same rules, published as the next version.
	out := cliOK(t, s, owner.TestKey, "policy", "set", id, "-file", shownFile)
	if !strings.Contains(out, "published policy version 2") {
		t.Fatalf("policy set with show's output printed:\n%s", out)
	}
	after := cliJSON(t, s, owner.TestKey, "policy", "show", id)
	if after["version"] != float64(2) {
		t.Fatalf("after the round trip, version %v is in effect, want 2: %v", after["version"], after)
	}
	for _, f := range policyRuleFields {
		b, _ := json.Marshal(before[f])
		a, _ := json.Marshal(after[f])
		if string(a) != string(b) {
			t.Errorf("the round trip changed %s: %s, then %s", f, b, a)
		}
	}
	if before["lifetime_cap"] == nil || before["valid_until"] == nil || before["destination_window_over"] == nil {
		t.Errorf("the test's policy lost a null-able rule: %v", before)
	}
	if after["hash"] != before["hash"] {
		t.Errorf("the same rules have a new hash: %v, then %v", before["hash"], after["hash"])
	}

	// Edited: show, change a rule, set.
	v2 := cliOK(t, s, owner.TestKey, "policy", "show", "-json", id)
	edited := writeFile(t, "edited.json", editJSON(t, v2, func(m map[string]any) { m["per_spend_limit"] = "6.50" }))
	cliOK(t, s, owner.TestKey, "policy", "set", id, "-file", edited)
	if p := cliJSON(t, s, owner.TestKey, "policy", "show", id); p["per_spend_limit"] != "6.50" || p["version"] != float64(3) {
		t.Fatalf("the edited file published %v", p)
	}

	refused := func(what, file, agent string, want ...string) {
		t.Helper()
		out, errOut, err := cliRun(t, nil, "policy", "set", agent, "-file", file, "-server", s.URL, "-key", owner.TestKey)
		if err == nil {
			t.Fatalf("policy set with %s succeeded:\n%s", what, out)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("policy set with %s: %v\nstderr %s\nwant it to say %q", what, err, errOut, w)
			}
		}
	}
	// The first file again: version 3 took effect since it was shown.
	refused("a file shown from an older version", shownFile, id, "version 1", "version 3", "nothing was published", "policy show")
	// paused is the agent's, not a rule.
	v3 := cliOK(t, s, owner.TestKey, "policy", "show", "-json", id)
	refused("paused changed", writeFile(t, "paused.json", editJSON(t, v3, func(m map[string]any) { m["paused"] = true })),
		id, "agents pause", "nothing was published")
	// Another agent's file names it.
	otherShown := cliOK(t, s, owner.TestKey, "policy", "show", "-json", other)
	refused("another agent's file", writeFile(t, "other.json", otherShown), id, other, "delete the read-only fields")
	if p := cliJSON(t, s, owner.TestKey, "policy", "show", id); p["version"] != float64(3) || p["per_spend_limit"] != "6.50" {
		t.Errorf("a refused file changed the policy: %v", p)
	}

	// Only the read-only fields are taken out: a misspelt rule still
	// reaches the server, whose decoding names it.
	typo := writeFile(t, "typo.json", editJSON(t, v3, func(m map[string]any) { m["per_spend_limt"] = "1.00" }))
	_, errOut, err := cliRun(t, nil, "policy", "set", id, "-file", typo, "-server", s.URL, "-key", owner.TestKey)
	if err == nil || !strings.Contains(errOut, "per_spend_limt") {
		t.Errorf("a misspelt rule: %v, stderr %q; want the server's refusal naming it", err, errOut)
	}

	// The file named as an argument, as one might type it, is a usage
	// error that says how to give it.
	_, _, err = cliRun(t, nil, "policy", "set", id, edited, "-server", s.URL, "-key", owner.TestKey)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "-file "+edited) {
		t.Errorf("policy set AGENT FILE: %v (exit %d); want a usage error that shows -file", err, exitCode(err))
	}
}

// policy set says what it did by the service's clock (here a fake one,
// months from this machine's): a tightening applies at once, a loosening
// waits and names the version in effect until then, a mixed edit names
// the version its tightening fields became, and a version that cancels
// waiting ones names them. policy changes lists what waits and policy
// cancel cancels it.
func TestCLIPolicyWaitingChanges(t *testing.T) {
	clock := guardtest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := guardtest.Start(t, guardtest.WithClock(clock))
	owner := s.NewOwner(t)
	id, _ := s.NewAgent(t, owner.TestKey, `{"per_spend_limit":"8.00","daily_cap":"40.00"}`)
	set := func(body string) string {
		t.Helper()
		return cliOK(t, s, owner.TestKey, "policy", "set", id, "-file", writeFile(t, "rules.json", body))
	}

	out := set(`{"per_spend_limit":"6.00","daily_cap":"40.00"}`)
	if strings.Contains(out, "loosens") || strings.Contains(out, "Cancelled") {
		t.Errorf("a tightening applies at once, yet policy set printed:\n%s", out)
	}
	out = set(`{"per_spend_limit":"9.00","daily_cap":"40.00"}`)
	if !strings.Contains(out, "This version loosens the rules") || !strings.Contains(out, "Until then version 2 applies") {
		t.Errorf("a loosening: policy set printed:\n%s", out)
	}
	waiting := cliOK(t, s, owner.TestKey, "policy", "changes", id)
	line := lineWith(waiting, "pending")
	if !strings.Contains(line, "pol_") || !strings.Contains(line, " 3 ") {
		t.Fatalf("policy changes after a loosening:\n%s", waiting)
	}
	first := strings.Fields(line)[0]

	// Lower per spend, raise daily: the lower limit applies now as version
	// 4, the whole edit waits as 5, and the raise to 9.00 that waited is
	// cancelled and named.
	out = set(`{"per_spend_limit":"5.00","daily_cap":"45.00"}`)
	for _, want := range []string{"published policy version 5", "Its tightening fields apply now, as version 4",
		"Cancelled by this version, so they never apply: version 3 (" + first + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("a mixed edit: policy set printed:\n%s\nwant %q", out, want)
		}
	}
	line = lineWith(cliOK(t, s, owner.TestKey, "policy", "changes", id), "pending")
	second := strings.Fields(line)[0]
	out = cliOK(t, s, owner.TestKey, "policy", "cancel", second)
	if !strings.Contains(out, "cancelled policy version 5 ("+second+")") {
		t.Errorf("policy cancel printed:\n%s", out)
	}
	if out := cliOK(t, s, owner.TestKey, "policy", "changes", id); !strings.Contains(out, "No version of agent "+id+" waits") {
		t.Errorf("policy changes after the cancel:\n%s", out)
	}
	if p := cliJSON(t, s, owner.TestKey, "policy", "show", id); p["version"] != float64(4) || p["per_spend_limit"] != "5.00" || p["daily_cap"] != "40.00" {
		t.Errorf("in effect after the cancel: %v", p)
	}
}
