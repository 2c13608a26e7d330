package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/console"
)

// ownerGroup works on a stopped server's data directory, not over the
// API: its commands take no -server or -key.
var ownerGroup = cmdGroup{
	name: "owner",
	summary: "Create owners in the server's data directory. The server must be stopped: the command\n" +
		"opens the data itself, with the settings serve would read (config file, GUARD_* variables).",
	footer: `"guard owner create -h" lists its flags.`,
	cmds: []subcommand{
		{"create", ownerCreateSynopsis, "create an owner, print its keys (password on stdin)",
			func(c *cli, args []string) error {
				return ownerCreate(c.ctx, args, c.stdin, c.stdout, c.stderr, c.getenv)
			}},
	},
}

const ownerCreateSynopsis = "[-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL"

func ownerCreate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("guard owner create", flag.ContinueOnError)
	file := fs.String("config", getenv("GUARD_CONFIG"), "the server's JSON config `file` (env GUARD_CONFIG)")
	data := fs.String("data", "", "data directory (the server must be stopped); default: the server's data setting (config, GUARD_DATA, else ./data)")
	journalDir := fs.String("journal-dir", "", "journal directory, when the server keeps it apart from the data directory; default: the server's journal_dir setting")
	name := fs.String("name", "", "owner name (required)")
	email := fs.String("email", "", "owner e-mail (console sign-in; required)")
	// Help goes to stdout and succeeds; a mistake prints the usage on
	// stderr and is a usage error, as for the other commands.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	usageTo := func(w io.Writer) {
		fmt.Fprintf(w, "usage: guard owner create %s\n\n%s\n\nFlags:\n", ownerCreateSynopsis,
			"Create an owner and print its id and keys as JSON. The console password is read from\n"+
				"standard input: prompted twice on a terminal, else the first line. The server must be stopped.")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	usageErr := func(format string, args ...any) error {
		usageTo(stderr)
		return usageErrorf("owner create: "+format, args...)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usageTo(stdout)
			return err
		}
		return usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (the settings are flags: -name NAME -email EMAIL)", fs.Arg(0))
	}
	if strings.TrimSpace(*name) == "" {
		return usageErr("-name is required: the owner's name, as the console shows it")
	}
	if *email == "" {
		return usageErr("-email is required: the address the owner signs in to the console with")
	}
	if a, err := mail.ParseAddress(*email); err != nil || a.Address != *email || a.Name != "" {
		return fmt.Errorf("-email %q is not an e-mail address; give the bare address the owner signs in with, like owner@example.com", *email)
	}
	pw, err := readPassword(stdin, stderr, *email)
	if err != nil {
		return err
	}
	if len(pw) < console.MinPasswordLength {
		return fmt.Errorf("the password must have at least %d characters", console.MinPasswordLength)
	}
	// The server's own settings: the data directory, its journal, and
	// the practice pool a new owner starts with.
	cfg, err := wire.LoadConfigFile(*file, getenv)
	if err != nil {
		return err
	}
	if *data != "" {
		cfg.Data = *data
	}
	if *journalDir != "" {
		cfg.JournalDir = *journalDir
	}
	dataFile := filepath.Join(cfg.Data, wire.JournalFile)
	_, statErr := os.Stat(dataFile)
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// Right before a first start, or a mistyped -data: say which.
		fmt.Fprintf(stderr, "No data file existed at %s; a new one was made there. Start the server with this data directory (-data %s) for the owner to be found.\n",
			dataFile, cfg.Data)
	}
	defer svc.Shutdown(context.Background())
	oc, err := svc.System().CreateOwner(ctx, *name, *email, console.HashPassword(pw))
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{
		"owner_id": oc.Owner.ID,
		"keys":     map[string]string{"test": oc.Keys[actors.EnvTest], "live": oc.Keys[actors.EnvLive]},
	})
}

// readPassword reads the owner's password: from a terminal, prompted and
// not echoed, typed twice; from a pipe, its first line.
func readPassword(stdin io.Reader, prompt io.Writer, email string) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ask := func(what string) (string, error) {
			fmt.Fprintf(prompt, "%s for %s (at least %d characters): ", what, email, console.MinPasswordLength)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(prompt)
			return string(b), err
		}
		pw, err := ask("Console password")
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		again, err := ask("The same password again")
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		if again != pw {
			return "", fmt.Errorf("the two passwords differ; nothing was created")
		}
		return pw, nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}
