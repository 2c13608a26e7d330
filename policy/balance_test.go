package policy

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestComputeBalance(t *testing.T) {
	cases := []struct {
		name      string
		rules     func(r *Rules)
		setup     func(l *Ledger)
		pool      Pool
		spendable string
		factor    string
		comp      BalanceComponents
		held      string
		pending   int
	}{
		{"fresh agent: the per-spend limit limits", nil, nil, fixPool(),
			"10.00", "per_spend_limit",
			BalanceComponents{"1000.00", "0.00", "50.00", "500.00", "10.00", nil}, "0.00", 0},
		{"daily remaining limits", nil, func(l *Ledger) {
			settleInto(l, "a", "api.vendor.com", "45.00", fixNow.Add(-time.Hour))
		}, fixPool(),
			"5.00", "daily_remaining",
			BalanceComponents{"1000.00", "0.00", "5.00", "455.00", "10.00", nil}, "0.00", 0},
		{"pool above the reserve floor limits", nil, nil, Pool{Available: amt("100.00"), ReserveFloor: amt("97.50")},
			"2.50", "pool_available",
			BalanceComponents{"100.00", "97.50", "50.00", "500.00", "10.00", nil}, "0.00", 0},
		{"reserve floor above the pool gives zero", nil, nil, Pool{Available: amt("5.00"), ReserveFloor: amt("8.00")},
			"0.00", "pool_available",
			BalanceComponents{"5.00", "8.00", "50.00", "500.00", "10.00", nil}, "0.00", 0},
		{"monthly remaining limits", func(r *Rules) { r.MonthlyCap = amt("100.00") }, func(l *Ledger) {
			settleInto(l, "a", "api.vendor.com", "98.00", time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
		}, fixPool(),
			"2.00", "monthly_remaining",
			BalanceComponents{"1000.00", "0.00", "50.00", "2.00", "10.00", nil}, "0.00", 0},
		{"lifetime remaining limits", func(r *Rules) { r.LifetimeCap = amtPtr("600.00") }, func(l *Ledger) {
			settleInto(l, "a", "api.vendor.com", "599.50", time.Date(2025, 10, 2, 0, 0, 0, 0, time.UTC))
		}, fixPool(),
			"0.50", "lifetime_remaining",
			BalanceComponents{"1000.00", "0.00", "50.00", "500.00", "10.00", strPtr("0.50")}, "0.00", 0},
		{"lifetime cap present but not limiting", func(r *Rules) { r.LifetimeCap = amtPtr("5000.00") }, nil, fixPool(),
			"10.00", "per_spend_limit",
			BalanceComponents{"1000.00", "0.00", "50.00", "500.00", "10.00", strPtr("5000.00")}, "0.00", 0},
		{"holds count in every component and in held", func(r *Rules) {
			r.PerSpendLimit = amt("45.00")
			r.LifetimeCap = amtPtr("700.00")
		}, func(l *Ledger) {
			// The ledger's clock only moves forward, so the old hold comes first.
			holdInto(l, "b", "x.com", "3.00", StatusPendingApproval, fixNow.Add(-48*time.Hour))
			settleInto(l, "a", "api.vendor.com", "1.00", fixNow.Add(-time.Hour))
			holdInto(l, "c", "api.vendor.com", "4.00", StatusApproved, fixNow)
			holdInto(l, "d", "api.vendor.com", "2.50", StatusProcessing, fixNow)
			holdInto(l, "e", "y.com", "0.25", StatusPendingApproval, fixNow)
		}, fixPool(),
			"39.25", "daily_remaining",
			BalanceComponents{"1000.00", "0.00", "39.25", "489.25", "45.00", strPtr("689.25")}, "9.75", 2},
		{"a cap tightened below what was spent gives zero, not a negative", func(r *Rules) { r.DailyCap = amt("20.00") }, func(l *Ledger) {
			settleInto(l, "a", "api.vendor.com", "30.00", fixNow.Add(-time.Hour))
		}, fixPool(),
			"0.00", "daily_remaining",
			BalanceComponents{"1000.00", "0.00", "0.00", "470.00", "10.00", nil}, "0.00", 0},
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
			holdsBefore := snapLedger(t, l).Holds
			b := ComputeBalance("agt_x", fixPolicy(r), l, c.pool, fixNow)
			if b.Spendable != c.spendable || b.LimitingFactor != c.factor {
				t.Errorf("spendable %s limited by %s, want %s by %s", b.Spendable, b.LimitingFactor, c.spendable, c.factor)
			}
			if !reflect.DeepEqual(b.Components, c.comp) {
				t.Errorf("components\n got %s\nwant %s", compText(b.Components), compText(c.comp))
			}
			if b.Held != c.held || b.PendingCount != c.pending {
				t.Errorf("held %s pending_count %d, want %s %d", b.Held, b.PendingCount, c.held, c.pending)
			}
			if b.Object != "balance" || b.AgentID != "agt_x" || b.Currency != "usdc" || !b.Livemode ||
				!b.AsOf.Equal(fixNow) || b.Message == "" {
				t.Errorf("envelope %+v", b)
			}
			checkSpendableRule(t, b)
			if snapLedger(t, l).Holds != holdsBefore {
				t.Error("ComputeBalance changed the holds")
			}
		})
	}
}

// checkSpendableRule recomputes spec 2.7's rule from the reported
// components: spendable is the smallest of pool minus floor, daily, monthly,
// per spend and (when there is one) lifetime remaining, and limiting_factor
// names a component with that value.
func checkSpendableRule(t *testing.T, b Balance) {
	t.Helper()
	c := b.Components
	terms := map[string]Amount{
		"pool_available":    MaxAmount(amt(c.PoolAvailable).Sub(amt(c.ReserveFloor)), Amount{}),
		"daily_remaining":   amt(c.DailyRemaining),
		"monthly_remaining": amt(c.MonthlyRemaining),
		"per_spend_limit":   amt(c.PerSpendLimit),
	}
	if c.LifetimeRemaining != nil {
		terms["lifetime_remaining"] = amt(*c.LifetimeRemaining)
	}
	var min *Amount
	for _, v := range terms {
		if min == nil || v.Cmp(*min) < 0 {
			min = &v
		}
	}
	if !amt(b.Spendable).Equal(*min) {
		t.Errorf("spendable %s is not the smallest component (%s)", b.Spendable, min.Display())
	}
	f, ok := terms[b.LimitingFactor]
	if !ok || !f.Equal(*min) {
		t.Errorf("limiting_factor %s does not name the smallest component", b.LimitingFactor)
	}
}

func compText(c BalanceComponents) string {
	return "pool=" + c.PoolAvailable + " floor=" + c.ReserveFloor + " daily=" + c.DailyRemaining +
		" monthly=" + c.MonthlyRemaining + " per_spend=" + c.PerSpendLimit + " lifetime=" + strOrNil(c.LifetimeRemaining)
}

func TestBalanceJSON(t *testing.T) {
	wantTop := []string{"agent_id", "as_of", "components", "currency", "held", "limiting_factor", "livemode",
		"message", "object", "pending_count", "spendable"}
	wantComp := []string{"daily_remaining", "lifetime_remaining", "monthly_remaining", "per_spend_limit",
		"pool_available", "reserve_floor"}
	for _, lifetime := range []*Amount{nil, amtPtr("800.00")} {
		r := fixRules()
		r.LifetimeCap = lifetime
		b := ComputeBalance("agt_x", fixPolicy(r), &Ledger{}, fixPool(), fixNow)
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		_ = json.Unmarshal(raw, &top)
		if got := sortedKeys(top); !reflect.DeepEqual(got, wantTop) {
			t.Errorf("balance keys %v, want %v", got, wantTop)
		}
		var comp map[string]json.RawMessage
		_ = json.Unmarshal(top["components"], &comp)
		if got := sortedKeys(comp); !reflect.DeepEqual(got, wantComp) {
			t.Errorf("component keys %v, want %v", got, wantComp)
		}
		wantLife := "null"
		if lifetime != nil {
			wantLife = `"800.00"`
		}
		if string(comp["lifetime_remaining"]) != wantLife {
			t.Errorf("lifetime_remaining %s, want %s", comp["lifetime_remaining"], wantLife)
		}
		if string(top["spendable"]) != `"10.00"` || string(top["pending_count"]) != "0" || string(top["as_of"]) != `"2026-11-22T10:00:00Z"` {
			t.Errorf("spendable %s pending_count %s as_of %s", top["spendable"], top["pending_count"], top["as_of"])
		}
	}
}

// What the balance says is spendable is what Decide lets through: the
// spendable amount passes every amount rule and one cent more does not.
func TestBalanceAgreesWithDecide(t *testing.T) {
	setups := []struct {
		name  string
		rules func(r *Rules)
		setup func(l *Ledger)
		pool  Pool
	}{
		{"daily", nil, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "43.21", fixNow) }, fixPool()},
		{"pool", nil, nil, Pool{Available: amt("50.00"), ReserveFloor: amt("46.66")}},
		{"monthly", func(r *Rules) { r.MonthlyCap = amt("60.00") }, func(l *Ledger) {
			settleInto(l, "a", "api.vendor.com", "57.01", time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC))
		}, fixPool()},
		{"lifetime", func(r *Rules) { r.LifetimeCap = amtPtr("600.00") }, func(l *Ledger) {
			settleInto(l, "a", "x.com", "593.30", time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC))
		}, fixPool()},
		{"per spend", nil, nil, fixPool()},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			r := fixRules()
			r.ApprovalOver = amt("1000.00")
			if s.rules != nil {
				s.rules(&r)
			}
			p := fixPolicy(r)
			l := &Ledger{}
			if s.setup != nil {
				s.setup(l)
			}
			b := ComputeBalance("agt_x", p, l, s.pool, fixNow)
			sp := amt(b.Spendable)
			if d := Decide(p, l, s.pool, Subject{}, Request{Amount: sp, Destination: "api.vendor.com"}, fixNow); d.Outcome != StatusApproved {
				t.Errorf("spending the spendable %s: %s", b.Spendable, verdict(d))
			}
			more := sp.Add(amt("0.01"))
			if d := Decide(p, l, s.pool, Subject{}, Request{Amount: more, Destination: "api.vendor.com"}, fixNow); d.Outcome != StatusDeclined {
				t.Errorf("spending %s, above the spendable %s: %s", more.Display(), b.Spendable, verdict(d))
			}
		})
	}
}
