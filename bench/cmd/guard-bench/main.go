// Command guard-bench loads the payment guard over HTTP and prints spends/s,
// latency percentiles, balance and check throughput, and the memory of an
// idle agent. See package bench for what each number means.
//
//	guard-bench [-agents 200] [-conns 64] [-duration 10s] [-warmup 2s]
//	            [-idle-agents 2000] [-idle-timeout 2s] [-json] [-cpuprofile FILE] [-trace FILE]
//	            [-profile-phase spends|balance|check] [-ceiling 3s] [-seed N]
//	            [-phases spends,balance,check]
//	guard-bench -target http://HOST:PORT -owner-key svc_test_owner_...[,svc_test_owner_...] [flags]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentpay/guard/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first interrupt ends the run, which then revokes the agent keys
	// it made on a -target server; from then on the signals are no longer
	// caught, so a second one ends the process at once (a later run
	// revokes what this one left, when it needs the room).
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "guard-bench:", err)
		}
		os.Exit(1)
	}
}

// Run parses the flags, runs the bench and prints its report.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := bench.Defaults()
	fs := flag.NewFlagSet("guard-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agents := fs.Int("agents", d.Agents, "agents the load spreads over (five per owner)")
	conns := fs.Int("conns", d.Conns, "concurrent connections, one request in flight each")
	duration := fs.Duration("duration", d.Duration, "measured time of each phase")
	warmup := fs.Duration("warmup", d.Warmup, "unmeasured load before each phase")
	rate := fs.Float64("rate", 0, "requests per second each phase offers in all, on a fixed schedule, latency counted from when each request was due (open loop); 0 sends each request as soon as the last is answered")
	idleAgents := fs.Int("idle-agents", d.IdleAgents, "extra agents activated to measure an idle agent's memory; 0 skips (in-process only)")
	idleTimeout := fs.Duration("idle-timeout", d.IdleTimeout, "passivation delay of the in-process service")
	ceiling := fs.Duration("ceiling", d.CeilingDuration, "measured time of each slice of the loopback ceiling (a handler that does nothing), before, between and after the reads; 0 skips")
	target := fs.String("target", "", "base URL of a running server (http://host:port); empty starts one in-process")
	dataDir := fs.String("data-dir", "", "where the in-process service's temporary data directory is made (default: the system's temporary directory)")
	journalDir := fs.String("journal-dir", "", "where the in-process service's temporary journal directory is made, apart from the data (say, on another disk); empty keeps the journal beside the data file")
	ownerKey := fs.String("owner-key", "", "practice owner key of the -target server, or several separated by commas (each owner may have 5 practice agents; the bench reuses the agents its earlier runs made)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of one phase (see -profile-phase) to this file")
	profilePhase := fs.String("profile-phase", "spends", "phase that -cpuprofile and -trace cover: spends, balance or check")
	traceFile := fs.String("trace", "", "write a runtime execution trace of one phase to this file")
	seed := fs.Uint64("seed", d.Seed, "seed of the amounts and the spread over agents")
	phases := fs.String("phases", "spends,balance,check", "phases to run, separated by commas; they run in the order spends, balance, check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := bench.Config{Agents: *agents, Conns: *conns, Duration: *duration, Warmup: *warmup, Rate: *rate,
		IdleAgents: *idleAgents, IdleTimeout: *idleTimeout, CeilingDuration: *ceiling, Target: *target, OwnerKey: *ownerKey, DataDir: *dataDir, JournalDir: *journalDir,
		Seed: *seed, Progress: stderr, ProfilePhase: *profilePhase, Phases: bench.ParsePhases(*phases)}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.CPUProfile = f
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Trace = f
	}
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(rep); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			rep.WriteText(stdout)
		}
		if err == nil {
			err = rep.RateLimited()
		}
		if err == nil {
			err = rep.MostlyDeclined()
		}
	}
	return err
}
