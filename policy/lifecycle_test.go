package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// specSpendKeys are the fields of spec 2.1 that the stored spend carries.
// The spec's two per-response fields, request_id and idempotent_replay, are
// spliced in by the transport for each reply and are not part of the stored
// object.
var specSpendKeys = []string{
	"id", "object", "agent_id", "livemode", "status", "amount", "amount_settled", "currency",
	"destination", "destination_rule", "resource", "memo", "client_reference", "policy_version",
	"decline_reason", "declined_at_gate", "pause_detail", "approval_reason", "approval", "hold",
	"settlement", "failure_reason", "rail_error", "processing_detail", "rule", "sandbox", "message",
	"next_action", "retryable", "created_at", "updated_at",
}

// nullableSpendKeys are the fields spec 2.1 types as "... or null".
var nullableSpendKeys = []string{
	"amount_settled", "destination_rule", "client_reference", "decline_reason", "declined_at_gate",
	"pause_detail", "approval_reason", "approval", "hold", "settlement", "failure_reason", "rail_error",
	"processing_detail", "rule", "sandbox",
}

func spendJSON(t *testing.T, s *Spend) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkSpendJSON asserts the exact key set of spec 2.1 and that, of the
// nullable fields, exactly those in set are non-null.
func checkSpendJSON(t *testing.T, s *Spend, set ...string) {
	t.Helper()
	m := spendJSON(t, s)
	want := slices.Sorted(slices.Values(specSpendKeys))
	if got := sortedKeys(m); !reflect.DeepEqual(got, want) {
		t.Errorf("spend JSON keys:\n got %v\nwant %v", got, want)
	}
	var wantNull, gotNull []string
	for _, k := range nullableSpendKeys {
		if !slices.Contains(set, k) {
			wantNull = append(wantNull, k)
		}
	}
	for _, k := range slices.Sorted(slices.Values(specSpendKeys)) {
		if string(m[k]) == "null" {
			gotNull = append(gotNull, k)
		}
	}
	slices.Sort(wantNull)
	if !reflect.DeepEqual(gotNull, wantNull) {
		t.Errorf("%s spend: null fields\n got %v\nwant %v", s.Status, gotNull, wantNull)
	}
}

func objectKeys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not an object: %v", raw, err)
	}
	return sortedKeys(m)
}

var lifeInput = NewSpendInput{
	ID: "spd_0123456789abcdef0123456789abcdef", AgentID: "agt_00000000000000000000000000000001",
	OwnerID: "own_1", Livemode: true, Currency: "usdc", Memo: "one report",
	IdempotencyKey: "key-1", Fingerprint: "fp-1", Nonce: "feedfacefeedfacefeedfacefeedface",
	Request: Request{Resource: Resource{Host: "api.vendor.com", Path: "/report?id=7", Method: "GET"}},
}

// newLifeSpend decides a request in a scene and registers the spend.
func newLifeSpend(t *testing.T, scene func(s *decideScene), livemode bool) (*Spend, Decision, *Policy) {
	t.Helper()
	s := newScene()
	if scene != nil {
		scene(s)
	}
	d, _ := s.run(t)
	p := fixPolicy(s.rules)
	in := lifeInput
	in.Livemode = livemode
	in.Request.Amount = amt(s.amount)
	in.Request.Destination = s.dest
	return NewSpend(in, p, d, s.now), d, p
}

func approvedLifeSpend(t *testing.T) *Spend {
	t.Helper()
	sp, _, _ := newLifeSpend(t, nil, true)
	if sp.Status != StatusApproved {
		t.Fatalf("fixture spend is %s", sp.Status)
	}
	return sp
}

func pendingLifeSpend(t *testing.T) *Spend {
	t.Helper()
	sp, _, _ := newLifeSpend(t, func(s *decideScene) { s.amount = "6.00" }, true)
	if sp.Status != StatusPendingApproval {
		t.Fatalf("fixture spend is %s", sp.Status)
	}
	return sp
}

// declineAdvice is what an agent is told after each create-time decline.
// Rule declines are final for this attempt (do_not_retry); an empty pool or
// a full approval queue can clear by themselves, so a new attempt with a new
// key makes sense.
var declineAdvice = map[string]struct {
	code      string
	retryable bool
}{
	ReasonAgentPaused:             {NextDoNotRetry, false},
	ReasonPolicyExpired:           {NextDoNotRetry, false},
	ReasonDestinationNotAllowed:   {NextDoNotRetry, false},
	ReasonPerSpendLimit:           {NextDoNotRetry, false},
	ReasonDailyCap:                {NextDoNotRetry, false},
	ReasonMonthlyCap:              {NextDoNotRetry, false},
	ReasonLifetimeCap:             {NextDoNotRetry, false},
	ReasonUnknownDestinationLimit: {NextDoNotRetry, false},
	ReasonInsufficientFunds:       {NextNewAttemptNewKey, true},
	ReasonMaxPending:              {NextNewAttemptNewKey, true},
}

// Every decision of the rule table becomes a spend with exactly the fields
// its outcome calls for.
func TestNewSpendForEveryDecision(t *testing.T) {
	for _, c := range decideCases() {
		t.Run(c.name, func(t *testing.T) {
			sp, d, p := newLifeSpend(t, c.scene, true)
			if sp.Status != d.Outcome {
				t.Fatalf("status %s, decision %s", sp.Status, d.Outcome)
			}
			// Copied from the request, the policy and the decision.
			if sp.ID != lifeInput.ID || sp.Object != "spend" || sp.AgentID != lifeInput.AgentID || sp.OwnerID != "own_1" ||
				!sp.Livemode || sp.Currency != "usdc" || sp.Memo != "one report" || sp.Resource != lifeInput.Request.Resource ||
				sp.IdempotencyKey != "key-1" || sp.Fingerprint != "fp-1" || sp.Nonce != lifeInput.Nonce {
				t.Errorf("request fields not copied: %+v", sp)
			}
			if sp.PolicyVersion != 3 || sp.PolicyHash != p.Hash || !strings.HasPrefix(sp.PolicyHash, "sha256:") {
				t.Errorf("policy_version %d hash %q, want 3 and %q", sp.PolicyVersion, sp.PolicyHash, p.Hash)
			}
			if sp.Destination != d.Destination || sp.Message != d.Message || sp.Rule != d.Rule ||
				strOrNil(sp.DestinationRule) != strOrNil(d.MatchedRule) {
				t.Errorf("decision fields not copied: dest %q rule %v matched %s", sp.Destination, sp.Rule, strOrNil(sp.DestinationRule))
			}
			if sp.CreatedAt.Location() != time.UTC || !sp.UpdatedAt.Equal(sp.CreatedAt) {
				t.Errorf("created_at %v updated_at %v: want equal, in UTC", sp.CreatedAt, sp.UpdatedAt)
			}
			if sp.AmountSettled != nil || sp.Settlement != nil || sp.FailureReason != nil || sp.RailError != nil ||
				sp.ProcessingDetail != nil || sp.Approval != nil || sp.PauseDetail != nil || sp.Sandbox != nil {
				t.Errorf("a new live spend has outcome fields set: %+v", sp)
			}
			switch sp.Status {
			case StatusDeclined:
				if strOrNil(sp.DeclineReason) != d.Reason || strOrNil(sp.DeclinedAtGate) != GateCreate {
					t.Errorf("decline_reason %s declined_at_gate %s", strOrNil(sp.DeclineReason), strOrNil(sp.DeclinedAtGate))
				}
				if sp.Hold != nil || sp.ApprovalReason != nil {
					t.Errorf("declined spend with hold %+v approval_reason %s", sp.Hold, strOrNil(sp.ApprovalReason))
				}
				adv, ok := declineAdvice[d.Reason]
				if !ok {
					t.Fatalf("no advice known for %s", d.Reason)
				}
				if sp.NextAction.Code != adv.code || sp.Retryable != adv.retryable {
					t.Errorf("next_action %s retryable %v, want %s %v", sp.NextAction.Code, sp.Retryable, adv.code, adv.retryable)
				}
			case StatusPendingApproval:
				if strOrNil(sp.ApprovalReason) != d.ApprovalReason {
					t.Errorf("approval_reason %s, want %s", strOrNil(sp.ApprovalReason), d.ApprovalReason)
				}
				if sp.Hold == nil || !sp.Hold.Amount.Equal(sp.Amount) || sp.Hold.ExpiresAt != nil {
					t.Errorf("hold %+v, want the amount %s", sp.Hold, sp.Amount)
				}
				if sp.NextAction.Code != NextWaitForOwner || sp.NextAction.CheckWith != CheckWithGetSpend || sp.Retryable {
					t.Errorf("next_action %+v retryable %v", sp.NextAction, sp.Retryable)
				}
				if sp.DeclineReason != nil || sp.DeclinedAtGate != nil || sp.Rule != nil {
					t.Errorf("pending spend has decline fields")
				}
			case StatusApproved:
				if sp.Hold == nil || !sp.Hold.Amount.Equal(sp.Amount) {
					t.Errorf("hold %+v, want the amount %s", sp.Hold, sp.Amount)
				}
				if sp.NextAction.Code != NextCheckLater || sp.NextAction.CheckWith != CheckWithGetSpend || sp.Retryable {
					t.Errorf("next_action %+v retryable %v", sp.NextAction, sp.Retryable)
				}
				if sp.DeclineReason != nil || sp.DeclinedAtGate != nil || sp.ApprovalReason != nil || sp.Rule != nil {
					t.Errorf("approved spend has decline or approval fields")
				}
			}
		})
	}
}

func TestNewSpendCapDeclineSuggestsTheReset(t *testing.T) {
	sp, _, _ := newLifeSpend(t, func(s *decideScene) {
		s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "50.00", fixNow) })
	}, true)
	if strOrNil(sp.DeclineReason) != ReasonDailyCap {
		t.Fatalf("decline_reason %s", strOrNil(sp.DeclineReason))
	}
	if !slices.ContainsFunc(sp.NextAction.Suggestions, func(s string) bool { return strings.Contains(s, "2026-11-23T00:00:00Z") }) {
		t.Errorf("suggestions %q do not say when the cap resets", sp.NextAction.Suggestions)
	}
}

func TestNewSpendJSONShapes(t *testing.T) {
	t.Run("approved", func(t *testing.T) {
		sp := approvedLifeSpend(t)
		checkSpendJSON(t, sp, "destination_rule", "hold")
		m := spendJSON(t, sp)
		if got := objectKeys(t, m["hold"]); !reflect.DeepEqual(got, []string{"amount", "expires_at"}) {
			t.Errorf("hold keys %v", got)
		}
		if got := objectKeys(t, m["resource"]); !reflect.DeepEqual(got, []string{"host", "method", "path"}) {
			t.Errorf("resource keys %v", got)
		}
		if string(m["amount"]) != `"1.00"` || string(m["status"]) != `"approved"` || string(m["object"]) != `"spend"` {
			t.Errorf("amount %s status %s object %s", m["amount"], m["status"], m["object"])
		}
		if string(m["created_at"]) != `"2026-11-22T10:00:00Z"` {
			t.Errorf("created_at %s", m["created_at"])
		}
		for _, hidden := range []string{"own_1", "key-1", "fp-1", lifeInput.Nonce} {
			b, _ := json.Marshal(sp)
			if strings.Contains(string(b), hidden) {
				t.Errorf("internal value %q leaks into the spend JSON", hidden)
			}
		}
	})
	t.Run("pending", func(t *testing.T) {
		checkSpendJSON(t, pendingLifeSpend(t), "destination_rule", "approval_reason", "hold")
	})
	t.Run("declined by a cap", func(t *testing.T) {
		sp, _, _ := newLifeSpend(t, func(s *decideScene) { s.amount = "10.50" }, true)
		checkSpendJSON(t, sp, "destination_rule", "decline_reason", "declined_at_gate", "rule")
		m := spendJSON(t, sp)
		want := []string{"limit", "name", "remaining", "requested", "resets_at", "scope", "spent"}
		if got := objectKeys(t, m["rule"]); !reflect.DeepEqual(got, want) {
			t.Errorf("rule keys %v, want %v", got, want)
		}
		if string(m["declined_at_gate"]) != `"create"` || string(m["decline_reason"]) != `"per_spend_limit"` {
			t.Errorf("declined_at_gate %s decline_reason %s", m["declined_at_gate"], m["decline_reason"])
		}
	})
	t.Run("declined destination", func(t *testing.T) {
		sp, _, _ := newLifeSpend(t, func(s *decideScene) { s.dest = "127.0.0.1" }, true)
		checkSpendJSON(t, sp, "decline_reason", "declined_at_gate")
	})
	t.Run("client reference", func(t *testing.T) {
		s := newScene()
		d, _ := s.run(t)
		in := lifeInput
		ref := "order-77"
		in.ClientReference = &ref
		in.Request.Amount, in.Request.Destination = amt("1.00"), s.dest
		sp := NewSpend(in, fixPolicy(s.rules), d, fixNow)
		checkSpendJSON(t, sp, "destination_rule", "hold", "client_reference")
	})
	t.Run("practice", func(t *testing.T) {
		sp, _, _ := newLifeSpend(t, nil, false)
		checkSpendJSON(t, sp, "destination_rule", "hold", "sandbox")
		if sp.Sandbox == nil || !sp.Sandbox.SimulatedVendor || sp.Sandbox.Forced != "" {
			t.Errorf("sandbox %+v, want simulated_vendor true", sp.Sandbox)
		}
	})
}

func TestNewSpendKeepsTheCallersScale(t *testing.T) {
	sp, _, _ := newLifeSpend(t, func(s *decideScene) { s.amount = "1.5" }, true)
	if m := spendJSON(t, sp); string(m["amount"]) != `"1.5"` {
		t.Errorf("amount %s, want the caller's \"1.5\"", m["amount"])
	}
}

func TestNewSpendStoresUTC(t *testing.T) {
	s := newScene()
	d, _ := s.run(t)
	in := lifeInput
	in.Request.Amount, in.Request.Destination = amt("1.00"), s.dest
	sp := NewSpend(in, fixPolicy(s.rules), d, fixNow.In(time.FixedZone("UTC-5", -5*3600)))
	if m := spendJSON(t, sp); string(m["created_at"]) != `"2026-11-22T10:00:00Z"` || string(m["updated_at"]) != `"2026-11-22T10:00:00Z"` {
		t.Errorf("created_at %s updated_at %s, want UTC", m["created_at"], m["updated_at"])
	}
}

var (
	lifeLater   = fixNow.Add(90 * time.Second)
	lifeReceipt = "rcp_00000000000000000000000000000009"
	lifeResult  = &VendorResult{HTTPStatus: 200, ContentType: "application/json", Body: `{"ok":true}`,
		BodySHA256: "sha256:4062edaf750fb8074e7e83e0c9028c94e32468a8b6f1614774328ef045150f93"}
	lifeSettled  = RailOutcome{Status: RailSettled, Price: amt("0.75"), Network: "base-sepolia", Reference: "0xfeed", Result: lifeResult}
	lifeRejected = RailOutcome{Status: RailRejected, ErrorCode: "insufficient_funds", ErrorMessage: "the payer's balance is too low"}
	lifeUnknown  = RailOutcome{Status: RailUnknown, ErrorCode: "timeout", ErrorMessage: "no answer in 30s"}
)

// Every way out of an active state: status, the fields the spec names for
// it, and no hold afterwards.
func TestSpendExits(t *testing.T) {
	approved := func(t *testing.T) *Spend { return approvedLifeSpend(t) }
	pending := func(t *testing.T) *Spend { return pendingLifeSpend(t) }
	processing := func(t *testing.T) *Spend {
		sp := approvedLifeSpend(t)
		sp.Processing(lifeUnknown, fixNow.Add(time.Second))
		return sp
	}
	settle := func(sp *Spend) { sp.Settle(lifeSettled, lifeReceipt, lifeLater) }
	fail := func(sp *Spend) { sp.Fail(lifeRejected, lifeLater) }

	checkSettled := func(t *testing.T, sp *Spend) {
		if sp.AmountSettled == nil || sp.AmountSettled.String() != "0.75" {
			t.Errorf("amount_settled %v, want 0.75", sp.AmountSettled)
		}
		want := Settlement{Mode: "service_executes_x402", Status: "settled", Network: strPtr("base-sepolia"),
			Reference: strPtr("0xfeed"), ReceiptID: strPtr(lifeReceipt), Result: lifeResult}
		if sp.Settlement == nil || !reflect.DeepEqual(*sp.Settlement, want) {
			t.Errorf("settlement %+v, want %+v", sp.Settlement, want)
		}
		m := spendJSON(t, sp)
		var st map[string]json.RawMessage
		_ = json.Unmarshal(m["settlement"], &st)
		if got := sortedKeys(st); !reflect.DeepEqual(got, []string{"mode", "network", "receipt_id", "reference", "result", "status"}) {
			t.Errorf("settlement keys %v", got)
		}
		wantResult := []string{"body", "body_sha256", "body_truncated", "content_type", "http_status"}
		if got := objectKeys(t, st["result"]); !reflect.DeepEqual(got, wantResult) {
			t.Errorf("settlement.result keys %v", got)
		}
		if sp.NextAction.Code != NextNone || sp.Retryable || sp.FailureReason != nil || sp.RailError != nil {
			t.Errorf("next_action %+v retryable %v failure %s", sp.NextAction, sp.Retryable, strOrNil(sp.FailureReason))
		}
	}
	checkFailed := func(t *testing.T, sp *Spend) {
		if strOrNil(sp.FailureReason) != "rail_error" {
			t.Errorf("failure_reason %s, want rail_error", strOrNil(sp.FailureReason))
		}
		if sp.RailError == nil || *sp.RailError != (RailError{Code: "insufficient_funds", Message: "the payer's balance is too low"}) {
			t.Errorf("rail_error %+v", sp.RailError)
		}
		if sp.Settlement == nil || sp.Settlement.Mode != SettlementMode || sp.Settlement.Status != "failed" ||
			sp.Settlement.ReceiptID != nil || sp.Settlement.Reference != nil || sp.Settlement.Result != nil {
			t.Errorf("settlement %+v, want a failed one with no receipt, reference or result", sp.Settlement)
		}
		if got := objectKeys(t, spendJSON(t, sp)["rail_error"]); !reflect.DeepEqual(got, []string{"code", "message"}) {
			t.Errorf("rail_error keys %v", got)
		}
		// A new attempt needs a new key: the old one replays this failure.
		if sp.AmountSettled != nil || sp.NextAction.Code != NextNewAttemptNewKey || !sp.Retryable {
			t.Errorf("amount_settled %v next_action %s retryable %v", sp.AmountSettled, sp.NextAction.Code, sp.Retryable)
		}
	}
	checkReleased := func(t *testing.T, sp *Spend) {
		if sp.NextAction.Code != NextNewAttemptNewKey || !sp.Retryable || sp.AmountSettled != nil || sp.Settlement != nil {
			t.Errorf("next_action %s retryable %v amount_settled %v settlement %+v",
				sp.NextAction.Code, sp.Retryable, sp.AmountSettled, sp.Settlement)
		}
	}

	cases := []struct {
		name  string
		start func(t *testing.T) *Spend
		act   func(sp *Spend)
		want  Status
		set   []string // non-null nullable fields after the exit
		check func(t *testing.T, sp *Spend)
	}{
		{"approved settles", approved, settle, StatusSettled,
			[]string{"destination_rule", "amount_settled", "settlement"}, checkSettled},
		{"processing settles", processing, settle, StatusSettled,
			[]string{"destination_rule", "amount_settled", "settlement"}, checkSettled},
		{"approved fails", approved, fail, StatusFailed,
			[]string{"destination_rule", "settlement", "failure_reason", "rail_error"}, checkFailed},
		{"processing fails", processing, fail, StatusFailed,
			[]string{"destination_rule", "settlement", "failure_reason", "rail_error"}, checkFailed},
		{"pending is cancelled", pending, func(sp *Spend) { sp.Cancel(lifeLater) }, StatusCancelled,
			[]string{"destination_rule", "approval_reason"}, checkReleased},
		{"approved is cancelled", approved, func(sp *Spend) { sp.Cancel(lifeLater) }, StatusCancelled,
			[]string{"destination_rule"}, checkReleased},
		{"pending expires", pending, func(sp *Spend) { sp.Expire(lifeLater) }, StatusExpired,
			[]string{"destination_rule", "approval_reason"}, checkReleased},
		{"pending with an approval expires", func(t *testing.T) *Spend {
			sp := pendingLifeSpend(t)
			sp.Approval = &ApprovalSummary{ID: "apr_1", Status: "pending", ExpiresAt: fixNow.Add(15 * time.Minute)}
			return sp
		}, func(sp *Spend) { sp.Expire(lifeLater) }, StatusExpired,
			[]string{"destination_rule", "approval_reason", "approval"}, func(t *testing.T, sp *Spend) {
				checkReleased(t, sp)
				if sp.Approval.Status == "pending" {
					t.Errorf("an expired spend still shows its approval as pending")
				}
			}},
		{"owner rejects", pending, func(sp *Spend) {
			sp.Decline(ReasonOwnerRejected, GateApproval, "The owner rejected the payment.", lifeLater)
		}, StatusDeclined, []string{"destination_rule", "approval_reason", "decline_reason", "declined_at_gate"},
			func(t *testing.T, sp *Spend) {
				if strOrNil(sp.DeclineReason) != ReasonOwnerRejected || strOrNil(sp.DeclinedAtGate) != GateApproval ||
					sp.Message != "The owner rejected the payment." || sp.NextAction.Code != NextDoNotRetry || sp.Retryable {
					t.Errorf("decline %s at %s, message %q, next %s retryable %v", strOrNil(sp.DeclineReason),
						strOrNil(sp.DeclinedAtGate), sp.Message, sp.NextAction.Code, sp.Retryable)
				}
			}},
		{"rules changed before sending", approved, func(sp *Spend) {
			sp.Decline(ReasonPolicyChanged, GateSettle, "The owner changed the rules.", lifeLater)
		}, StatusDeclined, []string{"destination_rule", "decline_reason", "declined_at_gate"},
			func(t *testing.T, sp *Spend) {
				if strOrNil(sp.DeclineReason) != ReasonPolicyChanged || strOrNil(sp.DeclinedAtGate) != GateSettle {
					t.Errorf("decline %s at %s", strOrNil(sp.DeclineReason), strOrNil(sp.DeclinedAtGate))
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp := c.start(t)
			created := sp.CreatedAt
			c.act(sp)
			if sp.Status != c.want {
				t.Fatalf("status %s, want %s", sp.Status, c.want)
			}
			if sp.Hold != nil {
				t.Errorf("hold %+v left after leaving the active states", sp.Hold)
			}
			if sp.ProcessingDetail != nil {
				t.Errorf("processing_detail %+v left on a %s spend", sp.ProcessingDetail, sp.Status)
			}
			if !sp.UpdatedAt.Equal(lifeLater) || !sp.CreatedAt.Equal(created) {
				t.Errorf("created_at %v updated_at %v", sp.CreatedAt, sp.UpdatedAt)
			}
			if sp.Message == "" {
				t.Error("empty message")
			}
			checkSpendJSON(t, sp, c.set...)
			c.check(t, sp)
		})
	}
}

func TestSpendProcessingKeepsTheHold(t *testing.T) {
	sp := approvedLifeSpend(t)
	sp.Processing(lifeUnknown, lifeLater.In(time.FixedZone("UTC+1", 3600)))
	if sp.Status != StatusProcessing {
		t.Fatalf("status %s", sp.Status)
	}
	if sp.Hold == nil || !sp.Hold.Amount.Equal(amt("1.00")) {
		t.Errorf("hold %+v: the money may have moved, so the allowance stays reserved", sp.Hold)
	}
	if sp.ProcessingDetail == nil || sp.ProcessingDetail.Code != "outcome_unknown" || sp.ProcessingDetail.Message == "" ||
		!sp.ProcessingDetail.Since.Equal(lifeLater) || sp.ProcessingDetail.Since.Location() != time.UTC {
		t.Errorf("processing_detail %+v, want code outcome_unknown since %v UTC", sp.ProcessingDetail, lifeLater)
	}
	if sp.Settlement == nil || sp.Settlement.Status != "processing" || sp.Settlement.Mode != SettlementMode {
		t.Errorf("settlement %+v", sp.Settlement)
	}
	if sp.NextAction.Code != NextCheckLater || sp.NextAction.CheckWith != CheckWithGetSpend || sp.Retryable {
		t.Errorf("next_action %+v retryable %v: the service verifies, the agent must not resend", sp.NextAction, sp.Retryable)
	}
	if sp.AmountSettled != nil || sp.FailureReason != nil {
		t.Errorf("processing spend with amount_settled %v failure %s", sp.AmountSettled, strOrNil(sp.FailureReason))
	}
	checkSpendJSON(t, sp, "destination_rule", "hold", "settlement", "processing_detail")
	if got := objectKeys(t, spendJSON(t, sp)["processing_detail"]); !reflect.DeepEqual(got, []string{"code", "message", "since"}) {
		t.Errorf("processing_detail keys %v", got)
	}
}

func TestSpendApproveKeepsTheHold(t *testing.T) {
	sp := pendingLifeSpend(t)
	sp.Approve(lifeLater)
	if sp.Status != StatusApproved || sp.Hold == nil || !sp.Hold.Amount.Equal(amt("6.00")) {
		t.Fatalf("status %s hold %+v", sp.Status, sp.Hold)
	}
	if sp.NextAction.Code != NextCheckLater || strOrNil(sp.ApprovalReason) != ApprovalOverReason || !sp.UpdatedAt.Equal(lifeLater) {
		t.Errorf("next_action %s approval_reason %s updated_at %v", sp.NextAction.Code, strOrNil(sp.ApprovalReason), sp.UpdatedAt)
	}
	checkSpendJSON(t, sp, "destination_rule", "approval_reason", "hold")
}

// The practice rail marks what it forced; spec part 3: 99.00 fails with
// rail_error insufficient_funds and sandbox.forced magic_amount.
func TestSpendPracticeMarkers(t *testing.T) {
	sp, _, _ := newLifeSpend(t, func(s *decideScene) {
		s.rules.PerSpendLimit, s.rules.ApprovalOver = amt("100.00"), amt("100.00")
		s.rules.DailyCap = amt("100.00")
		s.amount = "99.00"
	}, false)
	sp.Fail(RailOutcome{Status: RailRejected, ErrorCode: "insufficient_funds", ErrorMessage: "forced",
		Simulated: true, Forced: "magic_amount"}, lifeLater)
	if sp.Sandbox == nil || !sp.Sandbox.SimulatedVendor || sp.Sandbox.Forced != "magic_amount" {
		t.Fatalf("sandbox %+v", sp.Sandbox)
	}
	m := spendJSON(t, sp)
	var sb map[string]any
	_ = json.Unmarshal(m["sandbox"], &sb)
	if sb["forced"] != "magic_amount" || sb["simulated_vendor"] != true {
		t.Errorf("sandbox JSON %s", m["sandbox"])
	}
	if sp.RailError.Code != "insufficient_funds" {
		t.Errorf("rail_error %+v", sp.RailError)
	}
	// A live spend paid through a real vendor has no sandbox at all.
	live := approvedLifeSpend(t)
	live.Settle(lifeSettled, lifeReceipt, lifeLater)
	if live.Sandbox != nil {
		t.Errorf("live spend has sandbox %+v", live.Sandbox)
	}
}

// A payment its vendor is slow to answer reads processing, still holding
// its allowance, and leaves it settled or failed when the vendor answers.
func TestAwaitVendorKeepsTheHoldUntilTheVendorAnswers(t *testing.T) {
	for name, answer := range map[string]func(sp *Spend){
		"settled": func(sp *Spend) { sp.Settle(lifeSettled, lifeReceipt, lifeLater) },
		"failed":  func(sp *Spend) { sp.Fail(lifeRejected, lifeLater) },
	} {
		t.Run(name, func(t *testing.T) {
			sp := approvedLifeSpend(t)
			sent := fixNow.Add(5 * time.Second)
			sp.AwaitVendor(sent)
			if sp.Status != StatusProcessing || sp.ProcessingDetail == nil || sp.ProcessingDetail.Code != "outcome_unknown" ||
				!sp.ProcessingDetail.Since.Equal(sent) {
				t.Fatalf("status %s processing_detail %+v, want processing, outcome_unknown since %s", sp.Status, sp.ProcessingDetail, sent)
			}
			if sp.Hold == nil || sp.Hold.Amount.Cmp(sp.Amount) != 0 {
				t.Errorf("hold %+v, want the amount still held", sp.Hold)
			}
			if sp.Settlement == nil || sp.Settlement.Status != "processing" || sp.Retryable {
				t.Errorf("settlement %+v retryable %v, want processing and not retryable", sp.Settlement, sp.Retryable)
			}
			answer(sp)
			if string(sp.Status) != name || sp.Hold != nil || sp.ProcessingDetail != nil {
				t.Errorf("after the answer: status %s hold %+v processing_detail %+v", sp.Status, sp.Hold, sp.ProcessingDetail)
			}
		})
	}
	mustPanic(t, "impossible spend transition", func() { pendingLifeSpend(t).AwaitVendor(lifeLater) })
}

// Exits that make no sense panic instead of corrupting a spend: the actors
// turn the agent-visible ones (cancel while processing) into 409 first.
func TestSpendImpossibleExitsPanic(t *testing.T) {
	cases := []struct {
		name  string
		start func(t *testing.T) *Spend
		act   func(sp *Spend)
	}{
		{"cancel while processing", func(t *testing.T) *Spend {
			sp := approvedLifeSpend(t)
			sp.Processing(lifeUnknown, lifeLater)
			return sp
		}, func(sp *Spend) { sp.Cancel(lifeLater) }},
		{"expire an approved spend", func(t *testing.T) *Spend { return approvedLifeSpend(t) }, func(sp *Spend) { sp.Expire(lifeLater) }},
		{"settle a pending spend", func(t *testing.T) *Spend { return pendingLifeSpend(t) }, func(sp *Spend) {
			sp.Settle(lifeSettled, lifeReceipt, lifeLater)
		}},
		{"approve an approved spend", func(t *testing.T) *Spend { return approvedLifeSpend(t) }, func(sp *Spend) { sp.Approve(lifeLater) }},
		{"fail a settled spend", func(t *testing.T) *Spend {
			sp := approvedLifeSpend(t)
			sp.Settle(lifeSettled, lifeReceipt, lifeLater)
			return sp
		}, func(sp *Spend) { sp.Fail(lifeRejected, lifeLater) }},
		{"process a pending spend", func(t *testing.T) *Spend { return pendingLifeSpend(t) }, func(sp *Spend) {
			sp.Processing(lifeUnknown, lifeLater)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp := c.start(t)
			before, _ := json.Marshal(sp)
			mustPanic(t, "impossible spend transition", func() { c.act(sp) })
			if after, _ := json.Marshal(sp); string(after) != string(before) {
				t.Errorf("a refused exit changed the spend:\n%s\n%s", before, after)
			}
		})
	}
}
