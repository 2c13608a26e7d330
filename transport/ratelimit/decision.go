package ratelimit

import (
	"strconv"
	"time"
)

// Decision is the outcome of one Allow.
type Decision struct {
	// Allowed reports that a token was taken and the request may proceed.
	Allowed bool
	// Disabled reports that the limit is 0 in this environment: the route
	// does not exist there and the caller answers 404. Every other field
	// is zero.
	Disabled bool
	// Limit is what a full bucket holds, Rate+Burst, for RateLimit-Limit:
	// the three headers then describe one bucket (Remaining of Limit left,
	// full again in Reset), and Remaining is never above Limit.
	Limit int
	// Rate is the sustained pace, tokens per window (Limit less the
	// burst): what the 429 message states, as spec 8.1 does.
	Rate int
	// Remaining is the number of whole tokens left after this request.
	Remaining int
	// Reset is the time until the bucket is full again.
	Reset time.Duration
	// RetryAfter is, when refused, the time until one token is available;
	// zero when allowed.
	RetryAfter time.Duration
}

// Headers returns the values of RateLimit-Limit, RateLimit-Remaining,
// RateLimit-Reset and Retry-After. Reset and Retry-After are whole seconds
// rounded up; Retry-After is at least 1 when the request was refused and
// empty when it was allowed. A disabled decision has no headers: all four
// are empty.
func (d Decision) Headers() (limit, remaining, reset, retryAfter string) {
	if d.Disabled {
		return "", "", "", ""
	}
	limit = strconv.Itoa(d.Limit)
	remaining = strconv.Itoa(d.Remaining)
	reset = strconv.FormatInt(d.ResetSeconds(), 10)
	if !d.Allowed {
		retryAfter = strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10)
	}
	return limit, remaining, reset, retryAfter
}

// ResetSeconds is RateLimit-Reset: whole seconds until the bucket is full
// again, rounded up.
func (d Decision) ResetSeconds() int64 { return ceilSeconds(d.Reset) }

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return ceilDiv(int64(d), int64(time.Second))
}
