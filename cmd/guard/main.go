// Command guard runs the payment guard and administers its data.
//
//	guard serve [-config FILE] [-addr HOST:PORT] [-data DIR] [-dev]
//	guard owner create [-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL   (password on stdin)
//	guard agents|keys|policy COMMAND ...                   (a running server, owner key)
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
		os.Exit(1)
	}
}

const usage = `usage:
  guard serve [-config FILE] [-addr HOST:PORT] [-data DIR] [-dev]
  guard owner create [-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL
      (password on stdin; the server's settings come from its config file
      and GUARD_* variables, as for serve; the server must be stopped)

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
  guard policy set AGENT_ID -file FILE.json
These take -server URL (or GUARD_SERVER, default ` + defaultServer + `),
-key KEY (or GUARD_OWNER_KEY) and -json; "guard agents -h" and so on for more.

Every serve setting also reads from the config file and GUARD_* variables.`

// Run executes one command; it returns when the command is done or ctx ends.
// Help asked for (-h) is a success, whichever command printed it.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	err := run(ctx, args, stdin, stdout, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, getenv)
	case "owner":
		if len(args) < 2 || args[1] != "create" {
			return fmt.Errorf("usage: guard owner create [-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL")
		}
		return ownerCreate(ctx, args[2:], stdin, stdout, stderr, getenv)
	case "agents", "keys", "policy":
		cio := cliIO{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
		return runGroup(cio, map[string]cmdGroup{"agents": agentsGroup, "keys": keysGroup, "policy": policyGroup}[args[0]], args[1:])
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
