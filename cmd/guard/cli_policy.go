package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

var policyGroup = cmdGroup{
	name: "policy",
	summary: "Read and publish an agent's policy. Tightening applies at once; loosening waits\n" +
		"until its effective_at. A published body is a full policy: omitted fields take the defaults.",
	cmds: []subcommand{
		{"show", "AGENT_ID", "print the policy in effect", policyShow},
		{"set", "AGENT_ID -file FILE.json", "publish the policy body of a JSON file (\"-\" reads standard input)", policySet},
	},
}

// policyRows are the fields the summary shows, in order, with their labels.
var policyRows = []struct{ field, label string }{
	{"per_spend_limit", "per spend limit"},
	{"daily_cap", "daily cap"},
	{"monthly_cap", "monthly cap"},
	{"lifetime_cap", "lifetime cap"},
	{"approval_over", "approval over"},
	{"destination_window_over", "window over"},
	{"unknown_destination", "unknown destination"},
	{"allowed_destinations", "allowed"},
	{"trusted_destinations", "trusted"},
	{"blocked_destinations", "blocked"},
	{"max_pending", "max pending"},
	{"approval_ttl_minutes", "approval ttl minutes"},
	{"valid_until", "valid until"},
	{"paused", "paused"},
}

// plain renders one JSON value for people: strings unquoted, null as
// "none", lists comma-separated.
func plain(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "none"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return "none"
		}
		parts := make([]string, len(list))
		for i, v := range list {
			parts[i] = plain(v)
		}
		return strings.Join(parts, ", ")
	}
	return string(raw)
}

func (c *cli) printPolicy(verb string, raw []byte) error {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("the server's policy is not a JSON object: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%spolicy version %s (%s) of agent %s\n", verb, plain(p["version"]), plain(p["id"]), plain(p["agent_id"]))
	rows := make([][]string, 0, len(policyRows)+1)
	for _, r := range policyRows {
		if v, ok := p[r.field]; ok {
			rows = append(rows, []string{"  " + r.label, plain(v)})
		}
	}
	var eff time.Time
	if json.Unmarshal(p["effective_at"], &eff) == nil && !eff.IsZero() {
		rows = append(rows, []string{"  effective at", when(&eff)})
	}
	if _, err := fmt.Fprint(c.stdout, b.String()); err != nil {
		return err
	}
	if err := c.table(nil, rows); err != nil {
		return err
	}
	if !eff.IsZero() && eff.After(time.Now()) {
		_, err := fmt.Fprintf(c.stdout, "This version loosens the rules: it takes effect at %s; until then the previous version applies.\n", when(&eff))
		return err
	}
	return nil
}

func policyShow(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, "AGENT_ID")
	if err != nil {
		return err
	}
	raw, err := c.getJSON("/v1/agents/"+pathID(pos[0])+"/policy", nil, nil)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	return c.printPolicy("", raw)
}

func policySet(c *cli, args []string) error {
	fs := c.flags()
	file := fs.String("file", "", "`FILE.json` holding the policy body (required; \"-\" reads standard input)")
	pos, err := c.parse(fs, args, "AGENT_ID")
	if err != nil {
		return err
	}
	if *file == "" {
		c.printUsage(c.stderr, fs)
		return fmt.Errorf("policy set: -file is required")
	}
	body, err := c.readJSONObject("file", *file)
	if err != nil {
		return err
	}
	raw, err := c.postJSON("/v1/agents/"+pathID(pos[0])+"/policy", body, nil)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	return c.printPolicy("published ", raw)
}
