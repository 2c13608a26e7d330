package rail

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentpay/guard/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func payment(amount, nonce string) policy.Payment {
	return policy.Payment{
		SpendID:     "sp_" + nonce[:8],
		AgentID:     "ag_1",
		OwnerID:     "ow_1",
		Amount:      policy.MustAmount(amount),
		Currency:    "USDC",
		Destination: "0x2222222222222222222222222222222222222222",
		Resource:    policy.Resource{Host: "api.example.com", Path: "/v1/weather?city=Paris&units=metric", Method: "GET"},
		Nonce:       nonce,
		At:          t0,
	}
}

func nonce(i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "nonce-%d", i))
	return hex.EncodeToString(sum[:16])
}

// sameOutcome fails unless a and b are the same outcome, amounts compared
// numerically and results by value.
func sameOutcome(t *testing.T, a, b policy.RailOutcome) {
	t.Helper()
	if a.Status != b.Status || !a.Price.Equal(b.Price) || a.Network != b.Network ||
		a.Reference != b.Reference || a.ErrorCode != b.ErrorCode || a.ErrorMessage != b.ErrorMessage ||
		a.Simulated != b.Simulated || a.Forced != b.Forced || (a.Result == nil) != (b.Result == nil) ||
		(a.Result != nil && *a.Result != *b.Result) {
		t.Fatalf("outcomes differ:\n%s\n%s", describe(a), describe(b))
	}
}

func describe(o policy.RailOutcome) string {
	r := "<nil>"
	if o.Result != nil {
		r = fmt.Sprintf("%+v", *o.Result)
	}
	return fmt.Sprintf("status=%d price=%s network=%s ref=%s code=%s msg=%q sim=%v forced=%q result=%s",
		o.Status, o.Price.String(), o.Network, o.Reference, o.ErrorCode, o.ErrorMessage, o.Simulated, o.Forced, r)
}

var refPattern = regexp.MustCompile(`^0x[0-9a-f]{64}$`)

func TestPaySettles(t *testing.T) {
	s := NewSimulated(SimulatedOptions{})
	p := payment("1.00", nonce(1))
	out := s.Pay(context.Background(), p)
	if out.Status != policy.RailSettled {
		t.Fatalf("not settled: %s", describe(out))
	}
	if out.Price.Sign() <= 0 || out.Price.Cmp(p.Amount) > 0 {
		t.Fatalf("price %s outside (0, %s]", out.Price, p.Amount)
	}
	if out.Network != "base-sepolia" || !out.Simulated || out.Forced != "" || out.ErrorCode != "" {
		t.Fatalf("outcome: %s", describe(out))
	}
	if !refPattern.MatchString(out.Reference) {
		t.Fatalf("reference %q", out.Reference)
	}
	r := out.Result
	if r == nil || r.HTTPStatus != 200 || r.ContentType != "application/json" || r.BodyTruncated {
		t.Fatalf("result: %+v", r)
	}
	sum := sha256.Sum256([]byte(r.Body))
	if r.BodySHA256 != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("body hash %q does not match the body", r.BodySHA256)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.Body)
	}
	want := map[string]any{
		"resource":  "https://api.example.com/v1/weather?city=Paris&units=metric",
		"method":    "GET",
		"price":     out.Price.Display(),
		"currency":  "USDC",
		"nonce":     p.Nonce,
		"simulated": true,
	}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Fatalf("body = %v, want %v", body, want)
	}
	if s.Settlements() != 1 {
		t.Fatalf("settlements = %d", s.Settlements())
	}

	// Another rail (or the same after a restart) gives the identical outcome
	// for the identical payment.
	sameOutcome(t, NewSimulated(SimulatedOptions{}).Pay(context.Background(), p), out)

	// The reference depends on the nonce only.
	q := p
	q.Nonce = nonce(2)
	other := s.Pay(context.Background(), q)
	if other.Reference == out.Reference || !refPattern.MatchString(other.Reference) {
		t.Fatalf("references: %q and %q", out.Reference, other.Reference)
	}
	q.Amount = policy.MustAmount("3.00")
	q.Nonce = p.Nonce
	if got := NewSimulated(SimulatedOptions{}).Pay(context.Background(), q); got.Reference != out.Reference {
		t.Fatal("reference is not derived from the nonce alone")
	}
}

func TestSimulatedPriceTable(t *testing.T) {
	resources := []struct {
		dest string
		res  policy.Resource
	}{
		{"0x2222222222222222222222222222222222222222", policy.Resource{Host: "api.example.com", Path: "/v1/data", Method: "GET"}},
		{"0x2222222222222222222222222222222222222222", policy.Resource{Host: "api.example.com", Path: "/v1/data", Method: "POST"}},
		{"0x2222222222222222222222222222222222222222", policy.Resource{Host: "api.example.com", Path: "/v1/other", Method: "GET"}},
		{"0x3333333333333333333333333333333333333333", policy.Resource{Host: "api.example.com", Path: "/v1/data", Method: "GET"}},
		{"", policy.Resource{}},
	}
	amounts := []string{
		"0.000001", "0.000002", "0.000009", "0.00001", "0.01", "0.10", "0.99", "1", "1.00",
		"5.00", "97.999999", "100", "12345.678901", "1000000", "999999999999.999999",
	}
	for _, r := range resources {
		for _, a := range amounts {
			t.Run(a+" "+r.dest+" "+r.res.Method+" "+r.res.Path, func(t *testing.T) {
				amount := policy.MustAmount(a)
				price, err := SimulatedPrice(amount, r.dest, r.res)
				if err != nil {
					t.Fatal(err)
				}
				again, err := SimulatedPrice(policy.MustAmount(a), r.dest, r.res)
				if err != nil || !again.Equal(price) {
					t.Fatalf("not deterministic: %s then %s (%v)", price, again, err)
				}
				if price.Cmp(amount) > 0 {
					t.Fatalf("price %s above amount %s", price, amount)
				}
				if price.Cmp(policy.AmountFromMicros(1)) < 0 {
					t.Fatalf("price %s below 0.000001", price)
				}
				// Whole micros, and at most 10% off (plus the rounding
				// down).
				am, ok := amount.Micros()
				if !ok {
					t.Fatalf("amount %s is not whole micros", amount)
				}
				pm, ok := price.Micros()
				if !ok {
					t.Fatalf("price %s has more than 6 decimals", price)
				}
				if pm < am-am/10-1 {
					t.Fatalf("price %s is more than 10%% below %s", price, amount)
				}
			})
		}
	}
	// The discount depends on the resource: the five resources do not all
	// pay the same for 100.
	prices := map[string]bool{}
	for _, r := range resources {
		p, err := SimulatedPrice(policy.MustAmount("100"), r.dest, r.res)
		if err != nil {
			t.Fatal(err)
		}
		prices[p.String()] = true
	}
	if len(prices) < 2 {
		t.Fatal("every resource gets the same discount")
	}
	// The host is not part of the discount: same destination, path and
	// method on another host cost the same.
	a, _ := SimulatedPrice(policy.MustAmount("10"), "d", policy.Resource{Host: "a.example", Path: "/x", Method: "GET"})
	b, _ := SimulatedPrice(policy.MustAmount("10"), "d", policy.Resource{Host: "b.example", Path: "/x", Method: "GET"})
	if !a.Equal(b) {
		t.Fatalf("host changed the price: %s vs %s", a, b)
	}
}

func TestSimulatedPriceFormula(t *testing.T) {
	res := policy.Resource{Host: "api.example.com", Path: "/v1/data", Method: "GET"}
	dest := "0x2222222222222222222222222222222222222222"
	sum := sha256.Sum256([]byte(dest + "\n/v1/data\nGET"))
	want := int64(binary.BigEndian.Uint64(sum[:8]) % 100_001)
	d := discountPPM(dest, res)
	if d != want || d < 0 || d > 100_000 {
		t.Fatalf("discount = %d ppm, want %d", d, want)
	}
	for _, am := range []int64{1_000_000, 123_456_789, 9_999} {
		price, err := SimulatedPrice(policy.AmountFromMicros(am), dest, res)
		if err != nil {
			t.Fatal(err)
		}
		if pm, ok := price.Micros(); !ok || pm != am*(1_000_000-d)/1_000_000 {
			t.Fatalf("price of %d micros = %s, want %d micros", am, price, am*(1_000_000-d)/1_000_000)
		}
	}
}

func TestSimulatedPricePinned(t *testing.T) {
	// Practice prices show on owners' receipts: a change of formula must be
	// deliberate, so a few are pinned.
	cases := []struct {
		amount, dest, path, method, want string
	}{
		{"1.00", "0x2222222222222222222222222222222222222222", "/v1/data", "GET", "0.958461"},
		{"0.10", "0x2222222222222222222222222222222222222222", "/v1/data", "POST", "0.097761"},
		{"5.00", "0x3333333333333333333333333333333333333333", "/v1/weather?city=Paris", "GET", "4.746915"},
		{"250", "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd", "/reports/2026", "POST", "235.58625"},
		{"0.000003", "0x2222222222222222222222222222222222222222", "/v1/data", "GET", "0.000002"},
	}
	for _, c := range cases {
		got, err := SimulatedPrice(policy.MustAmount(c.amount), c.dest, policy.Resource{Host: "h", Path: c.path, Method: c.method})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(policy.MustAmount(c.want)) {
			t.Errorf("price of %s for %s %s %s = %s, want %s", c.amount, c.dest, c.method, c.path, got, c.want)
		}
	}
}

func TestSimulatedPriceEdges(t *testing.T) {
	res := policy.Resource{Host: "h", Path: "/", Method: "GET"}
	zero := policy.MustAmount("0")
	for _, a := range []policy.Amount{zero, zero.Sub(policy.MustAmount("1")), zero.Sub(policy.AmountFromMicros(1))} {
		if _, err := SimulatedPrice(a, "d", res); err == nil {
			t.Errorf("price of %s accepted", a)
		}
	}
	// Beyond 2^63 micros (only reachable by adding amounts) is not payable.
	huge := policy.AmountFromMicros(1<<63 - 1).Add(policy.AmountFromMicros(1))
	if _, err := SimulatedPrice(huge, "d", res); err == nil {
		t.Errorf("price of %s accepted", huge)
	}
	// The largest payable amount does not overflow.
	top := policy.AmountFromMicros(1<<63 - 1)
	if p, err := SimulatedPrice(top, "d", res); err != nil || p.Cmp(top) > 0 || p.Sign() <= 0 {
		t.Fatalf("price of %s = %s, %v", top, p, err)
	}
	// One micro can never be discounted.
	for i := range 50 {
		r := policy.Resource{Host: "h", Path: fmt.Sprintf("/%d", i), Method: "GET"}
		if p, err := SimulatedPrice(policy.AmountFromMicros(1), "d", r); err != nil || !p.Equal(policy.AmountFromMicros(1)) {
			t.Fatalf("price of 0.000001 = %s, %v", p, err)
		}
	}
}

func FuzzSimulatedPrice(f *testing.F) {
	f.Add(int64(1), "0xabc", "/v1/data", "GET")
	f.Add(int64(1_000_000), "", "", "")
	f.Add(int64(1_000_000_000_000_000_000), "0xdef", "/a?b=c", "POST")
	f.Add(int64(98_000_000), "0x1", "/", "GET")
	f.Add(int64(-7), "x", "y", "z")
	f.Fuzz(func(t *testing.T, raw int64, dest, path, method string) {
		micros := int64(uint64(raw)%1_000_000_000_000_000_000) + 1 // 1 .. 1e18
		amount := policy.AmountFromMicros(micros)
		res := policy.Resource{Host: "h.example", Path: path, Method: method}
		price, err := SimulatedPrice(amount, dest, res)
		if err != nil {
			t.Fatalf("price of %d micros: %v", micros, err)
		}
		pm, ok := price.Micros()
		if !ok {
			t.Fatalf("price %s of %d micros is not a whole number of micros", price, micros)
		}
		if pm <= 0 || pm > micros {
			t.Fatalf("price %d micros outside (0, %d]", pm, micros)
		}
		// At most 10% off, less the rounding: 10*price >= 9*amount - 10.
		if micros >= 10 && pm < micros-micros/10-1 {
			t.Fatalf("price %d micros is more than 10%% below %d", pm, micros)
		}
		again, err := SimulatedPrice(policy.AmountFromMicros(micros), dest, res)
		if err != nil || !again.Equal(price) {
			t.Fatalf("not deterministic: %s then %s", price, again)
		}
	})
}

func TestMagicDecline(t *testing.T) {
	for _, a := range []string{"99.00", "99", "99.0", "99.000000"} {
		t.Run(a, func(t *testing.T) {
			s := NewSimulated(SimulatedOptions{})
			p := payment(a, nonce(3))
			out := s.Pay(context.Background(), p)
			if out.Status != policy.RailRejected || out.ErrorCode != "insufficient_funds" ||
				out.Forced != "magic_amount" || !out.Simulated || out.Result != nil || !out.Price.IsZero() ||
				out.Reference != "" {
				t.Fatalf("outcome: %s", describe(out))
			}
			if !strings.HasSuffix(out.ErrorMessage, ".") || len(out.ErrorMessage) < 20 {
				t.Fatalf("message %q is not a sentence", out.ErrorMessage)
			}
			if s.Settlements() != 0 {
				t.Fatal("a declined payment settled")
			}
			// The vendor never got it.
			if v := s.Verify(context.Background(), p); v.Status != policy.RailRejected || v.ErrorCode != "payment_not_received" {
				t.Fatalf("verify: %s", describe(v))
			}
			if s.Settlements() != 0 {
				t.Fatal("verify settled")
			}
		})
	}
	// Close to the magic amount is an ordinary payment.
	for _, a := range []string{"99.01", "98.99", "99.000001", "9.90", "990"} {
		s := NewSimulated(SimulatedOptions{})
		if out := s.Pay(context.Background(), payment(a, nonce(4))); out.Status != policy.RailSettled || out.Forced != "" {
			t.Fatalf("%s: %s", a, describe(out))
		}
	}
}

func TestMagicUnknownThenVerify(t *testing.T) {
	ctx := context.Background()
	for _, a := range []string{"98.00", "98", "98.000"} {
		t.Run(a, func(t *testing.T) {
			s := NewSimulated(SimulatedOptions{})
			p := payment(a, nonce(5))
			out := s.Pay(ctx, p)
			if out.Status != policy.RailUnknown || out.ErrorCode != "outcome_unknown" || out.Forced != "magic_amount" ||
				!out.Simulated || out.Result != nil || out.ErrorMessage == "" {
				t.Fatalf("pay: %s", describe(out))
			}
			if s.Settlements() != 1 {
				t.Fatalf("the vendor did not receive the payment: settlements = %d", s.Settlements())
			}

			v := s.Verify(ctx, p)
			if v.Status != policy.RailSettled || v.Forced != "" || v.ErrorCode != "" {
				t.Fatalf("verify: %s", describe(v))
			}
			// Identical to what a plain settlement of this payment is.
			plain, err := s.settledOutcome(p)
			if err != nil {
				t.Fatal(err)
			}
			sameOutcome(t, v, plain)
			if !refPattern.MatchString(v.Reference) || v.Price.Cmp(p.Amount) > 0 || v.Result == nil {
				t.Fatalf("verify: %s", describe(v))
			}
			// Verifying again, or paying again with the nonce, changes nothing.
			sameOutcome(t, s.Verify(ctx, p), v)
			sameOutcome(t, s.Pay(ctx, p), v)
			if s.Settlements() != 1 {
				t.Fatalf("settlements = %d, want 1", s.Settlements())
			}

			// A rail that never saw the Pay (a restart) finds it as well,
			// identically.
			fresh := NewSimulated(SimulatedOptions{})
			sameOutcome(t, fresh.Verify(ctx, p), v)
		})
	}
}

func TestPayTwiceSameNonceSettlesOnce(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimulatedOptions{})
	p := payment("2.50", nonce(6))
	first := s.Pay(ctx, p)
	second := s.Pay(ctx, p)
	if first.Status != policy.RailSettled {
		t.Fatalf("pay: %s", describe(first))
	}
	sameOutcome(t, first, second)
	if s.Settlements() != 1 {
		t.Fatalf("settlements = %d, want 1", s.Settlements())
	}
	// The same amount written differently is the same payment.
	q := p
	q.Amount = policy.MustAmount("2.5")
	sameOutcome(t, s.Pay(ctx, q), first)

	// A different payment under a used nonce is refused, not paid.
	for name, mutate := range map[string]func(*policy.Payment){
		"amount":      func(p *policy.Payment) { p.Amount = policy.MustAmount("2.51") },
		"destination": func(p *policy.Payment) { p.Destination = "0x4444444444444444444444444444444444444444" },
		"path":        func(p *policy.Payment) { p.Resource.Path = "/other" },
		"currency":    func(p *policy.Payment) { p.Currency = "EURC" },
	} {
		q := p
		mutate(&q)
		for _, out := range []policy.RailOutcome{s.Pay(ctx, q), s.Verify(ctx, q)} {
			if out.Status != policy.RailRejected || out.ErrorCode != "nonce_conflict" {
				t.Fatalf("%s: %s", name, describe(out))
			}
		}
	}
	if s.Settlements() != 1 {
		t.Fatalf("settlements = %d, want 1", s.Settlements())
	}

	// A new nonce is a new payment.
	if out := s.Pay(ctx, payment("2.50", nonce(7))); out.Status != policy.RailSettled || s.Settlements() != 2 {
		t.Fatalf("second payment: %s, settlements %d", describe(out), s.Settlements())
	}
}

func TestConcurrentPaySameNonce(t *testing.T) {
	s := NewSimulated(SimulatedOptions{Latency: time.Millisecond})
	p := payment("7.77", nonce(8))
	outs := make([]policy.RailOutcome, 32)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			if i%2 == 0 {
				outs[i] = s.Pay(context.Background(), p)
			} else {
				outs[i] = s.Verify(context.Background(), p)
			}
		})
	}
	wg.Wait()
	if s.Settlements() != 1 {
		t.Fatalf("settlements = %d, want 1", s.Settlements())
	}
	var settled *policy.RailOutcome
	for i := range outs {
		switch outs[i].Status {
		case policy.RailSettled:
			if settled == nil {
				settled = &outs[i]
			}
			sameOutcome(t, outs[i], *settled)
		case policy.RailRejected:
			// Only a Verify that ran before any Pay settled.
			if i%2 == 0 || outs[i].ErrorCode != "payment_not_received" {
				t.Fatalf("call %d: %s", i, describe(outs[i]))
			}
		default:
			t.Fatalf("call %d: %s", i, describe(outs[i]))
		}
	}
	if settled == nil {
		t.Fatal("nothing settled")
	}
}

func TestVerifyNeverPays(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimulatedOptions{})
	p := payment("1.23", nonce(9))
	v := s.Verify(ctx, p)
	if v.Status != policy.RailRejected || v.ErrorCode != "payment_not_received" || !v.Simulated || v.Result != nil {
		t.Fatalf("verify of an unknown nonce: %s", describe(v))
	}
	if s.Settlements() != 0 {
		t.Fatal("verify paid")
	}
	paid := s.Pay(ctx, p)
	sameOutcome(t, s.Verify(ctx, p), paid)
	if s.Settlements() != 1 {
		t.Fatalf("settlements = %d, want 1", s.Settlements())
	}
}

func TestReturnedOutcomeIsACopy(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimulatedOptions{})
	p := payment("4.00", nonce(10))
	out := s.Pay(ctx, p)
	keep := *out.Result
	out.Result.Body = "changed"
	out.Result.HTTPStatus = 500
	if again := s.Pay(ctx, p); *again.Result != keep {
		t.Fatalf("stored result was changed through a returned outcome: %+v", *again.Result)
	}
}

func TestCancellation(t *testing.T) {
	t.Run("cancelled during latency is not sent", func(t *testing.T) {
		s := NewSimulated(SimulatedOptions{Latency: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		out := s.Pay(ctx, payment("1.00", nonce(11)))
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Pay ignored the cancellation for %v", d)
		}
		if out.Status != policy.RailRejected || out.ErrorCode != "not_sent" || !out.Simulated || out.Result != nil {
			t.Fatalf("outcome: %s", describe(out))
		}
		if !strings.Contains(out.ErrorMessage, context.Canceled.Error()) {
			t.Fatalf("message %q does not say why", out.ErrorMessage)
		}
		if s.Settlements() != 0 {
			t.Fatal("a cancelled payment settled")
		}
		// Nothing reached the vendor.
		s.opts.Latency = 0
		if v := s.Verify(context.Background(), payment("1.00", nonce(11))); v.ErrorCode != "payment_not_received" {
			t.Fatalf("verify: %s", describe(v))
		}
	})
	t.Run("deadline during latency is not sent", func(t *testing.T) {
		s := NewSimulated(SimulatedOptions{Latency: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		out := s.Pay(ctx, payment("98.00", nonce(12)))
		if out.Status != policy.RailRejected || out.ErrorCode != "not_sent" ||
			!strings.Contains(out.ErrorMessage, context.DeadlineExceeded.Error()) {
			t.Fatalf("outcome: %s", describe(out))
		}
		if s.Settlements() != 0 {
			t.Fatal("settled")
		}
	})
	t.Run("already cancelled without latency is not sent", func(t *testing.T) {
		s := NewSimulated(SimulatedOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if out := s.Pay(ctx, payment("1.00", nonce(13))); out.Status != policy.RailRejected || out.ErrorCode != "not_sent" {
			t.Fatalf("outcome: %s", describe(out))
		}
		if s.Settlements() != 0 {
			t.Fatal("settled")
		}
	})
	t.Run("cancelled verify stays unknown", func(t *testing.T) {
		s := NewSimulated(SimulatedOptions{Latency: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		v := s.Verify(ctx, payment("98.00", nonce(14)))
		if v.Status != policy.RailUnknown || v.ErrorCode != "outcome_unknown" || v.Forced != "" || !v.Simulated {
			t.Fatalf("verify: %s", describe(v))
		}
		if s.Settlements() != 0 {
			t.Fatal("a cancelled verify settled")
		}
	})
	t.Run("latency is spent", func(t *testing.T) {
		s := NewSimulated(SimulatedOptions{Latency: 30 * time.Millisecond})
		start := time.Now()
		out := s.Pay(context.Background(), payment("1.00", nonce(15)))
		if out.Status != policy.RailSettled {
			t.Fatalf("outcome: %s", describe(out))
		}
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Fatalf("answered after %v, before the latency", d)
		}
	})
}

func TestInvalidPaymentsRejected(t *testing.T) {
	ctx := context.Background()
	live := payment("1.00", nonce(16))
	live.Livemode = true
	noNonce := payment("1.00", nonce(17))
	noNonce.Nonce = ""
	negative := payment("1.00", nonce(19))
	negative.Amount = policy.MustAmount("0").Sub(negative.Amount)
	cases := map[string]struct {
		p    policy.Payment
		code string
	}{
		"livemode":        {live, "livemode_not_supported"},
		"no nonce":        {noNonce, "invalid_payment"},
		"zero amount":     {payment("0", nonce(18)), "invalid_payment"},
		"negative amount": {negative, "invalid_payment"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewSimulated(SimulatedOptions{})
			for _, out := range []policy.RailOutcome{s.Pay(ctx, tc.p), s.Verify(ctx, tc.p)} {
				if out.Status != policy.RailRejected || out.ErrorCode != tc.code || !out.Simulated {
					t.Fatalf("outcome: %s", describe(out))
				}
			}
			if s.Settlements() != 0 {
				t.Fatal("settled")
			}
		})
	}
}

func TestLargeBodyTruncated(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{MaxResultBody - 300, MaxResultBody, MaxResultBody + 1, MaxResultBody + 2, 10_000, 100_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			s := NewSimulated(SimulatedOptions{LargeBody: size})
			p := payment("1.00", nonce(20))
			out := s.Pay(ctx, p)
			if out.Status != policy.RailSettled {
				t.Fatalf("outcome: %s", describe(out))
			}
			full, err := s.body(p, out.Price)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Result
			sum := sha256.Sum256(full)
			if r.BodySHA256 != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Fatal("hash is not of the full body")
			}
			if len(full) <= MaxResultBody {
				if r.BodyTruncated || r.Body != string(full) {
					t.Fatalf("short body (%d bytes) altered", len(full))
				}
				return
			}
			if !r.BodyTruncated || len(r.Body) > MaxResultBody || len(r.Body) < MaxResultBody-3 {
				t.Fatalf("truncated=%v len=%d of %d", r.BodyTruncated, len(r.Body), len(full))
			}
			if !strings.HasPrefix(string(full), r.Body) {
				t.Fatal("truncated body is not a prefix of the full body")
			}
			if !utf8Valid(r.Body) {
				t.Fatal("truncated body splits a UTF-8 character")
			}
		})
	}
}

func utf8Valid(s string) bool {
	return strings.ToValidUTF8(s, "\uFFFD") == s
}

func TestCapBodyBoundaries(t *testing.T) {
	// "€" is 3 bytes, "é" 2, "𝄞" 4: every cut position inside each is tried.
	for _, ch := range []string{"a", "é", "€", "𝄞"} {
		for pad := range 5 {
			body := []byte(strings.Repeat("x", pad) + strings.Repeat(ch, 10))
			for limit := 0; limit <= len(body)+1; limit++ {
				got, cut := capBody(body, limit)
				if cut != (len(body) > limit) || len(got) > limit && cut {
					t.Fatalf("%q limit %d: %d bytes, cut=%v", body, limit, len(got), cut)
				}
				if !utf8Valid(string(got)) || !strings.HasPrefix(string(body), string(got)) {
					t.Fatalf("%q limit %d: %q", body, limit, got)
				}
				if cut && limit-len(got) >= len(ch) {
					t.Fatalf("%q limit %d: cut too much (%d bytes)", body, limit, len(got))
				}
			}
		}
	}
	// Binary bodies are cut at most 3 bytes early.
	bin := []byte(strings.Repeat("\x80", 10))
	if got, _ := capBody(bin, 8); len(got) < 5 {
		t.Fatalf("binary body cut to %d", len(got))
	}
	r := NewVendorResult(200, "text/plain", []byte(strings.Repeat("€", MaxResultBody)))
	if !r.BodyTruncated || len(r.Body) != MaxResultBody-MaxResultBody%3 {
		t.Fatalf("len %d", len(r.Body))
	}
}

// The vendor remembers a nonce for at least Retention and at most twice
// that: within it a repeat returns the same settlement and pays nothing;
// after, the memory is given back. Two generations keep the count bounded
// however many payments go through.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated(SimulatedOptions{Retention: time.Hour})
	now := s.rotatedAt
	s.now = func() time.Time { return now }

	first := payment("3.00", nonce(20))
	out := s.Pay(ctx, first)
	if out.Status != policy.RailSettled {
		t.Fatalf("pay: %s", describe(out))
	}
	now = now.Add(59 * time.Minute)
	second := payment("3.00", nonce(21))
	s.Pay(ctx, second)
	now = now.Add(2 * time.Minute) // a new generation: the first is older, still known
	for _, p := range []policy.Payment{first, second} {
		if v := s.Verify(ctx, p); v.Status != policy.RailSettled {
			t.Fatalf("verify within the retention: %s", describe(v))
		}
	}
	sameOutcome(t, s.Pay(ctx, first), out)
	if s.Settlements() != 2 || s.Remembered() != 2 {
		t.Fatalf("settlements %d remembered %d, want 2 and 2", s.Settlements(), s.Remembered())
	}
	// A conflict is still caught from the older generation.
	other := first
	other.Amount = policy.MustAmount("3.01")
	if c := s.Pay(ctx, other); c.ErrorCode != CodeNonceConflict {
		t.Fatalf("another payment under a remembered nonce: %s", describe(c))
	}

	now = now.Add(time.Hour) // both generations are over an hour old
	if n := s.Remembered(); n != 0 {
		t.Fatalf("%d nonces remembered after twice the retention", n)
	}
	if v := s.Verify(ctx, first); v.ErrorCode != CodePaymentNotReceived {
		t.Fatalf("verify after the retention: %s", describe(v))
	}
}

// BenchmarkRememberedPayment reports what one received payment costs the
// vendor's memory (B/payment), with a 4 KiB result it never keeps:
//
//	go test -run '^$' -bench RememberedPayment ./transport/rail
func BenchmarkRememberedPayment(b *testing.B) {
	s := NewSimulated(SimulatedOptions{LargeBody: 4096})
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range b.N {
		if out := s.Pay(ctx, payment("1.00", fmt.Sprintf("%032x", i))); out.Status != policy.RailSettled {
			b.Fatalf("pay %d: %s", i, describe(out))
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Remembered() != b.N {
		b.Fatalf("remembered %d, want %d", s.Remembered(), b.N)
	}
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "B/payment")
}

// PayNow answers as Pay does, and counts the payment once, when there is
// no latency to simulate; with latency it leaves the payment to Pay.
func TestPayNowOnlyWithoutLatency(t *testing.T) {
	s, other := NewSimulated(SimulatedOptions{}), NewSimulated(SimulatedOptions{})
	for i, amount := range []string{"1.00", MagicDeclineAmount, MagicUnknownAmount} {
		p := payment(amount, nonce(100+i))
		now, ok := s.PayNow(p)
		if !ok {
			t.Fatalf("%s: a rail without latency declined to answer at once", amount)
		}
		sameOutcome(t, now, other.Pay(context.Background(), p))
	}
	if n := s.Settlements(); n != 2 { // 1.00 and 98.00 reached the vendor
		t.Errorf("%d settlements, want 2", n)
	}
	// The vendor remembers what PayNow paid: verifying it never pays again.
	sameOutcome(t, s.Verify(context.Background(), payment("1.00", nonce(100))), other.Verify(context.Background(), payment("1.00", nonce(100))))
	if n := s.Settlements(); n != 2 {
		t.Errorf("a verification paid: %d settlements", n)
	}

	slow := NewSimulated(SimulatedOptions{Latency: time.Hour})
	if o, ok := slow.PayNow(payment("1.00", nonce(200))); ok {
		t.Fatalf("a rail with latency answered at once: %s", describe(o))
	}
	if n := slow.Settlements(); n != 0 {
		t.Errorf("declining to answer at once paid %d times", n)
	}
}
