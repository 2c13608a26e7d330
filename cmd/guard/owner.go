package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"strings"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/console"
)

func ownerCreate(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("guard owner create", flag.ContinueOnError)
	file := fs.String("config", getenv("GUARD_CONFIG"), "the server's JSON config `file` (env GUARD_CONFIG)")
	data := fs.String("data", "", "data directory (the server must be stopped); default: the server's data setting (config, GUARD_DATA, else ./data)")
	journalDir := fs.String("journal-dir", "", "journal directory, when the server keeps it apart from the data directory; default: the server's journal_dir setting")
	name := fs.String("name", "", "owner name")
	email := fs.String("email", "", "owner e-mail (console sign-in)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" {
		return fmt.Errorf("-name is required: the owner's name, as the console shows it")
	}
	if a, err := mail.ParseAddress(*email); err != nil || a.Address != *email || a.Name != "" {
		return fmt.Errorf("-email %q is not an e-mail address; give the bare address the owner signs in with, like owner@example.com", *email)
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("reading the password from standard input: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
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
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("%w (is the server still running on this data directory?)", err)
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
