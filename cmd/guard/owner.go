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
	summary: "Create owners and set their console passwords in the server's data directory. The server\n" +
		"must be stopped: the command opens the data itself, with the settings serve would read\n" +
		"(config file, GUARD_* variables).",
	footer: `"guard owner create -h" and "guard owner set-password -h" list their flags.`,
	cmds: []subcommand{
		{"create", ownerCreateSynopsis, "create an owner, print its keys (password on stdin)",
			func(c *cli, args []string) error {
				return ownerCreate(c.ctx, args, c.stdin, c.stdout, c.stderr, c.getenv)
			}},
		{"set-password", ownerSetPasswordSynopsis, "set an owner's console password, end its sessions (password on stdin)",
			func(c *cli, args []string) error {
				return ownerSetPassword(c.ctx, args, c.stdin, c.stdout, c.stderr, c.getenv)
			}},
	},
}

// ownerCommand is the command line of a command on a stopped server's
// data (guard owner, guard receipt-keys): its flags, with those that find
// the server's data, and its usage.
type ownerCommand struct {
	fs                           *flag.FlagSet
	group, name, synopsis, about string
	stdout, stderr               io.Writer

	file, data, journalDir *string
}

func newOwnerCommand(name, synopsis, about string, stdout, stderr io.Writer, getenv func(string) string) *ownerCommand {
	return newDataCommand("owner", name, synopsis, about, stdout, stderr, getenv)
}

func newDataCommand(group, name, synopsis, about string, stdout, stderr io.Writer, getenv func(string) string) *ownerCommand {
	fs := flag.NewFlagSet("guard "+group+" "+name, flag.ContinueOnError)
	// Help goes to stdout and succeeds; a mistake prints the usage on
	// stderr and is a usage error, as for the other commands.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &ownerCommand{fs: fs, group: group, name: name, synopsis: synopsis, about: about, stdout: stdout, stderr: stderr,
		file:       fs.String("config", getenv("GUARD_CONFIG"), "the server's JSON config `file` (env GUARD_CONFIG)"),
		data:       fs.String("data", "", "data directory (the server must be stopped); default: the server's data setting (config, GUARD_DATA, else ./data)"),
		journalDir: fs.String("journal-dir", "", "journal directory, when the server keeps it apart from the data directory; default: the server's journal_dir setting"),
	}
}

func (oc *ownerCommand) usageTo(w io.Writer) {
	fmt.Fprintf(w, "usage: guard %s %s %s\n\n%s\n\nFlags:\n", oc.group, oc.name, oc.synopsis, oc.about)
	oc.fs.SetOutput(w)
	oc.fs.PrintDefaults()
	oc.fs.SetOutput(io.Discard)
}

// usageErr prints the usage on stderr and returns a usage error.
func (oc *ownerCommand) usageErr(format string, args ...any) error {
	oc.usageTo(oc.stderr)
	return usageErrorf(oc.group+" "+oc.name+": "+format, args...)
}

// parse reads the flags; -h prints the usage on stdout and returns
// flag.ErrHelp.
func (oc *ownerCommand) parse(args []string) error {
	if err := oc.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			oc.usageTo(oc.stdout)
			return err
		}
		return oc.usageErr("%v", err)
	}
	return nil
}

// config is the server's own settings, with the flags' data and journal
// directories.
func (oc *ownerCommand) config(getenv func(string) string) (wire.Config, error) {
	cfg, err := wire.LoadConfigFile(*oc.file, getenv)
	if err != nil {
		return cfg, err
	}
	if *oc.data != "" {
		cfg.Data = *oc.data
	}
	if *oc.journalDir != "" {
		cfg.JournalDir = *oc.journalDir
	}
	return cfg, nil
}

const ownerCreateSynopsis = "[-config FILE] [-data DIR] [-journal-dir DIR] -name NAME -email EMAIL"

func ownerCreate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	oc := newOwnerCommand("create", ownerCreateSynopsis,
		"Create an owner and print its id and keys as JSON. The console password is read from\n"+
			"standard input: prompted twice on a terminal, else the first line. The server must be stopped.",
		stdout, stderr, getenv)
	name := oc.fs.String("name", "", "owner name (required)")
	email := oc.fs.String("email", "", "owner e-mail (console sign-in; required)")
	if err := oc.parse(args); err != nil {
		return err
	}
	if oc.fs.NArg() > 0 {
		return oc.usageErr("unexpected argument %q (the settings are flags: -name NAME -email EMAIL)", oc.fs.Arg(0))
	}
	if strings.TrimSpace(*name) == "" {
		return oc.usageErr("-name is required: the owner's name, as the console shows it")
	}
	if _, nerr := actors.CheckName(*name); nerr != nil {
		return oc.usageErr("-name: %s", strings.TrimPrefix(nerr.Message, "name "))
	}
	if *email == "" {
		return oc.usageErr("-email is required: the address the owner signs in to the console with")
	}
	if a, err := mail.ParseAddress(*email); err != nil || a.Address != *email || a.Name != "" {
		return fmt.Errorf("-email %q is not an e-mail address; give the bare address the owner signs in with, like owner@example.com", *email)
	}
	pw, err := readPassword(stdin, stderr, "Console password", *email)
	if err != nil {
		return err
	}
	if err := console.CheckNewPassword(pw); err != nil {
		return err
	}
	// The server's own settings: the data directory, its journal, and
	// the practice pool a new owner starts with.
	cfg, err := oc.config(getenv)
	if err != nil {
		return err
	}
	dataFile := filepath.Join(cfg.Data, wire.JournalFile)
	_, statErr := os.Stat(dataFile)
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(ownerActionsOnly{slog.NewTextHandler(stderr, nil)})})
	if err != nil {
		return err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// Right before a first start, or a mistyped -data: say which.
		fmt.Fprintf(stderr, "No data file existed at %s; a new one was made there. Start the server with this data directory (-data %s) for the owner to be found.\n",
			dataFile, cfg.Data)
	}
	defer svc.Shutdown(context.Background())
	created, err := svc.System().CreateOwner(ctx, *name, *email, console.HashPassword(pw))
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{
		"owner_id": created.Owner.ID,
		"keys":     map[string]string{"test": created.Keys[actors.EnvTest], "live": created.Keys[actors.EnvLive]},
	})
}

const ownerSetPasswordSynopsis = "[-config FILE] [-data DIR] [-journal-dir DIR] -email EMAIL"

// ownerSetPassword sets the console password of an owner who cannot
// change it in the console (forgotten, or taken over by someone who
// changed it), and ends every console session of the owner.
func ownerSetPassword(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	oc := newOwnerCommand("set-password", ownerSetPasswordSynopsis,
		"Set the console password of the owner who signs in with EMAIL, and sign every browser\n"+
			"of the owner out. The password is read from standard input (never from the command line,\n"+
			"which other users of the host can see): prompted twice on a terminal, else the first line.\n"+
			"The server must be stopped. An owner who knows the password changes it in the console.",
		stdout, stderr, getenv)
	email := oc.fs.String("email", "", "the owner's console sign-in e-mail (required)")
	if err := oc.parse(args); err != nil {
		return err
	}
	if oc.fs.NArg() > 0 {
		return oc.usageErr("unexpected argument %q (name the owner with -email EMAIL; the password is read from standard input)", oc.fs.Arg(0))
	}
	if strings.TrimSpace(*email) == "" {
		return oc.usageErr("-email is required: the address the owner signs in to the console with")
	}
	cfg, err := oc.config(getenv)
	if err != nil {
		return err
	}
	// Opening a data directory that holds no data would make an empty
	// one there: a mistyped -data must not.
	dataFile := filepath.Join(cfg.Data, wire.JournalFile)
	if err := wire.RequireData(cfg); err != nil {
		return err
	}
	// The owner action line goes to stderr, as the server would log it,
	// for the operator's records.
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(ownerActionsOnly{slog.NewTextHandler(stderr, nil)})})
	if err != nil {
		return err
	}
	defer svc.Shutdown(context.Background())
	// The owner is looked up before the password is asked for: a
	// mistyped e-mail is told at once.
	o, err := svc.System().OwnerByEmail(*email)
	if err != nil {
		if actors.AsError(err).Code == actors.CodeNotFound {
			return fmt.Errorf("no owner signs in with %q in %s; check the e-mail, or make the owner with guard owner create (nothing was changed)", *email, dataFile)
		}
		return err
	}
	pw, err := readPassword(stdin, stderr, "New console password", o.Email)
	if err != nil {
		return err
	}
	if err := console.CheckNewPassword(pw); err != nil {
		return fmt.Errorf("%w (nothing was changed)", err)
	}
	if err := svc.System().SetOwnerPassword(ctx, o.ID, console.HashPassword(pw), "cli"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "The console password of %s (owner %s) is set; every console session of the owner has ended.\n", o.Email, o.ID)
	return nil
}

// ownerActionsOnly passes on the service's "owner action" log lines only,
// not its start and stop messages.
type ownerActionsOnly struct{ slog.Handler }

func (h ownerActionsOnly) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "owner action" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h ownerActionsOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return ownerActionsOnly{h.Handler.WithAttrs(attrs)}
}

func (h ownerActionsOnly) WithGroup(name string) slog.Handler {
	return ownerActionsOnly{h.Handler.WithGroup(name)}
}

// readPassword reads the owner's password: from a terminal, prompted (as
// label) and not echoed, typed twice; from a pipe, its first line.
func readPassword(stdin io.Reader, prompt io.Writer, label, email string) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ask := func(what string) (string, error) {
			fmt.Fprintf(prompt, "%s for %s (at least %d characters): ", what, email, console.MinPasswordLength)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(prompt)
			return string(b), err
		}
		pw, err := ask(label)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		again, err := ask("The same password again")
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		if again != pw {
			return "", fmt.Errorf("the two passwords differ; nothing was changed")
		}
		return pw, nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}
