package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Name identifies one limit of the table (spec 8.1).
type Name string

// The limits of spec 8.1, and the subject each one counts.
const (
	Key             Name = "key"              // every authenticated request, per key id
	Spends          Name = "spends"           // POST /v1/spends, per agent id
	SpendsDaily     Name = "spends_daily"     // POST /v1/spends per day, per agent id
	Check           Name = "check"            // POST /v1/spends/check, per agent id
	AdminWrites     Name = "admin_writes"     // administration writes, per key id
	KeyChanges      Name = "key_changes"      // rotate or create keys per day, per owner id
	PracticeControl Name = "practice_control" // /v1/test/*, per owner id
	InvalidKey      Name = "invalid_key"      // invalid or missing key, per client IP
	// Public counts the requests to the routes that need no key (health,
	// receipt keys, the API document) per client IP. Spec 4 has every
	// answer carry the RateLimit headers, and without a limit of their
	// own these routes would be the one place an address could make the
	// server work (the API document is its largest answer) without any
	// bound. Not in spec 8.1, which lists the limits of keys.
	Public Name = "public"
	// SignIn counts console sign-in attempts per client IP (subject
	// "ip|…"), before any password is hashed. Not per e-mail: a count per
	// account is one a stranger who knows the e-mail fills, locking the
	// owner out of the console and its approvals. Not in spec 8.1, which
	// covers keys only.
	SignIn Name = "sign_in"
	// SignInAccount counts sign-in attempts per e-mail (subject
	// "email|…") from browsers that never signed in as its owner, across
	// every address: guessing one account from many addresses is slow. A
	// browser the owner signed in with before (its known-browser cookie)
	// is not counted, so a stranger who fills it keeps out only new
	// browsers, never the owner's own.
	SignInAccount Name = "sign_in_account"
)

// names lists every Name in table order; a Name's position is its index in
// the limiter's parameter array.
var names = [...]Name{Key, Spends, SpendsDaily, Check, AdminWrites, KeyChanges, PracticeControl, InvalidKey, Public, SignIn, SignInAccount}

// numNames is the number of limits.
const numNames = len(names)

// Names returns every limit name, in the order of spec 8.1.
func Names() []Name { return slices.Clone(names[:]) }

// index returns the position of n in names, or -1. A switch on constant
// strings compiles to a few length and word comparisons: cheaper than a map.
func (n Name) index() int {
	switch n {
	case Key:
		return 0
	case Spends:
		return 1
	case SpendsDaily:
		return 2
	case Check:
		return 3
	case AdminWrites:
		return 4
	case KeyChanges:
		return 5
	case PracticeControl:
		return 6
	case InvalidKey:
		return 7
	case Public:
		return 8
	case SignIn:
		return 9
	case SignInAccount:
		return 10
	}
	return -1
}

// Limit is one row of the table in one environment: Rate requests per
// Window sustained, plus Burst allowed at once on top of that pace. Rate 0
// means the route does not exist in that environment.
type Limit struct {
	Rate   int
	Window time.Duration
	Burst  int
}

// Table holds the limits of both environments. Both maps must hold every
// Name (see Validate).
type Table struct {
	Practice, Live map[Name]Limit
}

// DefaultTable returns the values of spec 8.1. Practice control has rate 0
// in live: the limiter reports it disabled and the route answers 404.
func DefaultTable() Table {
	const day = 24 * time.Hour
	// public is the Public limit, the same in both environments: a
	// request without a key has no environment, and the server counts it
	// in the practice column. 600 a minute (one every 100 ms) with 100 at
	// once is far above what the routes' callers send: a load balancer
	// probes /healthz every 5 to 30 s from each of its nodes, Kubernetes
	// probes every 10 s, and a receipt verifier keeps the JWKS for its
	// max-age of 5 minutes, fetching it again only on a key id it does not
	// know. Those callers often share one address (a balancer's nodes, a
	// NAT gateway in front of many verifiers), and the burst covers such a
	// fleet restarting at once. What the limit stops is one address asking
	// without pause, 10 a second at most once the burst is spent.
	public := Limit{Rate: 600, Window: time.Minute, Burst: 100}
	return Table{
		Practice: map[Name]Limit{
			Key:             {Rate: 120, Window: time.Minute, Burst: 30},
			Spends:          {Rate: 20, Window: time.Minute, Burst: 5},
			SpendsDaily:     {Rate: 1000, Window: day, Burst: 0},
			Check:           {Rate: 60, Window: time.Minute, Burst: 10},
			AdminWrites:     {Rate: 30, Window: time.Minute, Burst: 10},
			KeyChanges:      {Rate: 50, Window: day, Burst: 0},
			PracticeControl: {Rate: 120, Window: time.Hour, Burst: 20},
			InvalidKey:      {Rate: 30, Window: 10 * time.Minute, Burst: 0},
			Public:          public,
			SignIn:          {Rate: 10, Window: 15 * time.Minute, Burst: 5},
			SignInAccount:   {Rate: 20, Window: 15 * time.Minute, Burst: 10},
		},
		Live: map[Name]Limit{
			Key:             {Rate: 60, Window: time.Minute, Burst: 30},
			Spends:          {Rate: 10, Window: time.Minute, Burst: 5},
			SpendsDaily:     {Rate: 200, Window: day, Burst: 0},
			Check:           {Rate: 30, Window: time.Minute, Burst: 10},
			AdminWrites:     {Rate: 15, Window: time.Minute, Burst: 10},
			KeyChanges:      {Rate: 10, Window: day, Burst: 0},
			PracticeControl: {Rate: 0, Window: time.Hour, Burst: 20},
			InvalidKey:      {Rate: 30, Window: 10 * time.Minute, Burst: 0},
			Public:          public,
			SignIn:          {Rate: 10, Window: 15 * time.Minute, Burst: 5},
			SignInAccount:   {Rate: 20, Window: 15 * time.Minute, Burst: 10},
		},
	}
}

// maxScaled bounds a scaled rate or burst before it is converted back to an
// int; anything this large fails Validate anyway.
const maxScaled = 1 << 53

// Scaled returns a copy of t with every Rate and Burst multiplied by factor
// and rounded to the nearest integer; windows are kept. Operators use it to
// raise the limits for load benchmarks (factor 1000). A positive rate stays
// at least 1, so scaling down never turns a route off; a rate of 0 stays 0.
// Scaled panics if factor is not a positive finite number. t is not changed.
func (t Table) Scaled(factor float64) Table {
	if !(factor > 0) || math.IsInf(factor, 0) {
		panic(fmt.Sprintf("ratelimit: scale factor must be positive and finite, got %v", factor))
	}
	scale := func(v int, keepPositive bool) int {
		f := math.Round(float64(v) * factor)
		if f > maxScaled {
			f = maxScaled
		}
		if f < -maxScaled {
			f = -maxScaled
		}
		n := int(f)
		if keepPositive && v > 0 && n < 1 {
			n = 1
		}
		return n
	}
	scaleMap := func(m map[Name]Limit) map[Name]Limit {
		if m == nil {
			return nil
		}
		out := make(map[Name]Limit, len(m))
		for n, l := range m {
			out[n] = Limit{Rate: scale(l.Rate, true), Window: l.Window, Burst: scale(l.Burst, false)}
		}
		return out
	}
	return Table{Practice: scaleMap(t.Practice), Live: scaleMap(t.Live)}
}

// Validate reports every bad entry of t, each named by environment and
// limit: a missing or unknown name, a negative rate or burst, a window that
// is not positive, a rate finer than one token per nanosecond, or a bucket
// whose size in nanoseconds does not fit in 64 bits.
func (t Table) Validate() error {
	var errs []error
	check := func(env string, m map[Name]Limit) {
		for _, n := range names {
			l, ok := m[n]
			if !ok {
				errs = append(errs, fmt.Errorf("ratelimit: %s %q: missing", env, n))
				continue
			}
			if err := l.validate(); err != nil {
				errs = append(errs, fmt.Errorf("ratelimit: %s %q: %w", env, n, err))
			}
		}
		var unknown []string
		for n := range m {
			if n.index() < 0 {
				unknown = append(unknown, string(n))
			}
		}
		slices.Sort(unknown)
		for _, n := range unknown {
			errs = append(errs, fmt.Errorf("ratelimit: %s %q: unknown limit name", env, n))
		}
	}
	check("practice", t.Practice)
	check("live", t.Live)
	return errors.Join(errs...)
}

// validate checks one entry.
func (l Limit) validate() error {
	var errs []error
	if l.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate %d is negative", l.Rate))
	}
	if l.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst %d is negative", l.Burst))
	}
	if l.Window <= 0 {
		errs = append(errs, fmt.Errorf("window %v is not positive", l.Window))
	}
	if len(errs) > 0 || l.Rate == 0 {
		return errors.Join(errs...)
	}
	if int64(l.Rate) > int64(l.Window) {
		return fmt.Errorf("rate %d per %v is more than one token per nanosecond", l.Rate, l.Window)
	}
	if l.Burst == 0 && int64(l.Rate) > maxWindowRate {
		return fmt.Errorf("rate %d per %v with burst 0 is more than %d (a window counts in 32 bits)", l.Rate, l.Window, uint32(maxWindowRate))
	}
	interval := ceilDiv(int64(l.Window), int64(l.Rate))
	if most := math.MaxInt64 / interval; int64(l.Rate) > most || int64(l.Burst) > most-int64(l.Rate) {
		return fmt.Errorf("rate %d + burst %d per %v is too large", l.Rate, l.Burst, l.Window)
	}
	return nil
}

// ceilDiv returns a/b rounded up, for a >= 0 and b > 0, without overflow.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
