package fastjson

import (
	"strconv"

	"github.com/agentpay/guard/policy"
)

// AppendSpend appends sp as encoding/json writes it: its wire form, which
// is also the form the journal stores.
func AppendSpend(b []byte, sp *policy.Spend) []byte {
	b = append(b, `{"id":`...)
	b = AppendString(b, sp.ID)
	b = append(b, `,"object":`...)
	b = AppendString(b, sp.Object)
	b = append(b, `,"agent_id":`...)
	b = AppendString(b, sp.AgentID)
	b = append(b, `,"livemode":`...)
	b = strconv.AppendBool(b, sp.Livemode)
	b = append(b, `,"status":`...)
	b = AppendString(b, string(sp.Status))
	b = append(b, `,"amount":`...)
	b = AppendAmount(b, sp.Amount)
	b = append(b, `,"amount_settled":`...)
	b = AppendOptAmount(b, sp.AmountSettled)
	b = append(b, `,"currency":`...)
	b = AppendString(b, sp.Currency)
	b = append(b, `,"destination":`...)
	b = AppendString(b, sp.Destination)
	b = append(b, `,"destination_rule":`...)
	b = AppendOptString(b, sp.DestinationRule)
	b = append(b, `,"resource":`...)
	b = appendResource(b, &sp.Resource)
	b = append(b, `,"memo":`...)
	b = AppendString(b, sp.Memo)
	b = append(b, `,"client_reference":`...)
	b = AppendOptString(b, sp.ClientReference)
	b = append(b, `,"policy_version":`...)
	b = strconv.AppendInt(b, int64(sp.PolicyVersion), 10)
	b = append(b, `,"decline_reason":`...)
	b = AppendOptString(b, sp.DeclineReason)
	b = append(b, `,"declined_at_gate":`...)
	b = AppendOptString(b, sp.DeclinedAtGate)
	b = append(b, `,"pause_detail":`...)
	if p := sp.PauseDetail; p == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"scope":`...)
		b = AppendString(b, p.Scope)
		b = append(b, `,"paused_at":`...)
		b = AppendTime(b, p.PausedAt)
		b = append(b, `,"message":`...)
		b = AppendString(b, p.Message)
		b = append(b, '}')
	}
	b = append(b, `,"approval_reason":`...)
	b = AppendOptString(b, sp.ApprovalReason)
	b = append(b, `,"approval":`...)
	if a := sp.Approval; a == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"id":`...)
		b = AppendString(b, a.ID)
		b = append(b, `,"status":`...)
		b = AppendString(b, a.Status)
		b = append(b, `,"expires_at":`...)
		b = AppendTime(b, a.ExpiresAt)
		b = append(b, `,"items_hash":`...)
		b = AppendString(b, a.ItemsHash)
		b = append(b, `,"short_code":`...)
		b = AppendString(b, a.ShortCode)
		b = append(b, `,"owner_url":`...)
		b = AppendString(b, a.OwnerURL)
		b = append(b, '}')
	}
	b = append(b, `,"hold":`...)
	if h := sp.Hold; h == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"amount":`...)
		b = AppendAmount(b, h.Amount)
		b = append(b, `,"expires_at":`...)
		b = AppendOptTime(b, h.ExpiresAt)
		b = append(b, '}')
	}
	b = append(b, `,"settlement":`...)
	b = appendSettlement(b, sp.Settlement)
	b = append(b, `,"failure_reason":`...)
	b = AppendOptString(b, sp.FailureReason)
	b = append(b, `,"rail_error":`...)
	if e := sp.RailError; e == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = AppendString(b, e.Code)
		b = append(b, `,"message":`...)
		b = AppendString(b, e.Message)
		b = append(b, '}')
	}
	b = append(b, `,"processing_detail":`...)
	if p := sp.ProcessingDetail; p == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = AppendString(b, p.Code)
		b = append(b, `,"message":`...)
		b = AppendString(b, p.Message)
		b = append(b, `,"since":`...)
		b = AppendTime(b, p.Since)
		b = append(b, '}')
	}
	b = append(b, `,"rule":`...)
	b = AppendRuleDetail(b, sp.Rule)
	b = append(b, `,"sandbox":`...)
	if s := sp.Sandbox; s == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"simulated_vendor":`...)
		b = strconv.AppendBool(b, s.SimulatedVendor)
		if s.Forced != "" {
			b = append(b, `,"forced":`...)
			b = AppendString(b, s.Forced)
		}
		b = append(b, '}')
	}
	b = append(b, `,"message":`...)
	b = AppendString(b, sp.Message)
	b = append(b, `,"next_action":`...)
	b = AppendNextAction(b, &sp.NextAction)
	b = append(b, `,"retryable":`...)
	b = strconv.AppendBool(b, sp.Retryable)
	b = append(b, `,"created_at":`...)
	b = AppendTime(b, sp.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = AppendTime(b, sp.UpdatedAt)
	return append(b, '}')
}

func appendSettlement(b []byte, s *policy.Settlement) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"mode":`...)
	b = AppendString(b, s.Mode)
	b = append(b, `,"status":`...)
	b = AppendString(b, s.Status)
	b = append(b, `,"network":`...)
	b = AppendOptString(b, s.Network)
	b = append(b, `,"reference":`...)
	b = AppendOptString(b, s.Reference)
	b = append(b, `,"receipt_id":`...)
	b = AppendOptString(b, s.ReceiptID)
	b = append(b, `,"result":`...)
	if r := s.Result; r == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"http_status":`...)
		b = strconv.AppendInt(b, int64(r.HTTPStatus), 10)
		b = append(b, `,"content_type":`...)
		b = AppendString(b, r.ContentType)
		b = append(b, `,"body":`...)
		b = AppendString(b, r.Body)
		b = append(b, `,"body_truncated":`...)
		b = strconv.AppendBool(b, r.BodyTruncated)
		b = append(b, `,"body_sha256":`...)
		b = AppendString(b, r.BodySHA256)
		b = append(b, '}')
	}
	return append(b, '}')
}

// AppendRuleDetail appends d, or null for a nil d.
func AppendRuleDetail(b []byte, d *policy.RuleDetail) []byte {
	if d == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"name":`...)
	b = AppendString(b, d.Name)
	b = append(b, `,"scope":`...)
	b = AppendString(b, d.Scope)
	b = append(b, `,"limit":`...)
	b = AppendString(b, d.Limit)
	b = append(b, `,"spent":`...)
	b = AppendString(b, d.Spent)
	b = append(b, `,"requested":`...)
	b = AppendString(b, d.Requested)
	b = append(b, `,"remaining":`...)
	b = AppendString(b, d.Remaining)
	b = append(b, `,"resets_at":`...)
	b = AppendOptTime(b, d.ResetsAt)
	return append(b, '}')
}

// AppendNextAction appends n; its optional members are left out when
// empty, as their omitempty tags say.
func AppendNextAction(b []byte, n *policy.NextAction) []byte {
	b = append(b, `{"code":`...)
	b = AppendString(b, n.Code)
	if len(n.Suggestions) > 0 {
		b = append(b, `,"suggestions":`...)
		b = AppendStrings(b, n.Suggestions)
	}
	if n.CheckWith != "" {
		b = append(b, `,"check_with":`...)
		b = AppendString(b, n.CheckWith)
	}
	if n.RetryAfterSeconds != 0 {
		b = append(b, `,"retry_after_seconds":`...)
		b = strconv.AppendInt(b, int64(n.RetryAfterSeconds), 10)
	}
	if n.OwnerURL != "" {
		b = append(b, `,"owner_url":`...)
		b = AppendString(b, n.OwnerURL)
	}
	if n.Detail != "" {
		b = append(b, `,"detail":`...)
		b = AppendString(b, n.Detail)
	}
	return append(b, '}')
}

// AppendLedger appends the stored part of l: its counters. Holds and the
// destination window are not stored (see policy.Ledger).
func AppendLedger(b []byte, l *policy.Ledger) []byte {
	b = append(b, `{"day":`...)
	b = AppendString(b, l.Day)
	b = append(b, `,"day_settled":`...)
	b = AppendAmount(b, l.DaySettled)
	b = append(b, `,"month":`...)
	b = AppendString(b, l.Month)
	b = append(b, `,"month_settled":`...)
	b = AppendAmount(b, l.MonthSettled)
	b = append(b, `,"lifetime_settled":`...)
	b = AppendAmount(b, l.LifetimeSettled)
	b = append(b, `,"asked_day":`...)
	b = AppendString(b, l.AskedDay)
	b = append(b, `,"asked":`...)
	b = AppendStrings(b, l.Asked)
	return append(b, '}')
}

func appendResource(b []byte, r *policy.Resource) []byte {
	b = append(b, `{"host":`...)
	b = AppendString(b, r.Host)
	b = append(b, `,"path":`...)
	b = AppendString(b, r.Path)
	b = append(b, `,"method":`...)
	b = AppendString(b, r.Method)
	return append(b, '}')
}
