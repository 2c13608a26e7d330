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

// ceilingServer is a fasthttp server whose handler only writes
// ceilingBody, with the service's server timeouts. The read phases are
// measured against it: it is what this machine's loopback and HTTP layer
// allow right now, so a slow hour of a shared machine shows as such
// instead of as a slow service.
//
// The same server answers the spends phase's POSTs as the spend floor
// (floorSigner): the spends phase is measured against that.
type ceilingServer struct {
	addr  string
	ln    net.Listener
	srv   *fasthttp.Server
	floor *floorSigner
	done  chan error
}

func startCeiling() (*ceilingServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the ceiling server: %w", err)
	}
	floor, err := newFloorSigner()
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	c := &ceilingServer{addr: ln.Addr().String(), ln: ln, floor: floor, done: make(chan error, 1), srv: &fasthttp.Server{
		Handler: func(c *fasthttp.RequestCtx) {
			if c.IsPost() {
				floor.serve(c)
				return
			}
			c.SetContentType("application/json")
			c.SetBody(ceilingBody)
		},
		// As the service's defaults: they cost the same per request.
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute,
		NoDefaultServerHeader: true,
	}}
	go func() { c.done <- c.srv.Serve(ln) }()
	return c, nil
}

// measure drives one slice of the ceiling with the load generator,
// connections and request of the read phases.
func (c *ceilingServer) measure(ctx context.Context, cfg Config, agents []agentCred, name string) PhaseReport {
	return c.measurePhase(ctx, cfg, agents, name, phase{build: func(w *worker, host string) []byte {
		w.req.start("GET", "/v1/balance", host, w.agent().Key)
		return w.req.finish(nil)
	}})
}

// measurePhase drives one slice, named name, with the requests of ph.
func (c *ceilingServer) measurePhase(ctx context.Context, cfg Config, agents []agentCred, name string, ph phase) PhaseReport {
	cc := cfg
	cc.Duration, cc.Warmup = cfg.CeilingDuration, min(cfg.Warmup, time.Second)
	cc.Rate = 0 // a ceiling is the most the loopback can do
	ph.name = name
	var cpu cpuWindow
	p := runPhase(ctx, c.addr, cc, "", agents, ph, cfg.Seed, cpu.mark)
	cpu.fill(&p)
	return p
}

func (c *ceilingServer) stop() error {
	err := c.srv.Shutdown()
	// fasthttp closes only a listener its Serve has registered; a run
	// cancelled as the ceiling started may stop it before that, and Serve
	// would then accept for ever. Closing it here ends Serve either way
	// (a second Close only reports that it was closed).
	_ = c.ln.Close()
	if err != nil {
		return fmt.Errorf("stopping the ceiling server: %w", err)
	}
	if err := <-c.done; err != nil {
		return fmt.Errorf("ceiling server: %w", err)
	}
	return nil
}

// CeilingReport is the loopback ceiling, measured in slices that bracket
// the read phases that ran: before the first, between the two, and after
// the last (three slices for balance and check, two for one of them). Each
// read phase is compared with the mean of the two slices around it, so a
// machine whose speed drifts within the run still gives a fair share.
type CeilingReport struct {
	Slices []PhaseReport `json:"slices"`
	// Balance and Check are the ceilings around each phase (req/s), and
	// the shares the phases reached of them (percent); zero for a phase
	// that did not run, and the shares zero when NotCompared says why the
	// phases are no share of the ceiling.
	Balance      float64 `json:"balance_per_second"`
	Check        float64 `json:"check_per_second"`
	BalanceShare float64 `json:"balance_percent,omitempty"`
	CheckShare   float64 `json:"check_percent,omitempty"`
	NotCompared  string  `json:"not_compared,omitempty"`
}

// ceilingIncomparable says why the phases a bound is measured for (the
// reads for the ceiling, the spends for the floor) are no share of it, or
// "" when they are: the bound is this process's own handler driven as
// fast as it answers, so only a service in this process, driven the same
// way, compares.
func ceilingIncomparable(cfg Config, bound, phases string) string {
	switch {
	case cfg.Target != "":
		return "the " + bound + " is a handler inside the bench process, and the -target server runs elsewhere (another process, maybe another machine, with its own cores and network); its figures say what this machine's loopback and HTTP allow, not what the server could reach"
	case cfg.Rate > 0:
		return "-rate paces the " + phases + " at a fixed rate (an open loop) while the " + bound + " runs as fast as answers come; a paced rate is no share of the most the loopback can do"
	}
	return ""
}

// newCeilingReport compares the read phases, in the order they ran, with
// the slices around them: slices[k] and slices[k+1] bracket reads[k]. A run
// cancelled before its last slice compares nothing; with a reason not to
// compare (notCompared), the ceilings are given without the shares.
func newCeilingReport(notCompared string, slices []PhaseReport, reads ...PhaseReport) *CeilingReport {
	r := &CeilingReport{Slices: slices, NotCompared: notCompared}
	if len(slices) != len(reads)+1 {
		return r
	}
	for k, p := range reads {
		ceiling := (slices[k].PerSecond + slices[k+1].PerSecond) / 2
		share := 0.0
		if ceiling > 0 && notCompared == "" {
			share = 100 * p.PerSecond / ceiling
		}
		switch p.Name {
		case "balance":
			r.Balance, r.BalanceShare = ceiling, share
		case "check":
			r.Check, r.CheckShare = ceiling, share
		}
	}
	return r
}
