package console

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

type agentListData struct {
	Agents []actors.Agent
	Done   string
}

func (c *Console) agentList(r *request) error {
	_, agents, err := c.agentsOf(r.who)
	if err != nil {
		return fromActors(err, "Agents could not be listed")
	}
	return c.ok(r, "agents", "Agents", agentListData{Agents: agents, Done: doneText(query(r, "done"))})
}

// agentAction pauses or resumes an agent.
func (c *Console) agentAction(action string) handler {
	return func(r *request) error {
		id := param(r, "id")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.sys.ChangeAgent(ctx, r.who, id, action); err != nil {
			return fromActors(err, "The agent did not change")
		}
		back := c.base + "/agents"
		if form(r, "back") == "agent" {
			back += "/" + id
		}
		return redirect(back + "?done=" + action)
	}
}

// ruleField is one writable rule as the policy form shows it.
type ruleField struct {
	Name  string
	Label string
	Help  string
	Kind  string // "amount", "optional", "int", "list", "choice", "time"
	get   func(policy.Rules) string
	take  func(dst *policy.Rules, src policy.Rules)
}

func amountText(a *policy.Amount) string {
	if a == nil {
		return ""
	}
	return a.Display()
}

func patternsText(ps []policy.Pattern) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, "\n")
}

var ruleFields = []ruleField{
	{Name: "per_spend_limit", Label: "Per spend limit", Kind: "amount", Help: "The most one payment may be.",
		get: func(r policy.Rules) string { return r.PerSpendLimit.Display() }, take: func(d *policy.Rules, s policy.Rules) { d.PerSpendLimit = s.PerSpendLimit }},
	{Name: "daily_cap", Label: "Daily cap", Kind: "amount", Help: "The most paid per UTC day.",
		get: func(r policy.Rules) string { return r.DailyCap.Display() }, take: func(d *policy.Rules, s policy.Rules) { d.DailyCap = s.DailyCap }},
	{Name: "monthly_cap", Label: "Monthly cap", Kind: "amount", Help: "The most paid per calendar month (UTC).",
		get: func(r policy.Rules) string { return r.MonthlyCap.Display() }, take: func(d *policy.Rules, s policy.Rules) { d.MonthlyCap = s.MonthlyCap }},
	{Name: "lifetime_cap", Label: "Lifetime cap", Kind: "optional", Help: "The most ever paid; empty for none.",
		get: func(r policy.Rules) string { return amountText(r.LifetimeCap) }, take: func(d *policy.Rules, s policy.Rules) { d.LifetimeCap = s.LifetimeCap }},
	{Name: "approval_over", Label: "Approval over", Kind: "amount", Help: "Payments above this wait for your approval.",
		get: func(r policy.Rules) string { return r.ApprovalOver.Display() }, take: func(d *policy.Rules, s policy.Rules) { d.ApprovalOver = s.ApprovalOver }},
	{Name: "destination_window_over", Label: "Destination window over", Kind: "optional",
		Help: "Approval when the sum to one destination in 24 hours passes this; empty for none.",
		get:  func(r policy.Rules) string { return amountText(r.DestinationWindowOver) }, take: func(d *policy.Rules, s policy.Rules) { d.DestinationWindowOver = s.DestinationWindowOver }},
	{Name: "max_pending", Label: "Most payments waiting", Kind: "int", Help: "From 0 to 100.",
		get: func(r policy.Rules) string { return strconv.Itoa(r.MaxPending) }, take: func(d *policy.Rules, s policy.Rules) { d.MaxPending = s.MaxPending }},
	{Name: "approval_ttl_minutes", Label: "Approval lifetime (minutes)", Kind: "int", Help: "From 5 to 60.",
		get: func(r policy.Rules) string { return strconv.Itoa(r.ApprovalTTLMinutes) }, take: func(d *policy.Rules, s policy.Rules) { d.ApprovalTTLMinutes = s.ApprovalTTLMinutes }},
	{Name: "unknown_destination", Label: "Unknown destinations", Kind: "choice", Help: "ask: wait for you; decline: refuse.",
		get: func(r policy.Rules) string { return r.UnknownDestination }, take: func(d *policy.Rules, s policy.Rules) { d.UnknownDestination = s.UnknownDestination }},
	{Name: "trusted_destinations", Label: "Trusted destinations", Kind: "list", Help: "One host or *.domain per line; paid without asking.",
		get: func(r policy.Rules) string { return patternsText(r.TrustedDestinations) }, take: func(d *policy.Rules, s policy.Rules) { d.TrustedDestinations = s.TrustedDestinations }},
	{Name: "allowed_destinations", Label: "Allowed destinations", Kind: "list", Help: "One per line; known but not trusted: each payment waits for your approval.",
		get: func(r policy.Rules) string { return patternsText(r.AllowedDestinations) }, take: func(d *policy.Rules, s policy.Rules) { d.AllowedDestinations = s.AllowedDestinations }},
	{Name: "blocked_destinations", Label: "Blocked destinations", Kind: "list", Help: "One per line; never paid.",
		get: func(r policy.Rules) string { return patternsText(r.BlockedDestinations) }, take: func(d *policy.Rules, s policy.Rules) { d.BlockedDestinations = s.BlockedDestinations }},
	{Name: "valid_until", Label: "Valid until", Kind: "time", Help: "RFC 3339 time (2026-12-31T23:59:59Z) after which every payment is declined; empty for none.",
		get: func(r policy.Rules) string {
			if r.ValidUntil == nil {
				return ""
			}
			return r.ValidUntil.UTC().Format(time.RFC3339)
		}, take: func(d *policy.Rules, s policy.Rules) { d.ValidUntil = s.ValidUntil }},
}

// formField is a rule field with the value the form shows.
type formField struct {
	ruleField
	Value string
	// Problem is what to fix in this field, shown beside it; a field
	// with one is marked invalid for screen readers.
	Problem string
}

// fieldProblem words an error about a rule field for the form: by the
// field's label, with the line of a list counted from 1, and marks the
// field with it, so that the owner sees where to look.
func fieldProblem(param, message string, fields []formField) string {
	name, line := param, ""
	if i := strings.IndexByte(param, '['); i > 0 && strings.HasSuffix(param, "]") {
		if n, err := strconv.Atoi(param[i+1 : len(param)-1]); err == nil {
			name, line = param[:i], fmt.Sprintf("line %d ", n+1)
		}
	}
	for i := range fields {
		if fields[i].Name == name {
			fields[i].Problem = line + message
			if line != "" {
				return fields[i].Label + ", " + strings.TrimSpace(line) + ": " + message
			}
			return fields[i].Label + ": " + message
		}
	}
	return param + ": " + message
}

// formProblems words every refused field of the form, in the form's
// order, marking each: fixing one field at a time, sending the form again
// for each, is what the owner would otherwise do.
func formProblems(problems []policy.FieldError, fields []formField) string {
	order := func(param string) int {
		name, _, _ := strings.Cut(param, "[")
		for i, f := range fields {
			if f.Name == name {
				return i
			}
		}
		return len(fields)
	}
	sort.SliceStable(problems, func(i, j int) bool { return order(problems[i].Param) < order(problems[j].Param) })
	worded := make([]string, len(problems))
	for i, p := range problems {
		worded[i] = fieldProblem(p.Param, p.Message, fields)
	}
	if len(worded) == 1 {
		return worded[0]
	}
	return fmt.Sprintf("%d fields need fixing. %s.", len(worded), strings.Join(worded, "; "))
}

func fieldsOf(rules policy.Rules) []formField {
	out := make([]formField, len(ruleFields))
	for i, f := range ruleFields {
		out[i] = formField{ruleField: f, Value: f.get(rules)}
	}
	return out
}

// rulesFromForm reads the policy form; every field is sent, so the
// result is the whole new policy.
func rulesFromForm(r *request) (policy.Rules, []formField, []policy.FieldError) {
	vals := map[string]string{}
	fields := make([]formField, len(ruleFields))
	for i, f := range ruleFields {
		v := strings.TrimSpace(strings.ReplaceAll(form(r, f.Name), "\r\n", "\n"))
		vals[f.Name] = v
		fields[i] = formField{ruleField: f, Value: v}
	}
	str := func(name string) *string { v := vals[name]; return &v }
	optional := func(name string) policy.Nullable[string] {
		if vals[name] == "" {
			return policy.Nullable[string]{Set: true}
		}
		return policy.Nullable[string]{Set: true, Value: str(name)}
	}
	list := func(name string) *[]string {
		out := []string{}
		for _, l := range strings.Split(vals[name], "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return &out
	}
	var problems []policy.FieldError
	num := func(name string) *int {
		n, err := strconv.Atoi(vals[name])
		if err != nil {
			problems = append(problems, policy.FieldError{Param: name, Message: "must be a whole number"})
			return nil
		}
		return &n
	}
	in := policy.RulesInput{PerSpendLimit: str("per_spend_limit"), DailyCap: str("daily_cap"), MonthlyCap: str("monthly_cap"),
		LifetimeCap: optional("lifetime_cap"), ApprovalOver: str("approval_over"),
		DestinationWindowOver: optional("destination_window_over"), UnknownDestination: str("unknown_destination"),
		TrustedDestinations: list("trusted_destinations"), AllowedDestinations: list("allowed_destinations"),
		BlockedDestinations: list("blocked_destinations"), ValidUntil: optional("valid_until")}
	in.MaxPending, in.ApprovalTTLMinutes = num("max_pending"), num("approval_ttl_minutes")
	rules, more := in.ValidateAll(policy.DefaultRules())
	if problems = append(problems, more...); len(problems) > 0 {
		return policy.Rules{}, fields, problems
	}
	return rules, fields, nil
}

// ruleChange is one field a new version changes, and what that does.
type ruleChange struct {
	Label   string
	Old     string
	New     string
	Loosens bool
}

// classify lists the fields new changes from old, each marked as
// tightening (applies at once) or loosening (waits), by the same rule the
// engine applies to the whole version (policy.Loosens), asked of each
// field alone.
func classify(old, new policy.Rules) []ruleChange {
	var out []ruleChange
	for _, f := range ruleFields {
		if f.get(old) == f.get(new) {
			continue
		}
		one := old
		f.take(&one, new)
		out = append(out, ruleChange{Label: f.Label, Old: f.get(old), New: f.get(new), Loosens: policy.Loosens(old, one)})
	}
	return out
}

type agentPageData struct {
	Agent   actors.Agent
	Policy  policy.Policy
	Fields  []formField
	Pending *pendingView
	Done    string
	Error   string
}

type pendingView struct {
	Policy  policy.Policy
	Changes []ruleChange
}

func (c *Console) agentPage(r *request) error {
	return c.showAgent(r, 200, "", nil)
}

// showAgent renders the agent page, with the policy form holding fields
// (or the rules in effect) and problem above it.
func (c *Console) showAgent(r *request, status int, problem string, fields []formField) error {
	id := param(r, "id")
	ag, err := c.sys.Agent(r.who, id)
	if err != nil {
		return fromActors(err, "Agent not found")
	}
	pol, err := c.sys.Policy(r.who, id)
	if err != nil {
		return fromActors(err, "The agent's rules could not be read")
	}
	d := agentPageData{Agent: ag, Policy: pol, Fields: fields, Done: doneText(query(r, "done")), Error: problem}
	if d.Fields == nil {
		d.Fields = fieldsOf(pol.Rules)
	}
	if pend, ok, err := c.sys.PendingPolicy(r.who, id); err == nil && ok {
		d.Pending = &pendingView{Policy: pend, Changes: classify(pol.Rules, pend.Rules)}
	}
	c.render(r, status, "agent", "Agent "+ag.Name, "", d)
	return nil
}

type previewData struct {
	Agent    actors.Agent
	Fields   []formField
	Changes  []ruleChange
	Tightens bool
	Loosens  bool
	WaitsTil time.Time
	// Cancels is the waiting loosening this publish would cancel: a new
	// version in effect at once supersedes what waits (see the actors'
	// publish).
	Cancels *pendingView
}

// policyPreview shows what a new version changes before it is published.
func (c *Console) policyPreview(r *request) error {
	id := param(r, "id")
	ag, err := c.sys.Agent(r.who, id)
	if err != nil {
		return fromActors(err, "Agent not found")
	}
	rules, fields, problems := rulesFromForm(r)
	if len(problems) > 0 {
		return c.showAgent(r, 400, formProblems(problems, fields), fields)
	}
	pol, err := c.sys.Policy(r.who, id)
	if err != nil {
		return fromActors(err, "The agent's rules could not be read")
	}
	now := c.sys.EnvNow(r.who)
	if vu := rules.ValidUntil; vu != nil && !vu.After(now) && (pol.ValidUntil == nil || !vu.Equal(*pol.ValidUntil)) {
		// Refused here, where the form keeps what was typed, rather
		// than at publishing.
		return c.showAgent(r, 400, fieldProblem("valid_until", fmt.Sprintf("must be in the future (this environment's clock reads %s); to stop the agent's payments now, pause it.",
			now.UTC().Format(time.RFC3339)), fields), fields)
	}
	d := previewData{Agent: ag, Fields: fields, Changes: classify(pol.Rules, rules)}
	for _, ch := range d.Changes {
		d.Tightens = d.Tightens || !ch.Loosens
		d.Loosens = d.Loosens || ch.Loosens
	}
	if d.Loosens {
		d.WaitsTil = now.Add(c.sys.LoosenDelay())
	}
	if pend, ok, err := c.sys.PendingPolicy(r.who, id); err == nil && ok && d.Tightens {
		// Whatever tightens is published at once, and a version in effect
		// supersedes the loosening that waits: say so before the owner
		// loses it without a word.
		d.Cancels = &pendingView{Policy: pend, Changes: classify(pol.Rules, pend.Rules)}
	}
	return c.ok(r, "preview", "Review rule changes", d)
}

// policyPublish publishes the reviewed version.
func (c *Console) policyPublish(r *request) error {
	id := param(r, "id")
	rules, fields, problems := rulesFromForm(r)
	if len(problems) > 0 {
		return c.showAgent(r, 400, formProblems(problems, fields), fields)
	}
	pol, err := c.sys.Policy(r.who, id)
	if err != nil {
		return fromActors(err, "The agent's rules could not be read")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	publish := func(rs policy.Rules) error {
		_, err := c.sys.PublishPolicy(ctx, r.who, id, func(policy.Rules) (policy.Rules, *actors.Error) { return rs, nil }, nil)
		return err
	}
	loosens := policy.Loosens(pol.Rules, rules)
	// The engine splits a version that both tightens and loosens: the
	// tightening fields apply at once, as the review said, and the whole
	// version waits.
	if err := publish(rules); err != nil {
		if e := actors.AsError(err); e.Param != "" {
			// A value the rules refuse: back to the form, as typed.
			return c.showAgent(r, 400, fieldProblem(e.Param, e.Message, fields), fields)
		}
		return fromActors(err, "The rules were not published")
	}
	done := "policy"
	if loosens {
		done = "loosen"
	}
	return redirect(c.base + "/agents/" + id + "?done=" + done)
}

func (c *Console) policyCancel(r *request) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := c.sys.CancelPolicyChange(ctx, r.who, param(r, "id"))
	if err != nil {
		return fromActors(err, "The change was not cancelled")
	}
	return redirect(c.base + "/agents/" + pc.AgentID + "?done=cancel")
}
