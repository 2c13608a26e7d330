// Package guardtest starts the real payment guard for tests and talks to it
// over HTTP, the way an agent or an owner does.
//
// # Model
//
// Start assembles the service exactly as the command does (through
// cmd/wire), with its journal in t.TempDir(), and serves it on a random
// loopback port. It returns once GET /healthz answers 200 and registers a
// cleanup that closes the client's idle connections, shuts the service down
// and waits for the serving goroutine to end, so a leak checker run after
// the tests sees nothing of it. A failed shutdown reports every goroutine's
// stack, which names whatever held it.
//
// Owners have no HTTP endpoint: NewOwner creates one through the actor
// system and returns its practice and live owner keys. NewAgent then uses
// the owner endpoints (POST /v1/agents, POST /v1/agents/{id}/keys) so the
// agent and its key are made the way a client makes them.
//
// # Rate limits
//
// Start raises every rate limit of spec 8.1 by TestRateLimitScale, since
// tests send requests far faster than any real client; a test of the
// limits sets wire.Config.RateLimitScale back to 1 with WithConfig (or
// RateLimits to false to switch them off). WithClock's clock drives the
// limiter too, so Advance refills the buckets.
//
// # Time
//
// By default the service runs on the wall clock. WithClock injects a
// FakeClock: time stands still until the test calls Advance, which runs the
// timers that fall due in deadline order. Tests never sleep to wait for the
// service; they use wait_seconds, Advance, or WaitForTimers to learn that the
// service scheduled the work they are about to release.
//
// # Notifications
//
// StartMailServer runs a real SMTP server (github.com/emersion/go-smtp) on
// a loopback port, with STARTTLS, AUTH and refusals when asked, and hands
// the test every message it accepts; StartChatServer stands in for a chat's
// incoming webhook. Server.Quiesce waits until deliveries in flight have
// finished, so a test can tell "not sent" from "not sent yet".
//
// # Caveats
//
// The service's log goes to a buffer that is printed only when the test
// fails. Helpers call t.Fatal, so call them from the test's own goroutine.
package guardtest
