package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	tenAsked := func(l *Ledger) {
		for i := range NewDestinationsPerDay {
			l.RecordAsked(fmt.Sprintf("asked%d.com", i), fixNow.Add(-time.Hour))
		}
	}
	dailyExhausted := func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "50.00", fixNow.Add(-time.Hour)) }
	type want struct {
		allowed  bool
		decision string // "" means null
		reason   string
		dest     string
		matched  string // "" means null
		rule     string // expected rule name, "" means null
	}
	cases := []struct {
		name   string
		rules  func(r *Rules)
		paused bool
		setup  func(l *Ledger)
		pool   *Pool
		dest   string
		amount string // "" means no amount
		want   want
	}{
		// without amount: the destination only
		{"trusted, no amount", nil, false, nil, nil, "api.vendor.com", "",
			want{true, "", "allowed", "api.vendor.com", "api.vendor.com", ""}},
		{"trusted wildcard, no amount", nil, false, nil, nil, "Eu.Trusted.IO", "",
			want{true, "", "allowed", "eu.trusted.io", "*.trusted.io", ""}},
		{"no amount ignores an exhausted cap", nil, false, dailyExhausted, nil, "api.vendor.com", "",
			want{true, "", "allowed", "api.vendor.com", "api.vendor.com", ""}},
		{"no amount ignores an empty pool", nil, false, nil, &Pool{}, "api.vendor.com", "",
			want{true, "", "allowed", "api.vendor.com", "api.vendor.com", ""}},
		{"invalid destination, no amount", nil, false, nil, nil, "10.0.0.1", "",
			want{false, "", "destination_not_allowed", "10.0.0.1", "", ""}},
		{"destination with port, no amount", nil, false, nil, nil, "api.vendor.com:8443", "",
			want{false, "", "destination_not_allowed", "api.vendor.com:8443", "", ""}},
		{"blocked, no amount", func(r *Rules) { r.BlockedDestinations = pats("*.vendor.com") }, false, nil, nil, "api.vendor.com", "",
			want{false, "", "destination_not_allowed", "api.vendor.com", "", ""}},
		{"outside a non-empty allowed list, no amount", func(r *Rules) { r.AllowedDestinations = pats("shop.store.com") }, false, nil, nil, "other.com", "",
			want{false, "pending_approval", "unknown_destination", "other.com", "", ""}},
		{"allowed, not trusted, no amount", func(r *Rules) { r.AllowedDestinations = pats("*.store.com") }, false, nil, nil, "shop.store.com", "",
			want{false, "pending_approval", "unknown_destination", "shop.store.com", "*.store.com", ""}},
		{"allowed, limit of new destinations reached: not new, still asked", func(r *Rules) { r.AllowedDestinations = pats("shop.store.com") }, false, tenAsked, nil, "shop.store.com", "",
			want{false, "pending_approval", "unknown_destination", "shop.store.com", "shop.store.com", ""}},
		{"unknown with decline mode, no amount", func(r *Rules) { r.UnknownDestination = UnknownDecline }, false, nil, nil, "other.com", "",
			want{false, "", "destination_not_allowed", "other.com", "", ""}},
		{"unknown with ask, no amount", nil, false, nil, nil, "New.com", "",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		{"unknown, limit reached, no amount", nil, false, tenAsked, nil, "new.com", "",
			want{false, "declined", "unknown_destination_limit", "new.com", "", ""}},
		{"already asked, limit reached, no amount", nil, false, tenAsked, nil, "asked4.com", "",
			want{false, "pending_approval", "unknown_destination", "asked4.com", "", ""}},
		{"paused, no amount", nil, true, nil, nil, "api.vendor.com", "",
			want{false, "declined", "agent_paused", "api.vendor.com", "", ""}},

		// with amount: the full rules
		{"trusted, small amount", nil, false, nil, nil, "api.vendor.com", "1.00",
			want{true, "", "allowed", "api.vendor.com", "api.vendor.com", ""}},
		{"trusted, above approval_over", nil, false, nil, nil, "api.vendor.com", "7.00",
			want{false, "pending_approval", "approval_over", "api.vendor.com", "api.vendor.com", ""}},
		{"unknown with ask, tiny amount", nil, false, nil, nil, "new.com", "0.000001",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		{"unknown with ask, amount under approval_over", nil, false, nil, nil, "new.com", "4.99",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		{"unknown with ask, amount above approval_over", nil, false, nil, nil, "new.com", "9.99",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		// spec 4.6 rule 2: whatever the amount, even one the amount rules
		// would refuse when paid
		{"unknown with ask, amount above the per-spend limit", nil, false, nil, nil, "new.com", "10.01",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		{"unknown with ask, daily cap used up", nil, false, dailyExhausted, nil, "new.com", "1.00",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		{"unknown with ask, empty pool", nil, false, nil, &Pool{}, "new.com", "1.00",
			want{false, "pending_approval", "unknown_destination", "new.com", "", ""}},
		{"unknown with ask, approvals queue full", func(r *Rules) { r.MaxPending = 1 }, false, nil, nil, "new.com", "1.00",
			want{false, "declined", "max_pending", "new.com", "", ""}},
		{"unknown, limit reached, with amount", nil, false, tenAsked, nil, "new.com", "1.00",
			want{false, "declined", "unknown_destination_limit", "new.com", "", ""}},
		{"invalid destination with amount", nil, false, nil, nil, "localhost", "1.00",
			want{false, "", "destination_not_allowed", "localhost", "", ""}},
		{"blocked with amount", func(r *Rules) { r.BlockedDestinations = pats("api.vendor.com") }, false, nil, nil, "api.vendor.com", "1.00",
			want{false, "", "destination_not_allowed", "api.vendor.com", "", ""}},
		{"daily cap with amount", nil, false, dailyExhausted, nil, "api.vendor.com", "1.00",
			want{false, "declined", "daily_cap", "api.vendor.com", "api.vendor.com", "daily_cap"}},
		{"per spend limit with amount", nil, false, nil, nil, "api.vendor.com", "10.01",
			want{false, "declined", "per_spend_limit", "api.vendor.com", "api.vendor.com", "per_spend_limit"}},
		{"pool with amount", nil, false, nil, &Pool{Available: amt("0.50")}, "api.vendor.com", "1.00",
			want{false, "declined", "insufficient_funds", "api.vendor.com", "api.vendor.com", "insufficient_funds"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fixRules()
			if c.rules != nil {
				c.rules(&r)
			}
			l := &Ledger{}
			if c.setup != nil {
				c.setup(l)
			}
			// A pending hold and an asked destination, so that "unchanged"
			// below compares something real.
			holdInto(l, "h", "x.com", "0.10", StatusPendingApproval, fixNow.Add(-time.Minute))
			if len(l.Asked) == 0 {
				l.RecordAsked("x.com", fixNow.Add(-time.Minute))
			}
			pool := fixPool()
			if c.pool != nil {
				pool = *c.pool
			}
			var amount *Amount
			if c.amount != "" {
				amount = amtPtr(c.amount)
			}
			before := snapLedger(t, l)
			res := Check(fixPolicy(r), l, pool, Subject{Paused: c.paused}, c.dest, amount, fixNow)
			if after := snapLedger(t, l); after != before {
				t.Errorf("Check changed the ledger:\nbefore %+v\nafter  %+v", before, after)
			}

			got := want{res.Allowed, strOrEmpty(res.Decision), res.Reason, res.Destination, strOrEmpty(res.MatchedRule), ""}
			if res.Rule != nil {
				got.rule = res.Rule.Name
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if !res.ReservesNothing || res.Object != "spend_check" || !res.Livemode || res.Message == "" {
				t.Errorf("reserves_nothing %v object %q livemode %v message %q", res.ReservesNothing, res.Object, res.Livemode, res.Message)
			}
			switch {
			case res.Allowed && res.NextAction.Code != NextNone,
				got.decision == "pending_approval" && res.NextAction.Code != NextWaitForOwner,
				!res.Allowed && got.decision != "pending_approval" && res.NextAction.Code == NextNone:
				t.Errorf("next_action %+v does not fit %+v", res.NextAction, got)
			}
		})
	}
}

// TestCheckNamesTheAmountRuleAnUnknownDestinationWouldMeet: the answer is
// pending_approval whatever the amount, and the message tells the agent
// what the payment would meet when made.
func TestCheckNamesTheAmountRuleAnUnknownDestinationWouldMeet(t *testing.T) {
	for _, c := range []struct{ amount, says string }{
		{"10.01", "above the per-payment limit of 10.00"},
		{"1.00", ""},
	} {
		res := Check(fixPolicy(fixRules()), &Ledger{}, fixPool(), Subject{}, "new.com", amtPtr(c.amount), fixNow)
		if strOrEmpty(res.Decision) != "pending_approval" || res.Reason != ReasonUnknownDestination {
			t.Fatalf("%s: %s %s, want pending_approval unknown_destination", c.amount, strOrEmpty(res.Decision), res.Reason)
		}
		declined := strings.Contains(res.Message, "would be declined")
		if c.says == "" && declined || c.says != "" && !strings.Contains(res.Message, c.says) {
			t.Errorf("%s: message %q, want it to say %q", c.amount, res.Message, c.says)
		}
	}
}

func strOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// A check predicts a spend: with an amount it agrees with Decide on the same
// state, for every case of the rule table.
func TestCheckAgreesWithDecide(t *testing.T) {
	for _, c := range decideCases() {
		t.Run(c.name, func(t *testing.T) {
			s := newScene()
			if c.scene != nil {
				c.scene(s)
			}
			d, l := s.run(t)
			res := Check(fixPolicy(s.rules), l, s.pool, Subject{Paused: s.paused}, s.dest, amtPtr(s.amount), s.now)
			if d.Outcome == StatusDeclined && amountRule(d.Reason) && d.MatchedRule == nil && res.Reason == ReasonUnknownDestination {
				// The one place they differ: spec 4.6 rule 2 answers an
				// unknown destination with pending_approval whatever
				// the amount, where create declines on the amount first.
				// (When the payment could not wait, max_pending or the
				// day's new destinations reached, they agree: below.)
				if strOrNil(res.Decision) != "pending_approval" || res.Rule != nil {
					t.Errorf("Decide declined (%s) for an unknown destination, Check says decision=%s reason=%s",
						d.Reason, strOrNil(res.Decision), res.Reason)
				}
				return
			}
			switch d.Outcome {
			case StatusApproved:
				if !res.Allowed || res.Decision != nil {
					t.Errorf("Decide approved, Check says allowed=%v decision=%s", res.Allowed, strOrNil(res.Decision))
				}
			case StatusPendingApproval:
				if res.Allowed || strOrNil(res.Decision) != "pending_approval" || res.Reason != d.ApprovalReason {
					t.Errorf("Decide pending (%s), Check says allowed=%v decision=%s reason=%s",
						d.ApprovalReason, res.Allowed, strOrNil(res.Decision), res.Reason)
				}
			case StatusDeclined:
				wantDecision := "declined"
				if d.Reason == ReasonDestinationNotAllowed {
					wantDecision = "<nil>"
				}
				if res.Allowed || strOrNil(res.Decision) != wantDecision || res.Reason != d.Reason {
					t.Errorf("Decide declined (%s), Check says allowed=%v decision=%s reason=%s",
						d.Reason, res.Allowed, strOrNil(res.Decision), res.Reason)
				}
			}
			if !reflect.DeepEqual(res.Rule, d.Rule) {
				t.Errorf("rule %+v, Decide's %+v", res.Rule, d.Rule)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	res := Check(fixPolicy(fixRules()), &Ledger{}, fixPool(), Subject{}, "new.com", nil, fixNow)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	want := []string{"allowed", "decision", "destination", "livemode", "matched_rule", "message", "next_action",
		"object", "reason", "reserves_nothing", "rule"}
	if got := sortedKeys(m); !reflect.DeepEqual(got, want) {
		t.Errorf("spend_check keys %v, want %v", got, want)
	}
	if string(m["reserves_nothing"]) != "true" || string(m["decision"]) != `"pending_approval"` ||
		string(m["matched_rule"]) != "null" || string(m["rule"]) != "null" || string(m["allowed"]) != "false" {
		t.Errorf("spend_check %s", b)
	}
	res = Check(fixPolicy(fixRules()), &Ledger{}, fixPool(), Subject{}, "192.168.1.1", nil, fixNow)
	b, _ = json.Marshal(res)
	_ = json.Unmarshal(b, &m)
	if string(m["decision"]) != "null" || string(m["reason"]) != `"destination_not_allowed"` {
		t.Errorf("invalid destination check %s", b)
	}
}

// Checking many times never uses up the unknown-destination allowance: only
// a real spend asks the owner.
func TestCheckDoesNotCountAsAsking(t *testing.T) {
	l := &Ledger{}
	p := fixPolicy(fixRules())
	for i := range 3 * NewDestinationsPerDay {
		dest := fmt.Sprintf("probe%d.com", i)
		for _, a := range []*Amount{nil, amtPtr("1.00")} {
			res := Check(p, l, fixPool(), Subject{}, dest, a, fixNow)
			if res.Reason != ReasonUnknownDestination {
				t.Fatalf("check %d of %s: reason %s", i, dest, res.Reason)
			}
		}
	}
	if len(l.Asked) != 0 || len(l.Holds) != 0 {
		t.Fatalf("checks recorded asked %v holds %v", l.Asked, l.Holds)
	}
}
