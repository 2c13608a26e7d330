package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/receipt"
)

// floorBody is a settled practice spend's answer as the service writes it
// (taken from a real one), less its receipt id, which each request fills.
// The spends phase parses only its status.
const (
	floorBodyHead = `{"id":"spd_01a235369d2e00089809c115df0d3ac9","object":"spend","agent_id":"agt_01a235368fe60003bbe3d1ffc3e395ed",` +
		`"livemode":false,"status":"settled","amount":"0.50","amount_settled":"0.45064","currency":"usdc","destination":"api.vendor.com",` +
		`"destination_rule":"api.vendor.com","resource":{"host":"api.vendor.com","path":"/report","method":"GET"},"memo":"",` +
		`"client_reference":null,"policy_version":1,"decline_reason":null,"declined_at_gate":null,"pause_detail":null,` +
		`"approval_reason":null,"approval":null,"hold":null,"settlement":{"mode":"service_executes_x402","status":"settled",` +
		`"network":"base-sepolia","reference":"0x7e6fde745624fcb000445097f35316f3f8ecb280171cd0e3b44acb36bb4a0c00","receipt_id":"`
	floorBodyTail = `","result":{"http_status":200,"content_type":"application/json",` +
		`"body":"{\"resource\":\"https://api.vendor.com/report\",\"method\":\"GET\",\"price\":\"0.45064\",\"currency\":\"usdc\",` +
		`\"nonce\":\"e167689e85361af01e2bc8e8975fddd7\",\"simulated\":true}","body_truncated":false,` +
		`"body_sha256":"sha256:53a6c39a386099f834daefb4db40a078ad498f18a6b309586cc49af60772698b"}},"failure_reason":null,` +
		`"rail_error":null,"processing_detail":null,"rule":null,"sandbox":{"simulated_vendor":true},"message":"Paid 0.45064 to api.vendor.com.",` +
		`"next_action":{"code":"none"},"retryable":false,"created_at":"2026-12-02T05:25:01.358916867Z","updated_at":"2026-12-02T05:25:01.358916867Z",` +
		`"idempotent_replay":false,"request_id":"req_dd978db70dd2e13wu1oh"}`
)

// floorClaims are a settled practice spend's receipt claims, of the size
// the service signs; the ids change with each request.
var floorClaims = policy.ReceiptClaims{AgentID: "agt_01a235368fe60003bbe3d1ffc3e395ed",
	OwnerID: "1d738ce6-1079-493d-9c13-45e11217c00d", Amount: "0.50", AmountSettled: "0.45064", Currency: "usdc",
	Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/report", Method: "GET"},
	Network: "base-sepolia", Reference: "0x7e6fde745624fcb000445097f35316f3f8ecb280171cd0e3b44acb36bb4a0c00",
	PolicyVersion: 1, PolicyHash: "sha256:5e8b2089b63cb131fc5c2ba246313225c864dea6dbef418daafe28f85a26ba00",
	BodySHA256: "sha256:53a6c39a386099f834daefb4db40a078ad498f18a6b309586cc49af60772698b",
	PrevHash:   "sha256:9d1c0a3f6b8e2d4c7a5f1e0b3d6c9a8f2e4b7d1c0a3f6b8e2d4c7a5f1e0b3d6c"}

// floorSigner answers the spends phase's requests with the one thing a
// settled spend cannot do without: a receipt signed with Ed25519 by the
// service's own signing code. It reads no rules, stores and syncs nothing,
// so what it reaches is the most any design of the service could reach
// on this machine with this load.
type floorSigner struct {
	keys *receipt.Keyring
	n    atomic.Uint64 // numbers the receipts
}

func newFloorSigner() (*floorSigner, error) {
	k, err := receipt.GenerateKey(rand.Reader, time.Now())
	if err != nil {
		return nil, fmt.Errorf("making the spend floor's receipt key: %w", err)
	}
	kr, err := receipt.NewKeyring(k)
	if err != nil {
		return nil, fmt.Errorf("making the spend floor's keyring: %w", err)
	}
	return &floorSigner{keys: kr}, nil
}

// serve signs one receipt, with ids of its own, and writes a settled
// spend's answer that names it.
func (f *floorSigner) serve(c *fasthttp.RequestCtx) {
	n := f.n.Add(1)
	var id [36]byte
	rid := strconv.AppendUint(append(id[:0], "rcp_"...), n, 16)
	claims := floorClaims
	claims.ReceiptID = string(rid)
	claims.SpendID = "spd_" + claims.ReceiptID[4:]
	claims.IssuedAt = time.Now().Unix()
	if _, err := f.keys.Sign(claims); err != nil {
		c.Error("signing the receipt: "+err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	body := c.Response.BodyWriter()
	c.SetStatusCode(fasthttp.StatusCreated)
	c.SetContentType("application/json")
	// Written in three parts into the response's own buffer: no copy of
	// the whole answer per request, as the service's writer does not.
	_, _ = body.Write([]byte(floorBodyHead))
	_, _ = body.Write(rid)
	_, _ = body.Write([]byte(floorBodyTail))
}

// FloorReport is the spend floor, measured in two slices, before and
// after the spends phase (and its capacity search): the spends phase's
// load against a handler that only signs a receipt and writes a settled
// spend's answer. Spends is compared with the mean of the two.
type FloorReport struct {
	Slices []PhaseReport `json:"slices"`
	// PerSecond is the mean of the two slices (answers/s) and Share the
	// settled spends/s of the spends phase as a percent of it; zero when
	// a slice is missing, and the share zero when NotCompared says why
	// the spends are no share of the floor.
	PerSecond   float64 `json:"per_second"`
	Share       float64 `json:"percent,omitempty"`
	NotCompared string  `json:"not_compared,omitempty"`
}

// newFloorReport compares the spends with the slices around them.
func newFloorReport(notCompared string, slices []PhaseReport, spends PhaseReport) *FloorReport {
	r := &FloorReport{Slices: slices, NotCompared: notCompared}
	if len(slices) != 2 {
		return r
	}
	r.PerSecond = (slices[0].PerSecond + slices[1].PerSecond) / 2
	if r.PerSecond > 0 && notCompared == "" && spends.Name != "" {
		r.Share = 100 * spends.SettledPerSecond / r.PerSecond
	}
	return r
}

// floorSlice measures the spend floor once, before or after the spends.
func (r *runner) floorSlice(ctx context.Context, when string) {
	if r.ceiling == nil || ctx.Err() != nil {
		return
	}
	r.progress("spend floor %s: a handler that only signs a receipt, %s measured on %d connections", when, r.cfg.CeilingDuration, r.cfg.Conns)
	r.fslices = append(r.fslices, r.ceiling.measurePhase(ctx, r.cfg, r.agents, "floor "+when, spendsPhase()))
}

// floorReport puts the floor's slices in the report.
func (r *runner) floorReport() {
	if r.ceiling == nil || len(r.fslices) == 0 {
		return
	}
	r.rep.Floor = newFloorReport(ceilingIncomparable(r.cfg, "floor", "spends"), r.fslices, r.rep.Spends)
}
