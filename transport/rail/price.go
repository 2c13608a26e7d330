package rail

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/agentpay/guard/policy"
)

const (
	// maxDiscountPPM is the largest simulated discount, in parts per million
	// of the amount (10%).
	maxDiscountPPM = 100_000
	microsPerUnit  = 1_000_000
)

var oneMicro = policy.AmountFromMicros(1)

// discountPPM is the simulated vendor's discount for a resource, 0 to 10%
// inclusive in parts per million, a pure function of where the money goes and
// what it buys.
func discountPPM(destination string, r policy.Resource) int64 {
	sum := sha256.Sum256([]byte(destination + "\n" + r.Path + "\n" + r.Method))
	return int64(binary.BigEndian.Uint64(sum[:8]) % (maxDiscountPPM + 1))
}

// SimulatedPrice is what the practice vendor charges for a resource when the
// agent accepts up to amount: amount less a deterministic discount of 0–10%
// (derived from SHA-256 of destination, path and method), rounded down to 6
// decimals, and never below 0.000001. An amount below 0.000001 is charged as
// is. The result is never above amount. amount must be positive and a whole
// number of micros (at most 6 decimals, below 2^63 micros), as every payable
// USDC amount is.
func SimulatedPrice(amount policy.Amount, destination string, r policy.Resource) (policy.Amount, error) {
	var zero policy.Amount
	if amount.Sign() <= 0 {
		return zero, fmt.Errorf("rail: price of a non-positive amount %s", amount)
	}
	if amount.Cmp(oneMicro) < 0 {
		return amount, nil
	}
	micros, ok := amount.Micros()
	if !ok {
		return zero, fmt.Errorf("rail: amount %s is not a whole number of micros", amount)
	}
	// price = floor(micros * (1e6 - discount) / 1e6). The product needs up
	// to 83 bits, so it is computed in 128: its high word is below 1e6, so the
	// division cannot overflow, and the quotient is at most micros.
	keep := uint64(microsPerUnit - discountPPM(destination, r))
	hi, lo := bits.Mul64(uint64(micros), keep)
	price, _ := bits.Div64(hi, lo, microsPerUnit)
	if price == 0 {
		price = 1
	}
	// Rounding down already keeps the price within the amount; the clamp
	// states the invariant where it is promised.
	return policy.MinAmount(policy.AmountFromMicros(int64(price)), amount), nil
}
