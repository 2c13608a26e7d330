package ratelimit

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultTableValid(t *testing.T) {
	if err := DefaultTable().Validate(); err != nil {
		t.Fatalf("DefaultTable: %v", err)
	}
	if err := DefaultTable().Scaled(1000).Validate(); err != nil {
		t.Fatalf("DefaultTable scaled by 1000: %v", err)
	}
}

func TestDefaultTableWindows(t *testing.T) {
	want := map[Name]time.Duration{
		Key: time.Minute, Spends: time.Minute, SpendsDaily: 24 * time.Hour,
		Check: time.Minute, AdminWrites: time.Minute, KeyChanges: 24 * time.Hour,
		PracticeControl: time.Hour, InvalidKey: 10 * time.Minute, Public: time.Minute,
		SignIn: 15 * time.Minute, SignInAccount: 15 * time.Minute,
	}
	tab := DefaultTable()
	for n, w := range want {
		if tab.Practice[n].Window != w || tab.Live[n].Window != w {
			t.Errorf("%s: windows %v / %v, want %v", n, tab.Practice[n].Window, tab.Live[n].Window, w)
		}
	}
	if tab.Live[PracticeControl].Rate != 0 {
		t.Errorf("live practice control rate = %d, want 0", tab.Live[PracticeControl].Rate)
	}
}

// TestKeylessLimitsSameInBothEnvironments: InvalidKey and Public count
// requests that carry no valid key, so no environment; the server counts
// them in the practice column, and the live one must not say otherwise.
func TestKeylessLimitsSameInBothEnvironments(t *testing.T) {
	tab := DefaultTable()
	for _, n := range []Name{InvalidKey, Public} {
		if tab.Practice[n] != tab.Live[n] {
			t.Errorf("%s: practice %+v, live %+v; want the same", n, tab.Practice[n], tab.Live[n])
		}
	}
}

func TestScaled(t *testing.T) {
	orig := DefaultTable()
	s := orig.Scaled(1000)
	for _, n := range Names() {
		for _, env := range []struct {
			name     string
			from, to map[Name]Limit
		}{{"practice", orig.Practice, s.Practice}, {"live", orig.Live, s.Live}} {
			o, g := env.from[n], env.to[n]
			want := Limit{Rate: o.Rate * 1000, Window: o.Window, Burst: o.Burst * 1000}
			if g != want {
				t.Errorf("%s %s: scaled %+v, want %+v", env.name, n, g, want)
			}
		}
	}
	// The original is not changed.
	if orig.Practice[Key].Rate != 120 || DefaultTable().Practice[Key].Rate != 120 {
		t.Fatalf("Scaled changed its receiver")
	}
	// A limiter on the scaled table grants rate+burst times the factor.
	l := New(s, newFakeClock())
	if got := exhaust(t, l, Spends, true, "agt"); got != 15_000 {
		t.Fatalf("scaled live spends granted %d, want 15000", got)
	}

	down := orig.Scaled(0.001)
	if r := down.Live[Spends]; r.Rate != 1 || r.Burst != 0 {
		t.Errorf("scaled down live spends = %+v, want rate 1 (kept positive), burst 0", r)
	}
	if r := down.Live[PracticeControl]; r.Rate != 0 {
		t.Errorf("scaled down disabled limit has rate %d, want 0", r.Rate)
	}
	if r := orig.Scaled(1.5).Practice[Spends]; r.Rate != 30 || r.Burst != 8 {
		t.Errorf("scaled by 1.5 practice spends = %+v, want rate 30 burst 8 (rounded)", r)
	}
	if err := orig.Scaled(1e30).Validate(); err == nil {
		t.Errorf("a table scaled by 1e30 passed Validate")
	}
}

func TestScaledRejectsBadFactor(t *testing.T) {
	for _, f := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("Scaled(%v) did not panic", f)
				}
			}()
			DefaultTable().Scaled(f)
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		desc   string
		change func(*Table)
		want   []string // substrings the error must hold
	}{
		{"negative rate", func(t *Table) { t.Live[Spends] = Limit{Rate: -1, Window: time.Minute} },
			[]string{`live "spends"`, "rate -1 is negative"}},
		{"negative burst", func(t *Table) { t.Practice[Check] = Limit{Rate: 60, Window: time.Minute, Burst: -5} },
			[]string{`practice "check"`, "burst -5 is negative"}},
		{"zero window", func(t *Table) { t.Practice[AdminWrites] = Limit{Rate: 30, Burst: 10} },
			[]string{`practice "admin_writes"`, "window 0s is not positive"}},
		{"negative window", func(t *Table) { t.Live[KeyChanges] = Limit{Rate: 10, Window: -time.Hour} },
			[]string{`live "key_changes"`, "window -1h0m0s is not positive"}},
		{"zero window on a disabled limit", func(t *Table) { t.Live[PracticeControl] = Limit{} },
			[]string{`live "practice_control"`, "window 0s is not positive"}},
		{"missing", func(t *Table) { delete(t.Live, InvalidKey) },
			[]string{`live "invalid_key"`, "missing"}},
		{"nil map", func(t *Table) { t.Practice = nil },
			[]string{`practice "key"`, `practice "invalid_key"`, "missing"}},
		{"unknown", func(t *Table) { t.Practice["spend"] = Limit{Rate: 1, Window: time.Second} },
			[]string{`practice "spend"`, "unknown limit name"}},
		{"finer than a nanosecond", func(t *Table) { t.Live[Key] = Limit{Rate: 2000, Window: time.Microsecond} },
			[]string{`live "key"`, "more than one token per nanosecond"}},
		{"too large", func(t *Table) { t.Live[Key] = Limit{Rate: 1, Window: time.Minute, Burst: math.MaxInt64 / 1000} },
			[]string{`live "key"`, "too large"}},
		{"two bad entries", func(t *Table) {
			t.Practice[Spends] = Limit{Rate: -3, Window: time.Minute}
			t.Live[Check] = Limit{Rate: 3, Window: 0}
		}, []string{`practice "spends"`, `live "check"`}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tab := DefaultTable()
			tc.change(&tab)
			err := tab.Validate()
			if err == nil {
				t.Fatalf("Validate accepted the table")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("New accepted the invalid table")
				}
			}()
			New(tab, newFakeClock())
		})
	}
}

func TestValidateAcceptsEdgeValues(t *testing.T) {
	tab := DefaultTable()
	tab.Live[Key] = Limit{Rate: 1, Window: time.Nanosecond}            // one per nanosecond
	tab.Live[Check] = Limit{Rate: 7, Window: time.Minute, Burst: 1}    // window not a multiple of rate
	tab.Practice[Spends] = Limit{Rate: 0, Window: time.Minute}         // disabled in practice
	tab.Practice[Check] = Limit{Rate: 1, Window: 365 * 24 * time.Hour} // long window
	if err := tab.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	l := New(tab, newFakeClock())
	if d := l.Allow(Spends, false, "agt"); !d.Disabled {
		t.Fatalf("rate 0 in practice: %+v, want Disabled", d)
	}
	// 7 per minute: the interval rounds up to 8571428572ns, never faster.
	if got := exhaust(t, l, Check, true, "agt"); got != 8 {
		t.Fatalf("granted %d, want 7 and the burst of 1", got)
	}
	if d := l.Allow(Check, true, "agt"); d.RetryAfter != 8571428572 {
		t.Fatalf("RetryAfter = %d, want 8571428572ns", d.RetryAfter)
	}
}

func TestNames(t *testing.T) {
	got := Names()
	if len(got) != 11 {
		t.Fatalf("Names() has %d entries, want 11", len(got))
	}
	for i, n := range got {
		if n.index() != i {
			t.Errorf("%s: index %d, want %d", n, n.index(), i)
		}
	}
	got[0] = "changed"
	if Names()[0] != Key {
		t.Fatalf("Names returned its internal array")
	}
}

func TestHeaders(t *testing.T) {
	cases := []struct {
		desc                             string
		d                                Decision
		limit, remaining, reset, retryAf string
	}{
		{"allowed", Decision{Allowed: true, Limit: 60, Remaining: 29, Reset: 1500 * time.Millisecond},
			"60", "29", "2", ""},
		{"allowed, exact seconds", Decision{Allowed: true, Limit: 10, Remaining: 14, Reset: 6 * time.Second},
			"10", "14", "6", ""},
		{"allowed, one ns over", Decision{Allowed: true, Limit: 10, Remaining: 0, Reset: 6*time.Second + 1},
			"10", "0", "7", ""},
		{"remaining above limit", Decision{Allowed: true, Limit: 120, Remaining: 149, Reset: 500 * time.Millisecond},
			"120", "149", "1", ""},
		{"refused", Decision{Limit: 200, Reset: 24 * time.Hour, RetryAfter: 432 * time.Second},
			"200", "0", "86400", "432"},
		{"refused, sub-second", Decision{Limit: 120, Reset: 75 * time.Second, RetryAfter: 500 * time.Millisecond},
			"120", "0", "75", "1"},
		{"refused, rounded up", Decision{Limit: 1000, Reset: 24 * time.Hour, RetryAfter: 86400 * time.Millisecond},
			"1000", "0", "86400", "87"},
		{"refused, zero retry still 1", Decision{Limit: 5}, "5", "0", "0", "1"},
		{"disabled", Decision{Disabled: true}, "", "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			l, r, s, ra := tc.d.Headers()
			if l != tc.limit || r != tc.remaining || s != tc.reset || ra != tc.retryAf {
				t.Fatalf("Headers() = %q %q %q %q, want %q %q %q %q",
					l, r, s, ra, tc.limit, tc.remaining, tc.reset, tc.retryAf)
			}
		})
	}
}
