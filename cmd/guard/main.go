// Command guard runs the payment guard and administers its data.
//
//	guard serve [-config FILE] [-addr HOST:PORT] [-data DIR] [-dev]
//	guard owner create [-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL   (password on stdin)
//	guard owner set-password [-config FILE] [-data DIR] [-journal-dir DIR] -email EMAIL       (password on stdin)
//	guard receipt-keys list|rotate|withdraw ...            (a stopped server's data)
//	guard agents|keys|policy|receipts COMMAND ...          (a running server, owner key)
//	guard version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, the next one has its default effect and
	// ends the process at once: an operator who cannot wait for the
	// graceful stop loses nothing the journal holds (it survives a kill).
	go func() { <-ctx.Done(); stop() }()
	err := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard:", err)
	}
	os.Exit(exitCode(err))
}

// usageError is a command line that cannot run as typed: an unknown or
// missing command, an unknown flag, a missing or extra argument, a
// required flag left out. The usage was printed with it. It exits with
// status 2, as the flag package's own programs do, so that a script can
// tell a mistyped command line (2) from a command that ran and failed (1).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode is the process's exit status for what Run returned.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

const usage = `usage:
  guard serve [-config FILE] [-addr HOST:PORT] [-data DIR] [-dev]
  guard owner create [-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL
  guard owner set-password [-config FILE] [-data DIR] [-journal-dir DIR] -email EMAIL
      (password on stdin; the server's settings come from its config file
      and GUARD_* variables, as for serve; the server must be stopped;
      set-password signs the owner out of every console session)
  guard receipt-keys list|rotate [-config FILE] [-data DIR] [-journal-dir DIR] [-json]
  guard receipt-keys withdraw [-config FILE] [-data DIR] [-journal-dir DIR] -yes KEY_ID
      (the keys that sign receipts; the server must be stopped, and a
      change takes effect when it starts again)

Administration of a running server with an owner key:
  guard agents list [-limit N]
  guard agents create -name NAME [-policy FILE.json]
  guard agents rename AGENT_ID NAME
  guard agents pause|resume|archive AGENT_ID
  guard agents pause -all [-reason TEXT]
  guard keys list
  guard keys create AGENT_ID
  guard keys revoke KEY_ID
  guard keys rotate KEY_ID [-grace-hours N]
  guard policy show AGENT_ID
  guard policy set AGENT_ID -file FILE.json   (the output of policy show -json will do)
  guard policy changes AGENT_ID               (loosenings that wait for their effective_at)
  guard policy cancel CHANGE_ID               (cancel one before it applies)
  guard receipts get RECEIPT_ID               (its claims, once its signature verifies)
  guard receipts verify [-agent AGENT_ID] [-limit N] [-jwks FILE]
      (the signatures and the chain of the receipts of the last 30 days;
      with -agent, that agent's signatures only, not the chain's links)
These take -server URL (or GUARD_SERVER, default ` + defaultServer + `),
-key KEY (or GUARD_OWNER_KEY) and -json; "guard agents -h" and so on for more.

Every serve setting also reads from the config file and GUARD_* variables.
guard version prints the build, the API version it serves and its Go release.`

// Run executes one command; it returns when the command is done or ctx ends.
// Help asked for (-h) is a success, whichever command printed it.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	err := run(ctx, args, stdin, stdout, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commands are what "guard" takes first, as the usage error lists them.
const commands = "serve, owner, receipt-keys, agents, keys, policy, receipts, version, help"

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usageErrorf("no command given; the commands are %s", commands)
	}
	groups := map[string]cmdGroup{"owner": ownerGroup, "receipt-keys": receiptKeysGroup, "agents": agentsGroup,
		"keys": keysGroup, "policy": policyGroup, "receipts": receiptsGroup}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, getenv)
	case "owner", "receipt-keys", "agents", "keys", "policy", "receipts":
		cio := cliIO{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
		return runGroup(cio, groups[args[0]], args[1:])
	case "version", "-version", "--version":
		return version(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return usageErrorf("unknown command %q; the commands are %s", args[0], commands)
}
