// Package ratelimit enforces the rate limits of spec 8.1 with token
// buckets and, for the limits without a burst, sliding windows, one per
// limit, environment and subject, and gives the values of the RateLimit-*
// and Retry-After headers (spec 4 and 8.1).
//
// # Model
//
// A Limit is a Rate per Window plus a Burst. Its bucket holds at most
// Rate+Burst tokens, refills continuously at Rate per Window (one token
// every Window/Rate), and starts full. Each request takes one token; with
// none left it is refused and told how long until one token is back.
//
//	l := ratelimit.New(ratelimit.DefaultTable(), nil)
//	d := l.Allow(ratelimit.Spends, livemode, agentID)
//	switch {
//	case d.Disabled: // route absent in this environment: 404
//	case !d.Allowed: // 429 with Retry-After
//	}
//	limit, remaining, reset, retryAfter := d.Headers()
//
// The subject is what the limit counts: the key id for Key and
// AdminWrites, the agent id for Spends, SpendsDaily and Check, the owner id
// for KeyChanges and PracticeControl, the client IP for InvalidKey and
// Public. A request may pass several limits (every authenticated request
// passes Key, a payment also Spends and SpendsDaily); the caller checks
// each and answers with the headers of the one that refused, or of the
// most specific one.
//
// # Reading of burst
//
// The spec says burst "is what is allowed at once on top of the sustained
// pace". So a fresh subject may send Rate+Burst requests at once, and after
// that Rate per Window. Live POST /v1/spends (10 per minute, burst 5):
// 15 at once, then one every 6 seconds.
//
// # Windows (burst 0)
//
// A limit with burst 0 is a window, not a bucket: at most Rate requests in
// any span of Window. Those are the daily ones, payments (SpendsDaily) and
// key changes (KeyChanges), and invalid keys per 10 minutes. A bucket of
// Rate tokens refilling over the Window would let twice Rate through in
// one Window (a full bucket at its start, then a Window of refill), which
// "1000 per day, burst 0" does not allow. There is no midnight reset: the
// window slides.
//
// A window counts its requests in slots, Window/96 long but never shorter
// than a minute (a day in quarter hours, 10 minutes in minutes), and
// allows a request while the slots overlapping the last Window hold fewer
// than Rate. The oldest of those slots began before the Window did, so a
// request is refused at most one slot longer than an exact count would
// refuse it, and never allowed when an exact count would refuse it. Live
// SpendsDaily: 200 payments in one quarter hour, then none until a day
// after that quarter hour ended, when all 200 come back.
//
// Buckets and windows live in memory. So that a restart does not hand back
// a day's allowance, a limit may be given a History (Recall): a bucket or
// window the limiter has not seen starts from the uses the history finds. The
// server gives one to both daily limits: payments, read from the spends
// each agent made, and key changes, from the keys each owner was given.
//
// # Disabled limits
//
// Rate 0 means the route does not exist in that environment (practice
// control with a live key). Allow returns a Decision with Disabled set and
// counts nothing; the caller answers 404 and sends no RateLimit headers.
//
// # Headers
//
// RateLimit-Limit is what a full bucket holds, Rate+Burst, so that the
// three headers describe one bucket and Remaining is never above Limit (a
// client comparing them must not see more left than allowed). The pace,
// Rate per Window, is in the 429 message and the API document.
// RateLimit-Remaining is the whole tokens left after this request.
// RateLimit-Reset is the seconds, rounded up, until the bucket is full
// again. Retry-After, on a refusal only, is the seconds, rounded up and at
// least 1, until one token is back; right after a subject exhausted its
// bucket that is Window/Rate. For a window, Limit is Rate, Remaining what
// the window still takes, Reset the seconds until it holds nothing, and
// Retry-After the seconds until enough of its oldest slots have left for
// one more request.
//
// # Arithmetic
//
// Everything is integer nanoseconds. A limit becomes an interval, the time
// to earn one token (Window/Rate, rounded up so the pace is never faster
// than configured), and a size, (Rate+Burst) times the interval. A bucket
// is stored as a single number: the instant it is full again. The debt
// max(0, fullAt-now) is how far it is below full; the tokens are
// (size-debt)/interval. A request is allowed if debt+interval <= size and
// then moves fullAt one interval later. Time is measured from the
// limiter's start with the monotonic clock, so changes of the wall clock do
// not move buckets. Goroutines read the clock before taking a shard's
// lock, so a bucket may see a reading older than its last one; that only
// makes it look emptier for an instant, never fuller. A clock that steps
// backwards (possible only with an injected clock) likewise leaves buckets
// empty until it catches up, with RetryAfter counting the gap.
//
// # Concurrency
//
// A Limiter is safe for concurrent use. Buckets live in 64 shards chosen by
// a seeded hash of the subject, each a map behind its own mutex, padded to
// a cache line; Allow holds one shard's lock for one map lookup and a few
// integer operations. Allow on an existing bucket does not allocate; a new
// subject costs one map entry and one slab slot (slots freed by Sweep are
// reused). With a nil Clock, New uses the monotonic clock directly, the
// cheapest reading Go offers; the clock is read before the lock.
//
// # Memory
//
// A window is a map entry and its slots, 4 bytes each (97 for a day, 11
// for 10 minutes), allocated when a subject first uses it; Sweep drops a
// window once nothing is left in it.
//
// A bucket is a map entry (subject string header, limit index,
// environment, slot number) and one int64 in its shard's slab: 45 to 80
// bytes depending on where the map and slab are in their growth, plus the
// subject's bytes, which the map keeps alive (so a subject must be a real
// string, never an unsafe view of a reused request buffer). A subject
// that is idle long
// enough for its bucket to be full again costs nothing once Sweep has run:
// Sweep drops full buckets, since a subject seen anew starts full, which
// is the same state. The server calls Sweep periodically (every minute is
// plenty); the buckets left are the subjects active within the last window
// of their limit, so a one-day limit keeps a recently busy agent for up to
// a day. A shard whose map fell below a quarter of its peak is rebuilt so
// that its memory is returned.
//
// # Configuration
//
// DefaultTable returns the values of spec 8.1. Table.Scaled multiplies
// rates and bursts, for load benchmarks. Table.Validate names every bad
// entry; New panics on a table that fails it, as the table is checked
// once at start.
package ratelimit
