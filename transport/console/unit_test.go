package console

import (
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

func TestPasswordHashAndVerify(t *testing.T) {
	h := HashPassword("correct horse battery")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$") || strings.Count(h, "$") != 5 {
		t.Fatalf("hash %q is not a PHC argon2id string", h)
	}
	if HashPassword("correct horse battery") == h {
		t.Fatal("two hashes of one password must differ (random salt)")
	}
	if !VerifyPassword(h, "correct horse battery") {
		t.Fatal("the password does not verify")
	}
	parts := strings.Split(h, "$")
	for name, bad := range map[string]string{
		"wrong password": "",
		"empty hash":     "-",
		"argon2i":        strings.Replace(h, "argon2id", "argon2i", 1),
		"other version":  strings.Replace(h, "v=19", "v=16", 1),
		"huge memory":    strings.Replace(h, "m=65536", "m=99999999", 1),
		"zero passes":    strings.Replace(h, "t=3", "t=0", 1),
		"bad salt":       strings.Join(append(append([]string{}, parts[:4]...), "!!", parts[5]), "$"),
		"short key":      strings.Join(append(append([]string{}, parts[:5]...), "AAAA"), "$"),
	} {
		hash, pw := bad, "correct horse battery"
		if name == "wrong password" {
			hash, pw = h, "correct horse batterY"
		}
		if name == "empty hash" {
			hash = ""
		}
		if VerifyPassword(hash, pw) {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestSafeNext(t *testing.T) {
	c := &Console{base: "/console"}
	for next, want := range map[string]string{
		"":                               "/console/approvals",
		"/console/spends?status=settled": "/console/spends?status=settled",
		"/console/approvals/apr_1":       "/console/approvals/apr_1",
		"https://evil.example/console/x": "/console/approvals",
		"//evil.example/console/x":       "/console/approvals",
		"/v1/spends":                     "/console/approvals",
		"/console":                       "/console/approvals",
		"/console/\\evil":                "/console/approvals",
		"javascript:alert(1)":            "/console/approvals",
		"/consolex/other":                "/console/approvals",
		"/console/x\r\nSet-Cookie: a=b":  "/console/approvals",
		"/console/approvals#frag":        "/console/approvals#frag",
	} {
		if got := c.safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func rules(change func(*policy.Rules)) policy.Rules {
	r := policy.DefaultRules()
	change(&r)
	return r
}

func TestClassifyMarksEachChange(t *testing.T) {
	vendor, _ := policy.ParsePattern("api.vendor.com")
	hundred := policy.MustAmount("100.00")
	old := policy.DefaultRules()
	for _, tc := range []struct {
		name    string
		new     policy.Rules
		loosens []bool
	}{
		{"nothing", old, nil},
		{"lower daily cap", rules(func(r *policy.Rules) { r.DailyCap = policy.MustAmount("20.00") }), []bool{false}},
		{"higher daily cap", rules(func(r *policy.Rules) { r.DailyCap = policy.MustAmount("60.00") }), []bool{true}},
		{"trust a vendor", rules(func(r *policy.Rules) { r.TrustedDestinations = []policy.Pattern{vendor} }), []bool{true}},
		{"block a vendor", rules(func(r *policy.Rules) { r.BlockedDestinations = []policy.Pattern{vendor} }), []bool{false}},
		{"add a lifetime cap", rules(func(r *policy.Rules) { r.LifetimeCap = &hundred }), []bool{false}},
		{"decline unknown", rules(func(r *policy.Rules) { r.UnknownDestination = policy.UnknownDecline }), []bool{false}},
		{"both", rules(func(r *policy.Rules) {
			r.PerSpendLimit = policy.MustAmount("5.00")
			r.MaxPending = 9
		}), []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(old, tc.new)
			if len(got) != len(tc.loosens) {
				t.Fatalf("%d changes %+v, want %d", len(got), got, len(tc.loosens))
			}
			for i, ch := range got {
				if ch.Loosens != tc.loosens[i] {
					t.Errorf("%s: loosens %v, want %v", ch.Label, ch.Loosens, tc.loosens[i])
				}
			}
			// The whole version loosens when any field does, as the engine says.
			any := false
			for _, l := range tc.loosens {
				any = any || l
			}
			if policy.Loosens(old, tc.new) != any {
				t.Errorf("policy.Loosens = %v, fields say %v", !any, any)
			}
			part, ok := policy.TighteningPart(old, tc.new)
			if ok && policy.Loosens(old, part) {
				t.Error("the tightening part loosens")
			}
		})
	}
}

func TestDailyChartGeometry(t *testing.T) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	days := make([]actors.DaySpend, 14)
	for i := range days {
		days[i] = actors.DaySpend{Day: day.AddDate(0, 0, i), Settled: policy.MustAmount("0.00")}
	}
	days[3].Settled = policy.MustAmount("5.00")
	days[7].Settled = policy.MustAmount("12.50") // above the cap
	days[13].Settled = policy.MustAmount("10.00")
	ch := dailyChart(0, "bot", days, policy.MustAmount("10.00"))
	if len(ch.Bars) != 14 {
		t.Fatalf("%d bars", len(ch.Bars))
	}
	if ch.Bars[0].H != 0 || ch.Bars[0].Y != plotBottom {
		t.Errorf("empty day drawn %+v", ch.Bars[0])
	}
	// Heights are proportional: 5.00 is half of 10.00, and 10.00 reaches the cap line.
	if h3, h13 := ch.Bars[3].H, ch.Bars[13].H; h13 != 2*h3 && h13 != 2*h3+1 {
		t.Errorf("heights %d and %d are not 1:2", h3, h13)
	}
	if ch.Bars[13].Y != ch.CapY {
		t.Errorf("a day at the cap ends at y %d, the cap line is at %d", ch.Bars[13].Y, ch.CapY)
	}
	if !ch.Bars[7].Over || ch.Bars[13].Over || ch.Bars[7].Y < plotTop {
		t.Errorf("over-cap marking or head room wrong: %+v %+v", ch.Bars[7], ch.Bars[13])
	}
	if !strings.Contains(ch.Desc, "12.50") || !strings.Contains(ch.Desc, "1 of 14 days") {
		t.Errorf("description %q", ch.Desc)
	}
	// A huge amount does not overflow.
	days[0].Settled = policy.MustAmount("999999999999.999999")
	huge := dailyChart(1, "bot", days, policy.MustAmount("10.00"))
	if b := huge.Bars[0]; b.Y < plotTop || b.H <= 0 || b.H > plotBottom-plotTop {
		t.Errorf("huge day drawn %+v", b)
	}
}

func TestTimeLeft(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "expired", -time.Second: "expired", 14*time.Minute + 58*time.Second: "14 min 58 s",
		9 * time.Second: "9 s", 2*time.Hour + 5*time.Minute: "2 h 5 min",
	} {
		if got := timeLeft(d); got != want {
			t.Errorf("timeLeft(%v) = %q, want %q", d, got, want)
		}
	}
}
