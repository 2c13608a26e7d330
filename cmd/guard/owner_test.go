package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/console"
)

func TestOwnerCreate(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), []string{"owner", "create", "-data", dir, "-name", "Ada", "-email", "Ada@Example.org"},
		strings.NewReader("correct horse battery\n"), &out, &errOut, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		OwnerID string            `json:"owner_id"`
		Keys    map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %q", out.String())
	}
	if len(got.OwnerID) != 36 || !strings.HasPrefix(got.Keys["test"], "svc_test_owner_") || !strings.HasPrefix(got.Keys["live"], "svc_live_owner_") {
		t.Fatalf("unexpected output %+v", got)
	}
	// The operator's log has the new owner, as it has every owner action.
	if !strings.Contains(errOut.String(), `msg="owner action" action=owner_created owner=`+got.OwnerID) {
		t.Errorf("no owner_created line; stderr:\n%s", errOut.String())
	}
	// A name goes to the console and the operator's terminal: it is
	// printable text of at most 100 characters, refused before anything
	// is written.
	for _, name := range []string{"Ada\x1b[2J", "Ada\u202eevil", strings.Repeat("a", 101)} {
		data := t.TempDir()
		err := Run(context.Background(), []string{"owner", "create", "-data", data, "-name", name, "-email", "b@example.org"},
			strings.NewReader("correct horse battery\n"), io.Discard, io.Discard, func(string) string { return "" })
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "-name") {
			t.Errorf("-name %q: %v, want a usage error about -name", name, err)
		}
		if entries, _ := os.ReadDir(data); len(entries) != 0 {
			t.Errorf("-name %q: the refused command wrote %d files", name, len(entries))
		}
	}

	svc := openData(t, dir)
	for env, key := range got.Keys {
		p, err := svc.System().Authenticate(key)
		if err != nil {
			t.Fatalf("%s key does not authenticate: %v", env, err)
		}
		if p.Kind != actors.KindOwner || p.OwnerID != got.OwnerID || p.Livemode != (env == "live") {
			t.Fatalf("%s key resolves to %+v", env, p)
		}
	}
	// The same e-mail (any case) cannot be used twice.
	err = Run(context.Background(), []string{"owner", "create", "-data", t.TempDir(), "-name", "B", "-email", "b@example.org"},
		strings.NewReader("short\n"), io.Discard, io.Discard, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "12 characters") {
		t.Fatalf("a short password must be refused, got %v", err)
	}
}

// The second owner also shows that a new data file is announced (a
// mistyped -data would otherwise make a store no server reads), and an
// existing one is not.
func TestOwnerCreateDuplicateEmail(t *testing.T) {
	dir := t.TempDir()
	run := func(email string) (string, error) {
		var errOut bytes.Buffer
		err := Run(context.Background(), []string{"owner", "create", "-data", dir, "-name", "A", "-email", email},
			strings.NewReader("a long enough password\n"), io.Discard, &errOut, func(string) string { return "" })
		return errOut.String(), err
	}
	said, err := run("owner@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(said, "No data file existed at "+filepath.Join(dir, "guard.db")) {
		t.Fatalf("a new data file is not announced: %q", said)
	}
	if said, err = run("other@example.org"); err != nil || strings.Contains(said, "No data file") {
		t.Fatalf("a second owner in the same data: %v, %q", err, said)
	}
	if _, err := run("OWNER@example.org"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second owner with the same e-mail: %v", err)
	}
}

// The password typed at owner create is the one the console accepts.
func TestOwnerCreateStoresConsolePassword(t *testing.T) {
	dir := t.TempDir()
	err := Run(context.Background(), []string{"owner", "create", "-data", dir, "-name", "A", "-email", "Pw@Example.org"},
		strings.NewReader("correct horse battery\n"), io.Discard, io.Discard, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	svc := openData(t, dir)
	o, err := svc.System().OwnerByEmail("pw@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(o.PasswordHash, "$argon2id$v=19$m=65536,t=3,p=2$") {
		t.Fatalf("hash %q is not a PHC argon2id string", o.PasswordHash)
	}
	if !console.VerifyPassword(o.PasswordHash, "correct horse battery") || console.VerifyPassword(o.PasswordHash, "correct horse batter") {
		t.Fatal("the stored hash does not check the password")
	}
}

func TestRunUsage(t *testing.T) {
	var stderr bytes.Buffer
	if err := Run(context.Background(), nil, nil, io.Discard, &stderr, func(string) string { return "" }); err == nil {
		t.Fatal("no command must be an error")
	}
	if !strings.Contains(stderr.String(), "guard serve") {
		t.Fatalf("usage not printed: %q", stderr.String())
	}
	if err := Run(context.Background(), []string{"frobnicate"}, nil, io.Discard, io.Discard, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("unknown command: %v", err)
	}
}

// With the journal kept apart (journal_dir), owner create opens it there:
// nothing appears beside the data file, and the server finds the owner.
func TestOwnerCreateWithTheJournalApart(t *testing.T) {
	dir, jdir := t.TempDir(), filepath.Join(t.TempDir(), "journal")
	cfg := wire.Defaults()
	cfg.Data, cfg.JournalDir = dir, jdir
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := wire.Open(cfg, wire.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	svc.Shutdown(context.Background())

	var out bytes.Buffer
	err = Run(context.Background(), []string{"owner", "create", "-data", dir, "-journal-dir", jdir, "-name", "Ada", "-email", "ada@example.org"},
		strings.NewReader("correct horse battery\n"), &out, io.Discard, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, wire.JournalFile+".journal")); !os.IsNotExist(err) {
		t.Fatalf("a journal appeared beside the data file (%v)", err)
	}
	if segs, _ := filepath.Glob(filepath.Join(jdir, "*.wal")); len(segs) == 0 {
		t.Fatalf("no journal segment in %s", jdir)
	}
	var got struct {
		Keys map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %q", out.String())
	}
	svc, err = wire.Open(cfg, wire.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	if _, err := svc.System().Authenticate(got.Keys["test"]); err != nil {
		t.Fatalf("the new owner's key does not authenticate: %v", err)
	}
}

// owner create reads the server's settings from its file and GUARD_*
// variables: the data directory, and the practice pool a new owner gets.
// An address that is not one is refused.
func TestOwnerCreateReadsTheServersSettings(t *testing.T) {
	dir := t.TempDir()
	getenv := func(k string) string {
		return map[string]string{"GUARD_DATA": dir, "GUARD_PRACTICE_POOL": "50.00"}[k]
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"owner", "create", "-name", "Env", "-email", "env@example.org"},
		strings.NewReader("a long enough password\n"), &out, io.Discard, getenv); err != nil {
		t.Fatal(err)
	}
	svc := openData(t, dir)
	o, err := svc.System().OwnerByEmail("env@example.org")
	if err != nil {
		t.Fatalf("the owner is not in GUARD_DATA: %v", err)
	}
	f, err := svc.System().Funding(actors.OwnerPrincipal(o.ID, actors.EnvTest))
	if err != nil || f.Balance != "50.00" {
		t.Fatalf("practice pool %+v (%v), want 50.00 from GUARD_PRACTICE_POOL", f, err)
	}
	for _, email := range []string{"@", "bob @ex ample", "Bob <bob@example.org>"} {
		err := Run(context.Background(), []string{"owner", "create", "-data", t.TempDir(), "-name", "X", "-email", email},
			strings.NewReader("a long enough password\n"), io.Discard, io.Discard, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "-email") {
			t.Errorf("-email %q: %v, want it refused", email, err)
		}
	}
}

// Asking a command for its help is a success, with the settings listed.
func TestHelpIsASuccess(t *testing.T) {
	for _, args := range [][]string{{"serve", "-h"}, {"owner", "create", "-h"}, {"--help"}} {
		if err := Run(context.Background(), args, strings.NewReader(""), io.Discard, io.Discard, func(string) string { return "" }); err != nil {
			t.Errorf("guard %s: %v", strings.Join(args, " "), err)
		}
	}
}

// openData opens the service on a data directory, as the server would,
// until the test ends.
func openData(t *testing.T, dir string) *wire.Service {
	t.Helper()
	cfg := wire.Defaults()
	cfg.Data = dir
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	return svc
}
