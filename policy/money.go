package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/cockroachdb/apd/v3"
)

// Wire limits for amounts. USDC has 6 decimals, so a finer amount cannot be
// paid; 12 integer digits (just under a trillion) is far above any sane
// agent payment and keeps every wire value at 18 significant digits or fewer.
const (
	maxAmountDecimals      = 6
	maxAmountIntegerDigits = 12
)

// arithPrecision is the number of significant digits every computation keeps.
//
// Why 40 is enough: a wire amount has at most 12 integer digits and 6
// decimals, i.e. 18 significant digits and a scale of at most 6. Adding or
// subtracting values of scale <= 6 never creates more decimals, so the only
// growth is in the integer part: the sum of up to ~1e9 wire values is below
// 1e9 * 1e12 = 1e21, so it has at most 21 integer digits + 6 decimals = 27
// digits, and a difference of two such values is no longer. Forty digits
// leave 13 digits of headroom on top of that. Should a result
// ever need more, apd would have to round; the Inexact trap below turns that
// into a panic instead of a silently wrong balance.
const arithPrecision = 40

// arith is the single context all Amount arithmetic goes through, so the
// precision and traps are decided in one place.
var arith = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(arithPrecision)
	// Rounding money is never acceptable: trap Inexact in addition to the
	// defaults (overflow, underflow, invalid operation, ...).
	c.Traps |= apd.Inexact
	return c
}()

// ErrAmount matches every amount error with errors.Is, for callers that only
// need to know "bad amount" and not the details in *AmountError.
var ErrAmount = errors.New("invalid amount")

// AmountError reports an amount that does not follow the wire rule. Problem is
// a sentence telling the caller what to fix; it is safe to show to the agent
// or owner who sent the value.
type AmountError struct {
	Input   string
	Problem string
}

func (e *AmountError) Error() string {
	return "invalid amount " + quoteForError(e.Input) + ": " + e.Problem
}

// Is makes errors.Is(err, ErrAmount) true for every *AmountError.
func (e *AmountError) Is(target error) bool { return target == ErrAmount }

// maxQuotedInput bounds how much of a rejected input goes into an error
// message, so a hostile megabyte-long value cannot flood logs.
const maxQuotedInput = 80

func quoteForError(s string) string {
	if len(s) > maxQuotedInput {
		return strconv.Quote(s[:maxQuotedInput]) + "..."
	}
	return strconv.Quote(s)
}

// Amount is an exact decimal backed by apd.Decimal. Wire amounts are never
// negative, but computed ones (a balance after Sub) may be. The zero value
// is 0.
//
// It is a value type: methods never mutate the receiver and copying is safe.
// (A copy may share apd's internal big.Int for very large coefficients; that
// is fine precisely because nothing ever writes into an existing Amount.
// UnmarshalText replaces the whole value instead of writing into it.)
type Amount struct {
	d apd.Decimal
}

// amountExample is the value error messages suggest as the right shape.
const amountExample = `use a plain decimal string like "5.00"`

// ParseAmount parses an amount in the strict wire format
// ^(0|[1-9][0-9]{0,11})(\.[0-9]{1,6})?$ and keeps the caller's scale, so
// "5.0" prints back as "5.0". Every rejection is an *AmountError whose
// Problem says what to change.
func ParseAmount(s string) (Amount, error) {
	if a, ok := parsePlainAmount(s); ok {
		return a, nil
	}
	if p := wireProblem(s); p != "" {
		return Amount{}, &AmountError{Input: s, Problem: p}
	}
	return decimalFromChecked(s), nil
}

// wireProblem returns "" if s follows the wire rule, otherwise a sentence
// saying what to fix. The checks run from "wrong kind of thing" to "right
// shape, wrong size" so the first message is the most useful one.
func wireProblem(s string) string {
	if s == "" {
		return "the amount is empty: " + amountExample
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return "remove the spaces: " + amountExample + " without spaces or thousands separators"
	}
	switch s[0] {
	case '-':
		return "negative amounts are not allowed: " + amountExample
	case '+':
		return `remove the "+" sign: ` + amountExample
	}
	switch strings.ToLower(s) {
	case "nan", "snan", "inf", "infinity":
		return "the amount must be a finite number: " + amountExample
	}
	if strings.ContainsAny(s, "eE") {
		return amountExample + ": exponents are not allowed"
	}
	if strings.ContainsAny(s, ",_'") {
		return `remove the thousands separators and use "." as the decimal point: ` + amountExample
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return fmt.Sprintf("remove the character %q: %s using only digits and one \".\"", r, amountExample)
		}
	}
	if strings.Contains(frac, ".") {
		return `use a single "." as the decimal point: ` + amountExample
	}
	if intPart == "" && frac == "" {
		return "the amount has no digits: " + amountExample
	}
	if intPart == "" {
		return `add the leading zero: write "0` + s + `" instead of "` + s + `"`
	}
	if hasDot && frac == "" {
		return `add digits after the "." or drop it: write "` + intPart + `" or "` + intPart + `.00"`
	}
	if len(intPart) > 1 && intPart[0] == '0' {
		return "remove the leading zeros: " + amountExample
	}
	if len(intPart) > maxAmountIntegerDigits {
		return fmt.Sprintf("use at most %d digits before the decimal point: the amount is too large", maxAmountIntegerDigits)
	}
	if len(frac) > maxAmountDecimals {
		return fmt.Sprintf("use at most %d decimals (the smallest USDC unit is 0.000001)", maxAmountDecimals)
	}
	return ""
}

// parsePlainAmount is ParseAmount for text that follows the wire rule, in
// one pass and without apd's parser: amounts are parsed on every spend and
// check. It answers false for anything else, and ParseAmount then takes
// the path that words the error. A wire amount has at most 18 digits, so
// its coefficient always fits an int64. The amount fuzz target checks that
// both paths build the same decimal.
func parsePlainAmount(s string) (Amount, bool) {
	n := len(s)
	if n == 0 {
		return Amount{}, false
	}
	var coef int64
	i := 0
	if s[0] == '0' {
		i = 1 // a leading zero stands alone
	} else {
		for i < n && '0' <= s[i] && s[i] <= '9' {
			coef = coef*10 + int64(s[i]-'0')
			i++
			if i > maxAmountIntegerDigits {
				return Amount{}, false
			}
		}
		if i == 0 {
			return Amount{}, false
		}
	}
	scale := 0
	if i < n {
		if s[i] != '.' {
			return Amount{}, false
		}
		i++
		for i < n && '0' <= s[i] && s[i] <= '9' {
			coef = coef*10 + int64(s[i]-'0')
			i++
			scale++
			if scale > maxAmountDecimals {
				return Amount{}, false
			}
		}
		if scale == 0 || i != n {
			return Amount{}, false
		}
	}
	var a Amount
	a.d.SetFinite(coef, int32(-scale))
	return a, true
}

// decimalFromChecked builds an Amount from text already validated as plain
// decimal notation, so apd's parser cannot fail or see an exponent.
func decimalFromChecked(s string) Amount {
	var a Amount
	if _, _, err := a.d.SetString(s); err != nil {
		panic("policy: validated amount " + strconv.Quote(s) + " did not parse: " + err.Error())
	}
	if a.d.IsZero() {
		a.d.Negative = false // "-0" is just 0; never keep a signed zero
	}
	return a
}

// MustAmount is ParseAmount for constants and tests; it panics on bad input.
func MustAmount(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// AmountFromMicros converts 6-decimal fixed point (1 USDC = 1_000_000
// micros) to an Amount. The result has scale 6: AmountFromMicros(5_000_000)
// prints as "5.000000" with String and "5.00" with Display.
func AmountFromMicros(m int64) Amount {
	var a Amount
	a.d.SetFinite(m, -maxAmountDecimals)
	return a
}

// Micros returns the amount in 6-decimal fixed point. ok is false when that
// would not be exact: a non-zero digit below the sixth decimal, or a value
// outside int64.
func (a Amount) Micros() (int64, bool) {
	var shifted apd.Decimal
	shifted.Set(&a.d)
	shifted.Exponent += maxAmountDecimals
	m, err := shifted.Int64()
	if err != nil {
		return 0, false
	}
	return m, true
}

// String returns the amount in plain notation (never an exponent). Parsed
// values keep the caller's scale ("5.0" stays "5.0"); computed values show
// apd's exact result, whose scale is the larger of the operands' scales.
func (a Amount) String() string {
	return a.d.Text('f')
}

// Display returns the amount with the smallest scale that is at least 2 and
// loses nothing: "5.00", "12.50", "0.001", "0.000001", "-3.25". It is the
// form for humans; use String to keep the scale a caller sent.
func (a Amount) Display() string {
	if s, ok := a.displayInt64(); ok {
		return s
	}
	return a.displayText()
}

// displayText is Display through apd's text form: any coefficient size.
func (a Amount) displayText() string {
	s := a.d.Text('f')
	intPart, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return intPart + "." + frac
}

// displayInt64 is Display without apd's text formatting, for the common
// case of a coefficient that fits an int64: balances and spends format
// several amounts per request, and this path allocates once.
func (a Amount) displayInt64() (string, bool) {
	if a.d.Form != apd.Finite || !a.d.Coeff.IsInt64() || a.d.Exponent > 18 || a.d.Exponent < -18 {
		return "", false
	}
	coef := a.d.Coeff.Int64()
	if coef < 0 {
		return "", false
	}
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], coef, 10)
	var buf [64]byte
	out := buf[:0]
	if a.d.Negative {
		out = append(out, '-')
	}
	exp := int(a.d.Exponent)
	if exp >= 0 {
		out = append(out, d...)
		if coef != 0 {
			for range exp {
				out = append(out, '0')
			}
		}
		return string(append(out, ".00"...)), true
	}
	scale := -exp
	for len(d) <= scale { // at least one digit before the point
		d = append([]byte{'0'}, d...)
	}
	intPart, frac := d[:len(d)-scale], d[len(d)-scale:]
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	out = append(out, intPart...)
	out = append(out, '.')
	out = append(out, frac...)
	for i := len(frac); i < 2; i++ {
		out = append(out, '0')
	}
	return string(out), true
}

// mustExact panics when apd reports an error: with the traps on arith that
// means a result needed rounding or overflowed, which at the magnitudes money
// can have is a bug, not bad input.
func mustExact(op string, _ apd.Condition, err error) {
	if err != nil {
		panic("policy: amount " + op + " is not exact: " + err.Error())
	}
}

// maxAligned bounds the coefficients the int64 fast paths work with:
// below 2^62, the sum or difference of two of them still fits an int64.
const maxAligned = 1 << 62

// maxAlignedExponent keeps the fast paths far from apd's exponent limits,
// where its rounding step would report overflow or underflow.
const maxAlignedExponent = 64

// pow10 holds the powers of ten an int64 can hold.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// aligned writes a and b as signed int64 coefficients over their common
// (smaller) exponent, which is what apd does before it adds, subtracts or
// compares. ok is false when either is not finite or a coefficient would
// reach maxAligned; the callers then go through apd. Balances and caps are
// well inside this range, so apd's general arithmetic is the rare path.
func aligned(a, b *apd.Decimal) (x, y int64, exp int32, ok bool) {
	if a.Form != apd.Finite || b.Form != apd.Finite || !a.Coeff.IsInt64() || !b.Coeff.IsInt64() ||
		a.Exponent < -maxAlignedExponent || a.Exponent > maxAlignedExponent ||
		b.Exponent < -maxAlignedExponent || b.Exponent > maxAlignedExponent {
		return 0, 0, 0, false
	}
	x, y = a.Coeff.Int64(), b.Coeff.Int64()
	if x < 0 || y < 0 || x >= maxAligned || y >= maxAligned {
		return 0, 0, 0, false
	}
	exp = min(a.Exponent, b.Exponent)
	if x, ok = scaleUp(x, int64(a.Exponent)-int64(exp)); !ok {
		return 0, 0, 0, false
	}
	if y, ok = scaleUp(y, int64(b.Exponent)-int64(exp)); !ok {
		return 0, 0, 0, false
	}
	if a.Negative {
		x = -x
	}
	if b.Negative {
		y = -y
	}
	return x, y, exp, true
}

// scaleUp returns c * 10^by when that stays below maxAligned.
func scaleUp(c, by int64) (int64, bool) {
	if by == 0 {
		return c, true
	}
	if by >= int64(len(pow10)) || c > maxAligned/pow10[by] {
		return 0, false
	}
	return c * pow10[by], true
}

// Add returns a + b exactly.
func (a Amount) Add(b Amount) Amount {
	var r Amount
	if x, y, exp, ok := aligned(&a.d, &b.d); ok {
		r.d.SetFinite(x+y, exp)
		return r
	}
	c, err := arith.Add(&r.d, &a.d, &b.d)
	mustExact("addition", c, err)
	r.d.Negative = r.d.Negative && !r.d.IsZero()
	return r
}

// Sub returns a - b exactly; the result may be negative.
func (a Amount) Sub(b Amount) Amount {
	var r Amount
	if x, y, exp, ok := aligned(&a.d, &b.d); ok {
		r.d.SetFinite(x-y, exp)
		return r
	}
	c, err := arith.Sub(&r.d, &a.d, &b.d)
	mustExact("subtraction", c, err)
	r.d.Negative = r.d.Negative && !r.d.IsZero()
	return r
}

// Cmp compares numerically: -1 if a < b, 0 if a == b, +1 if a > b. Scale
// does not matter: 99 and 99.00 compare equal.
func (a Amount) Cmp(b Amount) int {
	if x, y, _, ok := aligned(&a.d, &b.d); ok {
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return a.d.Cmp(&b.d)
}

// Sign returns -1, 0 or +1.
func (a Amount) Sign() int { return a.d.Sign() }

// IsZero reports whether the amount is 0 at any scale.
func (a Amount) IsZero() bool { return a.d.IsZero() }

// Equal is numeric equality: 99 equals 99.00. Use it instead of ==, which
// would compare apd internals (and the scale).
func (a Amount) Equal(b Amount) bool { return a.Cmp(b) == 0 }

// MinAmount returns the smaller of a and b; on a tie it returns a.
func MinAmount(a, b Amount) Amount {
	if b.Cmp(a) < 0 {
		return b
	}
	return a
}

// MaxAmount returns the larger of a and b; on a tie it returns a.
func MaxAmount(a, b Amount) Amount {
	if b.Cmp(a) > 0 {
		return b
	}
	return a
}

// MarshalText uses the String form, so a stored or logged amount keeps the
// scale it had.
func (a Amount) MarshalText() ([]byte, error) {
	return []byte(a.String()), nil
}

// AppendText appends the text MarshalText returns, without a copy of its
// own: the hand-written encoders of the spend path write amounts with it.
func (a Amount) AppendText(b []byte) ([]byte, error) {
	return a.d.Append(b, 'f'), nil
}

// maxStoredAmountLen bounds the text UnmarshalText will look at. A value with
// arithPrecision digits, a sign and a point is far below it.
const maxStoredAmountLen = 64

// UnmarshalText accepts everything String produces, including negative
// values, so stored amounts (balances, remaining caps) round-trip. It is not
// the wire check: inputs from agents and owners go through ParseAmount.
// Still, it only accepts plain notation with at most 6 decimals and at most
// arithPrecision significant digits, so a stored value can never make later
// arithmetic inexact.
func (a *Amount) UnmarshalText(b []byte) error {
	s := string(b)
	if p := storedProblem(s); p != "" {
		return &AmountError{Input: s, Problem: p}
	}
	v := decimalFromChecked(s)
	var reduced apd.Decimal
	reduced.Reduce(&v.d)
	if reduced.NumDigits() > arithPrecision {
		return &AmountError{Input: s, Problem: fmt.Sprintf("the amount has more than %d significant digits", arithPrecision)}
	}
	*a = v
	return nil
}

// storedProblem is the grammar of String's output:
// ^-?(0|[1-9][0-9]*)(\.[0-9]{1,6})?$ of bounded length.
func storedProblem(s string) string {
	if len(s) > maxStoredAmountLen {
		return fmt.Sprintf("the amount is longer than %d characters", maxStoredAmountLen)
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return "the amount is empty: " + amountExample
	}
	intPart, frac, hasDot := strings.Cut(digits, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) {
		return amountExample + `, optionally with a leading "-"`
	}
	if len(intPart) > 1 && intPart[0] == '0' {
		return "remove the leading zeros: " + amountExample
	}
	if len(frac) > maxAmountDecimals {
		return fmt.Sprintf("use at most %d decimals (the smallest USDC unit is 0.000001)", maxAmountDecimals)
	}
	return ""
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
