package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Unknown-destination modes.
const (
	UnknownAsk     = "ask"     // a destination on no list waits for the owner
	UnknownDecline = "decline" // it is declined with destination_not_allowed (allowed ones still wait)
)

// Limits of the spec (8.2) that the rules enforce.
const (
	MinApprovalTTL          = 5
	MaxApprovalTTL          = 60
	DefaultApprovalTTL      = 15
	NewDestinationsPerDay   = 10
	DuplicateWindow         = 60 * time.Second
	DestinationWindowLength = 24 * time.Hour
)

// Rules are the owner-writable fields of a policy (spec 2.6).
//
// Destination lists: a blocked pattern always declines. Only a trusted
// pattern lets a payment go without the owner's approval (spec 3: a
// destination not in the trusted list, under "ask", waits for the owner
// whatever the amount). An allowed pattern makes a destination known
// without trusting it: payments there wait for the owner, but it never
// counts among the day's new destinations, and under "decline" it is asked
// about where a destination on no list is declined.
type Rules struct {
	PerSpendLimit         Amount     `json:"per_spend_limit"`
	DailyCap              Amount     `json:"daily_cap"`
	MonthlyCap            Amount     `json:"monthly_cap"`
	LifetimeCap           *Amount    `json:"lifetime_cap"`
	AllowedDestinations   []Pattern  `json:"allowed_destinations"`
	TrustedDestinations   []Pattern  `json:"trusted_destinations"`
	BlockedDestinations   []Pattern  `json:"blocked_destinations"`
	UnknownDestination    string     `json:"unknown_destination"`
	ApprovalOver          Amount     `json:"approval_over"`
	DestinationWindowOver *Amount    `json:"destination_window_over"`
	MaxPending            int        `json:"max_pending"`
	ApprovalTTLMinutes    int        `json:"approval_ttl_minutes"`
	ValidUntil            *time.Time `json:"valid_until"`
}

// DefaultRules are the values a field takes when a policy body omits it.
func DefaultRules() Rules {
	return Rules{
		PerSpendLimit:       MustAmount("10.00"),
		DailyCap:            MustAmount("50.00"),
		MonthlyCap:          MustAmount("500.00"),
		AllowedDestinations: []Pattern{},
		TrustedDestinations: []Pattern{},
		BlockedDestinations: []Pattern{},
		UnknownDestination:  UnknownAsk,
		ApprovalOver:        MustAmount("5.00"),
		MaxPending:          5,
		ApprovalTTLMinutes:  DefaultApprovalTTL,
	}
}

// Policy is one published version of an agent's rules.
type Policy struct {
	Object   string `json:"object"`
	ID       string `json:"id"`
	AgentID  string `json:"agent_id"`
	Version  int    `json:"version"`
	Hash     string `json:"hash"`
	Rules           // flattened on the wire, as spec 2.6 lists them
	Paused   bool   `json:"paused"`
	Livemode bool   `json:"livemode"`
	// EffectiveAt is when this version applies; later than CreatedAt for a
	// loosening that waits.
	EffectiveAt time.Time `json:"effective_at"`
	CreatedAt   time.Time `json:"created_at"`
}

// FieldError is a validation failure that names the offending field.
type FieldError struct {
	Param   string
	Message string
}

func (e *FieldError) Error() string { return e.Param + ": " + e.Message }

// RulesInput is a policy body as decoded from JSON, before validation. A nil
// field was omitted and takes its default. Null-able fields distinguish
// "omitted" (Set false) from an explicit null (Set true, Value nil).
type RulesInput struct {
	PerSpendLimit         *string
	DailyCap              *string
	MonthlyCap            *string
	LifetimeCap           Nullable[string]
	AllowedDestinations   *[]string
	TrustedDestinations   *[]string
	BlockedDestinations   *[]string
	UnknownDestination    *string
	ApprovalOver          *string
	DestinationWindowOver Nullable[string]
	MaxPending            *int
	ApprovalTTLMinutes    *int
	ValidUntil            Nullable[string]
}

// Nullable distinguishes an omitted field from an explicit null.
type Nullable[T any] struct {
	Set   bool
	Value *T
}

// Validate turns an input into Rules, starting from base for omitted fields.
// The error names the first field to fix and says how.
func (in RulesInput) Validate(base Rules) (Rules, *FieldError) {
	r, problems := in.ValidateAll(base)
	if len(problems) > 0 {
		return Rules{}, &problems[0]
	}
	return r, nil
}

// ValidateAll is Validate naming every field to fix, in the order Validate
// checks them, for a form that shows each beside its field. Caps out of
// order are checked only once each field is valid on its own: one wrong
// amount would otherwise be reported twice.
func (in RulesInput) ValidateAll(base Rules) (Rules, []FieldError) {
	r := base
	var problems []FieldError
	amount := func(param string, src *string, dst *Amount) *FieldError {
		if src == nil {
			return nil
		}
		a, err := ParseAmount(*src)
		if err != nil {
			return &FieldError{param, err.Error()}
		}
		*dst = a
		return nil
	}
	nullableAmount := func(param string, src Nullable[string], dst **Amount) *FieldError {
		if !src.Set {
			return nil
		}
		if src.Value == nil {
			*dst = nil
			return nil
		}
		a, err := ParseAmount(*src.Value)
		if err != nil {
			return &FieldError{param, err.Error()}
		}
		*dst = &a
		return nil
	}
	patterns := func(param string, src *[]string, dst *[]Pattern) *FieldError {
		if src == nil {
			return nil
		}
		if len(*src) > 500 {
			return &FieldError{param, "at most 500 patterns per list"}
		}
		out := make([]Pattern, 0, len(*src))
		seen := make(map[string]bool, len(*src))
		for i, s := range *src {
			p, err := ParsePattern(s)
			if err != nil {
				return &FieldError{fmt.Sprintf("%s[%d]", param, i), err.Error()}
			}
			if !seen[p.String()] {
				seen[p.String()] = true
				out = append(out, p)
			}
		}
		*dst = out
		return nil
	}
	for _, f := range []func() *FieldError{
		func() *FieldError { return amount("per_spend_limit", in.PerSpendLimit, &r.PerSpendLimit) },
		func() *FieldError { return amount("daily_cap", in.DailyCap, &r.DailyCap) },
		func() *FieldError { return amount("monthly_cap", in.MonthlyCap, &r.MonthlyCap) },
		func() *FieldError { return nullableAmount("lifetime_cap", in.LifetimeCap, &r.LifetimeCap) },
		func() *FieldError {
			return patterns("allowed_destinations", in.AllowedDestinations, &r.AllowedDestinations)
		},
		func() *FieldError {
			return patterns("trusted_destinations", in.TrustedDestinations, &r.TrustedDestinations)
		},
		func() *FieldError {
			return patterns("blocked_destinations", in.BlockedDestinations, &r.BlockedDestinations)
		},
		func() *FieldError { return amount("approval_over", in.ApprovalOver, &r.ApprovalOver) },
		func() *FieldError {
			return nullableAmount("destination_window_over", in.DestinationWindowOver, &r.DestinationWindowOver)
		},
	} {
		if err := f(); err != nil {
			problems = append(problems, *err)
		}
	}
	if in.UnknownDestination != nil {
		switch *in.UnknownDestination {
		case UnknownAsk, UnknownDecline:
			r.UnknownDestination = *in.UnknownDestination
		default:
			problems = append(problems, FieldError{"unknown_destination", `must be "ask" or "decline"`})
		}
	}
	if in.MaxPending != nil {
		if *in.MaxPending < 0 || *in.MaxPending > 100 {
			problems = append(problems, FieldError{"max_pending", "must be an integer from 0 to 100"})
		}
		r.MaxPending = *in.MaxPending
	}
	if in.ApprovalTTLMinutes != nil {
		if *in.ApprovalTTLMinutes < MinApprovalTTL || *in.ApprovalTTLMinutes > MaxApprovalTTL {
			problems = append(problems, FieldError{"approval_ttl_minutes", fmt.Sprintf("must be an integer from %d to %d", MinApprovalTTL, MaxApprovalTTL)})
		}
		r.ApprovalTTLMinutes = *in.ApprovalTTLMinutes
	}
	if in.ValidUntil.Set {
		if in.ValidUntil.Value == nil {
			r.ValidUntil = nil
		} else if t, err := time.Parse(time.RFC3339, *in.ValidUntil.Value); err != nil {
			problems = append(problems, FieldError{"valid_until", `must be an RFC 3339 timestamp like "2026-12-31T23:59:59Z" or null`})
		} else {
			t = t.UTC()
			r.ValidUntil = &t
		}
	}
	if len(problems) > 0 {
		return Rules{}, problems
	}
	// A cap out of order is reported on the field the request set: the
	// one that needs fixing (lowering monthly_cap alone names monthly_cap,
	// not the daily_cap the request never touched).
	if r.DailyCap.Cmp(r.MonthlyCap) > 0 {
		if in.DailyCap == nil && in.MonthlyCap != nil {
			return Rules{}, []FieldError{{"monthly_cap", "must not be below daily_cap (" + r.DailyCap.Display() + ")"}}
		}
		return Rules{}, []FieldError{{"daily_cap", "must not be above monthly_cap (" + r.MonthlyCap.Display() + ")"}}
	}
	if r.LifetimeCap != nil && r.MonthlyCap.Cmp(*r.LifetimeCap) > 0 {
		if in.LifetimeCap.Set {
			return Rules{}, []FieldError{{"lifetime_cap", "must not be below monthly_cap (" + r.MonthlyCap.Display() + ")"}}
		}
		return Rules{}, []FieldError{{"monthly_cap", "must not be above lifetime_cap (" + r.LifetimeCap.Display() + ")"}}
	}
	return r, nil
}

// canonicalRules is the hashed form: amounts in one display form, so "5" and
// "5.00" are the same policy and hash the same.
type canonicalRules struct {
	PerSpendLimit         string   `json:"per_spend_limit"`
	DailyCap              string   `json:"daily_cap"`
	MonthlyCap            string   `json:"monthly_cap"`
	LifetimeCap           *string  `json:"lifetime_cap"`
	AllowedDestinations   []string `json:"allowed_destinations"`
	TrustedDestinations   []string `json:"trusted_destinations"`
	BlockedDestinations   []string `json:"blocked_destinations"`
	UnknownDestination    string   `json:"unknown_destination"`
	ApprovalOver          string   `json:"approval_over"`
	DestinationWindowOver *string  `json:"destination_window_over"`
	MaxPending            int      `json:"max_pending"`
	ApprovalTTLMinutes    int      `json:"approval_ttl_minutes"`
	ValidUntil            *string  `json:"valid_until"`
}

// Hash is "sha256:<hex>" of the canonical JSON encoding of the rules.
func (r Rules) Hash() string {
	disp := func(a *Amount) *string {
		if a == nil {
			return nil
		}
		s := a.Display()
		return &s
	}
	strs := func(ps []Pattern) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
	c := canonicalRules{
		PerSpendLimit:         r.PerSpendLimit.Display(),
		DailyCap:              r.DailyCap.Display(),
		MonthlyCap:            r.MonthlyCap.Display(),
		LifetimeCap:           disp(r.LifetimeCap),
		AllowedDestinations:   strs(r.AllowedDestinations),
		TrustedDestinations:   strs(r.TrustedDestinations),
		BlockedDestinations:   strs(r.BlockedDestinations),
		UnknownDestination:    r.UnknownDestination,
		ApprovalOver:          r.ApprovalOver.Display(),
		DestinationWindowOver: disp(r.DestinationWindowOver),
		MaxPending:            r.MaxPending,
		ApprovalTTLMinutes:    r.ApprovalTTLMinutes,
	}
	if r.ValidUntil != nil {
		s := r.ValidUntil.UTC().Format(time.RFC3339Nano)
		c.ValidUntil = &s
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // plain strings and ints always encode
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewPolicy builds a version of the rules, hashing them.
func NewPolicy(id, agentID string, version int, r Rules, livemode bool, now, effective time.Time) Policy {
	return Policy{
		Object: "policy", ID: id, AgentID: agentID, Version: version, Hash: r.Hash(),
		Rules: r, Livemode: livemode, EffectiveAt: effective.UTC(), CreatedAt: now.UTC(),
	}
}

// ruleFieldCopies copy one field of the rules each, every field once: an
// edit is split field by field with them.
var ruleFieldCopies = [...]func(d *Rules, s Rules){
	func(d *Rules, s Rules) { d.PerSpendLimit = s.PerSpendLimit },
	func(d *Rules, s Rules) { d.DailyCap = s.DailyCap },
	func(d *Rules, s Rules) { d.MonthlyCap = s.MonthlyCap },
	func(d *Rules, s Rules) { d.LifetimeCap = s.LifetimeCap },
	func(d *Rules, s Rules) { d.AllowedDestinations = s.AllowedDestinations },
	func(d *Rules, s Rules) { d.TrustedDestinations = s.TrustedDestinations },
	func(d *Rules, s Rules) { d.BlockedDestinations = s.BlockedDestinations },
	func(d *Rules, s Rules) { d.UnknownDestination = s.UnknownDestination },
	func(d *Rules, s Rules) { d.ApprovalOver = s.ApprovalOver },
	func(d *Rules, s Rules) { d.DestinationWindowOver = s.DestinationWindowOver },
	func(d *Rules, s Rules) { d.MaxPending = s.MaxPending },
	func(d *Rules, s Rules) { d.ApprovalTTLMinutes = s.ApprovalTTLMinutes },
	func(d *Rules, s Rules) { d.ValidUntil = s.ValidUntil },
}

// TighteningPart is the part of the edit from old to new that applies at
// once: old with every field of new whose change alone does not loosen
// (a field is taken whole: a list that gains one pattern and loses
// another waits with the loosening). ok is false when no field is taken,
// or when the part alone would be rules a publish refuses (a daily cap
// above the monthly one) or would loosen.
func TighteningPart(old, new Rules) (part Rules, ok bool) {
	part = old
	oldHash := old.Hash()
	for _, take := range ruleFieldCopies {
		one := old
		take(&one, new)
		if one.Hash() != oldHash && !Loosens(old, one) {
			take(&part, new)
			ok = true
		}
	}
	ok = ok && part.DailyCap.Cmp(part.MonthlyCap) <= 0 &&
		(part.LifetimeCap == nil || part.MonthlyCap.Cmp(*part.LifetimeCap) <= 0) && !Loosens(old, part)
	return part, ok
}

// Loosens reports whether moving from old to new gives the agent more room
// anywhere: a higher limit or cap, a removed cap, a new allowed or trusted
// pattern, a removed block, a later expiry, more pending, asking instead of
// declining, or a higher approval threshold. Such a change waits before it
// applies; a pure tightening applies at once.
func Loosens(old, new Rules) bool {
	higher := func(o, n Amount) bool { return n.Cmp(o) > 0 }
	higherNullable := func(o, n *Amount) bool {
		switch {
		case o == nil:
			return false // no limit before: nothing to loosen
		case n == nil:
			return true
		default:
			return higher(*o, *n)
		}
	}
	added := func(o, n []Pattern) bool {
		set := make(map[string]bool, len(o))
		for _, p := range o {
			set[p.String()] = true
		}
		for _, p := range n {
			if !set[p.String()] {
				return true
			}
		}
		return false
	}
	switch {
	case higher(old.PerSpendLimit, new.PerSpendLimit),
		higher(old.DailyCap, new.DailyCap),
		higher(old.MonthlyCap, new.MonthlyCap),
		higherNullable(old.LifetimeCap, new.LifetimeCap),
		higher(old.ApprovalOver, new.ApprovalOver),
		higherNullable(old.DestinationWindowOver, new.DestinationWindowOver),
		new.MaxPending > old.MaxPending,
		added(old.TrustedDestinations, new.TrustedDestinations),
		added(new.BlockedDestinations, old.BlockedDestinations),
		added(old.AllowedDestinations, new.AllowedDestinations),
		old.UnknownDestination == UnknownDecline && new.UnknownDestination == UnknownAsk:
		return true
	case old.ValidUntil != nil && (new.ValidUntil == nil || new.ValidUntil.After(*old.ValidUntil)):
		return true
	}
	return false
}
