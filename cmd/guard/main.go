// Command guard runs the payment guard and administers its data.
//
//	guard serve [-config FILE] [-addr HOST:PORT] [-data DIR] [-dev]
//	guard owner create -data DIR -name NAME -email EMAIL   (password on stdin)
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  guard serve [-config FILE] [-addr HOST:PORT] [-data DIR] [-dev]
  guard owner create -data DIR -name NAME -email EMAIL   (password on stdin)

Every serve setting also reads from the config file and GUARD_* variables.`

// Run executes one command; it returns when the command is done or ctx ends.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, getenv)
	case "owner":
		if len(args) < 2 || args[1] != "create" {
			return fmt.Errorf("usage: guard owner create -data DIR -name NAME -email EMAIL")
		}
		return ownerCreate(ctx, args[2:], stdin, stdout, getenv)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
