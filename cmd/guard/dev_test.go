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

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/console"
)

// TestDevBootstrapGivesAConsolePassword: make run prints a console
// password that signs the practice owner in, keeps it across restarts, and
// gives one to credentials written before the console existed.
func TestDevBootstrapGivesAConsolePassword(t *testing.T) {
	cfg := wire.Defaults()
	cfg.Data = t.TempDir()
	boot := func() (devCredentials, string) {
		t.Helper()
		svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Shutdown(context.Background())
		var out bytes.Buffer
		if err := devBootstrap(context.Background(), svc, cfg, "127.0.0.1:8080", &out); err != nil {
			t.Fatal(err)
		}
		var creds devCredentials
		b, err := os.ReadFile(filepath.Join(cfg.Data, "dev-credentials.json"))
		if err != nil || json.Unmarshal(b, &creds) != nil {
			t.Fatalf("credentials file: %v", err)
		}
		o, err := svc.System().OwnerByEmail(creds.ConsoleEmail)
		if err != nil || !console.VerifyPassword(o.PasswordHash, creds.ConsolePassword) {
			t.Fatalf("the printed password does not sign %s in (%v)", creds.ConsoleEmail, err)
		}
		return creds, out.String()
	}
	first, out := boot()
	if first.ConsolePassword == "" || !strings.Contains(out, first.ConsolePassword) || !strings.Contains(out, cfg.ConsoleURL) {
		t.Fatalf("output does not show the console sign-in:\n%s", out)
	}
	if again, _ := boot(); again.ConsolePassword != first.ConsolePassword {
		t.Fatal("a restart changed the console password")
	}
	// Credentials from before the console have no password: one is made.
	old := first
	old.ConsoleEmail, old.ConsolePassword = "", ""
	b, _ := json.Marshal(old)
	if err := os.WriteFile(filepath.Join(cfg.Data, "dev-credentials.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if upgraded, _ := boot(); upgraded.ConsolePassword == "" || upgraded.ConsolePassword == first.ConsolePassword {
		t.Fatalf("old credentials got password %q", upgraded.ConsolePassword)
	}
}
