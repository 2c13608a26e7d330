package transport

import (
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/policy"
)

// The two answers agents read most, balance and check, are written by hand:
// field by field in the order of their struct, with request_id last, which
// is byte for byte what writeJSON writes for them (a test holds the two to
// the same bytes over random values). Encoding through reflection was a
// fifth of the handler's cost.

// writeBalance answers 200 with b.
func writeBalance(ctx *fasthttp.RequestCtx, reqID string, b *policy.Balance) {
	buf := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(buf)
	out := append((*buf)[:0], `{"object":`...)
	out = fastjson.AppendString(out, b.Object)
	out = append(out, `,"agent_id":`...)
	out = fastjson.AppendString(out, b.AgentID)
	out = append(out, `,"currency":`...)
	out = fastjson.AppendString(out, b.Currency)
	out = append(out, `,"spendable":`...)
	out = fastjson.AppendString(out, b.Spendable)
	out = append(out, `,"limiting_factor":`...)
	out = fastjson.AppendString(out, b.LimitingFactor)
	c := &b.Components
	out = append(out, `,"components":{"pool_available":`...)
	out = fastjson.AppendString(out, c.PoolAvailable)
	out = append(out, `,"reserve_floor":`...)
	out = fastjson.AppendString(out, c.ReserveFloor)
	out = append(out, `,"daily_remaining":`...)
	out = fastjson.AppendString(out, c.DailyRemaining)
	out = append(out, `,"monthly_remaining":`...)
	out = fastjson.AppendString(out, c.MonthlyRemaining)
	out = append(out, `,"per_spend_limit":`...)
	out = fastjson.AppendString(out, c.PerSpendLimit)
	out = append(out, `,"lifetime_remaining":`...)
	out = fastjson.AppendOptString(out, c.LifetimeRemaining)
	out = append(out, `},"held":`...)
	out = fastjson.AppendString(out, b.Held)
	out = append(out, `,"pending_count":`...)
	out = strconv.AppendInt(out, int64(b.PendingCount), 10)
	out = append(out, `,"message":`...)
	out = fastjson.AppendString(out, b.Message)
	out = append(out, `,"livemode":`...)
	out = strconv.AppendBool(out, b.Livemode)
	out = append(out, `,"as_of":`...)
	out = fastjson.AppendTime(out, b.AsOf)
	*buf = writeBody(ctx, reqID, out)
}

// writeCheck answers 200 with r.
func writeCheck(ctx *fasthttp.RequestCtx, reqID string, r *policy.CheckResult) {
	buf := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(buf)
	out := append((*buf)[:0], `{"object":`...)
	out = fastjson.AppendString(out, r.Object)
	out = append(out, `,"allowed":`...)
	out = strconv.AppendBool(out, r.Allowed)
	out = append(out, `,"destination":`...)
	out = fastjson.AppendString(out, r.Destination)
	out = append(out, `,"decision":`...)
	out = fastjson.AppendOptString(out, r.Decision)
	out = append(out, `,"reason":`...)
	out = fastjson.AppendString(out, r.Reason)
	out = append(out, `,"matched_rule":`...)
	out = fastjson.AppendOptString(out, r.MatchedRule)
	out = append(out, `,"rule":`...)
	out = fastjson.AppendRuleDetail(out, r.Rule)
	out = append(out, `,"reserves_nothing":`...)
	out = strconv.AppendBool(out, r.ReservesNothing)
	out = append(out, `,"message":`...)
	out = fastjson.AppendString(out, r.Message)
	out = append(out, `,"next_action":`...)
	out = fastjson.AppendNextAction(out, &r.NextAction)
	out = append(out, `,"livemode":`...)
	out = strconv.AppendBool(out, r.Livemode)
	*buf = writeBody(ctx, reqID, out)
}

// writeBody finishes an object whose members are written up to its last
// one: request_id goes last, as writeObject places it. The response copies
// out, so the buffer is returned (grown, if it had to) for the next answer.
func writeBody(ctx *fasthttp.RequestCtx, reqID string, out []byte) []byte {
	out = append(out, `,"request_id":`...)
	out = fastjson.AppendString(out, reqID)
	out = append(out, '}')
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
	return out
}

// answerBufs holds the buffers hand-written answers are built in.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
