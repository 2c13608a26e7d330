package policy

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

func TestParseAmountRejects(t *testing.T) {
	// fix is a fragment the Problem must contain: the test pins that each
	// message tells the caller what to change, not just that it is wrong.
	tests := []struct {
		in, fix string
	}{
		{"", "empty"},
		{"-1", "negative"},
		{"-0", "negative"},
		{"+1", `remove the "+"`},
		{"1e3", "exponents are not allowed"},
		{"1E3", "exponents are not allowed"},
		{"1.5e-2", "exponents are not allowed"},
		{"1,00", "thousands separators"},
		{"1,000.00", "thousands separators"},
		{"1_000", "thousands separators"},
		{"1'000", "thousands separators"},
		{"1 000", "remove the spaces"},
		{" 5", "remove the spaces"},
		{"5 ", "remove the spaces"},
		{"5\t", "remove the spaces"},
		{"1\u00a0000", "remove the spaces"},
		{"1\u2009000", "remove the spaces"},
		{"NaN", "finite"},
		{"nan", "finite"},
		{"sNaN", "finite"},
		{"Inf", "finite"},
		{"Infinity", "finite"},
		{"-Infinity", "negative"},
		{"0.0000001", "at most 6 decimals"},
		{"1.1234567", "at most 6 decimals"},
		{"1000000000000", "at most 12 digits"},
		{"9999999999999.5", "at most 12 digits"},
		{"01", "leading zeros"},
		{"00", "leading zeros"},
		{"00.5", "leading zeros"},
		{".5", `write "0.5"`},
		{"5.", `write "5" or "5.00"`},
		{".", "no digits"},
		{"1.2.3", `single "."`},
		{"0x10", `remove the character 'x'`},
		{"$5", `remove the character '$'`},
		{"５", `remove the character '５'`},
		{"5€", `remove the character '€'`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAmount(tt.in)
			if err == nil {
				t.Fatalf("ParseAmount(%q) = %s, want error", tt.in, a)
			}
			var ae *AmountError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not *AmountError", err)
			}
			if ae.Input != tt.in {
				t.Errorf("Input = %q, want %q", ae.Input, tt.in)
			}
			if !strings.Contains(ae.Problem, tt.fix) {
				t.Errorf("Problem = %q, want it to mention %q", ae.Problem, tt.fix)
			}
			if !strings.Contains(err.Error(), ae.Problem) {
				t.Errorf("Error() = %q does not include the Problem", err.Error())
			}
			if !errors.Is(err, ErrAmount) {
				t.Errorf("errors.Is(err, ErrAmount) = false")
			}
		})
	}
}

func TestParseAmountAccepts(t *testing.T) {
	tests := []struct {
		in, display string
		micros      int64
	}{
		{"0", "0.00", 0},
		{"0.0", "0.00", 0},
		{"0.001", "0.001", 1000},
		{"0.000001", "0.000001", 1},
		{"5", "5.00", 5_000_000},
		{"5.0", "5.00", 5_000_000},
		{"5.000000", "5.00", 5_000_000},
		{"12.5", "12.50", 12_500_000},
		{"100", "100.00", 100_000_000},
		{"999999999999.999999", "999999999999.999999", 999_999_999_999_999_999},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAmount(tt.in)
			if err != nil {
				t.Fatalf("ParseAmount(%q): %v", tt.in, err)
			}
			if got := a.String(); got != tt.in {
				t.Errorf("String() = %q, want the caller's scale %q", got, tt.in)
			}
			if got := a.Display(); got != tt.display {
				t.Errorf("Display() = %q, want %q", got, tt.display)
			}
			if m, ok := a.Micros(); !ok || m != tt.micros {
				t.Errorf("Micros() = %d, %v; want %d, true", m, ok, tt.micros)
			}
			if a.Sign() < 0 {
				t.Errorf("Sign() < 0 for a wire amount")
			}
			if MustAmount(tt.in).Cmp(a) != 0 {
				t.Errorf("MustAmount disagrees with ParseAmount")
			}
		})
	}
}

func TestMustAmountPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MustAmount(\"1e3\") did not panic")
		}
	}()
	MustAmount("1e3")
}

func TestAmountZeroValue(t *testing.T) {
	var z Amount
	if !z.IsZero() || z.Sign() != 0 || z.String() != "0" || z.Display() != "0.00" {
		t.Fatalf("zero Amount = %q/%q, want 0", z.String(), z.Display())
	}
	if !z.Equal(MustAmount("0.00")) {
		t.Fatal("zero value != 0.00")
	}
}

func TestAmountArithmeticIsExact(t *testing.T) {
	m := MustAmount
	tests := []struct {
		name           string
		got            Amount
		want, wantDisp string
	}{
		{"0.1+0.2", m("0.1").Add(m("0.2")), "0.3", "0.30"},
		{"scale is the larger one", m("5.0").Add(m("0.25")), "5.25", "5.25"},
		{"keeps trailing zeros", m("5.0").Add(m("1")), "6.0", "6.00"},
		{"micro precision", m("0.000001").Add(m("999999999999.999999")), "1000000000000.000000", "1000000000000.00"},
		{"sub to zero", m("5.00").Sub(m("5")), "0.00", "0.00"},
		{"sub negative", m("1").Sub(m("4.25")), "-3.25", "-3.25"},
		{"negative micro", m("0").Sub(m("0.000001")), "-0.000001", "-0.000001"},
		{"back from negative", m("1").Sub(m("4.25")).Add(m("3.25")), "0.00", "0.00"},
		{"0.3-0.1-0.2", m("0.3").Sub(m("0.1")).Sub(m("0.2")), "0.0", "0.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s := tt.got.String(); s != tt.want {
				t.Errorf("String() = %q, want %q", s, tt.want)
			}
			if s := tt.got.Display(); s != tt.wantDisp {
				t.Errorf("Display() = %q, want %q", s, tt.wantDisp)
			}
			if strings.HasPrefix(tt.got.String(), "-0") && tt.got.IsZero() {
				t.Errorf("signed zero %q", tt.got.String())
			}
		})
	}
	if !m("0.1").Add(m("0.2")).Equal(m("0.3")) {
		t.Error("0.1 + 0.2 != 0.3")
	}
}

func TestAmountSumOfManySmallValuesIsExact(t *testing.T) {
	// A float64 drifts after a few thousand additions of 0.1; apd must not.
	sum := Amount{}
	tenth := MustAmount("0.1")
	for range 100_000 {
		sum = sum.Add(tenth)
	}
	if !sum.Equal(MustAmount("10000")) {
		t.Fatalf("sum = %s, want 10000", sum)
	}
}

func TestAmountAtPrecisionLimitPanics(t *testing.T) {
	// 40 significant digits plus one more decimal cannot be exact; that must
	// be a loud bug, never a rounded balance.
	var big Amount
	if err := big.UnmarshalText([]byte("1" + strings.Repeat("0", 39))); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("inexact addition did not panic")
		}
	}()
	big.Add(MustAmount("0.000001"))
}

func TestAmountCompare(t *testing.T) {
	m := MustAmount
	tests := []struct {
		a, b Amount
		cmp  int
	}{
		{m("99"), m("99.00"), 0},
		{m("0.1"), m("0.10"), 0},
		{m("0.000001"), m("0"), 1},
		{m("5"), m("5.000001"), -1},
		{m("1").Sub(m("2")), m("0"), -1},
		{m("999999999999.999999"), m("999999999999.99999"), 1},
	}
	for _, tt := range tests {
		if got := tt.a.Cmp(tt.b); got != tt.cmp {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.cmp)
		}
		if got := tt.b.Cmp(tt.a); got != -tt.cmp {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.cmp)
		}
		if tt.a.Equal(tt.b) != (tt.cmp == 0) {
			t.Errorf("Equal(%s, %s) = %v", tt.a, tt.b, tt.a.Equal(tt.b))
		}
	}
	if got := MinAmount(m("3"), m("2.5")); got.String() != "2.5" {
		t.Errorf("MinAmount = %s", got)
	}
	if got := MaxAmount(m("3"), m("2.5")); got.String() != "3" {
		t.Errorf("MaxAmount = %s", got)
	}
	if got := MinAmount(m("3.0"), m("3")); got.String() != "3.0" {
		t.Errorf("MinAmount tie = %s, want the first argument", got)
	}
	if got := MaxAmount(m("3.0"), m("3")); got.String() != "3.0" {
		t.Errorf("MaxAmount tie = %s, want the first argument", got)
	}
}

func TestAmountValueSemantics(t *testing.T) {
	a := MustAmount("1.5")
	b := a
	_ = a.Add(MustAmount("1"))
	_ = a.Sub(MustAmount("10"))
	if a.String() != "1.5" || b.String() != "1.5" {
		t.Fatalf("receiver changed: a=%s b=%s", a, b)
	}
	// UnmarshalText into a copy must not reach the original, even when the
	// coefficient is large enough to live outside apd's inline storage.
	var big Amount
	if err := big.UnmarshalText([]byte("123456789012345678901234567890123.456789")); err != nil {
		t.Fatal(err)
	}
	cp := big
	if err := cp.UnmarshalText([]byte("1")); err != nil {
		t.Fatal(err)
	}
	if big.String() != "123456789012345678901234567890123.456789" {
		t.Fatalf("original changed to %s", big)
	}
}

func TestAmountConcurrentReads(t *testing.T) {
	// Amounts are shared between goroutines by value; reads must be race free.
	shared := MustAmount("999999999999.999999").Add(MustAmount("999999999999.999999"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_ = shared.Add(MustAmount("1")).Sub(shared).Display()
				_, _ = shared.Micros()
				_ = shared.Cmp(MustAmount("5"))
			}
		})
	}
	wg.Wait()
}

func TestMicros(t *testing.T) {
	for _, m := range []int64{0, 1, 999_999, 1_000_000, -1, -5_250_000, math.MaxInt64, math.MinInt64} {
		a := AmountFromMicros(m)
		got, ok := a.Micros()
		if !ok || got != m {
			t.Errorf("AmountFromMicros(%d).Micros() = %d, %v", m, got, ok)
		}
	}
	if s := AmountFromMicros(5_000_000).String(); s != "5.000000" {
		t.Errorf("AmountFromMicros(5e6).String() = %q", s)
	}
	if s := AmountFromMicros(1_250_000).Display(); s != "1.25" {
		t.Errorf("AmountFromMicros(1.25e6).Display() = %q", s)
	}
	if s := AmountFromMicros(-1).Display(); s != "-0.000001" {
		t.Errorf("AmountFromMicros(-1).Display() = %q", s)
	}
	// Too large for int64 micros: ~1e13 USDC is ~1e19 micros > MaxInt64.
	var huge Amount
	for range 10 {
		huge = huge.Add(MustAmount("999999999999.999999"))
	}
	if _, ok := huge.Micros(); ok {
		t.Errorf("Micros() of %s reported exact", huge)
	}
}

func TestAmountTextRoundTrip(t *testing.T) {
	m := MustAmount
	values := []Amount{
		{}, m("0"), m("0.000"), m("5.0"), m("0.001"), m("999999999999.999999"),
		m("1").Sub(m("4.25")), m("0").Sub(m("0.000001")),
		m("999999999999.999999").Add(m("999999999999.999999")),
		AmountFromMicros(-42),
	}
	for _, a := range values {
		b, err := a.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != a.String() {
			t.Errorf("MarshalText = %q, want String() %q", b, a.String())
		}
		var back Amount
		if err := back.UnmarshalText(b); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", b, err)
		}
		if back.String() != a.String() || !back.Equal(a) {
			t.Errorf("round trip %q -> %q", a.String(), back.String())
		}
	}

	type doc struct {
		Balance Amount `json:"balance"`
	}
	j, err := json.Marshal(doc{Balance: m("2").Sub(m("7.50"))})
	if err != nil {
		t.Fatal(err)
	}
	if string(j) != `{"balance":"-5.50"}` {
		t.Errorf("json = %s", j)
	}
	var d doc
	if err := json.Unmarshal(j, &d); err != nil || d.Balance.String() != "-5.50" {
		t.Errorf("json round trip = %s, %v", d.Balance, err)
	}
}

func TestAmountUnmarshalTextRejects(t *testing.T) {
	for _, in := range []string{
		"", "-", "--1", "+1", "1e3", "NaN", "-Infinity", "01", "-01", ".5", "5.", "1.0000001",
		" 1", "1,0", strings.Repeat("9", 41), "1" + strings.Repeat("0", 64),
	} {
		var a Amount
		err := a.UnmarshalText([]byte(in))
		var ae *AmountError
		if !errors.As(err, &ae) {
			t.Errorf("UnmarshalText(%q) = %v, want *AmountError", in, err)
		}
	}
	// A failed unmarshal leaves the target untouched.
	a := MustAmount("7.5")
	if err := a.UnmarshalText([]byte("x")); err == nil || a.String() != "7.5" {
		t.Errorf("after failed UnmarshalText: %s, %v", a, err)
	}
	// A stored negative zero is read as plain zero.
	if err := a.UnmarshalText([]byte("-0.00")); err != nil || a.Sign() != 0 || a.String() != "0.00" {
		t.Errorf("UnmarshalText(-0.00) = %s, %v", a, err)
	}
}

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{
		"0", "0.001", "5", "5.0", "999999999999.999999", "", "-1", "+1", "1e3",
		"1,00", "1 000", "NaN", "Infinity", "0.0000001", "1000000000000", "01", ".5", "5.",
		"0.000001", "12.50", "0x1p3", "١٢", "1.2.3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// The one-pass parser accepts exactly the wire rule and builds
		// what apd's parser builds.
		plain, ok := parsePlainAmount(s)
		if valid := wireProblem(s) == ""; ok != valid {
			t.Fatalf("parsePlainAmount(%q) ok=%v, but the wire rule says valid=%v", s, ok, valid)
		}
		if ok && !sameDecimal(plain, decimalFromChecked(s)) {
			t.Fatalf("parsePlainAmount(%q) = %s (exp %d), apd parses %s", s, plain, plain.d.Exponent, decimalFromChecked(s))
		}
		a, err := ParseAmount(s)
		if err != nil {
			var ae *AmountError
			if !errors.As(err, &ae) || ae.Problem == "" {
				t.Fatalf("ParseAmount(%q) error %v is not a helpful *AmountError", s, err)
			}
			return
		}
		if got := a.String(); got != s {
			t.Fatalf("String() = %q, want %q", got, s)
		}
		if a.Sign() < 0 {
			t.Fatalf("wire amount %q is negative", s)
		}
		if got, want := a.Display(), a.displayText(); got != want {
			t.Fatalf("Display() = %q, want %q", got, want)
		}
		d, err := ParseAmount(a.Display())
		if err != nil {
			t.Fatalf("Display() %q of %q does not parse: %v", a.Display(), s, err)
		}
		if !d.Equal(a) {
			t.Fatalf("Display() %q != %q", a.Display(), s)
		}
		if _, ok := a.Micros(); !ok {
			t.Fatalf("Micros() of wire amount %q not exact", s)
		}
		var back Amount
		if err := back.UnmarshalText([]byte(a.String())); err != nil || back.String() != s {
			t.Fatalf("text round trip of %q: %q, %v", s, back.String(), err)
		}
		if !a.Add(a).Sub(a).Equal(a) {
			t.Fatalf("a + a - a != a for %q", s)
		}
	})
}

func TestDisplayFastPathMatchesText(t *testing.T) {
	cases := []string{"0", "0.00", "5", "5.0", "12.5", "12.50", "0.001", "0.000001", "999999999999.999999",
		"100", "100000000000", "0.10", "7.000"}
	for _, s := range cases {
		a := MustAmount(s)
		for _, v := range []Amount{a, a.Sub(MustAmount("0.005")), a.Add(a), MustAmount("0").Sub(a)} {
			if got, want := v.Display(), v.displayText(); got != want {
				t.Errorf("Display(%s) = %q, want %q", v.String(), got, want)
			}
		}
	}
	// Exponents apd produces from arithmetic, positive ones included.
	for _, tc := range []struct {
		coef int64
		exp  int32
		neg  bool
	}{{5, 2, false}, {0, 3, false}, {0, -4, true}, {123, -1, true}, {1, -18, false}, {9, 18, false}} {
		var v Amount
		v.d.SetFinite(tc.coef, tc.exp)
		v.d.Negative = tc.neg
		want := v.displayText()
		if tc.coef == 0 && tc.exp > 0 {
			want = "0.00" // apd's text keeps the exponent's zeros: "0000"
		}
		if got := v.Display(); got != want {
			t.Errorf("Display(%dE%d neg=%v) = %q, want %q", tc.coef, tc.exp, tc.neg, got, want)
		}
	}
}

// apdOp is the general path the int64 fast paths stand in for.
func apdOp(t *testing.T, op string, a, b Amount) Amount {
	t.Helper()
	var r Amount
	var err error
	switch op {
	case "add":
		_, err = arith.Add(&r.d, &a.d, &b.d)
	case "sub":
		_, err = arith.Sub(&r.d, &a.d, &b.d)
	}
	if err != nil {
		t.Fatalf("apd %s(%s, %s): %v", op, a, b, err)
	}
	r.d.Negative = r.d.Negative && !r.d.IsZero()
	return r
}

// sameDecimal compares the representation, not just the value: a result
// must keep the scale apd would have given it.
func sameDecimal(a, b Amount) bool {
	return a.d.Form == b.d.Form && a.d.Negative == b.d.Negative && a.d.Exponent == b.d.Exponent &&
		a.d.Coeff.Cmp(&b.d.Coeff) == 0
}

func TestArithmeticFastPathMatchesApd(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	// Coefficients around the edges of the fast path (2^62, powers of
	// ten, int64) as well as ordinary amounts.
	edges := []int64{0, 1, 9, 10, 999_999, 1_000_000, maxAligned - 1, maxAligned, maxAligned + 1,
		math.MaxInt64, maxAligned / 10, maxAligned/10 + 1, 999_999_999_999_999_999}
	random := func() Amount {
		var a Amount
		var c int64
		switch rng.IntN(4) {
		case 0:
			c = edges[rng.IntN(len(edges))]
		case 1:
			c = rng.Int64N(1_000_000_000)
		default:
			c = rng.Int64()
		}
		a.d.SetFinite(c, int32(rng.IntN(13)-8)) // exact within arithPrecision
		if rng.IntN(3) == 0 && c != 0 {
			a.d.Negative = true
		}
		if rng.IntN(50) == 0 { // beyond int64
			a.d.Coeff.Mul(&a.d.Coeff, apd.NewBigInt(1_009))
		}
		return a
	}
	fast := 0
	for range 200_000 {
		a, b := random(), random()
		if _, _, _, ok := aligned(&a.d, &b.d); ok {
			fast++
		}
		if got, want := a.Add(b), apdOp(t, "add", a, b); !sameDecimal(got, want) {
			t.Fatalf("%s + %s = %s (exp %d), apd says %s (exp %d)", a, b, got, got.d.Exponent, want, want.d.Exponent)
		}
		if got, want := a.Sub(b), apdOp(t, "sub", a, b); !sameDecimal(got, want) {
			t.Fatalf("%s - %s = %s (exp %d), apd says %s (exp %d)", a, b, got, got.d.Exponent, want, want.d.Exponent)
		}
		if got, want := a.Cmp(b), a.d.Cmp(&b.d); got != want {
			t.Fatalf("Cmp(%s, %s) = %d, apd says %d", a, b, got, want)
		}
	}
	// Both paths must actually have been taken.
	if fast < 20_000 || fast > 180_000 {
		t.Fatalf("fast path taken %d times of 200000: the generator no longer covers both paths", fast)
	}
}
