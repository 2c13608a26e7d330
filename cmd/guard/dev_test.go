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

// A restart never prints keys that no longer work: a revoked agent key is
// replaced, and after a practice reset removed the agent, a new practice
// agent is made. What the file keeps is what the banner prints.
func TestDevBootstrapRenewsKeysThatNoLongerWork(t *testing.T) {
	cfg := wire.Defaults()
	cfg.Data = t.TempDir()
	boot := func(change func(sys *actors.System, creds devCredentials)) (devCredentials, string) {
		t.Helper()
		svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Shutdown(context.Background())
		var creds devCredentials
		if change != nil {
			b, _ := os.ReadFile(filepath.Join(cfg.Data, "dev-credentials.json"))
			if err := json.Unmarshal(b, &creds); err != nil {
				t.Fatal(err)
			}
			change(svc.System(), creds)
		}
		var out bytes.Buffer
		if err := devBootstrap(context.Background(), svc, cfg, "127.0.0.1:8080", &out); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(cfg.Data, "dev-credentials.json"))
		if err := json.Unmarshal(b, &creds); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{creds.OwnerKey, creds.AgentKey} {
			if _, err := svc.System().Authenticate(k); err != nil || !strings.Contains(out.String(), k) {
				t.Fatalf("the banner shows a key that does not work (%v):\n%s", err, out.String())
			}
		}
		return creds, out.String()
	}
	first, _ := boot(nil)
	owner := actors.OwnerPrincipal(first.OwnerID, actors.EnvTest)
	revoked, out := boot(func(sys *actors.System, creds devCredentials) {
		p, err := sys.Authenticate(creds.AgentKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sys.RevokeKey(context.Background(), owner, p.KeyID); err != nil {
			t.Fatal(err)
		}
	})
	if revoked.AgentKey == first.AgentKey || revoked.AgentID != first.AgentID || !strings.Contains(out, "no longer worked") {
		t.Fatalf("after a revocation: agent %s key changed %v; output:\n%s", revoked.AgentID, revoked.AgentKey != first.AgentKey, out)
	}
	reset, _ := boot(func(sys *actors.System, _ devCredentials) {
		if _, err := sys.ResetPractice(context.Background(), owner); err != nil {
			t.Fatal(err)
		}
	})
	if reset.AgentID == first.AgentID || reset.OwnerKey != first.OwnerKey {
		t.Fatalf("after a practice reset: agent %s (was %s), owner key kept %v", reset.AgentID, first.AgentID, reset.OwnerKey == first.OwnerKey)
	}
}
