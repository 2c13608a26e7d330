package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Builders for RulesInput fields.
func inStr(s string) *string          { return &s }
func inInt(i int) *int                { return &i }
func inList(ss ...string) *[]string   { return &ss }
func inSet(s string) Nullable[string] { return Nullable[string]{Set: true, Value: &s} }
func inNull() Nullable[string]        { return Nullable[string]{Set: true} }

func rulesJSON(t *testing.T, r Rules) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidateOmittedFieldsTakeDefaults(t *testing.T) {
	r, err := RulesInput{}.Validate(DefaultRules())
	if err != nil {
		t.Fatalf("empty body: %v", err)
	}
	want := `{"per_spend_limit":"10.00","daily_cap":"50.00","monthly_cap":"500.00","lifetime_cap":null,` +
		`"allowed_destinations":[],"trusted_destinations":[],"blocked_destinations":[],"unknown_destination":"ask",` +
		`"approval_over":"5.00","destination_window_over":null,"max_pending":5,"approval_ttl_minutes":15,"valid_until":null}`
	if got := rulesJSON(t, r); got != want {
		t.Errorf("defaults\n got %s\nwant %s", got, want)
	}
}

// Omitted fields keep the base, whatever it is: a new version starts from
// the current one.
func TestValidateOmittedFieldsKeepTheBase(t *testing.T) {
	base := fixRules()
	base.LifetimeCap = amtPtr("900.00")
	base.DestinationWindowOver = amtPtr("30.00")
	base.ValidUntil = timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	base.BlockedDestinations = pats("*.evil.com")
	base.MaxPending, base.ApprovalTTLMinutes, base.UnknownDestination = 9, 30, UnknownDecline
	r, err := RulesInput{}.Validate(base)
	if err != nil {
		t.Fatal(err)
	}
	if rulesJSON(t, r) != rulesJSON(t, base) {
		t.Errorf("empty input changed the base:\n got %s\nwant %s", rulesJSON(t, r), rulesJSON(t, base))
	}
	// Changing one field keeps every other.
	r, err = RulesInput{MaxPending: inInt(2)}.Validate(base)
	if err != nil {
		t.Fatal(err)
	}
	base.MaxPending = 2
	if rulesJSON(t, r) != rulesJSON(t, base) {
		t.Errorf("one field changed more:\n got %s\nwant %s", rulesJSON(t, r), rulesJSON(t, base))
	}
}

func TestValidateAcceptsEachField(t *testing.T) {
	cases := []struct {
		name  string
		in    RulesInput
		check func(r Rules) string // "" when fine, else what is wrong
	}{
		{"per_spend_limit keeps its scale", RulesInput{PerSpendLimit: inStr("7.5")}, func(r Rules) string {
			return wantStr(r.PerSpendLimit.String(), "7.5")
		}},
		{"daily_cap", RulesInput{DailyCap: inStr("20")}, func(r Rules) string { return wantStr(r.DailyCap.String(), "20") }},
		{"daily_cap equal to monthly_cap", RulesInput{DailyCap: inStr("500.00")}, func(r Rules) string {
			return wantStr(r.DailyCap.Display(), "500.00")
		}},
		{"monthly_cap", RulesInput{MonthlyCap: inStr("750.25")}, func(r Rules) string { return wantStr(r.MonthlyCap.String(), "750.25") }},
		{"lifetime_cap", RulesInput{LifetimeCap: inSet("5000")}, func(r Rules) string {
			if r.LifetimeCap == nil {
				return "lifetime_cap is nil"
			}
			return wantStr(r.LifetimeCap.String(), "5000")
		}},
		{"lifetime_cap equal to monthly_cap", RulesInput{LifetimeCap: inSet("500")}, func(r Rules) string {
			if r.LifetimeCap == nil {
				return "lifetime_cap is nil"
			}
			return ""
		}},
		{"approval_over", RulesInput{ApprovalOver: inStr("0.001")}, func(r Rules) string { return wantStr(r.ApprovalOver.String(), "0.001") }},
		{"destination_window_over", RulesInput{DestinationWindowOver: inSet("25.00")}, func(r Rules) string {
			if r.DestinationWindowOver == nil {
				return "destination_window_over is nil"
			}
			return wantStr(r.DestinationWindowOver.String(), "25.00")
		}},
		{"patterns are canonicalized and deduplicated", RulesInput{
			TrustedDestinations: inList("API.Vendor.com", "*.Trusted.IO", "api.vendor.com", "Bücher.de"),
		}, func(r Rules) string {
			return wantStr(patternText(r.TrustedDestinations), "api.vendor.com *.trusted.io xn--bcher-kva.de")
		}},
		{"allowed_destinations", RulesInput{AllowedDestinations: inList("shop.store.com", "*.store.com")}, func(r Rules) string {
			return wantStr(patternText(r.AllowedDestinations), "shop.store.com *.store.com")
		}},
		{"blocked_destinations", RulesInput{BlockedDestinations: inList("*.evil.com")}, func(r Rules) string {
			return wantStr(patternText(r.BlockedDestinations), "*.evil.com")
		}},
		{"an empty list clears the base list", RulesInput{TrustedDestinations: inList()}, func(r Rules) string {
			if r.TrustedDestinations == nil || len(r.TrustedDestinations) != 0 {
				return fmt.Sprintf("trusted %v, want an empty list", r.TrustedDestinations)
			}
			return ""
		}},
		{"500 patterns are allowed", RulesInput{BlockedDestinations: manyHosts(500)}, func(r Rules) string {
			return wantStr(fmt.Sprint(len(r.BlockedDestinations)), "500")
		}},
		{"unknown_destination decline", RulesInput{UnknownDestination: inStr("decline")}, func(r Rules) string {
			return wantStr(r.UnknownDestination, UnknownDecline)
		}},
		{"unknown_destination ask", RulesInput{UnknownDestination: inStr("ask")}, func(r Rules) string {
			return wantStr(r.UnknownDestination, UnknownAsk)
		}},
		{"max_pending 0", RulesInput{MaxPending: inInt(0)}, func(r Rules) string { return wantStr(fmt.Sprint(r.MaxPending), "0") }},
		{"max_pending 100", RulesInput{MaxPending: inInt(100)}, func(r Rules) string { return wantStr(fmt.Sprint(r.MaxPending), "100") }},
		{"approval_ttl_minutes 5", RulesInput{ApprovalTTLMinutes: inInt(5)}, func(r Rules) string {
			return wantStr(fmt.Sprint(r.ApprovalTTLMinutes), "5")
		}},
		{"approval_ttl_minutes 60", RulesInput{ApprovalTTLMinutes: inInt(60)}, func(r Rules) string {
			return wantStr(fmt.Sprint(r.ApprovalTTLMinutes), "60")
		}},
		{"valid_until is stored in UTC", RulesInput{ValidUntil: inSet("2026-12-31T23:59:59+01:00")}, func(r Rules) string {
			if r.ValidUntil == nil {
				return "valid_until is nil"
			}
			if r.ValidUntil.Location() != time.UTC {
				return "valid_until not in UTC: " + r.ValidUntil.String()
			}
			return wantStr(r.ValidUntil.Format(time.RFC3339), "2026-12-31T22:59:59Z")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.in.Validate(fixRules())
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if problem := c.check(r); problem != "" {
				t.Error(problem)
			}
		})
	}
}

func wantStr(got, want string) string {
	if got != want {
		return fmt.Sprintf("got %q, want %q", got, want)
	}
	return ""
}

func patternText(ps []Pattern) string {
	var ss []string
	for _, p := range ps {
		ss = append(ss, p.String())
	}
	return strings.Join(ss, " ")
}

func manyHosts(n int) *[]string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d.example-shop.com", i)
	}
	return &out
}

// Each bad field is reported by name with a message that says what to do.
func TestValidateRejectsEachField(t *testing.T) {
	cases := []struct {
		name  string
		base  func(r *Rules)
		in    RulesInput
		param string
		hint  *regexp.Regexp // the message must say what to fix
	}{
		{"per_spend_limit not a number", nil, RulesInput{PerSpendLimit: inStr("ten")}, "per_spend_limit", regexp.MustCompile(`"5\.00"`)},
		{"per_spend_limit negative", nil, RulesInput{PerSpendLimit: inStr("-1.00")}, "per_spend_limit", regexp.MustCompile(`negative`)},
		{"daily_cap with exponent", nil, RulesInput{DailyCap: inStr("1e3")}, "daily_cap", regexp.MustCompile(`exponent`)},
		{"monthly_cap empty", nil, RulesInput{MonthlyCap: inStr("")}, "monthly_cap", regexp.MustCompile(`empty`)},
		{"lifetime_cap with separator", nil, RulesInput{LifetimeCap: inSet("1,000.00")}, "lifetime_cap", regexp.MustCompile(`separator`)},
		{"approval_over too fine", nil, RulesInput{ApprovalOver: inStr("5.0000001")}, "approval_over", regexp.MustCompile(`at most 6 decimals`)},
		{"destination_window_over with a sign", nil, RulesInput{DestinationWindowOver: inSet("+20")}, "destination_window_over", regexp.MustCompile(`remove the "\+"`)},
		{"allowed pattern is a URL", nil, RulesInput{AllowedDestinations: inList("ok.com", "https://shop.com")}, "allowed_destinations[1]", regexp.MustCompile(`remove the scheme`)},
		{"trusted pattern is a bare star", nil, RulesInput{TrustedDestinations: inList("*")}, "trusted_destinations[0]", regexp.MustCompile(`name a domain`)},
		{"trusted pattern has a star inside", nil, RulesInput{TrustedDestinations: inList("api.*.com")}, "trusted_destinations[0]", regexp.MustCompile(`leading "\*\."`)},
		{"blocked pattern is an IP", nil, RulesInput{BlockedDestinations: inList("10.0.0.1")}, "blocked_destinations[0]", regexp.MustCompile(`DNS host name`)},
		{"too many patterns", nil, RulesInput{TrustedDestinations: manyHosts(501)}, "trusted_destinations", regexp.MustCompile(`at most 500`)},
		{"unknown_destination unknown", nil, RulesInput{UnknownDestination: inStr("allow")}, "unknown_destination", regexp.MustCompile(`"ask" or "decline"`)},
		{"unknown_destination is case-sensitive", nil, RulesInput{UnknownDestination: inStr("ASK")}, "unknown_destination", regexp.MustCompile(`"ask" or "decline"`)},
		{"max_pending negative", nil, RulesInput{MaxPending: inInt(-1)}, "max_pending", regexp.MustCompile(`from 0 to 100`)},
		{"max_pending too high", nil, RulesInput{MaxPending: inInt(101)}, "max_pending", regexp.MustCompile(`from 0 to 100`)},
		{"approval_ttl_minutes 4", nil, RulesInput{ApprovalTTLMinutes: inInt(4)}, "approval_ttl_minutes", regexp.MustCompile(`from 5 to 60`)},
		{"approval_ttl_minutes 61", nil, RulesInput{ApprovalTTLMinutes: inInt(61)}, "approval_ttl_minutes", regexp.MustCompile(`from 5 to 60`)},
		{"approval_ttl_minutes 0", nil, RulesInput{ApprovalTTLMinutes: inInt(0)}, "approval_ttl_minutes", regexp.MustCompile(`from 5 to 60`)},
		{"valid_until a date only", nil, RulesInput{ValidUntil: inSet("2026-12-31")}, "valid_until", regexp.MustCompile(`RFC 3339`)},
		{"valid_until in words", nil, RulesInput{ValidUntil: inSet("tomorrow")}, "valid_until", regexp.MustCompile(`RFC 3339`)},
		{"daily_cap above monthly_cap", nil, RulesInput{DailyCap: inStr("600.00")}, "daily_cap", regexp.MustCompile(`monthly_cap`)},
		// The field the request set is the one named.
		{"monthly_cap lowered below daily_cap", nil, RulesInput{MonthlyCap: inStr("40")}, "monthly_cap", regexp.MustCompile(`below daily_cap \(50\.00\)`)},
		{"both set, daily_cap above monthly_cap", nil, RulesInput{DailyCap: inStr("60"), MonthlyCap: inStr("40")}, "daily_cap", regexp.MustCompile(`above monthly_cap \(40\.00\)`)},
		{"daily_cap above the base monthly_cap", func(r *Rules) { r.MonthlyCap = amt("100.00") }, RulesInput{DailyCap: inStr("100.01")},
			"daily_cap", regexp.MustCompile(`monthly_cap`)},
		{"lifetime_cap set below monthly_cap", nil, RulesInput{LifetimeCap: inSet("499.99")}, "lifetime_cap", regexp.MustCompile(`below monthly_cap \(500\.00\)`)},
		{"lifetime_cap 0", nil, RulesInput{LifetimeCap: inSet("0")}, "lifetime_cap", regexp.MustCompile(`below monthly_cap`)},
		{"monthly_cap raised above lifetime_cap", func(r *Rules) { r.LifetimeCap = amtPtr("600.00") }, RulesInput{MonthlyCap: inStr("700")},
			"monthly_cap", regexp.MustCompile(`above lifetime_cap \(600\.00\)`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := fixRules()
			if c.base != nil {
				c.base(&base)
			}
			r, err := c.in.Validate(base)
			if err == nil {
				t.Fatalf("accepted: %s", rulesJSON(t, r))
			}
			if err.Param != c.param {
				t.Errorf("Param = %q, want %q (message %q)", err.Param, c.param, err.Message)
			}
			if !c.hint.MatchString(err.Message) {
				t.Errorf("message %q does not say what to fix (want %s)", err.Message, c.hint)
			}
			if !strings.HasPrefix(err.Error(), err.Param+": ") {
				t.Errorf("Error() = %q does not start with the field", err.Error())
			}
			if rulesJSON(t, r) != rulesJSON(t, Rules{}) {
				t.Errorf("a rejected input returned rules %s", rulesJSON(t, r))
			}
		})
	}
}

// An explicit null removes an optional limit; omitting the field keeps it.
func TestValidateExplicitNullRemoves(t *testing.T) {
	base := fixRules()
	base.LifetimeCap = amtPtr("900.00")
	base.DestinationWindowOver = amtPtr("30.00")
	base.ValidUntil = timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))

	kept, err := RulesInput{}.Validate(base)
	if err != nil {
		t.Fatal(err)
	}
	if kept.LifetimeCap == nil || kept.DestinationWindowOver == nil || kept.ValidUntil == nil {
		t.Fatalf("omitted fields were removed: %s", rulesJSON(t, kept))
	}
	cases := []struct {
		name string
		in   RulesInput
		gone func(r Rules) bool
	}{
		{"lifetime_cap", RulesInput{LifetimeCap: inNull()}, func(r Rules) bool { return r.LifetimeCap == nil }},
		{"destination_window_over", RulesInput{DestinationWindowOver: inNull()}, func(r Rules) bool { return r.DestinationWindowOver == nil }},
		{"valid_until", RulesInput{ValidUntil: inNull()}, func(r Rules) bool { return r.ValidUntil == nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.in.Validate(base)
			if err != nil {
				t.Fatal(err)
			}
			if !c.gone(r) {
				t.Errorf("null did not remove %s: %s", c.name, rulesJSON(t, r))
			}
			// Nothing else moved.
			var others = map[string]json.RawMessage{}
			var baseFields = map[string]json.RawMessage{}
			_ = json.Unmarshal([]byte(rulesJSON(t, r)), &others)
			_ = json.Unmarshal([]byte(rulesJSON(t, base)), &baseFields)
			for k, v := range baseFields {
				if k != c.name && string(others[k]) != string(v) {
					t.Errorf("%s changed from %s to %s", k, v, others[k])
				}
			}
		})
	}
}

// Validate must not share the caller's base lists: changing the result
// later cannot change the base.
func TestValidateDoesNotAliasTheBase(t *testing.T) {
	base := fixRules()
	r, err := RulesInput{BlockedDestinations: inList("*.evil.com")}.Validate(base)
	if err != nil {
		t.Fatal(err)
	}
	r.BlockedDestinations[0] = MustPattern("changed.com")
	if len(base.BlockedDestinations) != 0 {
		t.Errorf("base blocked list became %v", base.BlockedDestinations)
	}
}

// goldenHashRules is the fixed policy whose hash is pinned in testdata: a
// stored policy hash must never change meaning between releases.
func goldenHashRules() Rules {
	return Rules{
		PerSpendLimit:         amt("12.50"),
		DailyCap:              amt("40.00"),
		MonthlyCap:            amt("400.00"),
		LifetimeCap:           amtPtr("4000.00"),
		AllowedDestinations:   pats("shop.store.com", "*.store.com"),
		TrustedDestinations:   pats("api.vendor.com", "*.trusted.io"),
		BlockedDestinations:   pats("*.evil.com"),
		UnknownDestination:    UnknownAsk,
		ApprovalOver:          amt("5.00"),
		DestinationWindowOver: amtPtr("25.00"),
		MaxPending:            7,
		ApprovalTTLMinutes:    20,
		ValidUntil:            timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
}

const goldenHashFile = "testdata/rules_hash.golden"

func TestRulesHashGolden(t *testing.T) {
	got := goldenHashRules().Hash()
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(got) {
		t.Fatalf("hash %q is not sha256:<64 hex>", got)
	}
	if *rewriteGolden {
		if err := os.MkdirAll(filepath.Dir(goldenHashFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenHashFile, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(goldenHashFile)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	// The pinned value is the SHA-256 of this canonical form: amounts in
	// display form, patterns canonical and in list order, time in UTC.
	canonical := `{"per_spend_limit":"12.50","daily_cap":"40.00","monthly_cap":"400.00","lifetime_cap":"4000.00",` +
		`"allowed_destinations":["shop.store.com","*.store.com"],"trusted_destinations":["api.vendor.com","*.trusted.io"],` +
		`"blocked_destinations":["*.evil.com"],"unknown_destination":"ask","approval_over":"5.00",` +
		`"destination_window_over":"25.00","max_pending":7,"approval_ttl_minutes":20,"valid_until":"2027-01-01T00:00:00Z"}`
	sum := sha256.Sum256([]byte(canonical))
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Hash() = %s, want the SHA-256 of the canonical form %s", got, want)
	}
	if want := strings.TrimSpace(string(b)); got != want {
		t.Errorf("the hash of the fixed policy changed:\n got %s\nwant %s\n"+
			"stored policies would no longer match their hash; if the change is intended, run with -rewrite", got, want)
	}
}

// The hash is of the meaning, not the spelling.
func TestRulesHashIgnoresSpelling(t *testing.T) {
	spelled := func(amount, pattern, until string) Rules {
		in := RulesInput{
			PerSpendLimit: inStr("12.5"), DailyCap: inStr("40"), MonthlyCap: inStr("400.000"), LifetimeCap: inSet("4000"),
			AllowedDestinations: inList("Shop.Store.com", "*.STORE.com"), TrustedDestinations: inList(pattern, "*.trusted.io"),
			BlockedDestinations: inList("*.evil.com", "*.Evil.com"), UnknownDestination: inStr("ask"),
			ApprovalOver: inStr(amount), DestinationWindowOver: inSet("25"), MaxPending: inInt(7), ApprovalTTLMinutes: inInt(20),
			ValidUntil: inSet(until),
		}
		r, err := in.Validate(DefaultRules())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := goldenHashRules().Hash()
	for _, r := range []Rules{
		spelled("5", "api.vendor.com", "2027-01-01T00:00:00Z"),
		spelled("5.00", "API.VENDOR.COM", "2027-01-01T01:00:00+01:00"),
		spelled("5.000000", "api.Vendor.com", "2026-12-31T19:00:00-05:00"),
	} {
		if got := r.Hash(); got != want {
			t.Errorf("a different spelling of the fixed policy hashes to %s, want %s\n%s", got, want, rulesJSON(t, r))
		}
	}
	if r1, r2 := goldenHashRules(), goldenHashRules(); r1.Hash() != r2.Hash() {
		t.Error("the same rules, built twice, hash differently")
	}
	// nil and empty lists mean the same thing.
	a, b := goldenHashRules(), goldenHashRules()
	a.BlockedDestinations, b.BlockedDestinations = nil, []Pattern{}
	if a.Hash() != b.Hash() {
		t.Error("nil and empty blocked lists hash differently")
	}
}

// Every field is part of the hash: changing any one of them, even to a
// value that looks close, gives a new hash.
func TestRulesHashCoversEveryField(t *testing.T) {
	changes := []struct {
		field  string
		change func(r *Rules)
	}{
		{"per_spend_limit", func(r *Rules) { r.PerSpendLimit = amt("12.51") }},
		{"daily_cap", func(r *Rules) { r.DailyCap = amt("40.01") }},
		{"monthly_cap", func(r *Rules) { r.MonthlyCap = amt("399.99") }},
		{"lifetime_cap", func(r *Rules) { r.LifetimeCap = amtPtr("4000.000001") }},
		{"lifetime_cap null", func(r *Rules) { r.LifetimeCap = nil }},
		{"allowed_destinations", func(r *Rules) { r.AllowedDestinations = pats("shop.store.com") }},
		{"allowed_destinations order", func(r *Rules) { r.AllowedDestinations = pats("*.store.com", "shop.store.com") }},
		{"trusted_destinations", func(r *Rules) { r.TrustedDestinations = pats("api.vendor.com", "*.trusted.io", "new.com") }},
		{"blocked_destinations", func(r *Rules) { r.BlockedDestinations = pats("evil.com") }},
		{"a pattern moved from blocked to trusted", func(r *Rules) {
			r.BlockedDestinations = nil
			r.TrustedDestinations = pats("api.vendor.com", "*.trusted.io", "*.evil.com")
		}},
		{"unknown_destination", func(r *Rules) { r.UnknownDestination = UnknownDecline }},
		{"approval_over", func(r *Rules) { r.ApprovalOver = amt("5.001") }},
		{"destination_window_over", func(r *Rules) { r.DestinationWindowOver = amtPtr("26.00") }},
		{"destination_window_over null", func(r *Rules) { r.DestinationWindowOver = nil }},
		{"max_pending", func(r *Rules) { r.MaxPending = 8 }},
		{"approval_ttl_minutes", func(r *Rules) { r.ApprovalTTLMinutes = 21 }},
		{"valid_until", func(r *Rules) { r.ValidUntil = timePtr(time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC)) }},
		{"valid_until null", func(r *Rules) { r.ValidUntil = nil }},
	}
	seen := map[string]string{goldenHashRules().Hash(): "the fixed policy"}
	for _, c := range changes {
		r := goldenHashRules()
		c.change(&r)
		h := r.Hash()
		if other, dup := seen[h]; dup {
			t.Errorf("changing %s gives the same hash as %s", c.field, other)
		}
		seen[h] = c.field
	}
	// A cap of zero is not the absence of a cap.
	zero, none := goldenHashRules(), goldenHashRules()
	zero.LifetimeCap, none.LifetimeCap = amtPtr("0"), nil
	if zero.Hash() == none.Hash() {
		t.Error("lifetime_cap 0 and null hash the same")
	}
}

func TestNewPolicyHashesItsRules(t *testing.T) {
	r := goldenHashRules()
	created := time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("UTC+1", 3600))
	p := NewPolicy("pol_1", "agt_1", 4, r, false, created, created.Add(time.Hour))
	if p.Hash != r.Hash() || p.Object != "policy" || p.Version != 4 || p.Livemode ||
		p.CreatedAt.Location() != time.UTC || !p.CreatedAt.Equal(created) || !p.EffectiveAt.Equal(created.Add(time.Hour)) {
		t.Errorf("policy %+v", p)
	}
}

func TestLoosens(t *testing.T) {
	base := func() Rules {
		r := fixRules()
		r.LifetimeCap = amtPtr("1000.00")
		r.DestinationWindowOver = amtPtr("20.00")
		r.ValidUntil = timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		r.BlockedDestinations = pats("*.evil.com", "bad.com")
		r.AllowedDestinations = pats("shop.store.com", "docs.store.com")
		return r
	}
	cases := []struct {
		name   string
		old    func(r *Rules) // applied to the base to make the old rules
		change func(r *Rules) // applied to the old rules to make the new
		want   bool
	}{
		{"no change", nil, func(r *Rules) {}, false},
		{"same amounts written differently", nil, func(r *Rules) {
			r.PerSpendLimit, r.DailyCap = amt("10"), amt("50.000")
		}, false},
		{"trusted patterns reordered", nil, func(r *Rules) { r.TrustedDestinations = pats("*.trusted.io", "api.vendor.com") }, false},

		// loosening: more room for the agent
		{"higher per_spend_limit", nil, func(r *Rules) { r.PerSpendLimit = amt("10.01") }, true},
		{"higher daily_cap", nil, func(r *Rules) { r.DailyCap = amt("60.00") }, true},
		{"higher monthly_cap", nil, func(r *Rules) { r.MonthlyCap = amt("501.00") }, true},
		{"higher lifetime_cap", nil, func(r *Rules) { r.LifetimeCap = amtPtr("1000.01") }, true},
		{"lifetime cap removed", nil, func(r *Rules) { r.LifetimeCap = nil }, true},
		{"higher approval_over", nil, func(r *Rules) { r.ApprovalOver = amt("6.00") }, true},
		{"higher destination_window_over", nil, func(r *Rules) { r.DestinationWindowOver = amtPtr("25.00") }, true},
		{"destination window removed", nil, func(r *Rules) { r.DestinationWindowOver = nil }, true},
		{"higher max_pending", nil, func(r *Rules) { r.MaxPending = 6 }, true},
		{"new trusted pattern", nil, func(r *Rules) { r.TrustedDestinations = pats("api.vendor.com", "*.trusted.io", "new.com") }, true},
		{"trusted host widened to a wildcard", nil, func(r *Rules) { r.TrustedDestinations = pats("*.vendor.com", "*.trusted.io") }, true},
		{"new allowed pattern", nil, func(r *Rules) {
			r.AllowedDestinations = pats("shop.store.com", "docs.store.com", "*.cdn.store.com")
		}, true},
		{"block removed", nil, func(r *Rules) { r.BlockedDestinations = pats("*.evil.com") }, true},
		{"block narrowed from a wildcard to one host", nil, func(r *Rules) { r.BlockedDestinations = pats("www.evil.com", "bad.com") }, true},
		{"later valid_until", nil, func(r *Rules) { r.ValidUntil = timePtr(time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC)) }, true},
		{"valid_until removed", nil, func(r *Rules) { r.ValidUntil = nil }, true},
		{"decline becomes ask", func(r *Rules) { r.UnknownDestination = UnknownDecline }, func(r *Rules) { r.UnknownDestination = UnknownAsk }, true},
		{"one loosening among tightenings", nil, func(r *Rules) {
			r.DailyCap, r.MonthlyCap, r.PerSpendLimit = amt("10.00"), amt("100.00"), amt("11.00")
		}, true},

		// tightening: applies at once
		{"lower per_spend_limit", nil, func(r *Rules) { r.PerSpendLimit = amt("9.99") }, false},
		{"lower daily_cap", nil, func(r *Rules) { r.DailyCap = amt("40.00") }, false},
		{"lower monthly_cap", nil, func(r *Rules) { r.MonthlyCap = amt("400.00") }, false},
		{"lower lifetime_cap", nil, func(r *Rules) { r.LifetimeCap = amtPtr("999.99") }, false},
		{"lifetime cap added", func(r *Rules) { r.LifetimeCap = nil }, func(r *Rules) { r.LifetimeCap = amtPtr("1000000.00") }, false},
		{"lower approval_over", nil, func(r *Rules) { r.ApprovalOver = amt("4.99") }, false},
		{"lower destination_window_over", nil, func(r *Rules) { r.DestinationWindowOver = amtPtr("19.99") }, false},
		{"destination window added", func(r *Rules) { r.DestinationWindowOver = nil }, func(r *Rules) { r.DestinationWindowOver = amtPtr("1000.00") }, false},
		{"lower max_pending", nil, func(r *Rules) { r.MaxPending = 4 }, false},
		{"trusted pattern removed", nil, func(r *Rules) { r.TrustedDestinations = pats("api.vendor.com") }, false},
		{"allowed pattern removed, list not empty", nil, func(r *Rules) { r.AllowedDestinations = pats("shop.store.com") }, false},
		{"allowed list emptied", nil, func(r *Rules) { r.AllowedDestinations = nil }, false},
		{"block added", nil, func(r *Rules) { r.BlockedDestinations = pats("*.evil.com", "bad.com", "worse.com") }, false},
		{"earlier valid_until", nil, func(r *Rules) { r.ValidUntil = timePtr(time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)) }, false},
		{"valid_until added", func(r *Rules) { r.ValidUntil = nil }, func(r *Rules) { r.ValidUntil = timePtr(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) }, false},
		{"ask becomes decline", nil, func(r *Rules) { r.UnknownDestination = UnknownDecline }, false},
		{"everything tighter at once", nil, func(r *Rules) {
			r.PerSpendLimit, r.DailyCap, r.MonthlyCap, r.LifetimeCap = amt("1.00"), amt("2.00"), amt("3.00"), amtPtr("4.00")
			r.ApprovalOver, r.DestinationWindowOver, r.MaxPending = amt("0.50"), amtPtr("1.00"), 1
			r.TrustedDestinations, r.BlockedDestinations = nil, pats("*.evil.com", "bad.com", "*.vendor.com")
			r.ValidUntil = timePtr(fixNow)
			r.UnknownDestination = UnknownDecline
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := base()
			if c.old != nil {
				c.old(&old)
			}
			nu := old
			c.change(&nu)
			if got := Loosens(old, nu); got != c.want {
				t.Errorf("Loosens = %v, want %v\nold %s\nnew %s", got, c.want, rulesJSON(t, old), rulesJSON(t, nu))
			}
		})
	}
}

// An edit is split field by field: the part that applies at once holds
// the fields whose change alone tightens, and never loosens.
func TestTighteningPart(t *testing.T) {
	old := DefaultRules()
	vendor := MustPattern("api.vendor.com")
	edit := func(f func(r *Rules)) Rules {
		r := DefaultRules()
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		new  Rules
		ok   bool
		want Rules
	}{
		{"pure loosening", edit(func(r *Rules) { r.DailyCap = MustAmount("60.00") }), false, old},
		{"pure tightening", edit(func(r *Rules) { r.DailyCap = MustAmount("20.00") }), true,
			edit(func(r *Rules) { r.DailyCap = MustAmount("20.00") })},
		{"both", edit(func(r *Rules) {
			r.DailyCap = MustAmount("20.00")
			r.TrustedDestinations = []Pattern{vendor}
			r.BlockedDestinations = []Pattern{MustPattern("*.bad-vendor.com")}
			r.MaxPending = 9
		}), true, edit(func(r *Rules) {
			r.DailyCap = MustAmount("20.00")
			r.BlockedDestinations = []Pattern{MustPattern("*.bad-vendor.com")}
		})},
		{"nothing changes", old, false, old},
	} {
		t.Run(tc.name, func(t *testing.T) {
			part, ok := TighteningPart(old, tc.new)
			if ok != tc.ok || part.Hash() != tc.want.Hash() {
				t.Fatalf("TighteningPart = %+v, %v; want %+v, %v", part, ok, tc.want, tc.ok)
			}
			if Loosens(old, part) {
				t.Fatal("the part loosens")
			}
		})
	}
}
