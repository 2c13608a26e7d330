// Package rail holds the payment rails the settlement actor pays vendors
// through. Simulated is the practice rail: a vendor and a payment network
// simulated in memory for practice (non-live) spends, which never opens a
// connection. NewVendorResult is shared by every rail: it caps and hashes a
// vendor's answer the same way for all of them.
//
// # Model
//
// A rail offers two calls. Pay pays the vendor once for a policy.Payment and
// fetches the paid resource. Verify is for a payment whose outcome came back
// RailUnknown: it asks, by the payment's nonce, whether the vendor received
// it, and never pays again. Every outcome is one of
//
//	RailSettled   the vendor was paid and answered; Price, Reference, Result set
//	RailRejected  no money moved (declined, not sent, never received, invalid)
//	RailUnknown   money may have moved; only Verify with the same nonce can tell
//
// The practice vendor behaves like this:
//
//   - Price: the payment's amount less a discount of 0–10% drawn from
//     SHA-256 of destination, path and method, rounded down to 6 decimals and
//     never below 0.000001 (SimulatedPrice). The same resource at the same
//     amount always costs the same, and never more than the amount.
//   - Result: HTTP 200, application/json, a small JSON body naming the
//     resource, method, price, currency and nonce. Bodies above
//     MaxResultBody bytes are cut at a UTF-8 boundary and flagged truncated;
//     body_sha256 always hashes the whole body (NewVendorResult).
//   - Network "base-sepolia", Reference "0x" + 64 hex digits derived from the
//     nonce, Simulated true on every outcome.
//   - Magic amounts, compared numerically: exactly 99.00 is declined
//     (RailRejected, insufficient_funds); exactly 98.00 is received by the
//     vendor but answered RailUnknown (outcome_unknown), and Verify then finds
//     it RailSettled with the price, result and reference a plain settlement
//     would have had. Both carry Forced "magic_amount"; the later settlement
//     does not, since it is a normal one.
//
// # Invariants
//
//   - One nonce pays at most once while the rail remembers it (Retention,
//     an hour unless set). The rail remembers each nonce it settled with a
//     digest of the payment it settled; Pay or Verify of that nonce for the
//     same payment (same amount, currency, destination and resource)
//     returns the identical settled outcome, and Settlements does not move.
//     The same nonce for a different payment is refused as nonce_conflict.
//   - Verify never settles a nonce Pay did not send, except the 98.00 magic
//     amount, which the simulated vendor received by definition.
//   - Every outcome is a pure function of the payment and the options, apart
//     from what the rail remembers; it is built anew for every call, so
//     callers cannot alter what another call returns.
//   - A live-mode payment is refused (livemode_not_supported): the practice
//     rail must never be mistaken for a real settlement.
//
// # Cancellation: not_sent versus unknown
//
// The simulation puts all of Latency before the request leaves; sending,
// settling and answering then happen at once. So when ctx ends during the
// latency (or had ended already), nothing was sent and Pay answers
// RailRejected "not_sent": no money moved and the spend may safely be
// released. A real rail cannot say that once its request has left: a
// deadline after sending must be RailUnknown, to be settled by Verify. For
// Verify, an ended ctx means nothing was learnt, so the outcome stays
// RailUnknown (outcome_unknown).
//
// # Concurrency
//
// Simulated is safe for concurrent use. The map of received nonces is
// guarded by a mutex held only for lookups and inserts, never across the
// latency wait; two concurrent Pay calls with one nonce settle once and both
// return the same outcome.
//
// # Caveats
//
// The record of received nonces lives in memory: two 16-byte digests a
// payment (about 50 bytes with the map), whatever the size of its result,
// kept for Retention to twice Retention and then dropped, so a long
// practice load holds at most two retentions' worth. The service sends a
// nonce again only to verify an unknown outcome, within minutes. The record
// is lost on restart: after a restart Verify finds only 98.00 payments, and
// answers payment_not_received for anything else. That is consistent
// within the simulation, since simulated money exists nowhere but in this
// process.
package rail
