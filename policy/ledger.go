package policy

import (
	"sort"
	"sync/atomic"
	"time"
)

// Ledger is what an agent has spent and reserved: the counters every cap is
// checked against. It is owned by one agent actor and never shared.
//
// Settled amounts count in the window (UTC day, UTC month, lifetime) of their
// settlement. An active hold counts against every window until it is settled
// or released, so a long-pending approval cannot slip past a new day's cap.
type Ledger struct {
	Day             string `json:"day"` // "2006-01-02" of DaySettled
	DaySettled      Amount `json:"day_settled"`
	Month           string `json:"month"` // "2006-01" of MonthSettled
	MonthSettled    Amount `json:"month_settled"`
	LifetimeSettled Amount `json:"lifetime_settled"`
	// AskedDay and Asked are the unknown destinations the agent asked the
	// owner about today (UTC), for the 10-per-day limit.
	AskedDay string   `json:"asked_day"`
	Asked    []string `json:"asked"`

	// Holds of active spends and the 24 h per-destination window are rebuilt
	// from the spends themselves when an agent is activated, so they are not
	// stored with the counters. Window changes only through the methods,
	// which keep sent in step with it.
	Holds  map[string]HoldEntry `json:"-"`
	Window []WindowEntry        `json:"-"`

	// sent is the sum of Window per destination, so the window rule costs
	// one lookup per decision however many spends the last day holds. A
	// copy of a Ledger shares it: only Clone makes a copy that may be
	// changed on its own.
	sent map[string]Amount

	// held and pending sum up Holds (the amount, and how many wait for the
	// owner), kept in step by the methods that change Holds. Every rule
	// check needs both: a field read instead of a walk over the holds, and
	// a read copy can leave the holds out.
	held    Amount
	pending int
}

// HoldEntry is one active spend's reservation.
type HoldEntry struct {
	Amount  Amount
	Status  Status
	Dest    string
	Created time.Time
}

// WindowEntry is an amount sent, or held for, one destination.
type WindowEntry struct {
	SpendID string
	At      time.Time
	Dest    string
	Amount  Amount
}

// calendar is the names of one UTC day and its month, as the ledger stores
// them.
type calendar struct {
	number     int64 // days since 1970-01-01 UTC
	day, month string
}

// lastCalendar holds the names of the day most recently asked for. Every
// rule check rolls a ledger, nearly always on the same day as the last
// one: comparing day numbers is much cheaper than formatting two dates.
var lastCalendar atomic.Pointer[calendar]

// calendarOf returns the names of t's UTC day.
func calendarOf(t time.Time) *calendar {
	n := t.Unix()
	if n < 0 {
		n -= 86399 // floor, not truncation, for instants before 1970
	}
	n /= 86400
	if c := lastCalendar.Load(); c != nil && c.number == n {
		return c
	}
	u := t.UTC()
	c := &calendar{number: n, day: u.Format("2006-01-02"), month: u.Format("2006-01")}
	lastCalendar.Store(c)
	return c
}

// NextDay is 00:00 UTC after t: when daily caps reset.
func NextDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// NextMonth is the 1st of the next month, 00:00 UTC.
func NextMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// roll resets windows that ended before now. Windows only move forward: a
// wall clock stepped back across midnight must not hand the agent a fresh
// daily cap (the date strings sort as text).
func (l *Ledger) roll(now time.Time) {
	c := calendarOf(now)
	if l.Day < c.day {
		l.Day, l.DaySettled = c.day, Amount{}
	}
	if l.Month < c.month {
		l.Month, l.MonthSettled = c.month, Amount{}
	}
	if l.AskedDay < c.day {
		l.AskedDay, l.Asked = c.day, nil
	}
	l.trimWindow(now)
}

// trimWindow drops destination-window entries older than 24 h.
func (l *Ledger) trimWindow(now time.Time) {
	cut := now.Add(-DestinationWindowLength)
	i := 0
	for i < len(l.Window) && !l.Window[i].At.After(cut) {
		i++
	}
	if i > 0 {
		// A reslice, not a copy: this runs on every rule check, and the
		// array is reallocated (dropping the expired head) when it grows.
		// Nothing writes into a window shared with a snapshot.
		for _, w := range l.Window[:i] {
			l.subSent(w.Dest, w.Amount)
		}
		l.Window = l.Window[i:]
	}
}

// addSent and subSent move dest's sum in the window. A destination whose
// sum is back to zero is forgotten: amounts are never negative, so none of
// its entries is left that could count.
func (l *Ledger) addSent(dest string, a Amount) { l.setSent(dest, l.sent[dest].Add(a)) }
func (l *Ledger) subSent(dest string, a Amount) { l.setSent(dest, l.sent[dest].Sub(a)) }

func (l *Ledger) setSent(dest string, v Amount) {
	if v.Sign() == 0 {
		delete(l.sent, dest)
		return
	}
	if l.sent == nil {
		l.sent = make(map[string]Amount)
	}
	l.sent[dest] = v
}

// Clone is a copy that can be changed without touching l: for decisions
// tried on a ledger that must not keep them.
func (l *Ledger) Clone() Ledger {
	c := l.ReadCopy()
	c.Holds = make(map[string]HoldEntry, len(l.Holds))
	for k, v := range l.Holds {
		c.Holds[k] = v
	}
	c.Window = append([]WindowEntry(nil), l.Window...)
	if l.sent != nil {
		c.sent = make(map[string]Amount, len(l.sent))
		for k, v := range l.sent {
			c.sent[k] = v
		}
	}
	return c
}

// ReadCopy is a copy for a reader of a published snapshot: the counters,
// the sums of the holds and the asked destinations, which is all that
// rules and balances read. It leaves out the holds one by one and the
// destination window, which stay with the ledger's owner (the one rule
// that reads the window is answered there): publishing a snapshot then
// costs the same however many spends the agent has open. A read copy
// takes no hold changes; Clone makes a copy that does.
func (l *Ledger) ReadCopy() Ledger {
	c := *l
	c.Holds = nil
	c.Asked = append([]string(nil), l.Asked...)
	c.Window, c.sent = nil, nil
	return c
}

// Held is the sum of active holds.
func (l *Ledger) Held() Amount { return l.held }

// PendingCount is the number of spends waiting for the owner.
func (l *Ledger) PendingCount() int { return l.pending }

// addHold and dropHold change Holds and the sums over it together.
func (l *Ledger) addHold(id string, h HoldEntry) {
	l.dropHold(id) // a hold noted twice counts once
	if l.Holds == nil {
		l.Holds = make(map[string]HoldEntry)
	}
	l.Holds[id] = h
	l.held = l.held.Add(h.Amount)
	if h.Status == StatusPendingApproval {
		l.pending++
	}
}

func (l *Ledger) dropHold(id string) {
	h, ok := l.Holds[id]
	if !ok {
		return
	}
	delete(l.Holds, id)
	l.held = l.held.Sub(h.Amount)
	if h.Status == StatusPendingApproval {
		l.pending--
	}
}

// Usage is what counts against each cap at one instant: what settled in
// the cap's window plus every active hold.
type Usage struct {
	Day, Month, Lifetime Amount
}

// Usage rolls the windows to now and sums the holds once for all caps.
func (l *Ledger) Usage(now time.Time) Usage {
	l.roll(now)
	held := l.Held()
	return Usage{Day: l.DaySettled.Add(held), Month: l.MonthSettled.Add(held), Lifetime: l.LifetimeSettled.Add(held)}
}

// DayUsed is settled today plus held.
func (l *Ledger) DayUsed(now time.Time) Amount { return l.Usage(now).Day }

// MonthUsed is settled this month plus held.
func (l *Ledger) MonthUsed(now time.Time) Amount { return l.Usage(now).Month }

// LifetimeUsed is settled ever plus held.
func (l *Ledger) LifetimeUsed() Amount { return l.LifetimeSettled.Add(l.Held()) }

// destinationSent is the amount sent or held for dest in the last 24 h.
func (l *Ledger) destinationSent(dest string, now time.Time) Amount {
	l.roll(now)
	return l.sent[dest]
}

func (l *Ledger) asked(dest string) bool {
	for _, d := range l.Asked {
		if d == dest {
			return true
		}
	}
	return false
}

// Reserve records a hold for a new active spend.
func (l *Ledger) Reserve(s *Spend, now time.Time) {
	l.roll(now)
	l.addHold(s.ID, HoldEntry{Amount: s.Amount, Status: s.Status, Dest: s.Destination, Created: s.CreatedAt})
	l.insertWindow(WindowEntry{SpendID: s.ID, At: s.CreatedAt, Dest: s.Destination, Amount: s.Amount})
}

// insertWindow adds e to the window, which stays ordered by At; an entry
// goes after those with the same At. A new spend is nearly always the
// newest, so this is an append: the window can hold every spend of a day.
func (l *Ledger) insertWindow(e WindowEntry) {
	l.addSent(e.Dest, e.Amount)
	n := len(l.Window)
	if n == 0 || !e.At.Before(l.Window[n-1].At) {
		l.Window = append(l.Window, e)
		return
	}
	i := sort.Search(n, func(i int) bool { return e.At.Before(l.Window[i].At) })
	l.Window = append(l.Window, WindowEntry{})
	copy(l.Window[i+1:], l.Window[i:n])
	l.Window[i] = e
}

// windowIndex finds a spend's window entry, or -1. It looks from the
// newest end, where a spend being settled or released nearly always is.
func (l *Ledger) windowIndex(id string) int {
	for i := len(l.Window) - 1; i >= 0; i-- {
		if l.Window[i].SpendID == id {
			return i
		}
	}
	return -1
}

// Restatus updates the status of an active hold (pending -> approved ...).
func (l *Ledger) Restatus(id string, st Status) {
	if h, ok := l.Holds[id]; ok {
		h.Status = st
		l.addHold(id, h)
	}
}

// Release drops a hold without paying: the allowance returns at once.
func (l *Ledger) Release(id string, now time.Time) {
	l.dropHold(id)
	if i := l.windowIndex(id); i >= 0 {
		l.subSent(l.Window[i].Dest, l.Window[i].Amount)
		l.Window = append(l.Window[:i], l.Window[i+1:]...)
	}
	l.roll(now)
}

// Settle converts a hold into a settled amount; a price below the hold
// releases the difference at once.
func (l *Ledger) Settle(id string, price Amount, now time.Time) {
	l.dropHold(id)
	if i := l.windowIndex(id); i >= 0 {
		l.subSent(l.Window[i].Dest, l.Window[i].Amount)
		l.addSent(l.Window[i].Dest, price)
		l.Window[i].Amount = price
	}
	l.roll(now)
	l.DaySettled = l.DaySettled.Add(price)
	l.MonthSettled = l.MonthSettled.Add(price)
	l.LifetimeSettled = l.LifetimeSettled.Add(price)
}

// RecordAsked notes that the agent asked about a new destination today.
func (l *Ledger) RecordAsked(dest string, now time.Time) {
	l.roll(now)
	if !l.asked(dest) {
		l.Asked = append(l.Asked, dest)
	}
}

// AddWindow restores settled amounts into the 24 h window (activation),
// in any order: the window is sorted once for all of them.
func (l *Ledger) AddWindow(es ...WindowEntry) {
	for _, e := range es {
		l.addSent(e.Dest, e.Amount)
	}
	l.Window = append(l.Window, es...)
	sortWindow(l.Window)
}

func sortWindow(w []WindowEntry) {
	sort.SliceStable(w, func(i, j int) bool { return w[i].At.Before(w[j].At) })
}

// Counters is the part of the ledger persisted with every change.
func (l *Ledger) Counters() Ledger {
	return Ledger{Day: l.Day, DaySettled: l.DaySettled, Month: l.Month, MonthSettled: l.MonthSettled,
		LifetimeSettled: l.LifetimeSettled, AskedDay: l.AskedDay, Asked: append([]string(nil), l.Asked...)}
}
