package policy

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// decideScene is one call to Decide: the fixture rules and an empty ledger,
// modified by the case.
type decideScene struct {
	rules  Rules
	paused bool
	setup  []func(l *Ledger)
	pool   Pool
	dest   string
	amount string
	now    time.Time
}

func newScene() *decideScene {
	return &decideScene{rules: fixRules(), pool: fixPool(), dest: "api.vendor.com", amount: "1.00", now: fixNow}
}

func (s *decideScene) run(t *testing.T) (Decision, *Ledger) {
	t.Helper()
	l := &Ledger{}
	for _, f := range s.setup {
		f(l)
	}
	// Bring the windows forward to now first, so that the comparison below
	// sees only what Decide itself did.
	l.DayUsed(s.now)
	before := snapLedger(t, l)
	d := Decide(fixPolicy(s.rules), l, s.pool, Subject{Paused: s.paused},
		Request{Amount: amt(s.amount), Destination: s.dest}, s.now)
	after := snapLedger(t, l)
	// Decide only reads: recording an asked destination or a hold is the
	// caller's job once it accepts the decision.
	if before != after {
		t.Errorf("Decide changed the ledger:\nbefore %+v\nafter  %+v", before, after)
	}
	return d, l
}

// verdict is a decision in one word: the decline reason, "pending:<why>" or
// "approved".
func verdict(d Decision) string {
	switch d.Outcome {
	case StatusDeclined:
		return d.Reason
	case StatusPendingApproval:
		return "pending:" + d.ApprovalReason
	case StatusApproved:
		return "approved"
	}
	return fmt.Sprintf("outcome %q", d.Outcome)
}

type decideWant struct {
	verdict string
	dest    string // expected Decision.Destination
	matched string // "" means MatchedRule must be nil
	newDest bool
}

type decideCase struct {
	name  string
	scene func(s *decideScene)
	want  decideWant
}

// The cases follow the documented rule order: paused, valid_until,
// destination, per_spend_limit, caps, pool, unknown destination,
// approval_over / destination_window_over, max_pending, approved.
// maxPendingReached gives the scene max_pending 2 and two payments that
// wait for the owner.
func maxPendingReached(s *decideScene) {
	s.rules.MaxPending = 2
	s.setup = append(s.setup, func(l *Ledger) {
		holdInto(l, "a", "x.com", "1.00", StatusPendingApproval, fixNow)
		holdInto(l, "b", "y.com", "1.00", StatusPendingApproval, fixNow)
	})
}

func decideCases() []decideCase {
	yesterday := fixNow.Add(-24 * time.Hour)
	asked := func(hosts ...string) func(*Ledger) {
		return func(l *Ledger) {
			for _, h := range hosts {
				l.RecordAsked(h, fixNow.Add(-time.Hour))
			}
		}
	}
	tenHosts := []string{"n0.com", "n1.com", "n2.com", "n3.com", "n4.com", "n5.com", "n6.com", "n7.com", "n8.com", "n9.com"}
	return []decideCase{
		// approved, and which pattern matched
		{"trusted exact host is approved", nil, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"trusted wildcard matches a deep subdomain", func(s *decideScene) { s.dest = "eu.api.trusted.io" },
			decideWant{"approved", "eu.api.trusted.io", "*.trusted.io", false}},
		{"destination is canonicalized before matching", func(s *decideScene) { s.dest = "API.Vendor.COM" },
			decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"wildcard does not match the bare domain", func(s *decideScene) { s.dest = "trusted.io" },
			decideWant{"pending:unknown_destination", "trusted.io", "", true}},
		{"trusted wins over allowed when both match", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("*.vendor.com")
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// agent_paused
		{"paused agent", func(s *decideScene) { s.paused = true },
			decideWant{"agent_paused", "api.vendor.com", "", false}},

		// policy_expired
		{"valid_until exactly now has expired", func(s *decideScene) { s.rules.ValidUntil = timePtr(fixNow) },
			decideWant{"policy_expired", "api.vendor.com", "", false}},
		{"valid_until in the past", func(s *decideScene) { s.rules.ValidUntil = timePtr(fixNow.Add(-time.Hour)) },
			decideWant{"policy_expired", "api.vendor.com", "", false}},
		{"valid_until one nanosecond ahead still applies", func(s *decideScene) {
			s.rules.ValidUntil = timePtr(fixNow.Add(time.Nanosecond))
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"valid_until compared as an instant, not a wall time", func(s *decideScene) {
			s.rules.ValidUntil = timePtr(fixNow.Add(time.Minute))
			s.now = fixNow.In(time.FixedZone("UTC+9", 9*3600)) // same instant, other zone
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// destination_not_allowed: invalid hosts keep the raw input
		{"IPv4 literal", func(s *decideScene) { s.dest = "192.0.2.10" },
			decideWant{"destination_not_allowed", "192.0.2.10", "", false}},
		{"IPv6 literal in brackets", func(s *decideScene) { s.dest = "[2001:db8::1]" },
			decideWant{"destination_not_allowed", "[2001:db8::1]", "", false}},
		{"bare IPv6 literal", func(s *decideScene) { s.dest = "2001:db8::1" },
			decideWant{"destination_not_allowed", "2001:db8::1", "", false}},
		{"localhost", func(s *decideScene) { s.dest = "localhost" },
			decideWant{"destination_not_allowed", "localhost", "", false}},
		{"subdomain of localhost", func(s *decideScene) { s.dest = "api.localhost" },
			decideWant{"destination_not_allowed", "api.localhost", "", false}},
		{"single label", func(s *decideScene) { s.dest = "vendor" },
			decideWant{"destination_not_allowed", "vendor", "", false}},
		{"trailing dot", func(s *decideScene) { s.dest = "api.vendor.com." },
			decideWant{"destination_not_allowed", "api.vendor.com.", "", false}},
		{"port", func(s *decideScene) { s.dest = "api.vendor.com:443" },
			decideWant{"destination_not_allowed", "api.vendor.com:443", "", false}},
		{"URL instead of host", func(s *decideScene) { s.dest = "https://api.vendor.com" },
			decideWant{"destination_not_allowed", "https://api.vendor.com", "", false}},
		{"empty label", func(s *decideScene) { s.dest = "api..vendor.com" },
			decideWant{"destination_not_allowed", "api..vendor.com", "", false}},
		{"empty destination", func(s *decideScene) { s.dest = "" },
			decideWant{"destination_not_allowed", "", "", false}},
		{"loopback IPv4 literal", func(s *decideScene) {
			s.dest = "127.0.0.1"
		}, decideWant{"destination_not_allowed", "127.0.0.1", "", false}},

		// destination_not_allowed: blocked lists
		{"blocked exact host", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("evil.com")
			s.dest = "evil.com"
		}, decideWant{"destination_not_allowed", "evil.com", "", false}},
		{"blocked exact host in another spelling", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("evil.com")
			s.dest = "EVIL.Com"
		}, decideWant{"destination_not_allowed", "evil.com", "", false}},
		{"exact block does not cover subdomains", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("evil.com")
			s.dest = "www.evil.com"
		}, decideWant{"pending:unknown_destination", "www.evil.com", "", true}},
		{"blocked wildcard covers a subdomain", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("*.evil.com")
			s.dest = "pay.evil.com"
		}, decideWant{"destination_not_allowed", "pay.evil.com", "", false}},
		{"blocked wildcard covers a deep subdomain", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("*.evil.com")
			s.dest = "a.b.evil.com"
		}, decideWant{"destination_not_allowed", "a.b.evil.com", "", false}},
		{"blocked wildcard does not cover the bare domain", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("*.evil.com")
			s.dest = "evil.com"
		}, decideWant{"pending:unknown_destination", "evil.com", "", true}},
		{"blocked wildcard does not cover a look-alike", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("*.evil.com")
			s.dest = "notevil.com"
		}, decideWant{"pending:unknown_destination", "notevil.com", "", true}},
		{"block beats a trusted wildcard", func(s *decideScene) {
			s.rules.TrustedDestinations = pats("*.vendor.com")
			s.rules.BlockedDestinations = pats("bad.vendor.com")
			s.dest = "bad.vendor.com"
		}, decideWant{"destination_not_allowed", "bad.vendor.com", "", false}},
		{"block beats the same trusted host", func(s *decideScene) {
			s.rules.BlockedDestinations = pats("api.vendor.com")
		}, decideWant{"destination_not_allowed", "api.vendor.com", "", false}},

		// destination_not_allowed: allow-list mode
		{"an allowed exact host waits for the owner", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("shop.store.com")
			s.dest = "shop.store.com"
		}, decideWant{"pending:unknown_destination", "shop.store.com", "shop.store.com", false}},
		{"an allowed wildcard's host waits for the owner", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("*.store.com")
			s.dest = "eu.store.com"
		}, decideWant{"pending:unknown_destination", "eu.store.com", "*.store.com", false}},
		{"allow list still accepts trusted hosts", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("shop.store.com")
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"allowed destination waits for the owner above approval_over", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("shop.store.com")
			s.dest, s.amount = "shop.store.com", "6.00"
		}, decideWant{"pending:unknown_destination", "shop.store.com", "shop.store.com", false}},
		{"allowed destination waits for the owner below approval_over, and is not new", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("*.store.com")
			s.dest, s.amount = "shop.store.com", "1.00"
		}, decideWant{"pending:unknown_destination", "shop.store.com", "*.store.com", false}},
		{"a non-empty allowed list does not decline a destination on no list under ask", func(s *decideScene) {
			s.rules.AllowedDestinations = pats("shop.store.com")
			s.dest, s.amount = "other.com", "1.00"
		}, decideWant{"pending:unknown_destination", "other.com", "", true}},
		{"decline mode asks about an allowed destination", func(s *decideScene) {
			s.rules.UnknownDestination = UnknownDecline
			s.rules.AllowedDestinations = pats("shop.store.com")
			s.dest, s.amount = "shop.store.com", "1.00"
		}, decideWant{"pending:unknown_destination", "shop.store.com", "shop.store.com", false}},

		// destination_not_allowed: unknown_destination "decline"
		{"decline mode declines an unknown destination", func(s *decideScene) {
			s.rules.UnknownDestination = UnknownDecline
			s.dest = "other.com"
		}, decideWant{"destination_not_allowed", "other.com", "", false}},
		{"decline mode keeps trusted hosts", func(s *decideScene) {
			s.rules.UnknownDestination = UnknownDecline
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// per_spend_limit
		{"above per_spend_limit", func(s *decideScene) { s.amount = "10.01" },
			decideWant{"per_spend_limit", "api.vendor.com", "api.vendor.com", false}},
		{"exactly per_spend_limit passes", func(s *decideScene) {
			s.rules.ApprovalOver = amt("100.00")
			s.amount = "10.00"
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"per_spend_limit compares numbers, not text", func(s *decideScene) {
			s.rules.ApprovalOver = amt("100.00")
			s.amount = "10.000000"
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// daily_cap
		{"settled today plus request above daily cap", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "45.00", fixNow.Add(-time.Hour)) })
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"daily_cap", "api.vendor.com", "api.vendor.com", false}},
		{"request reaching the daily cap exactly passes", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "45.00", fixNow.Add(-time.Hour)) })
			s.amount = "5.00"
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"holds count against the daily cap", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) {
				holdInto(l, "a", "api.vendor.com", "40.00", StatusApproved, fixNow.Add(-time.Hour))
				holdInto(l, "b", "other.com", "5.00", StatusPendingApproval, fixNow.Add(-time.Hour))
			})
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"daily_cap", "api.vendor.com", "api.vendor.com", false}},
		{"a hold made yesterday still counts today", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) { holdInto(l, "a", "api.vendor.com", "45.00", StatusPendingApproval, yesterday) })
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"daily_cap", "api.vendor.com", "api.vendor.com", false}},
		{"settled yesterday does not count today", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "50.00", time.Date(2026, 11, 21, 23, 59, 59, 0, time.UTC))
			})
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// monthly_cap
		{"settled this month plus request above monthly cap", func(s *decideScene) {
			s.rules.MonthlyCap = amt("100.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "40.00", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
				settleInto(l, "b", "api.vendor.com", "40.00", time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC))
				settleInto(l, "c", "api.vendor.com", "16.00", time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
			})
			s.amount = "4.01"
		}, decideWant{"monthly_cap", "api.vendor.com", "api.vendor.com", false}},
		{"request reaching the monthly cap exactly passes", func(s *decideScene) {
			s.rules.MonthlyCap = amt("100.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "96.00", time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
			})
			s.amount = "4.00"
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"last month does not count on the 1st", func(s *decideScene) {
			s.rules.MonthlyCap = amt("100.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "100.00", time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC))
			})
			s.now = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// lifetime_cap
		{"settled ever plus request above lifetime cap", func(s *decideScene) {
			s.rules.LifetimeCap = amtPtr("600.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "300.00", time.Date(2026, 9, 5, 0, 0, 0, 0, time.UTC))
				settleInto(l, "b", "api.vendor.com", "296.00", time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC))
			})
			s.amount = "4.01"
		}, decideWant{"lifetime_cap", "api.vendor.com", "api.vendor.com", false}},
		{"holds count against the lifetime cap", func(s *decideScene) {
			s.rules.LifetimeCap = amtPtr("5.00")
			s.setup = append(s.setup, func(l *Ledger) { holdInto(l, "a", "other.com", "4.50", StatusPendingApproval, fixNow) })
			s.amount = "0.51"
		}, decideWant{"lifetime_cap", "api.vendor.com", "api.vendor.com", false}},
		{"no lifetime cap means no lifetime limit", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) {
				for m := time.January; m <= time.October; m++ {
					settleInto(l, fmt.Sprint("m", m), "api.vendor.com", "500.00", time.Date(2026, m, 3, 0, 0, 0, 0, time.UTC))
				}
			})
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// insufficient_funds
		{"pool minus reserve floor below the request", func(s *decideScene) {
			s.pool = Pool{Available: amt("20.00"), ReserveFloor: amt("16.00")}
			s.amount = "4.01"
		}, decideWant{"insufficient_funds", "api.vendor.com", "api.vendor.com", false}},
		{"pool minus reserve floor exactly the request passes", func(s *decideScene) {
			s.pool = Pool{Available: amt("20.00"), ReserveFloor: amt("16.00")}
			s.amount = "4.00"
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"reserve floor above the pool", func(s *decideScene) {
			s.pool = Pool{Available: amt("10.00"), ReserveFloor: amt("12.00")}
			s.amount = "0.01"
		}, decideWant{"insufficient_funds", "api.vendor.com", "api.vendor.com", false}},

		// unknown_destination -> pending, whatever the amount
		{"unknown destination needs approval for a tiny amount", func(s *decideScene) {
			s.dest, s.amount = "New-Vendor.com", "0.001"
		}, decideWant{"pending:unknown_destination", "new-vendor.com", "", true}},
		{"unknown destination needs approval for a large amount", func(s *decideScene) {
			s.dest, s.amount = "new-vendor.com", "9.99"
		}, decideWant{"pending:unknown_destination", "new-vendor.com", "", true}},
		{"unknown destination above the per-spend limit: amounts come first", func(s *decideScene) {
			s.dest, s.amount = "new-vendor.com", "10.01"
		}, decideWant{"per_spend_limit", "new-vendor.com", "", false}},
		{"unknown destination already asked today is not new", func(s *decideScene) {
			s.dest = "new-vendor.com"
			s.setup = append(s.setup, asked("new-vendor.com"))
		}, decideWant{"pending:unknown_destination", "new-vendor.com", "", false}},

		// unknown_destination_limit
		{"nine asked today: the tenth may still ask", func(s *decideScene) {
			s.dest = "tenth.com"
			s.setup = append(s.setup, asked(tenHosts[:9]...))
		}, decideWant{"pending:unknown_destination", "tenth.com", "", true}},
		{"ten asked today: an eleventh is declined", func(s *decideScene) {
			s.rules.MaxPending = 50
			s.dest = "eleventh.com"
			s.setup = append(s.setup, asked(tenHosts...))
		}, decideWant{"unknown_destination_limit", "eleventh.com", "", false}},
		{"ten asked today: one of them may ask again", func(s *decideScene) {
			s.dest = "n3.com"
			s.setup = append(s.setup, asked(tenHosts...))
		}, decideWant{"pending:unknown_destination", "n3.com", "", false}},
		{"ten asked yesterday: a new UTC day resets the count", func(s *decideScene) {
			s.dest = "eleventh.com"
			s.setup = append(s.setup, func(l *Ledger) {
				for _, h := range tenHosts {
					l.RecordAsked(h, time.Date(2026, 11, 21, 23, 59, 59, 0, time.UTC))
				}
			})
			s.now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
		}, decideWant{"pending:unknown_destination", "eleventh.com", "", true}},
		{"asked yesterday is new again today", func(s *decideScene) {
			s.dest = "n0.com"
			s.setup = append(s.setup, func(l *Ledger) { l.RecordAsked("n0.com", yesterday) })
		}, decideWant{"pending:unknown_destination", "n0.com", "", true}},

		// approval_over
		{"above approval_over", func(s *decideScene) { s.amount = "5.01" },
			decideWant{"pending:approval_over", "api.vendor.com", "api.vendor.com", false}},
		{"exactly approval_over passes", func(s *decideScene) { s.amount = "5.00" },
			decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// destination_window_over
		{"window sum including this spend above the limit", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "15.00", fixNow.Add(-2*time.Hour)) })
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"pending:destination_window_over", "api.vendor.com", "api.vendor.com", false}},
		{"window sum exactly the limit passes", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "15.00", fixNow.Add(-2*time.Hour)) })
			s.amount = "5.00"
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"window alone: this spend above the limit", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("2.00")
			s.amount = "2.01"
		}, decideWant{"pending:destination_window_over", "api.vendor.com", "api.vendor.com", false}},
		{"window entry of 24 h ago has dropped out", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "15.00", fixNow.Add(-24*time.Hour)) })
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"window entry of just under 24 h ago still counts", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "15.00", fixNow.Add(-24*time.Hour+time.Second))
			})
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"pending:destination_window_over", "api.vendor.com", "api.vendor.com", false}},
		{"window counts only the same destination", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "eu.trusted.io", "15.00", fixNow.Add(-time.Hour)) })
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"window counts holds", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) {
				holdInto(l, "a", "api.vendor.com", "15.00", StatusApproved, fixNow.Add(-time.Minute))
			})
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"pending:destination_window_over", "api.vendor.com", "api.vendor.com", false}},
		{"a released hold leaves the window", func(s *decideScene) {
			s.rules.DestinationWindowOver = amtPtr("20.00")
			s.setup = append(s.setup, func(l *Ledger) {
				holdInto(l, "a", "api.vendor.com", "15.00", StatusApproved, fixNow.Add(-time.Minute))
				l.Release("a", fixNow)
			})
			s.amount = "5.01"
			s.rules.ApprovalOver = amt("10.00")
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},

		// max_pending
		{"max_pending reached declines an approval_over spend", func(s *decideScene) {
			maxPendingReached(s)
			s.amount = "6.00"
		}, decideWant{"max_pending", "api.vendor.com", "api.vendor.com", false}},
		{"max_pending reached declines an unknown destination and does not count it as asked", func(s *decideScene) {
			maxPendingReached(s)
			s.dest = "new-vendor.com"
		}, decideWant{"max_pending", "new-vendor.com", "", false}},
		{"max_pending reached: an unknown destination over the limit meets the limit first", func(s *decideScene) {
			maxPendingReached(s)
			s.dest = "new-vendor.com"
			s.amount = "500.00"
		}, decideWant{"per_spend_limit", "new-vendor.com", "", false}},
		{"max_pending does not touch a spend that needs no approval", func(s *decideScene) {
			maxPendingReached(s)
		}, decideWant{"approved", "api.vendor.com", "api.vendor.com", false}},
		{"approved holds are not pending", func(s *decideScene) {
			s.rules.MaxPending = 2
			s.setup = append(s.setup, func(l *Ledger) {
				holdInto(l, "a", "x.com", "1.00", StatusApproved, fixNow)
				holdInto(l, "b", "y.com", "1.00", StatusProcessing, fixNow)
				holdInto(l, "c", "z.com", "1.00", StatusPendingApproval, fixNow)
			})
			s.amount = "6.00"
		}, decideWant{"pending:approval_over", "api.vendor.com", "api.vendor.com", false}},
		{"max_pending 0 declines every approval", func(s *decideScene) {
			s.rules.MaxPending = 0
			s.amount = "6.00"
		}, decideWant{"max_pending", "api.vendor.com", "api.vendor.com", false}},
	}
}

func TestDecideRules(t *testing.T) {
	for _, c := range decideCases() {
		t.Run(c.name, func(t *testing.T) {
			s := newScene()
			if c.scene != nil {
				c.scene(s)
			}
			d, _ := s.run(t)
			if got := verdict(d); got != c.want.verdict {
				t.Errorf("verdict = %s, want %s (message %q)", got, c.want.verdict, d.Message)
			}
			if d.Destination != c.want.dest {
				t.Errorf("Destination = %q, want %q", d.Destination, c.want.dest)
			}
			wantMatched := "<nil>"
			if c.want.matched != "" {
				wantMatched = c.want.matched
			}
			if got := strOrNil(d.MatchedRule); got != wantMatched {
				t.Errorf("MatchedRule = %s, want %s", got, wantMatched)
			}
			if d.NewDestination != c.want.newDest {
				t.Errorf("NewDestination = %v, want %v", d.NewDestination, c.want.newDest)
			}
			// Fields that belong to one outcome only.
			switch d.Outcome {
			case StatusDeclined:
				if d.ApprovalReason != "" {
					t.Errorf("declined with ApprovalReason %q", d.ApprovalReason)
				}
			case StatusPendingApproval:
				if d.Reason != "" || d.Rule != nil {
					t.Errorf("pending with Reason %q, Rule %+v", d.Reason, d.Rule)
				}
			case StatusApproved:
				if d.Reason != "" || d.ApprovalReason != "" || d.Rule != nil {
					t.Errorf("approved with Reason %q, ApprovalReason %q, Rule %+v", d.Reason, d.ApprovalReason, d.Rule)
				}
			}
			if d.Message == "" {
				t.Error("empty Message: every decision explains itself")
			}
		})
	}
}

// TestDecideEveryDeclineReasonIsReachable guards the table above: every
// reason the service documents for create has a case.
func TestDecideEveryDeclineReasonIsReachable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range decideCases() {
		seen[c.want.verdict] = true
	}
	for _, v := range []string{
		ReasonAgentPaused, ReasonPolicyExpired, ReasonDestinationNotAllowed, ReasonPerSpendLimit,
		ReasonDailyCap, ReasonMonthlyCap, ReasonLifetimeCap, ReasonInsufficientFunds,
		"pending:" + ReasonUnknownDestination, ReasonUnknownDestinationLimit,
		"pending:" + ApprovalOverReason, "pending:" + DestinationWindowReason, ReasonMaxPending, "approved",
	} {
		if !seen[v] {
			t.Errorf("no case reaches %s", v)
		}
	}
}

// TestDecideRuleOrder puts two objections in one request. The earlier rule
// of the documented order must win, and removing it must reveal the later
// one (which proves both really objected).
func TestDecideRuleOrder(t *testing.T) {
	exhaustDaily := func(s *decideScene) {
		s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "d", "api.vendor.com", "50.00", fixNow.Add(-time.Hour)) })
	}
	tenAsked := func(s *decideScene) {
		s.setup = append(s.setup, func(l *Ledger) {
			for i := range NewDestinationsPerDay {
				l.RecordAsked(fmt.Sprintf("asked%d.com", i), fixNow.Add(-time.Hour))
			}
		})
	}
	cases := []struct {
		name          string
		both          func(s *decideScene)
		removeFirst   func(s *decideScene)
		first, second string
	}{
		{"paused beats expired policy",
			func(s *decideScene) { s.paused = true; s.rules.ValidUntil = timePtr(fixNow.Add(-time.Hour)) },
			func(s *decideScene) { s.paused = false },
			"agent_paused", "policy_expired"},
		{"paused beats blocked destination",
			func(s *decideScene) { s.paused = true; s.rules.BlockedDestinations = pats("api.vendor.com") },
			func(s *decideScene) { s.paused = false },
			"agent_paused", "destination_not_allowed"},
		{"expired policy beats invalid destination",
			func(s *decideScene) { s.rules.ValidUntil = timePtr(fixNow); s.dest = "10.0.0.1" },
			func(s *decideScene) { s.rules.ValidUntil = nil },
			"policy_expired", "destination_not_allowed"},
		{"blocked beats per_spend_limit",
			func(s *decideScene) { s.rules.BlockedDestinations = pats("*.vendor.com"); s.amount = "11.00" },
			func(s *decideScene) { s.rules.BlockedDestinations = nil },
			"destination_not_allowed", "per_spend_limit"},
		{"invalid destination beats per_spend_limit",
			func(s *decideScene) { s.dest = "localhost"; s.amount = "11.00" },
			func(s *decideScene) { s.dest = "api.vendor.com" },
			"destination_not_allowed", "per_spend_limit"},
		{"decline mode beats per_spend_limit",
			func(s *decideScene) {
				s.rules.UnknownDestination = UnknownDecline
				s.dest = "x.com"
				s.amount = "11.00"
			},
			func(s *decideScene) { s.rules.UnknownDestination = UnknownAsk },
			"destination_not_allowed", "per_spend_limit"},
		{"per_spend_limit beats daily_cap",
			func(s *decideScene) { exhaustDaily(s); s.amount = "10.01" },
			func(s *decideScene) { s.rules.PerSpendLimit = amt("20.00") },
			"per_spend_limit", "daily_cap"},
		{"daily_cap beats monthly_cap",
			func(s *decideScene) { s.rules.MonthlyCap = amt("50.00"); exhaustDaily(s) },
			func(s *decideScene) { s.rules.DailyCap = amt("100.00") },
			"daily_cap", "monthly_cap"},
		{"monthly_cap beats lifetime_cap",
			func(s *decideScene) {
				s.rules.DailyCap, s.rules.MonthlyCap, s.rules.LifetimeCap = amt("50.00"), amt("50.00"), amtPtr("50.00")
				s.setup = append(s.setup, func(l *Ledger) {
					settleInto(l, "m", "api.vendor.com", "50.00", time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
				})
			},
			func(s *decideScene) { s.rules.MonthlyCap = amt("500.00") },
			"monthly_cap", "lifetime_cap"},
		{"daily_cap beats pool",
			func(s *decideScene) { exhaustDaily(s); s.pool = Pool{Available: amt("0.50")} },
			func(s *decideScene) { s.rules.DailyCap = amt("100.00") },
			"daily_cap", "insufficient_funds"},
		{"lifetime_cap beats pool",
			func(s *decideScene) { s.rules.LifetimeCap = amtPtr("0.50"); s.pool = Pool{Available: amt("0.50")} },
			func(s *decideScene) { s.rules.LifetimeCap = nil },
			"lifetime_cap", "insufficient_funds"},
		{"pool beats unknown destination",
			func(s *decideScene) { s.dest = "new.com"; s.pool = Pool{Available: amt("0.50")} },
			func(s *decideScene) { s.pool = fixPool() },
			"insufficient_funds", "pending:unknown_destination"},
		{"caps beat the unknown destination limit",
			func(s *decideScene) { tenAsked(s); exhaustDaily(s); s.dest = "new.com" },
			func(s *decideScene) { s.rules.DailyCap = amt("100.00") },
			"daily_cap", "unknown_destination_limit"},
		{"unknown destination beats approval_over",
			func(s *decideScene) { s.dest = "new.com"; s.amount = "9.00" },
			func(s *decideScene) { s.rules.TrustedDestinations = pats("new.com") },
			"pending:unknown_destination", "pending:approval_over"},
		{"unknown destination limit beats approval_over",
			func(s *decideScene) { tenAsked(s); s.dest = "new.com"; s.amount = "9.00" },
			func(s *decideScene) { s.rules.TrustedDestinations = pats("new.com") },
			"unknown_destination_limit", "pending:approval_over"},
		{"approval_over beats destination_window_over",
			func(s *decideScene) { s.rules.DestinationWindowOver = amtPtr("1.00"); s.amount = "6.00" },
			func(s *decideScene) { s.rules.ApprovalOver = amt("10.00") },
			"pending:approval_over", "pending:destination_window_over"},
		{"unknown destination limit beats max_pending",
			func(s *decideScene) { tenAsked(s); s.rules.MaxPending = 0; s.dest = "new.com" },
			func(s *decideScene) { s.setup = nil },
			"unknown_destination_limit", "max_pending"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScene()
			c.both(s)
			d, _ := s.run(t)
			if got := verdict(d); got != c.first {
				t.Fatalf("with both objections: %s, want %s", got, c.first)
			}
			c.removeFirst(s)
			d, _ = s.run(t)
			if got := verdict(d); got != c.second {
				t.Fatalf("without the first objection: %s, want %s (the second rule did not object)", got, c.second)
			}
		})
	}
}

func TestDecideRuleDetail(t *testing.T) {
	dec1 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	nov23 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		scene func(s *decideScene)
		want  RuleDetail
	}{
		{"daily cap with settled amount and a hold", func(s *decideScene) {
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "30.00", fixNow.Add(-3*time.Hour))
				holdInto(l, "b", "x.com", "12.50", StatusPendingApproval, fixNow.Add(-time.Hour))
			})
			s.amount = "8.00"
		}, RuleDetail{Name: "daily_cap", Scope: "agent", Limit: "50.00", Spent: "42.50", Requested: "8.00", Remaining: "7.50", ResetsAt: &nov23}},
		{"daily cap resets at the next 00:00 UTC even one nanosecond before it", func(s *decideScene) {
			s.now = time.Date(2026, 11, 22, 23, 59, 59, 999999999, time.UTC)
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "50.00", fixNow) })
			s.amount = "0.01"
		}, RuleDetail{Name: "daily_cap", Scope: "agent", Limit: "50.00", Spent: "50.00", Requested: "0.01", Remaining: "0.00", ResetsAt: &nov23}},
		{"daily cap reset computed in UTC for a non-UTC clock", func(s *decideScene) {
			// 08:00 on the 23rd in UTC+9 is 23:00 on the 22nd in UTC.
			s.now = time.Date(2026, 11, 23, 8, 0, 0, 0, time.FixedZone("UTC+9", 9*3600))
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "50.00", fixNow) })
			s.amount = "0.01"
		}, RuleDetail{Name: "daily_cap", Scope: "agent", Limit: "50.00", Spent: "50.00", Requested: "0.01", Remaining: "0.00", ResetsAt: &nov23}},
		{"remaining is never negative after a tightening", func(s *decideScene) {
			s.rules.DailyCap = amt("20.00")
			s.setup = append(s.setup, func(l *Ledger) { settleInto(l, "a", "api.vendor.com", "30.00", fixNow.Add(-time.Hour)) })
			s.amount = "1.00"
		}, RuleDetail{Name: "daily_cap", Scope: "agent", Limit: "20.00", Spent: "30.00", Requested: "1.00", Remaining: "0.00", ResetsAt: &nov23}},
		{"monthly cap resets on the 1st at 00:00 UTC", func(s *decideScene) {
			s.rules.MonthlyCap = amt("100.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "97.00", time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC))
			})
			s.amount = "4.00"
		}, RuleDetail{Name: "monthly_cap", Scope: "agent", Limit: "100.00", Spent: "97.00", Requested: "4.00", Remaining: "3.00", ResetsAt: &dec1}},
		{"monthly cap in December resets on January 1st", func(s *decideScene) {
			s.rules.MonthlyCap = amt("100.00")
			s.now = time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "100.00", time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
			})
		}, RuleDetail{Name: "monthly_cap", Scope: "agent", Limit: "100.00", Spent: "100.00", Requested: "1.00", Remaining: "0.00",
			ResetsAt: timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))}},
		{"lifetime cap never resets", func(s *decideScene) {
			s.rules.LifetimeCap = amtPtr("600.00")
			s.setup = append(s.setup, func(l *Ledger) {
				settleInto(l, "a", "api.vendor.com", "599.00", time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC))
			})
			s.amount = "2.00"
		}, RuleDetail{Name: "lifetime_cap", Scope: "agent", Limit: "600.00", Spent: "599.00", Requested: "2.00", Remaining: "1.00"}},
		{"per spend limit", func(s *decideScene) { s.amount = "12.5" },
			RuleDetail{Name: "per_spend_limit", Scope: "agent", Limit: "10.00", Spent: "0.00", Requested: "12.50", Remaining: "10.00"}},
		{"pool", func(s *decideScene) {
			// Balance 23.00, of which 3.00 held, floor 16.00.
			s.pool = Pool{Available: amt("20.00"), ReserveFloor: amt("16.00"), Held: amt("3.00")}
			s.amount = "4.01"
		}, RuleDetail{Name: "insufficient_funds", Scope: "owner", Limit: "7.00", Spent: "3.00", Requested: "4.01", Remaining: "4.00"}},
		{"pool with the reserve floor above the balance", func(s *decideScene) {
			s.pool = Pool{Available: amt("10.00"), ReserveFloor: amt("12.00")}
			s.amount = "0.01"
		}, RuleDetail{Name: "insufficient_funds", Scope: "owner", Limit: "0.00", Spent: "0.00", Requested: "0.01", Remaining: "0.00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScene()
			c.scene(s)
			d, _ := s.run(t)
			if d.Outcome != StatusDeclined || d.Reason != c.want.Name {
				t.Fatalf("verdict %s, want %s", verdict(d), c.want.Name)
			}
			if d.Rule == nil {
				t.Fatal("Rule is nil")
			}
			if !reflect.DeepEqual(*d.Rule, c.want) {
				t.Errorf("Rule =\n %s\nwant\n %s", ruleText(d.Rule), ruleText(&c.want))
			}
		})
	}
}

func ruleText(r *RuleDetail) string {
	resets := "<nil>"
	if r.ResetsAt != nil {
		resets = r.ResetsAt.Format(time.RFC3339Nano) + " " + r.ResetsAt.Location().String()
	}
	return fmt.Sprintf("%s/%s limit=%s spent=%s requested=%s remaining=%s resets_at=%s",
		r.Name, r.Scope, r.Limit, r.Spent, r.Requested, r.Remaining, resets)
}

// Declines that are not about an amount carry no rule detail.
func TestDecideRuleDetailOnlyForAmountRules(t *testing.T) {
	for _, c := range decideCases() {
		s := newScene()
		if c.scene != nil {
			c.scene(s)
		}
		d, _ := s.run(t)
		switch d.Reason {
		case ReasonPerSpendLimit, ReasonDailyCap, ReasonMonthlyCap, ReasonLifetimeCap, ReasonInsufficientFunds:
			if d.Rule == nil || d.Rule.Name != d.Reason {
				t.Errorf("%s: %s without a matching rule detail: %+v", c.name, d.Reason, d.Rule)
			}
		default:
			if d.Rule != nil {
				t.Errorf("%s: %s carries rule detail %+v", c.name, verdict(d), d.Rule)
			}
		}
	}
}

// Decide is a pure function of its inputs: the same call twice gives the
// same decision and asking does not get recorded by Decide itself.
func TestDecideIsRepeatable(t *testing.T) {
	l := &Ledger{}
	p := fixPolicy(fixRules())
	req := Request{Amount: amt("1.00"), Destination: "fresh.com"}
	first := Decide(p, l, fixPool(), Subject{}, req, fixNow)
	second := Decide(p, l, fixPool(), Subject{}, req, fixNow)
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("two identical calls differ:\n%+v\n%+v", first, second)
	}
	if !first.NewDestination || len(l.Asked) != 0 {
		t.Fatalf("NewDestination=%v Asked=%v: Decide must flag the new destination and leave recording to the caller",
			first.NewDestination, l.Asked)
	}
}
