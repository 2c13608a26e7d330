// Package webhook signs webhook deliveries and sends them over HTTP (spec
// 6.3).
//
// # Signature
//
// Every delivery is a POST whose body is one event envelope, exactly as
// GET /v1/events lists it, with the header
//
//	Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]
//
// where each v1 is the lower-case hex HMAC-SHA256 of the text
// "<t>.<raw body>", keyed with an endpoint secret exactly as shown at
// creation (the whsec_ prefix included). During a secret rotation the
// current and the previous secret each give one v1 value, newest first; a
// receiver accepts the delivery when one of them matches its secret and t
// is within Tolerance of its own clock. Verify does that for a Go
// receiver; any language's HMAC does it in a few lines.
//
// # Sending
//
// Sender implements actors.WebhookSender with net/http: an attempt that
// gets no complete answer within Timeout (5 s) fails, redirects are not
// followed (a 3xx is a failure), and only a 2xx counts as delivered. Up to
// 64 KiB of the answer is read so the connection can be reused; the rest
// is ignored. Close drops the idle connections when the service stops.
package webhook
