package transport

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/policy"
)

// randomText mixes what needs escaping (quotes, backslashes, HTML, control
// characters, U+2028, invalid UTF-8) with plain and non-ASCII text.
func randomText(rnd *rand.Rand) string {
	pieces := []string{"a", "Z", "0.01", " ", "\"", "\\", "<", ">", "&", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f",
		"\x7f", "é", "日本", "\u2028", "\u2029", "💸", "\xff", "\xed\xa0\x80", "/", "api.vendor.com"}
	var b strings.Builder
	for n := rnd.IntN(10); n > 0; n-- {
		b.WriteString(pieces[rnd.IntN(len(pieces))])
	}
	return b.String()
}

func randomOpt(rnd *rand.Rand) *string {
	if rnd.IntN(3) == 0 {
		return nil
	}
	s := randomText(rnd)
	return &s
}

func randomTime(rnd *rand.Rand) time.Time {
	t := time.Unix(1_700_000_000+rnd.Int64N(300_000_000), rnd.Int64N(1e9)).UTC()
	switch rnd.IntN(3) {
	case 0:
		return t.Truncate(time.Second)
	case 1:
		return t.Truncate(time.Millisecond)
	}
	return t
}

// answered returns the body a writer gives an answer.
func answered(write func(ctx *fasthttp.RequestCtx)) []byte {
	var ctx fasthttp.RequestCtx
	write(&ctx)
	return append([]byte(nil), ctx.Response.Body()...)
}

// The hand-written balance and check answers are byte for byte what the
// general encoder writes for the same values.
func TestHandWrittenAnswersMatchEncoder(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 3))
		reqID := randomText(rnd)
		b := policy.Balance{Object: randomText(rnd), AgentID: randomText(rnd), Currency: randomText(rnd),
			Spendable: randomText(rnd), LimitingFactor: randomText(rnd), Held: randomText(rnd),
			PendingCount: rnd.IntN(100), Message: randomText(rnd), Livemode: rnd.IntN(2) == 0, AsOf: randomTime(rnd),
			Components: policy.BalanceComponents{PoolAvailable: randomText(rnd), ReserveFloor: randomText(rnd),
				DailyRemaining: randomText(rnd), MonthlyRemaining: randomText(rnd), PerSpendLimit: randomText(rnd),
				LifetimeRemaining: randomOpt(rnd)}}
		want := answered(func(ctx *fasthttp.RequestCtx) { writeJSON(ctx, 200, reqID, b) })
		got := answered(func(ctx *fasthttp.RequestCtx) { writeBalance(ctx, reqID, &b) })
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: balance\nencoder: %s\nby hand: %s", seed, want, got)
		}

		r := policy.CheckResult{Object: randomText(rnd), Allowed: rnd.IntN(2) == 0, Destination: randomText(rnd),
			Decision: randomOpt(rnd), Reason: randomText(rnd), MatchedRule: randomOpt(rnd),
			ReservesNothing: rnd.IntN(2) == 0, Message: randomText(rnd), Livemode: rnd.IntN(2) == 0,
			NextAction: policy.NextAction{Code: randomText(rnd)}}
		if rnd.IntN(2) == 0 {
			r.Rule = &policy.RuleDetail{Name: randomText(rnd), Scope: randomText(rnd), Limit: randomText(rnd),
				Spent: randomText(rnd), Requested: randomText(rnd), Remaining: randomText(rnd)}
			if rnd.IntN(2) == 0 {
				at := randomTime(rnd)
				r.Rule.ResetsAt = &at
			}
		}
		na := &r.NextAction
		switch rnd.IntN(3) {
		case 0:
			na.Suggestions = []string{}
		case 1:
			for n := 1 + rnd.IntN(3); n > 0; n-- {
				na.Suggestions = append(na.Suggestions, randomText(rnd))
			}
		}
		if rnd.IntN(2) == 0 {
			na.CheckWith = randomText(rnd)
		}
		if rnd.IntN(2) == 0 {
			na.RetryAfterSeconds = rnd.IntN(100)
		}
		if rnd.IntN(2) == 0 {
			na.OwnerURL = randomText(rnd)
		}
		if rnd.IntN(2) == 0 {
			na.Detail = randomText(rnd)
		}
		want = answered(func(ctx *fasthttp.RequestCtx) { writeJSON(ctx, 200, reqID, r) })
		got = answered(func(ctx *fasthttp.RequestCtx) { writeCheck(ctx, reqID, &r) })
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: check\nencoder: %s\nby hand: %s", seed, want, got)
		}
	}
}
