package ratelimit

import (
	"slices"
	"time"
)

// History tells a limiter how long ago, from now, a subject used a limit,
// for the uses it can find within the given span: for daily limits, the
// requests that left a durable trace (the spends an agent created). It is
// asked once for a subject the limiter holds no bucket of, so that a
// restart does not hand back a day's allowance. An error or a subject it
// does not know means no earlier uses: the bucket starts full, as without
// a History.
type History func(name Name, livemode bool, subject string, within time.Duration) ([]time.Duration, error)

// Recall makes the buckets of names start from what h remembers instead of
// full. Call it once, before the limiter is used. A bucket starts as the
// limiter would hold it now had it seen those uses (and nothing else) from
// a full bucket two windows ago: uses h does not know of (a request
// refused with 400 leaves no spend) are not counted, so a recalled bucket
// is never emptier than the one the previous process held.
func (l *Limiter) Recall(h History, names ...Name) {
	l.history = h
	for _, n := range names {
		i := n.index()
		if i < 0 {
			panic("ratelimit: unknown limit name " + string(n))
		}
		l.params[i][0].recall = true
		l.params[i][1].recall = true
	}
}

// recalled is the debt a new bucket of (name, livemode, subject) starts
// with, from the limiter's History.
func (l *Limiter) recalled(p *params, name Name, livemode bool, subject string) int64 {
	horizon := 2 * p.window
	ages, err := l.history(name, livemode, subject, time.Duration(horizon))
	if err != nil {
		return 0
	}
	return debtAfter(p, ages)
}

// debtAfter replays uses the given ages ago through a bucket of p that was
// full two windows ago, and returns its debt now. Two windows, not one: a
// bucket emptied just before the window began is still refilling inside
// it. A use stamped in the future (a clock step) counts as now; the bucket
// never goes below empty.
func debtAfter(p *params, ages []time.Duration) int64 {
	horizon := 2 * p.window
	at := make([]int64, 0, len(ages)) // nanoseconds relative to now, <= 0
	for _, a := range ages {
		if int64(a) < horizon {
			at = append(at, -max(int64(a), 0))
		}
	}
	slices.Sort(at)
	var debt int64
	last := -horizon
	for _, t := range at {
		debt = min(max(debt-(t-last), 0)+p.interval, p.size)
		last = t
	}
	return max(debt+last, 0)
}
