package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

var policyGroup = cmdGroup{
	name: "policy",
	summary: "Read and publish an agent's policy. Tightening applies at once; loosening waits\n" +
		"until its effective_at. A published body is a full policy: omitted fields take the defaults.\n" +
		"To edit the rules: guard policy show -json AGENT_ID > rules.json, edit rules.json, then\n" +
		"guard policy set AGENT_ID -file rules.json (\"guard policy set -h\" says what it checks).",
	footer: commonUsage,
	cmds: []subcommand{
		{"show", "AGENT_ID", "print the policy in effect", policyShow},
		{"set", "AGENT_ID -file FILE.json", "publish the rules of a JSON file, such as show -json's output (\"-\": stdin)", policySet},
		{"changes", "AGENT_ID", "list the versions that wait for their effective_at (loosenings), oldest first", policyChanges},
		{"cancel", "CHANGE_ID", "cancel a waiting version (and those built on it) before it applies", policyCancel},
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
	return c.table(nil, rows)
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

// policyReadOnlyFields are the fields policy show -json prints besides
// the rules: they describe the version and the agent, and the server's
// policy body refuses them.
var policyReadOnlyFields = []string{"object", "id", "agent_id", "version", "hash",
	"paused", "livemode", "effective_at", "created_at", "request_id"}

var (
	policyReadOnly = func() map[string]bool {
		m := make(map[string]bool, len(policyReadOnlyFields))
		for _, f := range policyReadOnlyFields {
			m[f] = true
		}
		return m
	}()
	policyReadOnlyList = strings.Join(policyReadOnlyFields, ", ")
)

// policySetHelp is the long help of policy set.
var policySetHelp = `The file holds a policy body: the rules, each one optional; a rule left out takes its
default, not its current value. The output of "guard policy show -json AGENT_ID" is such
a file, edited or not. Its read-only fields
  ` + policyReadOnlyList + `
are checked, then left out of what is published: they must still describe the policy in
effect for AGENT_ID. If another version took effect since the file was shown, nothing is
published (show it again and redo the edit). Pausing is not a rule: use
"guard agents pause|resume AGENT_ID".`

// sameJSON reports whether two JSON values are equal as values, whatever
// their spacing.
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// rulesOnly turns what policy show -json printed, edited or not, back into
// a policy body: the read-only fields are checked against the agent's
// policy in effect, then left out. A body without them is sent as it is.
// Only those fields are taken out: a field the server does not know (a
// typo) still reaches it and is refused by name.
func (c *cli) rulesOnly(agentID, src string, body []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	found := false
	for f := range fields {
		found = found || policyReadOnly[f]
	}
	if !found {
		return body, nil
	}
	var current map[string]json.RawMessage
	if _, err := c.getJSON("/v1/agents/"+pathID(agentID)+"/policy", nil, &current); err != nil {
		return nil, err
	}
	if err := readOnlyMismatch(src, fields, current); err != nil {
		return nil, err
	}
	for f := range fields {
		if policyReadOnly[f] {
			delete(fields, f)
		}
	}
	return json.Marshal(fields)
}

// readOnlyMismatch says which read-only field of the file no longer
// matches the agent's policy in effect (current), and what to do about it.
// request_id names the answer the file was printed from: it is never
// compared.
func readOnlyMismatch(src string, fields, current map[string]json.RawMessage) error {
	const nothing = "; nothing was published"
	agent := plain(current["agent_id"])
	if v, ok := fields["object"]; ok && !sameJSON(v, json.RawMessage(`"policy"`)) {
		return fmt.Errorf("%s: object is %s, not \"policy\": this is not a policy; delete object if the rest is one%s", src, v, nothing)
	}
	if v, ok := fields["agent_id"]; ok && !sameJSON(v, current["agent_id"]) {
		return fmt.Errorf("%s holds the policy of agent %s, not of %s%s. To publish these rules to %s, delete the read-only fields from the file: %s",
			src, plain(v), agent, nothing, agent, policyReadOnlyList)
	}
	if v, ok := fields["version"]; ok && !sameJSON(v, current["version"]) {
		return fmt.Errorf("%s was shown from policy version %s, but version %s is in effect now: publishing it would undo what changed since%s. "+
			"Show the policy again (guard policy show -json %s), redo the edit and set it again", src, plain(v), plain(current["version"]), nothing, agent)
	}
	for _, f := range []string{"id", "hash", "effective_at", "created_at"} {
		if v, ok := fields[f]; ok && !sameJSON(v, current[f]) {
			return fmt.Errorf("%s: %s is %s, but the version in effect has %s; %s is read-only: put it back or delete it%s", src, f, v, current[f], f, nothing)
		}
	}
	if v, ok := fields["paused"]; ok && !sameJSON(v, current["paused"]) {
		state := "not paused"
		if sameJSON(current["paused"], json.RawMessage("true")) {
			state = "paused"
		}
		return fmt.Errorf("%s: paused is %s, but the agent is %s now. Pausing is not a rule: use \"guard agents pause|resume %s\", "+
			"and put paused back or delete it%s", src, v, state, agent, nothing)
	}
	if v, ok := fields["livemode"]; ok && !sameJSON(v, current["livemode"]) {
		return fmt.Errorf("%s: livemode is %s, but the agent's is %s: an agent's environment is fixed when it is made; put livemode back or delete it%s",
			src, v, current["livemode"], nothing)
	}
	return nil
}

func policySet(c *cli, args []string) error {
	c.help = policySetHelp
	fs := c.flags()
	file := fs.String("file", "", "`FILE.json` holding the policy body, or the output of policy show -json (required; \"-\" reads standard input)")
	pos, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *file == "" {
		if len(pos) == 2 {
			return c.usageErr(fs, "give the file with -file: guard policy set %s -file %s", pos[0], pos[1])
		}
		return c.usageErr(fs, "-file is required")
	}
	if err := c.want(fs, pos, "AGENT_ID"); err != nil {
		return err
	}
	body, err := c.readJSONObject("file", *file)
	if err != nil {
		return err
	}
	src := *file
	if src == "-" {
		src = "standard input"
	}
	if body, err = c.rulesOnly(pos[0], src, body); err != nil {
		return err
	}
	agentPath := "/v1/agents/" + pathID(pos[0])
	// What waited before, to name what this version cancels; the
	// publish does not depend on it.
	waitedBefore, _, beforeErr := c.waitingChanges(pos[0])
	var inEffect policyChange
	_, inEffectErr := c.getJSON(agentPath+"/policy", nil, &inEffect)
	raw, err := c.postJSON(agentPath+"/policy", body, nil)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	if err := c.printPolicy("published ", raw); err != nil {
		return err
	}
	var pub policyChange
	if err := decodeAnswer(raw, &pub); err != nil {
		return err
	}
	if pub.EffectiveAt.After(pub.CreatedAt) {
		// The service compares with its own clock (a practice clock may
		// be ahead of this machine's): a version published to wait has
		// effective_at after created_at.
		msg := fmt.Sprintf("This version loosens the rules: it takes effect at %s.", when(&pub.EffectiveAt))
		var now policyChange
		if _, err := c.getJSON(agentPath+"/policy", nil, &now); err == nil && now.ID != pub.ID {
			if inEffectErr == nil && now.ID != inEffect.ID {
				msg += fmt.Sprintf(" Its tightening fields apply now, as version %d; until then that version applies.", now.Version)
			} else {
				msg += fmt.Sprintf(" Until then version %d applies.", now.Version)
			}
		}
		if _, err := fmt.Fprintln(c.stdout, msg); err != nil {
			return err
		}
	}
	if beforeErr != nil {
		return nil
	}
	var gone []string
	for _, w := range waitedBefore {
		var now policyChange
		if _, err := c.getJSON("/v1/policy_changes/"+pathID(w.ID), nil, &now); err == nil && now.Status == "cancelled" {
			gone = append(gone, fmt.Sprintf("version %d (%s)", w.Version, w.ID))
		}
	}
	if len(gone) > 0 {
		_, err := fmt.Fprintf(c.stdout, "Cancelled by this version, so they never apply: %s.\n", strings.Join(gone, ", "))
		return err
	}
	return nil
}

// policyChange is what the CLI reads of a policy version or a waiting
// change.
type policyChange struct {
	ID          string     `json:"id"`
	Version     int        `json:"version"`
	Status      string     `json:"status"`
	EffectiveAt time.Time  `json:"effective_at"`
	CreatedAt   time.Time  `json:"created_at"`
	CancelledAt *time.Time `json:"cancelled_at"`
}

// waitingChanges lists an agent's versions that wait, and returns the
// answer as sent too, for --json.
func (c *cli) waitingChanges(agentID string) ([]policyChange, []byte, error) {
	var page struct {
		Data []policyChange `json:"data"`
	}
	raw, err := c.getJSON("/v1/agents/"+pathID(agentID)+"/policy_changes", nil, &page)
	return page.Data, raw, err
}

func policyChanges(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, "AGENT_ID")
	if err != nil {
		return err
	}
	waiting, raw, err := c.waitingChanges(pos[0])
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	if len(waiting) == 0 {
		_, err := fmt.Fprintf(c.stdout, "No version of agent %s waits: the policy in effect is the newest (guard policy show %s).\n", pos[0], pos[0])
		return err
	}
	rows := make([][]string, 0, len(waiting))
	for _, w := range waiting {
		rows = append(rows, []string{w.ID, fmt.Sprint(w.Version), w.Status, when(&w.EffectiveAt)})
	}
	return c.table([]string{"ID", "VERSION", "STATUS", "EFFECTIVE AT"}, rows)
}

func policyCancel(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, "CHANGE_ID")
	if err != nil {
		return err
	}
	var ch policyChange
	raw, err := c.postJSON("/v1/policy_changes/"+pathID(pos[0])+"/cancel", nil, &ch)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	_, err = fmt.Fprintf(c.stdout, "cancelled policy version %d (%s), cancelled at %s: it never applies\n", ch.Version, ch.ID, when(ch.CancelledAt))
	return err
}
