package policy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Golden scenarios: testdata/scenarios/*.txt drive one agent through the
// spend state machine with the same calls the service makes (Decide,
// NewSpend, the Ledger and the Spend methods) and pin what comes out.
//
// A file is a sequence of steps. A step is a command line, a "----" line and
// the expected output, ended by a blank line. Lines starting with "#" and
// blank lines between steps are comments and are kept by -rewrite.
//
//	# an approved spend settles below its hold
//	spend id=s1 amount=4.00 dest=api.vendor.com
//	----
//	s1 approved hold=4.00 matched=api.vendor.com
//	next_action=check_status_later retryable=false
//	event spend.approved
//
// Commands (amounts are decimal strings, times RFC 3339, durations Go's):
//
//	policy key=value...   publish a new version on top of the current one;
//	                      keys are the policy body fields, lists are
//	                      comma-separated (trusted=, allowed=, blocked=) and
//	                      "null" removes lifetime_cap, destination_window_over
//	                      or valid_until
//	clock TIME            set the clock (never backwards)
//	advance DURATION      move the clock forward
//	pool [funds=A] [floor=A]  the owner's money and reserve floor
//	pause, resume         pause or resume the agent
//	spend id=ID amount=A dest=HOST
//	approve ID, reject ID the owner's answer to a pending spend
//	settle ID [price=A]   the rail paid (price defaults to the amount)
//	fail ID [code=C]      the rail refused
//	process ID            the rail gave no answer
//	cancel ID, expire ID  the agent cancels; the approval runs out
//	balance, ledger       read the balance and the counters
//	check dest=HOST [amount=A]
//
// A spend's output lists its state and the events the service emits for
// that transition. go test ./policy -run TestScenarios -rewrite regenerates
// every expected block; review the diff before keeping it.
var rewriteGolden = flag.Bool("rewrite", false, "rewrite the expected output of the golden files under testdata")

const scenarioSeparator = "----"

type scenarioStep struct {
	lead []string // comments and blank lines before the command
	cmd  string
	line int // 1-based line of the command
	want []string
}

// parseScenario splits a file into steps and the comment lines after the
// last one.
func parseScenario(text string) ([]scenarioStep, []string, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var steps []scenarioStep
	var lead []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			lead = append(lead, l)
			continue
		}
		st := scenarioStep{lead: lead, cmd: l, line: i + 1}
		lead = nil
		if i+1 >= len(lines) || lines[i+1] != scenarioSeparator {
			return nil, nil, fmt.Errorf("line %d: %q must be followed by a %q line", i+1, l, scenarioSeparator)
		}
		i += 2
		for ; i < len(lines) && lines[i] != ""; i++ {
			st.want = append(st.want, lines[i])
		}
		steps = append(steps, st)
	}
	return steps, lead, nil
}

func formatScenario(steps []scenarioStep, trailing []string) string {
	var out []string
	for _, st := range steps {
		out = append(out, st.lead...)
		out = append(out, st.cmd, scenarioSeparator)
		out = append(out, st.want...)
		out = append(out, "")
	}
	out = append(out, trailing...)
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n") + "\n"
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("found %d scenario files, want at least 6", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenarioFile(t, f) })
	}
}

func runScenarioFile(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	steps, trailing, err := parseScenario(string(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	w := newScenarioWorld()
	for i := range steps {
		st := &steps[i]
		got := w.exec(t, fmt.Sprintf("%s:%d", path, st.line), st.cmd)
		w.checkInvariants(t, fmt.Sprintf("%s:%d", path, st.line))
		if *rewriteGolden {
			st.want = got
			continue
		}
		if !slices.Equal(got, st.want) {
			t.Errorf("%s:%d: %s\n%s", path, st.line, st.cmd, lineDiff(st.want, got))
		}
	}
	if *rewriteGolden {
		if err := os.WriteFile(path, []byte(formatScenario(steps, trailing)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// lineDiff shows want and got as a unified-style diff of lines ("-" only in
// the file, "+" only in the output), from a longest common subsequence.
func lineDiff(want, got []string) string {
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			fmt.Fprintf(&b, "   %s\n", want[i])
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&b, "  -%s\n", want[i])
			i++
		default:
			fmt.Fprintf(&b, "  +%s\n", got[j])
			j++
		}
	}
	return "  (-want +got; run with -rewrite to accept)\n" + b.String()
}

// scenarioWorld is one agent and its owner's pool, as an agent actor keeps
// them, without persistence or concurrency.
type scenarioWorld struct {
	now     time.Time
	policy  Policy
	ledger  Ledger
	funds   Amount // the owner's money before holds
	floor   Amount
	paused  bool
	spends  map[string]*Spend
	ordered []string
}

func newScenarioWorld() *scenarioWorld {
	w := &scenarioWorld{
		now:    time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		funds:  amt("1000.00"),
		spends: map[string]*Spend{},
	}
	w.policy = NewPolicy("pol_scenario", "agt_scenario", 1, DefaultRules(), true, w.now, w.now)
	return w
}

// pool is what one spend sees: the funds minus every active hold.
func (w *scenarioWorld) pool() Pool {
	return Pool{Available: w.funds.Sub(w.ledger.Held()), ReserveFloor: w.floor}
}

type scenarioArgs struct {
	pos []string
	kv  map[string]string
}

func parseScenarioArgs(fields []string) scenarioArgs {
	a := scenarioArgs{kv: map[string]string{}}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			a.kv[k] = v
		} else {
			a.pos = append(a.pos, f)
		}
	}
	return a
}

func (w *scenarioWorld) exec(t *testing.T, where, cmd string) []string {
	t.Helper()
	fields := strings.Fields(cmd)
	args := parseScenarioArgs(fields[1:])
	bad := func(format string, v ...any) []string {
		t.Helper()
		t.Fatalf("%s: %s: %s", where, cmd, fmt.Sprintf(format, v...))
		return nil
	}
	amountArg := func(key string) Amount {
		t.Helper()
		a, err := ParseAmount(args.kv[key])
		if err != nil {
			bad("%s: %v", key, err)
		}
		return a
	}
	spendArg := func() *Spend {
		t.Helper()
		if len(args.pos) != 1 {
			bad("want one spend id")
		}
		sp, ok := w.spends[args.pos[0]]
		if !ok {
			bad("no spend %q", args.pos[0])
		}
		return sp
	}
	switch fields[0] {
	case "policy":
		return w.publish(t, where, cmd, args)
	case "clock":
		if len(args.pos) != 1 {
			bad("want one time")
		}
		at, err := time.Parse(time.RFC3339, args.pos[0])
		if err != nil {
			bad("%v", err)
		}
		if at.Before(w.now) {
			bad("the clock never goes back")
		}
		w.now = at.UTC()
		return []string{"now " + w.now.Format(time.RFC3339)}
	case "advance":
		if len(args.pos) != 1 {
			bad("want one duration")
		}
		d, err := time.ParseDuration(args.pos[0])
		if err != nil || d < 0 {
			bad("bad duration %q", args.pos[0])
		}
		w.now = w.now.Add(d)
		return []string{"now " + w.now.Format(time.RFC3339)}
	case "pool":
		if _, ok := args.kv["funds"]; ok {
			w.funds = amountArg("funds")
		}
		if _, ok := args.kv["floor"]; ok {
			w.floor = amountArg("floor")
		}
		return []string{fmt.Sprintf("pool funds=%s floor=%s available=%s", w.funds.Display(), w.floor.Display(), w.pool().Available.Display())}
	case "pause":
		w.paused = true
		return []string{"event agent.paused"}
	case "resume":
		w.paused = false
		return []string{"event agent.resumed"}
	case "spend":
		id, dest := args.kv["id"], args.kv["dest"]
		if id == "" {
			bad("missing id=")
		}
		if _, dup := w.spends[id]; dup {
			bad("spend %q exists", id)
		}
		req := Request{Amount: amountArg("amount"), Destination: dest,
			Resource: Resource{Host: dest, Path: "/", Method: "GET"}}
		d := Decide(&w.policy, &w.ledger, w.pool(), Subject{Paused: w.paused}, req, w.now)
		sp := NewSpend(NewSpendInput{ID: id, AgentID: w.policy.AgentID, Livemode: true, Request: req, Currency: "usdc"},
			&w.policy, d, w.now)
		if d.NewDestination {
			w.ledger.RecordAsked(d.Destination, w.now)
		}
		if sp.Status.Holds() {
			w.ledger.Reserve(sp, w.now)
		}
		w.spends[id] = sp
		w.ordered = append(w.ordered, id)
		out := describeSpend(sp)
		if d.NewDestination {
			out = append(out, "new_destination "+d.Destination)
		}
		out = append(out, "event "+sp.Status.EventType())
		if sp.Status == StatusPendingApproval {
			out = append(out, "event approval.requested")
		}
		return out
	case "approve":
		sp := spendArg()
		if sp.Status != StatusPendingApproval {
			return []string{fmt.Sprintf("error: %s is %s, nothing to approve", sp.ID, sp.Status)}
		}
		sp.Approve(w.now)
		w.ledger.Restatus(sp.ID, sp.Status)
		return append(describeSpend(sp), "event approval.decided", "event "+sp.Status.EventType())
	case "reject":
		sp := spendArg()
		if sp.Status != StatusPendingApproval {
			return []string{fmt.Sprintf("error: %s is %s, nothing to reject", sp.ID, sp.Status)}
		}
		sp.Decline(ReasonOwnerRejected, GateApproval, "The owner rejected the payment.", w.now)
		w.ledger.Release(sp.ID, w.now)
		return append(describeSpend(sp), "event approval.decided", "event "+sp.Status.EventType())
	case "settle":
		sp := spendArg()
		if !CanMove(sp.Status, StatusSettled) {
			return []string{fmt.Sprintf("error: %s is %s and cannot settle", sp.ID, sp.Status)}
		}
		price := sp.Amount
		if _, ok := args.kv["price"]; ok {
			price = amountArg("price")
		}
		if price.Cmp(sp.Amount) > 0 {
			return []string{fmt.Sprintf("error: price %s is above the amount %s", price.Display(), sp.Amount.Display())}
		}
		w.ledger.Settle(sp.ID, price, w.now)
		w.funds = w.funds.Sub(price)
		sp.Settle(RailOutcome{Status: RailSettled, Price: price, Network: "base-sepolia", Reference: "0x" + sp.ID},
			"rcp_"+sp.ID, w.now)
		return append(describeSpend(sp), "event "+sp.Status.EventType())
	case "fail":
		sp := spendArg()
		if !CanMove(sp.Status, StatusFailed) {
			return []string{fmt.Sprintf("error: %s is %s and cannot fail", sp.ID, sp.Status)}
		}
		code := args.kv["code"]
		if code == "" {
			code = "insufficient_funds"
		}
		w.ledger.Release(sp.ID, w.now)
		sp.Fail(RailOutcome{Status: RailRejected, ErrorCode: code, ErrorMessage: "refused by the rail"}, w.now)
		return append(describeSpend(sp), "event "+sp.Status.EventType())
	case "process":
		sp := spendArg()
		if !CanMove(sp.Status, StatusProcessing) {
			return []string{fmt.Sprintf("error: %s is %s and cannot be processing", sp.ID, sp.Status)}
		}
		sp.Processing(RailOutcome{Status: RailUnknown, ErrorCode: "timeout"}, w.now)
		w.ledger.Restatus(sp.ID, sp.Status)
		return append(describeSpend(sp), "event "+sp.Status.EventType())
	case "cancel":
		sp := spendArg()
		switch {
		case sp.Status == StatusCancelled:
			// Idempotent: the same spend, no new event.
			return append([]string{"(already cancelled)"}, describeSpend(sp)...)
		case sp.Status == StatusProcessing:
			return []string{"error: cancel_too_late (409): the payment was already sent"}
		case !CanMove(sp.Status, StatusCancelled):
			return []string{fmt.Sprintf("error: %s is %s and cannot be cancelled", sp.ID, sp.Status)}
		}
		sp.Cancel(w.now)
		w.ledger.Release(sp.ID, w.now)
		return append(describeSpend(sp), "event "+sp.Status.EventType())
	case "expire":
		sp := spendArg()
		if sp.Status != StatusPendingApproval {
			return []string{fmt.Sprintf("error: %s is %s and cannot expire", sp.ID, sp.Status)}
		}
		sp.Expire(w.now)
		w.ledger.Release(sp.ID, w.now)
		return append(describeSpend(sp), "event "+sp.Status.EventType())
	case "balance":
		b := ComputeBalance(w.policy.AgentID, &w.policy, &w.ledger, w.pool(), w.now)
		c := b.Components
		return []string{
			fmt.Sprintf("spendable=%s limiting_factor=%s", b.Spendable, b.LimitingFactor),
			fmt.Sprintf("pool_available=%s reserve_floor=%s daily_remaining=%s monthly_remaining=%s per_spend_limit=%s lifetime_remaining=%s",
				c.PoolAvailable, c.ReserveFloor, c.DailyRemaining, c.MonthlyRemaining, c.PerSpendLimit, nullText(c.LifetimeRemaining)),
			fmt.Sprintf("held=%s pending_count=%d", b.Held, b.PendingCount),
		}
	case "ledger":
		l := &w.ledger
		day := l.DayUsed(w.now) // rolls the windows to now first
		return []string{
			fmt.Sprintf("day=%s settled=%s used=%s", l.Day, l.DaySettled.Display(), day.Display()),
			fmt.Sprintf("month=%s settled=%s used=%s", l.Month, l.MonthSettled.Display(), l.MonthUsed(w.now).Display()),
			fmt.Sprintf("lifetime settled=%s used=%s", l.LifetimeSettled.Display(), l.LifetimeUsed().Display()),
			fmt.Sprintf("held=%s pending=%d asked_today=%d", l.Held().Display(), l.PendingCount(), len(l.Asked)),
		}
	case "check":
		var a *Amount
		if _, ok := args.kv["amount"]; ok {
			v := amountArg("amount")
			a = &v
		}
		w.ledger.DayUsed(w.now) // roll the windows first: only Check's own changes count
		before := snapLedger(t, &w.ledger)
		r := Check(&w.policy, &w.ledger, w.pool(), Subject{Paused: w.paused}, args.kv["dest"], a, w.now)
		if after := snapLedger(t, &w.ledger); after != before {
			t.Errorf("%s: check changed the ledger", where)
		}
		line := fmt.Sprintf("allowed=%v decision=%s reason=%s", r.Allowed, nullText(r.Decision), r.Reason)
		if r.MatchedRule != nil {
			line += " matched=" + *r.MatchedRule
		}
		out := []string{line}
		if r.Rule != nil {
			out = append(out, ruleLine(r.Rule))
		}
		return append(out, fmt.Sprintf("next_action=%s reserves_nothing=%v", r.NextAction.Code, r.ReservesNothing))
	}
	return bad("unknown command")
}

// publish validates a policy body on top of the current rules and applies
// it at once. The service delays a loosening by an hour and announces it
// with policy.change_requested first; here it takes effect immediately so a
// scenario can go on, but the output says it loosened.
func (w *scenarioWorld) publish(t *testing.T, where, cmd string, args scenarioArgs) []string {
	t.Helper()
	var in RulesInput
	str := func(k string) *string {
		if v, ok := args.kv[k]; ok {
			return &v
		}
		return nil
	}
	nullable := func(k string) Nullable[string] {
		v, ok := args.kv[k]
		switch {
		case !ok:
			return Nullable[string]{}
		case v == "null":
			return Nullable[string]{Set: true}
		default:
			return Nullable[string]{Set: true, Value: &v}
		}
	}
	strList := func(k string) *[]string {
		v, ok := args.kv[k]
		if !ok {
			return nil
		}
		out := []string{}
		if v != "" {
			out = strings.Split(v, ",")
		}
		return &out
	}
	num := func(k string) *int {
		v, ok := args.kv[k]
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: %s: %s: %v", where, cmd, k, err)
		}
		return &n
	}
	known := map[string]bool{"per_spend_limit": true, "daily_cap": true, "monthly_cap": true, "lifetime_cap": true,
		"trusted": true, "allowed": true, "blocked": true, "unknown_destination": true, "approval_over": true,
		"destination_window_over": true, "max_pending": true, "approval_ttl_minutes": true, "valid_until": true}
	for k := range args.kv {
		if !known[k] {
			t.Fatalf("%s: %s: unknown policy key %q", where, cmd, k)
		}
	}
	in.PerSpendLimit, in.DailyCap, in.MonthlyCap = str("per_spend_limit"), str("daily_cap"), str("monthly_cap")
	in.LifetimeCap = nullable("lifetime_cap")
	in.TrustedDestinations, in.AllowedDestinations, in.BlockedDestinations = strList("trusted"), strList("allowed"), strList("blocked")
	in.UnknownDestination, in.ApprovalOver = str("unknown_destination"), str("approval_over")
	in.DestinationWindowOver = nullable("destination_window_over")
	in.MaxPending, in.ApprovalTTLMinutes = num("max_pending"), num("approval_ttl_minutes")
	in.ValidUntil = nullable("valid_until")

	r, ferr := in.Validate(w.policy.Rules)
	if ferr != nil {
		return []string{"error: " + ferr.Error()}
	}
	loosens := Loosens(w.policy.Rules, r)
	w.policy = NewPolicy(w.policy.ID, w.policy.AgentID, w.policy.Version+1, r, true, w.now, w.now)
	out := []string{fmt.Sprintf("version=%d loosens=%v hash=%s", w.policy.Version, loosens, w.policy.Hash[:19])}
	if loosens {
		out = append(out, "event policy.change_requested")
	}
	return append(out, "event policy.updated")
}

func describeSpend(sp *Spend) []string {
	head := sp.ID + " " + string(sp.Status)
	if sp.DeclineReason != nil {
		head += " reason=" + *sp.DeclineReason
		if sp.DeclinedAtGate != nil && *sp.DeclinedAtGate != GateCreate {
			head += " gate=" + *sp.DeclinedAtGate
		}
	}
	if sp.ApprovalReason != nil {
		head += " approval_reason=" + *sp.ApprovalReason
	}
	if sp.Hold != nil {
		head += " hold=" + sp.Hold.Amount.Display()
	}
	if sp.AmountSettled != nil {
		head += " settled=" + sp.AmountSettled.Display()
	}
	if sp.DestinationRule != nil {
		head += " matched=" + *sp.DestinationRule
	}
	out := []string{head}
	if sp.RailError != nil {
		out = append(out, fmt.Sprintf("failure_reason=%s rail_error=%s", strOrNil(sp.FailureReason), sp.RailError.Code))
	}
	if sp.ProcessingDetail != nil {
		out = append(out, "processing_detail="+sp.ProcessingDetail.Code)
	}
	if sp.Rule != nil {
		out = append(out, ruleLine(sp.Rule))
	}
	return append(out, fmt.Sprintf("next_action=%s retryable=%v", sp.NextAction.Code, sp.Retryable))
}

func ruleLine(r *RuleDetail) string {
	s := fmt.Sprintf("rule %s limit=%s spent=%s requested=%s remaining=%s", r.Name, r.Limit, r.Spent, r.Requested, r.Remaining)
	if r.ResetsAt != nil {
		s += " resets_at=" + r.ResetsAt.Format(time.RFC3339)
	}
	return s
}

func nullText(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// checkInvariants holds after every command: the ledger's holds are exactly
// the holds of the active spends, and nothing outside the active states
// holds anything.
func (w *scenarioWorld) checkInvariants(t *testing.T, where string) {
	t.Helper()
	var sum Amount
	pending := 0
	for _, id := range w.ordered {
		sp := w.spends[id]
		h, inLedger := w.ledger.Holds[id]
		if sp.Status.Holds() != (sp.Hold != nil) {
			t.Errorf("%s: %s is %s with hold %+v", where, id, sp.Status, sp.Hold)
		}
		if sp.Status.Holds() != inLedger {
			t.Errorf("%s: %s is %s, ledger hold present=%v", where, id, sp.Status, inLedger)
		}
		if inLedger && (h.Status != sp.Status || sp.Hold == nil || !h.Amount.Equal(sp.Hold.Amount)) {
			t.Errorf("%s: ledger hold %+v does not match spend %s (%s, %+v)", where, h, id, sp.Status, sp.Hold)
		}
		if sp.Hold != nil {
			sum = sum.Add(sp.Hold.Amount)
		}
		if sp.Status == StatusPendingApproval {
			pending++
		}
	}
	for id := range w.ledger.Holds {
		if _, ok := w.spends[id]; !ok {
			t.Errorf("%s: the ledger holds for unknown spend %q", where, id)
		}
	}
	if !w.ledger.Held().Equal(sum) || w.ledger.PendingCount() != pending {
		t.Errorf("%s: ledger held %s pending %d, spends hold %s pending %d",
			where, w.ledger.Held().Display(), w.ledger.PendingCount(), sum.Display(), pending)
	}
}

func TestScenarioParseAndFormatRoundTrip(t *testing.T) {
	text := "# head\n\nclock 2026-11-22T10:00:00Z\n----\nnow x\n\n# mid\nbalance\n----\na\nb\n\n# tail\n"
	steps, trailing, err := parseScenario(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[1].cmd != "balance" || !slices.Equal(steps[1].want, []string{"a", "b"}) ||
		steps[1].line != 8 || !slices.Equal(steps[0].lead, []string{"# head", ""}) {
		t.Fatalf("parsed %+v", steps)
	}
	if got := formatScenario(steps, trailing); got != text {
		t.Fatalf("round trip:\n%q\n%q", got, text)
	}
	if _, _, err := parseScenario("balance\nspendable\n"); err == nil {
		t.Fatal("a command without a separator was accepted")
	}
	d := lineDiff([]string{"a", "b", "c"}, []string{"a", "x", "c"})
	if !strings.Contains(d, "  -b\n") || !strings.Contains(d, "  +x\n") || !strings.Contains(d, "   a\n") {
		t.Fatalf("diff:\n%s", d)
	}
}
