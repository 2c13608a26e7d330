// Command guard-bench loads the payment guard over HTTP and prints spends/s,
// latency percentiles, balance and check throughput, and the memory of an
// idle agent. See package bench for what each number means.
//
//	guard-bench [-agents 200] [-conns 64] [-duration 10s] [-warmup 2s] [-rate N]
//	            [-capacity-p99 10ms] [-capacity-steps 6]
//	            [-idle-agents 2000] [-idle-timeout 2s] [-json] [-cpuprofile FILE] [-trace FILE]
//	            [-profile-phase spends|balance|check] [-ceiling 3s] [-seed N]
//	            [-phases spends,balance,check] [-data-dir DIR] [-journal-dir DIR]
//	guard-bench -target http://HOST:PORT -owner-key svc_test_owner_...[,svc_test_owner_...] [flags]
//
// It exits 0 when the run succeeded, 1 when it failed (see -h), 2 on a
// usage error, and 130 when interrupted by SIGINT (143 by SIGTERM).
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
	"time"

	"github.com/agentpay/guard/bench"
)

// The exit statuses; 128 plus the signal's number for an interrupt, as a
// shell reports a process the signal ended.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitSignal = 128
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	// The first signal ends the run, which then prints what it measured
	// and revokes the agent keys it made on a -target server; from then on
	// the signals are no longer caught, so a second one ends the process
	// at once (a later run revokes what this one left).
	go func() {
		s := <-sigs
		signal.Stop(sigs)
		cancel(signalCause{s})
	}()
	os.Exit(Run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// signalCause is the cause of a run's context ended by a signal.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return s.sig.String() + " signal received" }

// usageError is a flag value or argument the run cannot start with.
type usageError struct{ error }

// Run parses the flags, runs the bench, prints its report and returns
// the exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfg, files, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(stdout, fs)
		return exitOK
	}
	if err == nil {
		err = openOutputs(&cfg, files)
	}
	if err != nil {
		fmt.Fprintf(stderr, "guard-bench: %v\nguard-bench -h lists the flags.\n", err)
		return exitUsage
	}
	defer files.close()
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		if werr := writeReport(stdout, rep, files.asJSON); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return exitStatus(ctx, err, stderr)
}

// exitStatus prints what went wrong and chooses the exit status: an
// interrupt wins, as the report it left is partial whatever else failed.
func exitStatus(ctx context.Context, err error, stderr io.Writer) int {
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "guard-bench: interrupted: the report covers what was measured before the signal")
		for _, e := range flatten(err) {
			if !errors.Is(e, context.Canceled) {
				fmt.Fprintln(stderr, "guard-bench:", e)
			}
		}
		var sc signalCause
		if errors.As(context.Cause(ctx), &sc) && sc.sig == syscall.SIGTERM {
			return exitSignal + int(syscall.SIGTERM)
		}
		return exitSignal + int(syscall.SIGINT)
	}
	if err == nil {
		return exitOK
	}
	for _, e := range flatten(err) {
		fmt.Fprintln(stderr, "guard-bench:", e)
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailed
}

// flatten lists the errors an errors.Join holds, however nested.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// writeReport prints the report as text or JSON.
func writeReport(w io.Writer, rep *bench.Report, asJSON bool) error {
	if !asJSON {
		rep.WriteText(w)
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// outputs are the files the flags name, opened only once every flag is
// known to be good: a run refused for a bad flag leaves an earlier
// profile as it was.
type outputs struct {
	cpuProfile, trace string
	asJSON            bool
	opened            []*os.File
}

func (o *outputs) close() {
	for _, f := range o.opened {
		_ = f.Close()
	}
}

// openOutputs creates the profile and trace files the flags name.
func openOutputs(cfg *bench.Config, o *outputs) error {
	for _, out := range []struct {
		flag, path string
		w          *io.Writer
	}{{"-cpuprofile", o.cpuProfile, &cfg.CPUProfile}, {"-trace", o.trace, &cfg.Trace}} {
		if out.path == "" {
			continue
		}
		f, err := os.Create(out.path)
		if err != nil {
			o.close()
			return usageError{fmt.Errorf("%s: %w; give a file the bench may create or overwrite", out.flag, err)}
		}
		o.opened = append(o.opened, f)
		*out.w = f
	}
	return nil
}

// parseArgs reads the flags into a checked configuration. The profile
// and trace files are only named in outputs, not yet created.
func parseArgs(args []string, stderr io.Writer) (*flag.FlagSet, bench.Config, *outputs, error) {
	d := bench.Defaults()
	fs := flag.NewFlagSet("guard-bench", flag.ContinueOnError)
	// The errors are printed once, by Run, with a pointer to -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cfg := bench.Config{Progress: stderr}
	o := &outputs{}
	fs.IntVar(&cfg.Agents, "agents", d.Agents, "agents the load spreads over (five per owner), at least 1")
	fs.IntVar(&cfg.Conns, "conns", d.Conns, "concurrent connections, one request in flight each, at least 1 (each takes an open file, two in-process: see ulimit -n)")
	cfg.Duration, cfg.Warmup, cfg.IdleTimeout, cfg.CeilingDuration = d.Duration, d.Warmup, d.IdleTimeout, d.CeilingDuration
	fs.Var((*durationValue)(&cfg.Duration), "duration", "measured time of each phase, a `duration` like 10s")
	fs.Var((*durationValue)(&cfg.Warmup), "warmup", "unmeasured load before each phase, a `duration`; 0 for none")
	fs.Float64Var(&cfg.Rate, "rate", 0, "requests per second each phase offers in all, on a fixed schedule, latency counted from when each request was due (open loop; at most 1,000,000 per connection); 0 sends each request as soon as the last is answered")
	fs.Var((*durationValue)(&cfg.CapacityP99), "capacity-p99", "after the spends phase, find the most spends/s whose p99 latency stays within this `duration` (like 10ms): paced spends phases, each -warmup plus -duration long, at rates bisected below the unpaced one; 0 skips")
	fs.IntVar(&cfg.CapacitySteps, "capacity-steps", d.CapacitySteps, "most paced phases the -capacity-p99 search runs (6 finds the capacity within 1/64 of the unpaced rate)")
	fs.IntVar(&cfg.IdleAgents, "idle-agents", d.IdleAgents, "extra agents activated to measure an idle agent's memory; 0 skips (in-process only)")
	fs.Var((*durationValue)(&cfg.IdleTimeout), "idle-timeout", "passivation delay of the in-process service, a positive `duration`")
	fs.Var((*durationValue)(&cfg.CeilingDuration), "ceiling", "measured time of each slice of the loopback ceiling (a handler that does nothing), before, between and after the reads, a `duration`; 0 skips (with -target or -rate it is shown, not compared)")
	fs.StringVar(&cfg.Target, "target", "", "base URL of a running server (http://host:port); empty starts one in-process")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "where the in-process service's temporary data directory is made (default: the system's temporary directory)")
	fs.StringVar(&cfg.JournalDir, "journal-dir", "", "where the in-process service's temporary journal directory is made, apart from the data (say, on another disk); empty keeps the journal beside the data file")
	fs.StringVar(&cfg.OwnerKey, "owner-key", "", "practice owner key of the -target server (svc_test_owner_..., the .keys.test that guard owner create prints), or several separated by commas (each owner may have 5 practice agents; the bench reuses the agents its earlier runs made)")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of one phase (see -profile-phase) to this `file`")
	fs.StringVar(&cfg.ProfilePhase, "profile-phase", "spends", "phase that -cpuprofile and -trace cover: spends, balance or check")
	fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace of one phase to this `file`")
	fs.Uint64Var(&cfg.Seed, "seed", d.Seed, "seed of the amounts and the spread over agents (any number, 0 included)")
	phases := fs.String("phases", "spends,balance,check", "phases to run, separated by commas; they run in the order spends, balance, check")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return fs, cfg, o, err
		}
		return fs, cfg, o, usageError{err}
	}
	if fs.NArg() > 0 {
		return fs, cfg, o, usageError{fmt.Errorf("unexpected argument %q: every setting is a flag (-target URL, -owner-key KEY, ...)", fs.Arg(0))}
	}
	if cfg.Phases = bench.ParsePhases(*phases); len(cfg.Phases) == 0 {
		return fs, cfg, o, usageError{fmt.Errorf("-phases %q names no phase; give spends, balance or check, several separated by commas", *phases)}
	}
	return fs, cfg, o, checkConfig(cfg, o)
}

// checkConfig validates the configuration as the flags gave it: a zero
// there was typed, and is not taken for the default. The profile and
// trace stand in as discarded output, for the checks that depend on them.
func checkConfig(cfg bench.Config, o *outputs) error {
	if o.cpuProfile != "" {
		cfg.CPUProfile = io.Discard
	}
	if o.trace != "" {
		cfg.Trace = io.Discard
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// durationValue is a duration flag whose error shows what a duration
// looks like: "-duration 10" is a common slip for 10s.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration; give a duration like 10s, 500ms or 1m30s")
	}
	*d = durationValue(v)
	return nil
}

// writeHelp prints the synopsis, the flags and the exit statuses.
func writeHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage:
  guard-bench [flags]
      start the service in-process, on a temporary data directory removed
      after the run, and load it over loopback
  guard-bench -target http://HOST:PORT -owner-key KEY[,KEY...] [flags]
      load a running server with agents of the practice owners whose keys
      are given (svc_test_owner_...)

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, `
Exit status:
  0    the run succeeded
  1    the run failed: the server answered with errors (5xx, refused or
       dropped connections) or stopped answering, most answers were 429
       (rate limited), most spends were declined, or the setup failed
  2    a usage error: a bad flag value, an unknown flag, an extra argument
  130  interrupted by SIGINT (Ctrl-C; 143 by SIGTERM): the report covers
       what was measured before it
`)
}
