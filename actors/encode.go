package actors

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// The records every spend journals (the spend, its events, the idempotency
// record, the agent's counters, the environment's state, the receipt) are
// encoded by hand, field by field in the order of their struct: through
// reflection they cost a tenth of a spend's CPU. The bytes are the ones
// encoding/json writes, which TestStoredFormsSameAsEncodingJSON holds over
// random values, so records written either way read the same.

// encodeBufs lend changes the buffer their hand-encoded values are written
// in. Store.Append copies a record's values, so the buffer goes back as soon
// as the record is appended (see change.release).
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledEncodeBuf keeps a change with an unusually large value (a long
// vendor answer) from pinning its buffer in the pool.
const maxPooledEncodeBuf = 64 << 10

// appendTo runs fn on the change's buffer and puts the bytes it appended
// under key.
func (c *change) appendTo(bucket string, key []byte, fn func([]byte) []byte) {
	if c.buf == nil {
		c.buf = encodeBufs.Get().(*[]byte)
	}
	start := len(*c.buf)
	*c.buf = fn(*c.buf)
	b := *c.buf
	// Capped: nothing may append into the value through its slice. A later
	// value that outgrows the buffer moves to a new array; earlier values
	// keep the old one, unchanged.
	c.ops = append(c.ops, persistence.Put(bucket, key, b[start:len(b):len(b)]))
}

// release returns the buffer once the record holding its values has been
// appended. The change's ops alias it, so they go too.
func (c *change) release() {
	if c.buf == nil {
		return
	}
	if cap(*c.buf) <= maxPooledEncodeBuf {
		*c.buf = (*c.buf)[:0]
		encodeBufs.Put(c.buf)
	}
	c.buf, c.ops = nil, nil
}

func (c *change) putLedger(key []byte, l *policy.Ledger) {
	c.appendTo(bLedgers, key, func(b []byte) []byte { return fastjson.AppendLedger(b, l) })
}

func (c *change) putEnvState(key []byte, st *EnvState) {
	c.appendTo(bEnvs, key, func(b []byte) []byte { return appendEnvState(b, st) })
}

// putIdemEntry puts the agent's index entry of a spend, which holds the
// record of the Idempotency-Key it was made under (see idempotency.go).
func (c *change) putIdemEntry(key []byte, idemKey string, r *idemRecord) {
	c.appendTo(bAgentSpends, key, func(b []byte) []byte { return appendIdemEntry(b, idemKey, r) })
}

func (c *change) putReceipt(key []byte, r *Receipt) {
	c.appendTo(bReceipts, key, func(b []byte) []byte { return appendReceipt(b, r) })
}

func (c *change) putActive(key []byte, sp *policy.Spend) {
	r := activeRecord{Nonce: sp.Nonce, PolicyHash: sp.PolicyHash, Warning: sp.Warning}
	c.appendTo(bActive, key, func(b []byte) []byte { return appendActiveRecord(b, &r) })
}

// spendJSON is the stored and answered form of sp, in a slice of its own:
// the agent keeps it as the answer to replay.
func spendJSON(sp *policy.Spend) []byte {
	bp := encodeBufs.Get().(*[]byte)
	b := fastjson.AppendSpend((*bp)[:0], sp)
	out := bytes.Clone(b)
	if cap(b) <= maxPooledEncodeBuf {
		*bp = b[:0]
		encodeBufs.Put(bp)
	}
	return out
}

func appendEnvState(b []byte, st *EnvState) []byte {
	b = append(b, `{"owner_id":`...)
	b = fastjson.AppendString(b, st.OwnerID)
	b = append(b, `,"env":`...)
	b = fastjson.AppendString(b, string(st.Env))
	b = append(b, `,"balance":`...)
	b = fastjson.AppendAmount(b, st.Balance)
	b = append(b, `,"held":`...)
	b = fastjson.AppendAmount(b, st.Held)
	b = append(b, `,"reserve_floor":`...)
	b = fastjson.AppendAmount(b, st.ReserveFloor)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, st.Sequence, 10)
	b = append(b, `,"receipt_chain":`...)
	b = fastjson.AppendString(b, st.ReceiptChain)
	if st.ClockOffset != 0 {
		b = append(b, `,"clock_offset":`...)
		b = strconv.AppendInt(b, int64(st.ClockOffset), 10)
	}
	b = append(b, `,"active_agents":`...)
	b = strconv.AppendInt(b, int64(st.ActiveAgents), 10)
	if st.ArchivedAgents != 0 {
		b = append(b, `,"archived_agents":`...)
		b = strconv.AppendInt(b, int64(st.ArchivedAgents), 10)
	}
	if st.EventFloor != 0 {
		b = append(b, `,"event_floor":`...)
		b = strconv.AppendUint(b, st.EventFloor, 10)
	}
	b = append(b, `,"low_balance_threshold":`...)
	b = fastjson.AppendAmount(b, st.LowBalanceThreshold)
	if st.BelowLowBalance {
		b = append(b, `,"below_low_balance":true`...)
	}
	return append(b, '}')
}

func appendIdemRecord(b []byte, r *idemRecord) []byte {
	b = append(b, `{"spend_id":`...)
	b = fastjson.AppendString(b, r.SpendID)
	b = append(b, `,"fp":{"amount":`...)
	b = fastjson.AppendString(b, r.Fingerprint.Amount)
	b = append(b, `,"currency":`...)
	b = fastjson.AppendString(b, r.Fingerprint.Currency)
	b = append(b, `,"destination":`...)
	b = fastjson.AppendString(b, r.Fingerprint.Destination)
	b = append(b, `,"url":`...)
	b = fastjson.AppendString(b, r.Fingerprint.URL)
	b = append(b, `,"method":`...)
	b = fastjson.AppendString(b, r.Fingerprint.Method)
	b = append(b, `},"created_at":`...)
	b = fastjson.AppendTime(b, r.CreatedAt)
	return append(b, '}')
}

func appendReceipt(b []byte, r *Receipt) []byte {
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, r.ID)
	b = append(b, `,"object":`...)
	b = fastjson.AppendString(b, r.Object)
	b = append(b, `,"spend_id":`...)
	b = fastjson.AppendString(b, r.SpendID)
	b = append(b, `,"agent_id":`...)
	b = fastjson.AppendString(b, r.AgentID)
	b = append(b, `,"livemode":`...)
	b = strconv.AppendBool(b, r.Livemode)
	b = append(b, `,"jws":`...)
	b = fastjson.AppendString(b, r.JWS)
	b = append(b, `,"kid":`...)
	b = fastjson.AppendString(b, r.KeyID)
	b = append(b, `,"created_at":`...)
	b = fastjson.AppendTime(b, r.CreatedAt)
	return append(b, '}')
}

func appendActiveRecord(b []byte, r *activeRecord) []byte {
	b = append(b, `{"nonce":`...)
	b = fastjson.AppendString(b, r.Nonce)
	b = append(b, `,"policy_hash":`...)
	b = fastjson.AppendString(b, r.PolicyHash)
	if w := r.Warning; w != nil {
		b = append(b, `,"warning":{"message":`...)
		b = fastjson.AppendString(b, w.Message)
		b = append(b, `,"suggestion":`...)
		b = fastjson.AppendString(b, w.Suggestion)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendStoredEvent writes an event as stored: the Event's members, then
// its audience. A spend's own payload is written by hand; the rarer ones
// (approvals, policies, pool notices) go through the codec.
func appendStoredEvent(b []byte, ev *StoredEvent) []byte {
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, ev.ID)
	b = append(b, `,"object":`...)
	b = fastjson.AppendString(b, ev.Object)
	b = append(b, `,"type":`...)
	b = fastjson.AppendString(b, ev.Type)
	b = append(b, `,"api_version":`...)
	b = fastjson.AppendString(b, ev.APIVersion)
	b = append(b, `,"created":`...)
	b = fastjson.AppendTime(b, ev.Created)
	b = append(b, `,"livemode":`...)
	b = strconv.AppendBool(b, ev.Livemode)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, ev.Sequence, 10)
	b = append(b, `,"agent_id":`...)
	b = fastjson.AppendString(b, ev.AgentID)
	b = append(b, `,"data":{"object":`...)
	switch o := ev.Data.Object.(type) {
	case SpendRef:
		b = appendSpendRef(b, &o)
	default:
		b = append(b, mustJSON(o)...)
	}
	b = append(b, `},"audience":`...)
	b = fastjson.AppendStrings(b, ev.AudienceList)
	return append(b, '}')
}

func appendSpendRef(b []byte, r *SpendRef) []byte {
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, r.ID)
	b = append(b, `,"object":`...)
	b = fastjson.AppendString(b, r.Object)
	b = append(b, `,"status":`...)
	b = fastjson.AppendString(b, string(r.Status))
	b = append(b, `,"amount":`...)
	b = fastjson.AppendAmount(b, r.Amount)
	b = append(b, `,"amount_settled":`...)
	b = fastjson.AppendOptAmount(b, r.AmountSettled)
	b = append(b, `,"destination":`...)
	b = fastjson.AppendString(b, r.Destination)
	if r.Settlement != nil {
		b = append(b, `,"settlement":{"receipt_id":`...)
		b = fastjson.AppendOptString(b, r.Settlement.ReceiptID)
		b = append(b, '}')
	}
	return append(b, '}')
}
