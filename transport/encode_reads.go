package transport

import (
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

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
	out = appendJSONString(out, b.Object)
	out = append(out, `,"agent_id":`...)
	out = appendJSONString(out, b.AgentID)
	out = append(out, `,"currency":`...)
	out = appendJSONString(out, b.Currency)
	out = append(out, `,"spendable":`...)
	out = appendJSONString(out, b.Spendable)
	out = append(out, `,"limiting_factor":`...)
	out = appendJSONString(out, b.LimitingFactor)
	c := &b.Components
	out = append(out, `,"components":{"pool_available":`...)
	out = appendJSONString(out, c.PoolAvailable)
	out = append(out, `,"reserve_floor":`...)
	out = appendJSONString(out, c.ReserveFloor)
	out = append(out, `,"daily_remaining":`...)
	out = appendJSONString(out, c.DailyRemaining)
	out = append(out, `,"monthly_remaining":`...)
	out = appendJSONString(out, c.MonthlyRemaining)
	out = append(out, `,"per_spend_limit":`...)
	out = appendJSONString(out, c.PerSpendLimit)
	out = append(out, `,"lifetime_remaining":`...)
	out = appendOptString(out, c.LifetimeRemaining)
	out = append(out, `},"held":`...)
	out = appendJSONString(out, b.Held)
	out = append(out, `,"pending_count":`...)
	out = strconv.AppendInt(out, int64(b.PendingCount), 10)
	out = append(out, `,"message":`...)
	out = appendJSONString(out, b.Message)
	out = append(out, `,"livemode":`...)
	out = strconv.AppendBool(out, b.Livemode)
	out = append(out, `,"as_of":`...)
	out = appendJSONTime(out, b.AsOf)
	*buf = writeBody(ctx, reqID, out)
}

// writeCheck answers 200 with r.
func writeCheck(ctx *fasthttp.RequestCtx, reqID string, r *policy.CheckResult) {
	buf := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(buf)
	out := append((*buf)[:0], `{"object":`...)
	out = appendJSONString(out, r.Object)
	out = append(out, `,"allowed":`...)
	out = strconv.AppendBool(out, r.Allowed)
	out = append(out, `,"destination":`...)
	out = appendJSONString(out, r.Destination)
	out = append(out, `,"decision":`...)
	out = appendOptString(out, r.Decision)
	out = append(out, `,"reason":`...)
	out = appendJSONString(out, r.Reason)
	out = append(out, `,"matched_rule":`...)
	out = appendOptString(out, r.MatchedRule)
	out = append(out, `,"rule":`...)
	if d := r.Rule; d == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, `{"name":`...)
		out = appendJSONString(out, d.Name)
		out = append(out, `,"scope":`...)
		out = appendJSONString(out, d.Scope)
		out = append(out, `,"limit":`...)
		out = appendJSONString(out, d.Limit)
		out = append(out, `,"spent":`...)
		out = appendJSONString(out, d.Spent)
		out = append(out, `,"requested":`...)
		out = appendJSONString(out, d.Requested)
		out = append(out, `,"remaining":`...)
		out = appendJSONString(out, d.Remaining)
		out = append(out, `,"resets_at":`...)
		if d.ResetsAt == nil {
			out = append(out, "null"...)
		} else {
			out = appendJSONTime(out, *d.ResetsAt)
		}
		out = append(out, '}')
	}
	out = append(out, `,"reserves_nothing":`...)
	out = strconv.AppendBool(out, r.ReservesNothing)
	out = append(out, `,"message":`...)
	out = appendJSONString(out, r.Message)
	out = append(out, `,"next_action":`...)
	out = appendNextAction(out, &r.NextAction)
	out = append(out, `,"livemode":`...)
	out = strconv.AppendBool(out, r.Livemode)
	*buf = writeBody(ctx, reqID, out)
}

// appendNextAction writes a next_action object; its optional members are
// left out when empty, as their omitempty tags say.
func appendNextAction(out []byte, n *policy.NextAction) []byte {
	out = append(out, `{"code":`...)
	out = appendJSONString(out, n.Code)
	if len(n.Suggestions) > 0 {
		out = append(out, `,"suggestions":`...)
		out = appendJSONStrings(out, n.Suggestions)
	}
	if n.CheckWith != "" {
		out = append(out, `,"check_with":`...)
		out = appendJSONString(out, n.CheckWith)
	}
	if n.RetryAfterSeconds != 0 {
		out = append(out, `,"retry_after_seconds":`...)
		out = strconv.AppendInt(out, int64(n.RetryAfterSeconds), 10)
	}
	if n.OwnerURL != "" {
		out = append(out, `,"owner_url":`...)
		out = appendJSONString(out, n.OwnerURL)
	}
	if n.Detail != "" {
		out = append(out, `,"detail":`...)
		out = appendJSONString(out, n.Detail)
	}
	return append(out, '}')
}

// writeBody finishes an object whose members are written up to its last
// one: request_id goes last, as writeObject places it. The response copies
// out, so the buffer is returned (grown, if it had to) for the next answer.
func writeBody(ctx *fasthttp.RequestCtx, reqID string, out []byte) []byte {
	out = append(out, `,"request_id":`...)
	out = appendJSONString(out, reqID)
	out = append(out, '}')
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
	return out
}

// answerBufs holds the buffers hand-written answers are built in.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func appendOptString(out []byte, s *string) []byte {
	if s == nil {
		return append(out, "null"...)
	}
	return appendJSONString(out, *s)
}

// appendJSONTime writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds as needed, quoted).
func appendJSONTime(out []byte, t time.Time) []byte {
	out = append(out, '"')
	out = t.AppendFormat(out, time.RFC3339Nano)
	return append(out, '"')
}
