package fastjson

import (
	"strconv"

	"github.com/agentpay/guard/policy"
)

// AppendReceiptClaims appends c as encoding/json writes it: the payload of
// the receipt every settled spend signs, written on the settlement's path.
func AppendReceiptClaims(b []byte, c *policy.ReceiptClaims) []byte {
	b = append(b, `{"rid":`...)
	b = AppendString(b, c.ReceiptID)
	b = append(b, `,"spend_id":`...)
	b = AppendString(b, c.SpendID)
	b = append(b, `,"agent_id":`...)
	b = AppendString(b, c.AgentID)
	b = append(b, `,"owner_id":`...)
	b = AppendString(b, c.OwnerID)
	b = append(b, `,"livemode":`...)
	b = strconv.AppendBool(b, c.Livemode)
	b = append(b, `,"amount":`...)
	b = AppendString(b, c.Amount)
	b = append(b, `,"amount_settled":`...)
	b = AppendString(b, c.AmountSettled)
	b = append(b, `,"currency":`...)
	b = AppendString(b, c.Currency)
	b = append(b, `,"destination":`...)
	b = AppendString(b, c.Destination)
	b = append(b, `,"resource":`...)
	b = appendResource(b, &c.Resource)
	b = append(b, `,"network":`...)
	b = AppendString(b, c.Network)
	b = append(b, `,"reference":`...)
	b = AppendString(b, c.Reference)
	b = append(b, `,"policy_version":`...)
	b = strconv.AppendInt(b, int64(c.PolicyVersion), 10)
	b = append(b, `,"policy_hash":`...)
	b = AppendString(b, c.PolicyHash)
	b = append(b, `,"body_sha256":`...)
	b = AppendString(b, c.BodySHA256)
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, c.IssuedAt, 10)
	b = append(b, `,"prev":`...)
	b = AppendString(b, c.PrevHash)
	return append(b, '}')
}
