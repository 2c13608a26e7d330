package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// ceilingBody is about the size of a balance answer, so that the kernel,
// HTTP framing and load generator work per request match the read phases.
var ceilingBody = []byte(`{"object":"balance","agent_id":"agt_0000000000000000000000","spendable":"100.00",` +
	`"limiting_factor":"daily_cap","per_spend_limit":"10.00","daily_remaining":"100.00","daily_cap":"100.00",` +
	`"monthly_remaining":"1000.00","monthly_cap":"1000.00","lifetime_remaining":null,"lifetime_cap":null,` +
	`"pool_available":"1000000.00","held":"0.00","pending_count":0,"currency":"usdc",` +
	`"as_of":"2026-01-01T00:00:00Z","livemode":false,"request_id":"req_000000000000000000000"}`)

// measureCeiling drives a fasthttp server whose handler only writes
// ceilingBody, with the same load generator, connections, request and
// server timeouts as the read phases. It is what this machine's loopback
// and HTTP layer allow right now: the service's reads are measured
// against it, so a slow hour of a shared machine shows as such instead of
// as a slow service.
func measureCeiling(ctx context.Context, cfg Config, agents []agentCred) (PhaseReport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return PhaseReport{}, fmt.Errorf("listening for the ceiling server: %w", err)
	}
	srv := &fasthttp.Server{
		Handler: func(c *fasthttp.RequestCtx) {
			c.SetContentType("application/json")
			c.SetBody(ceilingBody)
		},
		// As the service's defaults: they cost the same per request.
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute,
		NoDefaultServerHeader: true,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c := cfg
	c.Duration, c.Warmup = cfg.CeilingDuration, min(cfg.Warmup, time.Second)
	ph := phase{name: "ceiling", build: func(w *worker, host string) []byte {
		w.req.start("GET", "/v1/balance", host, w.agent().Key)
		return w.req.finish(nil)
	}}
	r := runPhase(ctx, ln.Addr().String(), c, "", agents, ph, cfg.Seed, nil)
	if err := srv.Shutdown(); err != nil {
		return r, fmt.Errorf("stopping the ceiling server: %w", err)
	}
	if err := <-done; err != nil {
		return r, fmt.Errorf("ceiling server: %w", err)
	}
	return r, nil
}
