package rail

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentpay/guard/policy"
)

// PracticeNetwork is the network every simulated outcome names.
const PracticeNetwork = "base-sepolia"

// Error codes of the simulated rail's outcomes.
const (
	// CodeInsufficientFunds: the magic amount 99.00 was declined (rejected).
	CodeInsufficientFunds = "insufficient_funds"
	// CodeOutcomeUnknown: the magic amount 98.00 was sent and no answer came
	// back, or a Verify was cancelled before it learnt anything (unknown).
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeNotSent: the context ended before the request left (rejected).
	CodeNotSent = "not_sent"
	// CodePaymentNotReceived: Verify found no payment with the nonce
	// (rejected).
	CodePaymentNotReceived = "payment_not_received"
	// CodeNonceConflict: the nonce already paid a different payment
	// (rejected).
	CodeNonceConflict = "nonce_conflict"
	// CodeInvalidPayment: the payment has no nonce or no positive amount
	// (rejected).
	CodeInvalidPayment = "invalid_payment"
	// CodeLivemodeNotSupported: a live-mode payment reached the practice rail
	// (rejected).
	CodeLivemodeNotSupported = "livemode_not_supported"
)

// ForcedMagicAmount is the RailOutcome.Forced value of outcomes a magic
// amount forced.
const ForcedMagicAmount = "magic_amount"

// Magic amounts of the practice rail, compared numerically (99, 99.0 and
// 99.00 are all the same amount).
const (
	// MagicDeclineAmount is always declined with insufficient_funds.
	MagicDeclineAmount = "99.00"
	// MagicUnknownAmount is sent, then answered with an unknown outcome; a
	// later Verify finds it settled.
	MagicUnknownAmount = "98.00"
)

var (
	magicDecline = policy.MustAmount(MagicDeclineAmount)
	magicUnknown = policy.MustAmount(MagicUnknownAmount)
)

// SimulatedOptions tunes the practice rail. The zero value is a rail that
// answers at once.
type SimulatedOptions struct {
	// Latency is how long the simulated vendor takes before the request is
	// sent. Pay and Verify wait for it and give up when their context ends.
	Latency time.Duration
	// LargeBody, when positive, adds a "data" member of about that many
	// bytes (multi-byte UTF-8 characters included) to every result body.
	// Tests use it to exercise MaxResultBody.
	LargeBody int
	// Retention is how long the vendor remembers a nonce it received: at
	// least this long, at most twice. Zero means DefaultRetention.
	Retention time.Duration
}

// DefaultRetention is how long the practice vendor remembers the nonces it
// received when SimulatedOptions.Retention is zero. The service sends a
// nonce again only to verify an unknown outcome, which it does within
// minutes; an hour bounds the memory of a long practice load (about 50
// bytes a payment) without ever forgetting a payment still being
// verified.
const DefaultRetention = time.Hour

// Simulated is the practice rail: a vendor and a payment network simulated in
// memory, without any network call. It is safe for concurrent use.
type Simulated struct {
	opts SimulatedOptions

	mu sync.Mutex
	// recent and older map each nonce the vendor received to the payment
	// it paid, in two generations: a nonce is looked up in both and noted
	// in recent; every Retention, recent becomes older and the old older is
	// dropped.
	// Only digests are kept: the settled outcome is a pure function of the
	// payment, so it is computed again when a nonce is asked about twice.
	recent, older map[nonceKey]paymentDigest
	rotatedAt     time.Time
	settlements   int
	now           func() time.Time // time.Now; tests move it by hand
}

// nonceKey is the first 16 bytes of a nonce's SHA-256, and paymentDigest
// those of a payment's identity (see digestOf): 128 bits, so two different
// ones never meet in practice, in a fixed size that keeps no pointer.
type (
	nonceKey      [16]byte
	paymentDigest [16]byte
)

func keyOf(nonce string) (k nonceKey) {
	sum := sha256.Sum256([]byte(nonce))
	copy(k[:], sum[:])
	return k
}

// digestOf identifies what a nonce paid: the amount (numerically, so 2.5
// and 2.50 are the same payment), currency, destination and resource. Each
// part is length-prefixed, so no two payments encode alike.
func digestOf(p policy.Payment) (d paymentDigest) {
	h := sha256.New()
	for _, part := range []string{p.Amount.Display(), p.Currency, p.Destination, p.Resource.Host, p.Resource.Path, p.Resource.Method} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	copy(d[:], h.Sum(nil))
	return d
}

// NewSimulated returns a practice rail.
func NewSimulated(opts SimulatedOptions) *Simulated {
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	return &Simulated{opts: opts, recent: make(map[nonceKey]paymentDigest), rotatedAt: time.Now(), now: time.Now}
}

// find returns the payment a nonce paid. Caller holds s.mu.
func (s *Simulated) find(k nonceKey) (paymentDigest, bool) {
	s.rotate()
	if d, ok := s.recent[k]; ok {
		return d, true
	}
	d, ok := s.older[k]
	return d, ok
}

// rotate starts a new generation once the current one is Retention old.
// Caller holds s.mu.
func (s *Simulated) rotate() {
	now := s.now()
	if now.Sub(s.rotatedAt) < s.opts.Retention {
		return
	}
	s.older, s.recent, s.rotatedAt = s.recent, make(map[nonceKey]paymentDigest), now
}

// Remembered is how many nonces the vendor remembers now.
func (s *Simulated) Remembered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate()
	return len(s.recent) + len(s.older)
}

// Settlements is how many payments the simulated vendor has received. A
// nonce paid twice counts once.
func (s *Simulated) Settlements() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settlements
}

// Pay pays the simulated vendor once for p. Outcomes:
//   - RailSettled with a deterministic price, reference and result; paying
//     a nonce that was already paid for the same payment returns the same
//     settled outcome without paying again;
//   - RailRejected "not_sent" when ctx ends before the request leaves;
//   - RailRejected "insufficient_funds" (forced) for exactly 99.00;
//   - RailUnknown "outcome_unknown" (forced) for exactly 98.00: the vendor
//     did receive it, and Verify will say so;
//   - RailRejected "nonce_conflict", "invalid_payment" or
//     "livemode_not_supported" for payments that must not be paid.
func (s *Simulated) Pay(ctx context.Context, p policy.Payment) policy.RailOutcome {
	if out, bad := s.check(p); bad {
		return out
	}
	if err := s.wait(ctx); err != nil {
		return rejected(CodeNotSent, fmt.Sprintf(
			"The payment was not sent to the vendor because the call ended first (%v); no money moved.", err))
	}
	// From here on the request has left: the simulated vendor decides and
	// answers at once.
	if rec, ok := s.lookup(p); ok {
		return rec
	}
	if p.Amount.Equal(magicDecline) {
		out := rejected(CodeInsufficientFunds,
			"The paying wallet does not hold enough USDC for this payment, so the vendor was not paid.")
		out.Forced = ForcedMagicAmount
		return out
	}
	settled := s.settle(p)
	if settled.Status != policy.RailSettled {
		return settled
	}
	if p.Amount.Equal(magicUnknown) {
		return policy.RailOutcome{
			Status:    policy.RailUnknown,
			Network:   PracticeNetwork,
			ErrorCode: CodeOutcomeUnknown,
			ErrorMessage: "The payment was sent but the vendor did not answer, so it is not known whether it settled; " +
				"verify it with the same nonce.",
			Simulated: true,
			Forced:    ForcedMagicAmount,
		}
	}
	return settled
}

// PayNow is Pay for a rail without latency, whose vendor answers at once
// and only in this process's memory; with Latency set it declines
// (ok false), so the payment goes the way a live one does.
func (s *Simulated) PayNow(p policy.Payment) (policy.RailOutcome, bool) {
	if s.opts.Latency > 0 {
		return policy.RailOutcome{}, false
	}
	return s.Pay(context.Background(), p), true
}

// Verify asks the simulated vendor whether it received p (by nonce) and never
// pays. Outcomes:
//   - RailSettled, identical to the settled outcome Pay produced, when the
//     nonce was paid for this payment; a payment of exactly 98.00 is always
//     found settled, even by a rail that did not see the Pay (after a
//     restart), because the simulated vendor received it by definition;
//   - RailRejected "payment_not_received" when the vendor never received
//     the nonce: no money moved;
//   - RailUnknown "outcome_unknown" when ctx ends before the vendor answers:
//     verifying again later is still needed;
//   - RailRejected "nonce_conflict", "invalid_payment" or
//     "livemode_not_supported" as for Pay.
func (s *Simulated) Verify(ctx context.Context, p policy.Payment) policy.RailOutcome {
	if out, bad := s.check(p); bad {
		return out
	}
	if err := s.wait(ctx); err != nil {
		return policy.RailOutcome{
			Status:    policy.RailUnknown,
			Network:   PracticeNetwork,
			ErrorCode: CodeOutcomeUnknown,
			ErrorMessage: fmt.Sprintf(
				"The verification ended before the vendor answered (%v); whether the payment settled is still unknown.", err),
			Simulated: true,
		}
	}
	if rec, ok := s.lookup(p); ok {
		return rec
	}
	if p.Amount.Equal(magicUnknown) {
		return s.settle(p)
	}
	return rejected(CodePaymentNotReceived,
		"The vendor never received a payment with this nonce; no money moved.")
}

// check refuses payments no rail may pay.
func (s *Simulated) check(p policy.Payment) (policy.RailOutcome, bool) {
	switch {
	case p.Livemode:
		return rejected(CodeLivemodeNotSupported,
			"The practice rail cannot pay a live-mode payment; no money moved."), true
	case p.Nonce == "":
		return rejected(CodeInvalidPayment, "The payment has no nonce; no money moved."), true
	case p.Amount.Sign() <= 0:
		return rejected(CodeInvalidPayment, "The payment amount is not positive; no money moved."), true
	}
	return policy.RailOutcome{}, false
}

// wait spends the simulated latency, or returns the context's error when it
// ends first. The context is checked again at the end, so an ended context
// never lets a request leave.
func (s *Simulated) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.opts.Latency > 0 {
		t := time.NewTimer(s.opts.Latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return ctx.Err()
}

// lookup returns the outcome of p's nonce if the vendor received it: the
// settled outcome when it paid this same payment, a nonce_conflict
// rejection when it paid another one.
func (s *Simulated) lookup(p policy.Payment) (policy.RailOutcome, bool) {
	s.mu.Lock()
	d, ok := s.find(keyOf(p.Nonce))
	s.mu.Unlock()
	if !ok {
		return policy.RailOutcome{}, false
	}
	if d != digestOf(p) {
		return nonceConflict(), true
	}
	out, err := s.settledOutcome(p)
	if err != nil { // it was priced when it was received
		return rejected(CodeInvalidPayment, fmt.Sprintf("The payment cannot be priced (%v); no money moved.", err)), true
	}
	return out, true
}

// settle records p as received, exactly once per nonce, and returns its
// settled outcome. When another call settled the nonce in the meantime, that
// record wins (and a different payment under it is a conflict). A payment
// that cannot be priced is rejected and not recorded.
func (s *Simulated) settle(p policy.Payment) policy.RailOutcome {
	out, err := s.settledOutcome(p)
	if err != nil {
		return rejected(CodeInvalidPayment,
			fmt.Sprintf("The payment cannot be priced (%v); no money moved.", err))
	}
	k, d := keyOf(p.Nonce), digestOf(p)
	s.mu.Lock()
	paid, ok := s.find(k)
	if !ok {
		paid = d
		s.recent[k] = d
		s.settlements++
	}
	s.mu.Unlock()
	if paid != d {
		return nonceConflict()
	}
	return out
}

// settledOutcome is the deterministic settled outcome of p: a pure function
// of the payment and the options.
func (s *Simulated) settledOutcome(p policy.Payment) (policy.RailOutcome, error) {
	price, err := SimulatedPrice(p.Amount, p.Destination, p.Resource)
	if err != nil {
		return policy.RailOutcome{}, err
	}
	body, err := s.body(p, price)
	if err != nil {
		return policy.RailOutcome{}, err
	}
	return policy.RailOutcome{
		Status:    policy.RailSettled,
		Price:     price,
		Network:   PracticeNetwork,
		Reference: reference(p.Nonce),
		Result:    NewVendorResult(200, "application/json", body),
		Simulated: true,
	}, nil
}

// reference is the simulated transaction hash of a nonce: "0x" and 64 hex
// digits.
func reference(nonce string) string {
	sum := sha256.Sum256([]byte("simulated-x402-settlement\n" + nonce))
	return "0x" + hex.EncodeToString(sum[:])
}

// simulatedBody is what the practice vendor answers. Field order is fixed, so
// the body is deterministic.
type simulatedBody struct {
	Resource  string `json:"resource"`
	Method    string `json:"method"`
	Price     string `json:"price"`
	Currency  string `json:"currency"`
	Nonce     string `json:"nonce"`
	Simulated bool   `json:"simulated"`
	Data      string `json:"data,omitempty"`
}

func (s *Simulated) body(p policy.Payment, price policy.Amount) ([]byte, error) {
	path := p.Resource.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	b := simulatedBody{
		Resource:  "https://" + p.Resource.Host + path,
		Method:    p.Resource.Method,
		Price:     price.Display(),
		Currency:  p.Currency,
		Nonce:     p.Nonce,
		Simulated: true,
		Data:      filler(s.opts.LargeBody),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// filler is n bytes (or up to 3 fewer, to end on a whole character) of text
// mixing one-, two- and three-byte UTF-8 characters.
func filler(n int) string {
	if n <= 0 {
		return ""
	}
	const unit = "practice data · résumé · 5 € · "
	text := strings.Repeat(unit, n/len(unit)+1)
	cut, _ := capBody([]byte(text), n)
	return string(cut)
}

func rejected(code, message string) policy.RailOutcome {
	return policy.RailOutcome{
		Status:       policy.RailRejected,
		Network:      PracticeNetwork,
		ErrorCode:    code,
		ErrorMessage: message,
		Simulated:    true,
	}
}

func nonceConflict() policy.RailOutcome {
	return rejected(CodeNonceConflict,
		"This nonce already paid a different payment; nothing was paid for this one.")
}
