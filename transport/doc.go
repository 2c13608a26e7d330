// Package transport is the wire side of the payment guard: the REST API on
// fasthttp. It decodes and validates requests strictly, authenticates the
// key, turns a request into a call on the actor system, and encodes the
// answer. It holds no money state of its own.
//
// Rules it keeps:
//   - bad input is answered 400 with the offending param and a message that
//     says what to fix, before anything reaches an actor: nothing is created,
//     reserved or counted;
//   - a change is answered only after the journal made it durable (the
//     actors hand back a ticket; the handler waits on it);
//   - every response carries Request-Id and Service-Version; every error has
//     the body {"error":{type,code,message,param},"request_id"}.
//
// Subpackages: receipt signs and verifies receipts (compact JWS, EdDSA);
// rail holds the payment rails (the practice vendor simulation); console
// is the owner console, HTML pages served on the same listener through
// Config.Pages (see pages.go).
package transport
