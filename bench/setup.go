package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/policy"
)

// Destination is the vendor every spend of the load pays.
const Destination = "api.vendor.com"

// benchPool funds each in-process owner so that no run of any length
// drains a pool: a declined spend measures nothing the operator cares for.
const benchPool = "1000000000.00"

// The limits of loadPolicy, which the load never reaches: the run
// measures the full path of an approved, settled spend, not the decline
// shortcut.
const (
	loadPerSpendLimit = "10.00"
	loadApprovalOver  = "10.00"
	loadCap           = "1000000.00" // daily and monthly
)

// loadPolicy is the policy body every agent of the load gets; the fields
// it leaves out take the service's defaults.
func loadPolicy() map[string]any {
	return map[string]any{
		"per_spend_limit":      loadPerSpendLimit,
		"approval_over":        loadApprovalOver,
		"daily_cap":            loadCap,
		"monthly_cap":          loadCap,
		"trusted_destinations": []string{Destination},
	}
}

// loadPolicyHash is the hash of the rules loadPolicy publishes, defaults
// included. A reused agent whose rules in effect carry another hash was
// changed since the bench set them, and gets them again: a run on reused
// agents must measure what a run on new ones does.
func loadPolicyHash() string {
	perSpend, approval, limit := loadPerSpendLimit, loadApprovalOver, loadCap
	rules, ferr := policy.RulesInput{PerSpendLimit: &perSpend, ApprovalOver: &approval, DailyCap: &limit,
		MonthlyCap: &limit, TrustedDestinations: &[]string{Destination}}.Validate(policy.DefaultRules())
	if ferr != nil {
		panic("bench: the load policy is invalid: " + ferr.Param + ": " + ferr.Message)
	}
	return rules.Hash()
}

// agentCred is one agent of the load and its key.
type agentCred struct {
	ID  string
	Key string
}

// inProcess is the service started by the bench itself.
type inProcess struct {
	svc     *wire.Service
	addr    string
	dir     string
	journal string // "" when the journal is beside the data file
	served  chan error
}

// startInProcess opens the service on a fresh temporary data directory,
// with the production durability (every acknowledged change fsynced), and
// serves it on a loopback port.
func startInProcess(cfg Config) (*inProcess, error) {
	dir, err := os.MkdirTemp(cfg.DataDir, "guard-bench-")
	if err != nil {
		return nil, err
	}
	wcfg := wire.Defaults()
	wcfg.Data = dir
	var journal string
	if cfg.JournalDir != "" {
		if journal, err = os.MkdirTemp(cfg.JournalDir, "guard-bench-journal-"); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		wcfg.JournalDir = journal
	}
	removeAll := func() {
		os.RemoveAll(dir)
		if journal != "" {
			os.RemoveAll(journal)
		}
	}
	wcfg.Addr = "127.0.0.1:0"
	wcfg.IdleTimeout = cfg.IdleTimeout
	wcfg.PracticePool = benchPool
	wcfg.LogLevel = "warn"
	wcfg.RateLimitScale = 1e6 // the load measures the service, not the limits of spec 8.1
	log := slog.New(slog.NewTextHandler(cfg.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := wire.Open(wcfg, wire.Options{Logger: log})
	if err != nil {
		removeAll()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = svc.Shutdown(context.Background())
		removeAll()
		return nil, err
	}
	p := &inProcess{svc: svc, addr: ln.Addr().String(), dir: dir, journal: journal, served: make(chan error, 1)}
	go func() { p.served <- svc.Serve(ln) }()
	return p, nil
}

// close stops the service gracefully and removes its data.
func (p *inProcess) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.svc.Shutdown(ctx)
	if serr := <-p.served; err == nil {
		err = serr
	}
	if rerr := os.RemoveAll(p.dir); err == nil {
		err = rerr
	}
	if p.journal != "" {
		if rerr := os.RemoveAll(p.journal); err == nil {
			err = rerr
		}
	}
	return err
}

// bootstrapOwners creates n practice owners through the System API (the
// way `guard owner create` does) and returns their practice owner keys.
func bootstrapOwners(ctx context.Context, sys *actors.System, prefix string, n int) ([]actors.OwnerCreated, error) {
	out := make([]actors.OwnerCreated, n)
	err := parallel(ctx, n, 16, func(i int) error {
		oc, err := sys.CreateOwner(ctx, fmt.Sprintf("Bench owner %d", i),
			fmt.Sprintf("%s-%d@bench.invalid", prefix, i), "")
		out[i] = oc
		return err
	})
	return out, err
}

// createAgents creates up to n agents of a new in-process owner over
// HTTP, each with a key. It stops early, without an error, when the
// owner's practice quota is full; it fails when not even one agent could
// be created.
func createAgents(ctx context.Context, c *fasthttp.HostClient, ownerKey, namePrefix string, n int) ([]agentCred, error) {
	var out []agentCred
	for i := 0; i < n; i++ {
		var ag struct {
			ID string `json:"id"`
		}
		err := callJSON(ctx, c, "POST", "/v1/agents", ownerKey,
			map[string]any{"name": fmt.Sprintf("%s-%d", namePrefix, i), "policy": loadPolicy()}, &ag)
		if isCode(err, string(actors.CodeQuotaExceeded)) && len(out) > 0 {
			break
		}
		if err != nil {
			return out, err
		}
		var key struct {
			Secret string `json:"secret"`
		}
		if err := callJSON(ctx, c, "POST", "/v1/agents/"+ag.ID+"/keys", ownerKey, nil, &key); err != nil {
			return out, err
		}
		out = append(out, agentCred{ID: ag.ID, Key: key.Secret})
	}
	return out, nil
}

// setupInProcess bootstraps ceil(n/5) owners and n agents over HTTP.
func setupInProcess(ctx context.Context, p *inProcess, c *fasthttp.HostClient, n int) ([]agentCred, error) {
	per := actors.MaxActiveAgentsPractice
	owners, err := bootstrapOwners(ctx, p.svc.System(), "load", (n+per-1)/per)
	if err != nil {
		return nil, fmt.Errorf("bootstrapping owners: %w", err)
	}
	creds := make([][]agentCred, len(owners))
	err = parallel(ctx, len(owners), 8, func(i int) error {
		want := min(per, n-i*per)
		got, err := createAgents(ctx, c, owners[i].Keys[actors.EnvTest], fmt.Sprintf("load-%d", i), want)
		if err == nil && len(got) < want {
			err = fmt.Errorf("owner %d got %d agents of %d", i, len(got), want)
		}
		creds[i] = got
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating agents: %w", err)
	}
	var out []agentCred
	for _, cs := range creds {
		out = append(out, cs...)
	}
	return out, nil
}

// parallel runs f(0..n-1) on at most width goroutines and returns the
// first error; once one fails, the others stop taking work.
func parallel(ctx context.Context, n, width int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil || next >= n || ctx.Err() != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for w := 0; w < min(width, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
