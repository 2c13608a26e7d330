package policy

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"
)

func wantAmount(t *testing.T, what string, got Amount, want string) {
	t.Helper()
	if !got.Equal(amt(want)) {
		t.Errorf("%s = %s, want %s", what, got.Display(), want)
	}
}

func TestLedgerReserveReleaseSettle(t *testing.T) {
	var l Ledger
	now := fixNow
	holdInto(&l, "a", "api.vendor.com", "10.00", StatusApproved, now)
	holdInto(&l, "b", "other.com", "2.50", StatusPendingApproval, now)
	holdInto(&l, "c", "api.vendor.com", "0.001", StatusPendingApproval, now)
	wantAmount(t, "Held after three holds", l.Held(), "12.501")
	wantAmount(t, "DayUsed", l.DayUsed(now), "12.501")
	wantAmount(t, "MonthUsed", l.MonthUsed(now), "12.501")
	wantAmount(t, "LifetimeUsed", l.LifetimeUsed(), "12.501")
	if got := l.PendingCount(); got != 2 {
		t.Errorf("PendingCount = %d, want 2", got)
	}

	// Release: the allowance returns at once and nothing counts as paid.
	l.Release("b", now)
	wantAmount(t, "Held after release", l.Held(), "10.001")
	wantAmount(t, "DaySettled after release", l.DaySettled, "0")
	wantAmount(t, "DayUsed after release", l.DayUsed(now), "10.001")
	if got := l.PendingCount(); got != 1 {
		t.Errorf("PendingCount after release = %d, want 1", got)
	}

	// Settle below the hold: the hold (10.00) leaves, the price (7.25)
	// enters every settled counter, so 2.75 is released at once.
	l.Settle("a", amt("7.25"), now)
	wantAmount(t, "Held after settle", l.Held(), "0.001")
	wantAmount(t, "DaySettled", l.DaySettled, "7.25")
	wantAmount(t, "MonthSettled", l.MonthSettled, "7.25")
	wantAmount(t, "LifetimeSettled", l.LifetimeSettled, "7.25")
	wantAmount(t, "DayUsed after settle", l.DayUsed(now), "7.251")
	if _, ok := l.Holds["a"]; ok {
		t.Error("settled hold still in Holds")
	}

	// Settle at exactly the hold.
	l.Settle("c", amt("0.001"), now)
	wantAmount(t, "Held at the end", l.Held(), "0")
	wantAmount(t, "DayUsed at the end", l.DayUsed(now), "7.251")
	wantAmount(t, "LifetimeUsed at the end", l.LifetimeUsed(), "7.251")
	if len(l.Holds) != 0 || l.PendingCount() != 0 {
		t.Errorf("holds left: %v", l.Holds)
	}
}

func TestLedgerReleaseOfUnknownIDIsHarmless(t *testing.T) {
	var l Ledger
	holdInto(&l, "a", "api.vendor.com", "3.00", StatusApproved, fixNow)
	l.Release("nope", fixNow)
	wantAmount(t, "Held", l.Held(), "3.00")
	if len(l.Window) != 1 {
		t.Errorf("window has %d entries, want 1", len(l.Window))
	}
}

func TestLedgerRestatusMovesPendingCount(t *testing.T) {
	var l Ledger
	holdInto(&l, "a", "x.com", "1.00", StatusPendingApproval, fixNow)
	holdInto(&l, "b", "x.com", "1.00", StatusPendingApproval, fixNow)
	l.Restatus("a", StatusApproved)
	if got := l.PendingCount(); got != 1 {
		t.Errorf("PendingCount = %d, want 1", got)
	}
	l.Restatus("gone", StatusApproved) // no hold: nothing happens
	if len(l.Holds) != 2 {
		t.Errorf("Restatus of an unknown id added a hold: %v", l.Holds)
	}
	wantAmount(t, "Held", l.Held(), "2.00")
}

func TestLedgerDayRolloverAtMidnightUTC(t *testing.T) {
	var l Ledger
	last := time.Date(2026, 11, 22, 23, 59, 59, 999999999, time.UTC)
	midnight := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	settleInto(&l, "a", "api.vendor.com", "8.00", time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC))
	holdInto(&l, "b", "api.vendor.com", "1.50", StatusApproved, time.Date(2026, 11, 22, 23, 30, 0, 0, time.UTC))

	wantAmount(t, "DayUsed one nanosecond before midnight", l.DayUsed(last), "9.50")
	// The settled amount leaves the day; the hold counts in every window.
	wantAmount(t, "DayUsed at midnight", l.DayUsed(midnight), "1.50")
	wantAmount(t, "MonthUsed at midnight", l.MonthUsed(midnight), "9.50")
	wantAmount(t, "LifetimeUsed at midnight", l.LifetimeUsed(), "9.50")
	if l.Day != "2026-11-23" {
		t.Errorf("Day = %q after rolling", l.Day)
	}

	// Settling yesterday's hold today counts in today's window.
	l.Settle("b", amt("1.50"), midnight.Add(time.Hour))
	wantAmount(t, "DaySettled after settling yesterday's hold", l.DaySettled, "1.50")
	wantAmount(t, "MonthSettled", l.MonthSettled, "9.50")
}

func TestLedgerRollsByUTCNotLocalDate(t *testing.T) {
	var l Ledger
	tokyo := time.FixedZone("UTC+9", 9*3600)
	// 08:00 on the 23rd in Tokyo is still the 22nd in UTC.
	settleInto(&l, "a", "api.vendor.com", "4.00", time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	wantAmount(t, "DayUsed at 08:00+09:00 the next local day", l.DayUsed(time.Date(2026, 11, 23, 8, 0, 0, 0, tokyo)), "4.00")
	wantAmount(t, "DayUsed at 09:00+09:00 (00:00 UTC)", l.DayUsed(time.Date(2026, 11, 23, 9, 0, 0, 0, tokyo)), "0")
}

func TestLedgerMonthRollover(t *testing.T) {
	var l Ledger
	settleInto(&l, "a", "api.vendor.com", "40.00", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC))
	settleInto(&l, "b", "api.vendor.com", "60.00", time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC))
	holdInto(&l, "c", "api.vendor.com", "5.00", StatusPendingApproval, time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC))
	wantAmount(t, "MonthUsed on Oct 31", l.MonthUsed(time.Date(2026, 10, 31, 23, 59, 59, 999, time.UTC)), "105.00")
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	wantAmount(t, "MonthUsed on Nov 1", l.MonthUsed(nov1), "5.00")
	wantAmount(t, "DayUsed on Nov 1", l.DayUsed(nov1), "5.00")
	wantAmount(t, "LifetimeUsed", l.LifetimeUsed(), "105.00")
	if l.Month != "2026-11" {
		t.Errorf("Month = %q", l.Month)
	}

	// Across a year too.
	settleInto(&l, "d", "api.vendor.com", "7.00", time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC))
	wantAmount(t, "MonthUsed on Jan 1", l.MonthUsed(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)), "5.00")
	wantAmount(t, "LifetimeUsed after a year", l.LifetimeUsed(), "112.00")
}

// The 24 h window is the sum sent to (or held for) one destination; entries
// drop out when they are 24 h old.
func TestLedgerDestinationWindow(t *testing.T) {
	var l Ledger
	settleInto(&l, "a", "api.vendor.com", "3.00", fixNow.Add(-23*time.Hour))
	settleInto(&l, "b", "other.com", "100.00", fixNow.Add(-2*time.Hour))
	holdInto(&l, "c", "api.vendor.com", "10.00", StatusApproved, fixNow.Add(-time.Hour))
	// Settling below the hold keeps only the price in the window.
	l.Settle("c", amt("4.00"), fixNow.Add(-30*time.Minute))
	holdInto(&l, "d", "api.vendor.com", "2.00", StatusPendingApproval, fixNow)

	wantAmount(t, "window now", l.destinationSent("api.vendor.com", fixNow), "9.00")
	wantAmount(t, "window of another host", l.destinationSent("other.com", fixNow), "100.00")
	wantAmount(t, "window of a host never paid", l.destinationSent("nobody.com", fixNow), "0")
	// One hour later the 23 h old entry is exactly 24 h old and gone.
	wantAmount(t, "window an hour later", l.destinationSent("api.vendor.com", fixNow.Add(time.Hour)), "6.00")
	// Releasing the pending hold takes it out of the window too.
	l.Release("d", fixNow.Add(time.Hour))
	wantAmount(t, "window after release", l.destinationSent("api.vendor.com", fixNow.Add(time.Hour)), "4.00")
	wantAmount(t, "window a day later", l.destinationSent("api.vendor.com", fixNow.Add(25*time.Hour)), "0")
}

// AddWindow restores entries in any order (activation); the window stays
// sorted so old entries still roll off.
func TestLedgerAddWindowKeepsOrder(t *testing.T) {
	var l Ledger
	l.AddWindow(WindowEntry{SpendID: "late", At: fixNow.Add(-time.Hour), Dest: "a.com", Amount: amt("1.00")})
	l.AddWindow(WindowEntry{SpendID: "early", At: fixNow.Add(-20 * time.Hour), Dest: "a.com", Amount: amt("2.00")})
	l.AddWindow(WindowEntry{SpendID: "mid", At: fixNow.Add(-10 * time.Hour), Dest: "a.com", Amount: amt("4.00")})
	var ids []string
	for _, w := range l.Window {
		ids = append(ids, w.SpendID)
	}
	if !reflect.DeepEqual(ids, []string{"early", "mid", "late"}) {
		t.Fatalf("window order %v", ids)
	}
	wantAmount(t, "window 5 h later", l.destinationSent("a.com", fixNow.Add(5*time.Hour)), "5.00")
	wantAmount(t, "window 15 h later", l.destinationSent("a.com", fixNow.Add(15*time.Hour)), "1.00")
}

func TestLedgerRecordAsked(t *testing.T) {
	var l Ledger
	l.RecordAsked("a.com", fixNow)
	l.RecordAsked("b.com", fixNow.Add(time.Hour))
	l.RecordAsked("a.com", fixNow.Add(2*time.Hour)) // already asked: not twice
	if !reflect.DeepEqual(l.Asked, []string{"a.com", "b.com"}) {
		t.Fatalf("Asked = %v", l.Asked)
	}
	if !l.asked("a.com") || l.asked("c.com") {
		t.Fatalf("asked() wrong for %v", l.Asked)
	}
	l.RecordAsked("c.com", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	if !reflect.DeepEqual(l.Asked, []string{"c.com"}) || l.AskedDay != "2026-11-23" {
		t.Fatalf("after midnight Asked = %v (day %s), want only c.com", l.Asked, l.AskedDay)
	}
}

func TestNextDayAndNextMonth(t *testing.T) {
	tokyo := time.FixedZone("UTC+9", 9*3600)
	cases := []struct {
		at              time.Time
		nextDay, nextMo time.Time
	}{
		{fixNow, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2028, 2, 28, 12, 0, 0, 0, time.UTC), time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC), time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)},
		// 2026-12-01 05:00 in Tokyo is still November 30th in UTC.
		{time.Date(2026, 12, 1, 5, 0, 0, 0, tokyo), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		if got := NextDay(c.at); !got.Equal(c.nextDay) || got.Location() != time.UTC {
			t.Errorf("NextDay(%v) = %v, want %v UTC", c.at, got, c.nextDay)
		}
		if got := NextMonth(c.at); !got.Equal(c.nextMo) || got.Location() != time.UTC {
			t.Errorf("NextMonth(%v) = %v, want %v UTC", c.at, got, c.nextMo)
		}
	}
}

func TestLedgerCountersIsAnIndependentCopy(t *testing.T) {
	var l Ledger
	settleInto(&l, "a", "api.vendor.com", "2.00", fixNow)
	holdInto(&l, "b", "api.vendor.com", "3.00", StatusApproved, fixNow)
	l.RecordAsked("x.com", fixNow)
	l.RecordAsked("y.com", fixNow)

	c := l.Counters()
	if c.Holds != nil || c.Window != nil {
		t.Errorf("Counters carries holds %v or window %v; they are rebuilt from spends", c.Holds, c.Window)
	}
	wantAmount(t, "Counters().DaySettled", c.DaySettled, "2.00")
	if c.Day != "2026-11-22" || c.Month != "2026-11" || c.AskedDay != "2026-11-22" {
		t.Errorf("Counters windows: day %q month %q asked day %q", c.Day, c.Month, c.AskedDay)
	}

	// Writing into the copy leaves the ledger alone...
	c.Asked[0] = "changed.com"
	c.Asked = append(c.Asked, "more.com")
	if !reflect.DeepEqual(l.Asked, []string{"x.com", "y.com"}) {
		t.Fatalf("changing the copy changed the ledger: %v", l.Asked)
	}
	// ...and the ledger moving on leaves an earlier copy alone.
	c2 := l.Counters()
	l.RecordAsked("z.com", fixNow)
	l.Settle("b", amt("3.00"), fixNow)
	if !reflect.DeepEqual(c2.Asked, []string{"x.com", "y.com"}) {
		t.Fatalf("the ledger changed an earlier copy: %v", c2.Asked)
	}
	wantAmount(t, "earlier copy DaySettled", c2.DaySettled, "2.00")
	wantAmount(t, "earlier copy LifetimeSettled", c2.LifetimeSettled, "2.00")
}

// Counters is what gets persisted: it round-trips through JSON, and the
// in-memory holds and window are not part of it.
func TestLedgerCountersJSONRoundTrip(t *testing.T) {
	var l Ledger
	settleInto(&l, "a", "api.vendor.com", "2.125", fixNow)
	holdInto(&l, "b", "api.vendor.com", "3.00", StatusApproved, fixNow)
	l.RecordAsked("x.com", fixNow)
	b, err := json.Marshal(l.Counters())
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	want := []string{"asked", "asked_day", "day", "day_settled", "lifetime_settled", "month", "month_settled"}
	if got := sortedKeys(keys); !reflect.DeepEqual(got, want) {
		t.Errorf("persisted keys %v, want %v", got, want)
	}
	var back Ledger
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back.Counters())
	if string(b) != string(b2) {
		t.Errorf("round trip changed the counters:\n%s\n%s", b, b2)
	}
	wantAmount(t, "restored DaySettled", back.DaySettled, "2.125")
}

// The actors' clock is wall time in UTC, which carries no monotonic reading,
// so it can step back (an NTP correction, a host clock fix). A step back
// across 00:00 UTC must not make the ledger forget what was settled in the
// current window: otherwise the agent can spend a daily or monthly cap
// twice, and ask about ten more new destinations.
func TestLedgerWindowsNeverRollBackwards(t *testing.T) {
	cases := []struct {
		name  string
		after time.Time // just past a boundary
	}{
		{"day boundary", time.Date(2026, 11, 23, 0, 0, 5, 0, time.UTC)},
		{"month boundary", time.Date(2026, 12, 1, 0, 0, 5, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l Ledger
			settleInto(&l, "a", "api.vendor.com", "30.00", c.after)
			l.RecordAsked("x.com", c.after)

			// The clock steps back ten seconds, across the boundary, and
			// something reads the ledger; then the clock recovers.
			back := c.after.Add(-10 * time.Second)
			ComputeBalance("agt_x", fixPolicy(fixRules()), &l, fixPool(), back)
			now := c.after.Add(time.Second)

			wantAmount(t, "DayUsed after the clock recovered", l.DayUsed(now), "30.00")
			wantAmount(t, "MonthUsed after the clock recovered", l.MonthUsed(now), "30.00")
			if !l.asked("x.com") {
				t.Errorf("the destination asked about at %s was forgotten: Asked = %v", c.after.Format(time.RFC3339), l.Asked)
			}
			r := fixRules()
			r.PerSpendLimit, r.ApprovalOver = amt("50.00"), amt("50.00")
			d := Decide(fixPolicy(r), &l, fixPool(), Subject{}, Request{Amount: amt("25.00"), Destination: "api.vendor.com"}, now)
			if d.Reason != ReasonDailyCap {
				t.Errorf("after 30.00 settled today, 25.00 more against a 50.00 daily cap: %s, want daily_cap", verdict(d))
			}
		})
	}
}

// windowModel is the window kept the plain way: append and stable-sort on
// every insert, first match on settle and release, drop expired entries.
type windowModel []WindowEntry

func (m *windowModel) insert(es ...WindowEntry) {
	*m = append(*m, es...)
	sort.SliceStable(*m, func(i, j int) bool { return (*m)[i].At.Before((*m)[j].At) })
}

func (m windowModel) find(id string) int {
	for i := range m {
		if m[i].SpendID == id {
			return i
		}
	}
	return -1
}

func (m *windowModel) trim(now time.Time) {
	cut := now.Add(-DestinationWindowLength)
	var kept windowModel
	for _, w := range *m {
		if w.At.After(cut) {
			kept = append(kept, w)
		}
	}
	*m = kept
}

// The window's bookkeeping (insert where it belongs, search from the new
// end, trim by reslicing) keeps exactly the entries, order and amounts of
// the plain way, through out-of-order and equal times and every kind of
// change.
func TestLedgerWindowMatchesModel(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	var l Ledger
	var m windowModel
	now := fixNow
	live := []string{}
	next := 0
	for step := range 5_000 {
		switch op := rng.IntN(10); {
		case op < 5: // a new spend, usually the newest, sometimes earlier or tied
			at := now.Add(-time.Duration(rng.IntN(3)) * time.Minute)
			id := "sp" + strconv.Itoa(next)
			next++
			sp := &Spend{ID: id, CreatedAt: at, Destination: "d" + strconv.Itoa(rng.IntN(3)) + ".com",
				Amount: AmountFromMicros(int64(rng.IntN(5_000_000) + 1)), Status: StatusApproved}
			l.Reserve(sp, now)
			m.trim(now)
			m.insert(WindowEntry{SpendID: id, At: at, Dest: sp.Destination, Amount: sp.Amount})
			live = append(live, id)
		case op < 7 && len(live) > 0: // settle one, at a lower price
			k := rng.IntN(len(live))
			id := live[k]
			live = append(live[:k], live[k+1:]...)
			price := AmountFromMicros(int64(rng.IntN(1_000_000)))
			l.Settle(id, price, now)
			if i := m.find(id); i >= 0 {
				m[i].Amount = price
			}
			m.trim(now)
		case op < 8 && len(live) > 0: // release one
			k := rng.IntN(len(live))
			id := live[k]
			live = append(live[:k], live[k+1:]...)
			l.Release(id, now)
			if i := m.find(id); i >= 0 {
				m = append(m[:i], m[i+1:]...)
			}
			m.trim(now)
		case op < 9: // restored entries, in any order
			var es []WindowEntry
			for range rng.IntN(4) {
				es = append(es, WindowEntry{SpendID: "r" + strconv.Itoa(next), At: now.Add(-time.Duration(rng.IntN(600)) * time.Minute),
					Dest: "d0.com", Amount: AmountFromMicros(1)})
				next++
			}
			l.AddWindow(es...)
			m.insert(es...)
		default: // time passes
			now = now.Add(time.Duration(rng.IntN(90)) * time.Minute)
			l.roll(now)
			m.trim(now)
		}
		if len(l.Window) != len(m) {
			t.Fatalf("step %d: window holds %d entries, the model %d", step, len(l.Window), len(m))
		}
		for i := range m {
			w := l.Window[i]
			if w.SpendID != m[i].SpendID || !w.At.Equal(m[i].At) || !w.Amount.Equal(m[i].Amount) {
				t.Fatalf("step %d: entry %d is %s at %v (%s), the model has %s at %v (%s)",
					step, i, w.SpendID, w.At, w.Amount, m[i].SpendID, m[i].At, m[i].Amount)
			}
		}
		// The sums per destination are the model's, and no destination
		// without an amount is kept.
		m.trim(now)
		sums := map[string]Amount{}
		for _, w := range m {
			sums[w.Dest] = sums[w.Dest].Add(w.Amount)
		}
		for _, d := range []string{"d0.com", "d1.com", "d2.com", "elsewhere.com"} {
			if got := l.destinationSent(d, now); !got.Equal(sums[d]) {
				t.Fatalf("step %d: %s sent %s in the window, the model %s", step, d, got.Display(), sums[d].Display())
			}
		}
		for d, v := range l.sent {
			if v.Sign() <= 0 {
				t.Fatalf("step %d: %s kept with a sum of %s", step, d, v.Display())
			}
		}
	}
}

// BenchmarkLedgerSpendWithFullWindow is one spend (reserve, then settle)
// of an agent that already paid 10,000 times in the last 24 h.
func BenchmarkLedgerSpendWithFullWindow(b *testing.B) {
	var l Ledger
	now := fixNow
	for i := range 10_000 {
		l.Reserve(&Spend{ID: "old" + strconv.Itoa(i), CreatedAt: now.Add(-time.Duration(10_000-i) * time.Second),
			Destination: "api.vendor.com", Amount: amt("0.01"), Status: StatusApproved}, now)
		l.Settle("old"+strconv.Itoa(i), amt("0.01"), now)
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "sp" + strconv.Itoa(i)
	}
	price := amt("0.01")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		l.Reserve(&Spend{ID: ids[i], CreatedAt: now, Destination: "api.vendor.com", Amount: price, Status: StatusApproved}, now)
		l.Settle(ids[i], price, now)
	}
}

// The cached day names must be exactly the formatted UTC date of any
// instant, including the last and first nanosecond of a day, instants
// before 1970, and a clock that jumps back and forth between days.
func TestCalendarOfMatchesFormat(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	edges := []time.Time{
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("UTC-10", -10*3600)),
		time.Date(1950, 3, 1, 0, 0, 0, 1, time.UTC),
	}
	for i := 0; i < 20000; i++ {
		var at time.Time
		if i < len(edges) {
			at = edges[i]
		} else {
			at = time.Unix(rng.Int64N(4_000_000_000)-1_000_000_000, rng.Int64N(1e9))
		}
		c := calendarOf(at)
		if want := at.UTC().Format("2006-01-02"); c.day != want {
			t.Fatalf("day of %v: %q, want %q", at, c.day, want)
		}
		if want := at.UTC().Format("2006-01"); c.month != want {
			t.Fatalf("month of %v: %q, want %q", at, c.month, want)
		}
	}
}

// A clone rolls, releases and reserves on its own: the ledger it came from
// keeps its window, sums and holds. ReadCopy carries neither the window nor
// the holds one by one, only their sums.
func TestLedgerCloneIsIndependent(t *testing.T) {
	var l Ledger
	now := fixNow
	l.Reserve(&Spend{ID: "old", CreatedAt: now.Add(-23 * time.Hour), Destination: "a.com", Amount: amt("2.00"), Status: StatusApproved}, now)
	l.Settle("old", amt("2.00"), now)
	l.Reserve(&Spend{ID: "held", CreatedAt: now, Destination: "a.com", Amount: amt("1.00"), Status: StatusApproved}, now)

	c := l.Clone()
	later := now.Add(2 * time.Hour) // "old" leaves the clone's window
	c.Release("held", later)
	c.Reserve(&Spend{ID: "new", CreatedAt: later, Destination: "b.com", Amount: amt("5.00"), Status: StatusApproved}, later)
	wantAmount(t, "clone a.com", c.destinationSent("a.com", later), "0")
	wantAmount(t, "clone b.com", c.destinationSent("b.com", later), "5.00")

	if len(l.Window) != 2 || len(l.Holds) != 1 {
		t.Fatalf("the original changed: window %v holds %v", l.Window, l.Holds)
	}
	wantAmount(t, "original a.com", l.destinationSent("a.com", now), "3.00")
	wantAmount(t, "original b.com", l.destinationSent("b.com", now), "0")
	// And rolled forward itself, the original counts as the clone did.
	wantAmount(t, "original a.com later", l.destinationSent("a.com", later), "1.00")

	wantAmount(t, "clone held", c.Held(), "5.00")
	wantAmount(t, "original held", l.Held(), "1.00")

	r := l.ReadCopy()
	if r.Window != nil || r.sent != nil || r.Holds != nil {
		t.Fatalf("ReadCopy: window %v sums %v holds %v", r.Window, r.sent, r.Holds)
	}
	wantAmount(t, "read copy held", r.Held(), "1.00")
}

// The sums of the holds follow every change of Holds: reserve, restatus,
// release, settle, a hold noted twice, and a release of a spend that holds
// nothing. After each step they equal a walk over the holds.
func TestLedgerHoldSumsFollowHolds(t *testing.T) {
	var l Ledger
	now := fixNow
	check := func(step string) {
		t.Helper()
		var sum Amount
		n := 0
		for _, h := range l.Holds {
			sum = sum.Add(h.Amount)
			if h.Status == StatusPendingApproval {
				n++
			}
		}
		if !l.Held().Equal(sum) || l.PendingCount() != n {
			t.Fatalf("%s: held %s pending %d, the holds say %s and %d", step, l.Held(), l.PendingCount(), sum, n)
		}
		r := l.ReadCopy()
		if !r.Held().Equal(sum) || r.PendingCount() != n {
			t.Fatalf("%s: the read copy says held %s pending %d, want %s and %d", step, r.Held(), r.PendingCount(), sum, n)
		}
	}
	spend := func(id, amount string, st Status) *Spend {
		return &Spend{ID: id, CreatedAt: now, Destination: "a.com", Amount: amt(amount), Status: st}
	}
	l.Reserve(spend("p1", "2.50", StatusPendingApproval), now)
	l.Reserve(spend("p2", "1.25", StatusPendingApproval), now)
	l.Reserve(spend("a1", "4.00", StatusApproved), now)
	check("reserved three")
	if l.PendingCount() != 2 {
		t.Fatalf("pending %d, want 2", l.PendingCount())
	}
	wantAmount(t, "held", l.Held(), "7.75")
	l.Restatus("p1", StatusApproved)
	check("p1 approved")
	l.Restatus("missing", StatusApproved)
	check("restatus of a spend without a hold")
	l.addHold("p2", HoldEntry{Amount: amt("1.25"), Status: StatusPendingApproval, Dest: "a.com", Created: now})
	check("p2 noted twice")
	l.Release("p2", now)
	check("p2 released")
	l.Release("p2", now)
	check("p2 released again")
	l.Settle("a1", amt("3.00"), now)
	check("a1 settled")
	l.Settle("p1", amt("2.50"), now)
	check("p1 settled")
	if !l.Held().IsZero() || l.PendingCount() != 0 {
		t.Fatalf("nothing open, yet held %s pending %d", l.Held(), l.PendingCount())
	}
}

// BenchmarkDecideWithFullWindow is one decision under
// destination_window_over for an agent that paid 10,000 times in the last
// 24 h, half of them to the destination asked about.
func BenchmarkDecideWithFullWindow(b *testing.B) {
	r := fixRules()
	r.DailyCap, r.MonthlyCap = amt("1000000.00"), amt("1000000.00")
	r.DestinationWindowOver = amtPtr("1000000.00")
	p := fixPolicy(r)
	var l Ledger
	now := fixNow
	for i := range 10_000 {
		dest := "api.vendor.com"
		if i%2 == 1 {
			dest = "other.trusted.io"
		}
		settleInto(&l, "old"+strconv.Itoa(i), dest, "0.01", now.Add(-time.Duration(10_000-i)*time.Second))
	}
	req := Request{Amount: amt("0.01"), Destination: "api.vendor.com"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if d := Decide(p, &l, fixPool(), Subject{}, req, now); d.Outcome != StatusApproved {
			b.Fatalf("%s: %s", d.Outcome, d.Message)
		}
	}
}
