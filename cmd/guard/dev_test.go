package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/console"
)

// bootDev opens the service on cfg's data directory, lets before change
// it (given the saved credentials), runs the dev bootstrap and checks that
// what it saved and printed works: both keys authenticate and appear in
// the banner, and the password signs the owner in.
func bootDev(t *testing.T, cfg wire.Config, before func(sys *actors.System, saved devCredentials)) (devCredentials, string) {
	t.Helper()
	creds, out, _ := bootDevLogged(t, cfg, before)
	return creds, out
}

// bootDevLogged is bootDev that also returns the service's log.
func bootDevLogged(t *testing.T, cfg wire.Config, before func(sys *actors.System, saved devCredentials)) (creds devCredentials, out, log string) {
	t.Helper()
	file := filepath.Join(cfg.Data, "dev-credentials.json")
	read := func() devCredentials {
		t.Helper()
		var saved devCredentials
		b, err := os.ReadFile(file)
		if err != nil || json.Unmarshal(b, &saved) != nil {
			t.Fatalf("credentials file: %v", err)
		}
		return saved
	}
	var logged bytes.Buffer
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	sys := svc.System()
	if before != nil {
		before(sys, read())
	}
	var printed bytes.Buffer
	if err := devBootstrap(context.Background(), svc, cfg, "127.0.0.1:8080", &printed); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	creds, out = read(), printed.String()
	for _, k := range []string{creds.OwnerKey, creds.AgentKey} {
		if _, err := sys.Authenticate(k); err != nil || !strings.Contains(out, k) {
			t.Fatalf("the banner shows a key that does not work (%v):\n%s", err, out)
		}
	}
	o, err := sys.OwnerByEmail(creds.ConsoleEmail)
	if err != nil || o.ID != creds.OwnerID || !console.VerifyPassword(o.PasswordHash, creds.ConsolePassword) ||
		!strings.Contains(out, creds.ConsolePassword) || !strings.Contains(out, cfg.ConsoleURL) {
		t.Fatalf("the printed password does not sign %s in (%v):\n%s", creds.ConsoleEmail, err, out)
	}
	return creds, out, logged.String()
}

func devConfig(t *testing.T) wire.Config {
	cfg := wire.Defaults()
	cfg.Data = t.TempDir()
	return cfg
}

// make run prints a console password that signs the practice owner in,
// keeps it across restarts, and gives one to credentials written before
// the console existed.
func TestDevBootstrapGivesAConsolePassword(t *testing.T) {
	cfg := devConfig(t)
	first, _, firstLog := bootDevLogged(t, cfg, nil)
	// The setup's own actions are logged as the setup's, not a console's.
	for _, action := range []string{"agent_created", "key_created"} {
		if !strings.Contains(firstLog, `msg="owner action" action=`+action+` owner=`+first.OwnerID+` env=test by=dev_bootstrap`) {
			t.Errorf("no %s line by dev_bootstrap; the log:\n%s", action, firstLog)
		}
	}
	if again, _ := bootDev(t, cfg, nil); again.ConsolePassword != first.ConsolePassword {
		t.Fatal("a restart changed the console password")
	}
	// Credentials from before the console have no password: one is made.
	old := first
	old.ConsoleEmail, old.ConsolePassword = "", ""
	b, _ := json.Marshal(old)
	if err := os.WriteFile(filepath.Join(cfg.Data, "dev-credentials.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	upgraded, _, log := bootDevLogged(t, cfg, nil)
	if upgraded.ConsolePassword == first.ConsolePassword {
		t.Fatalf("old credentials kept password %q", upgraded.ConsolePassword)
	}
	// The operator's log says the password changed, and by what.
	if n := strings.Count(log, `msg="owner action" action=console_password_set owner=`+first.OwnerID+" by=dev_bootstrap"); n != 1 {
		t.Fatalf("%d log lines for the new console password, want 1; the log:\n%s", n, log)
	}
}

// A restart never prints keys that no longer work: a revoked agent key is
// replaced, and after a practice reset removed the agent, a new practice
// agent is made.
func TestDevBootstrapRenewsKeysThatNoLongerWork(t *testing.T) {
	cfg := devConfig(t)
	first, _ := bootDev(t, cfg, nil)
	owner := actors.OwnerPrincipal(first.OwnerID, actors.EnvTest)
	revoked, out := bootDev(t, cfg, func(sys *actors.System, creds devCredentials) {
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
	reset, _ := bootDev(t, cfg, func(sys *actors.System, _ devCredentials) {
		if _, err := sys.ResetPractice(context.Background(), owner); err != nil {
			t.Fatal(err)
		}
	})
	if reset.AgentID == first.AgentID || reset.OwnerKey != first.OwnerKey {
		t.Fatalf("after a practice reset: agent %s (was %s), owner key kept %v", reset.AgentID, first.AgentID, reset.OwnerKey == first.OwnerKey)
	}
}

// The credentials file and the data can part: a deleted file finds the
// practice owner still there (new password and keys, not "already
// exists"), and a file whose data went makes everything afresh.
func TestDevBootstrapWhenFileAndDataPart(t *testing.T) {
	cfg := devConfig(t)
	first, _ := bootDev(t, cfg, nil)
	if err := os.Remove(filepath.Join(cfg.Data, "dev-credentials.json")); err != nil {
		t.Fatal(err)
	}
	again, out := bootDev(t, cfg, nil)
	if again.OwnerID != first.OwnerID || again.ConsolePassword == first.ConsolePassword || !strings.Contains(out, "was missing") {
		t.Fatalf("after the file was deleted: owner %s (was %s), output:\n%s", again.OwnerID, first.OwnerID, out)
	}
	// The practice agent is the same one, with a new key; nothing claims
	// that saved keys stopped working, since none were saved.
	if again.AgentID != first.AgentID || again.AgentKey == first.AgentKey || strings.Contains(out, "no longer worked") {
		t.Fatalf("after the file was deleted: agent %s (was %s), output:\n%s", again.AgentID, first.AgentID, out)
	}
	// Deleted again and again: the owner keys the file no longer names
	// make room for the new one (the quota is three, live included), and
	// no practice agent is added (the quota is five).
	for range 6 {
		if err := os.Remove(filepath.Join(cfg.Data, "dev-credentials.json")); err != nil {
			t.Fatal(err)
		}
		if c, _ := bootDev(t, cfg, nil); c.AgentID != first.AgentID {
			t.Fatalf("a restart without the file made practice agent %s (was %s)", c.AgentID, first.AgentID)
		}
	}
	for _, name := range []string{"guard.db", "guard.db.journal"} {
		if err := os.RemoveAll(filepath.Join(cfg.Data, name)); err != nil {
			t.Fatal(err)
		}
	}
	fresh, out := bootDev(t, cfg, nil)
	if fresh.OwnerID == first.OwnerID || !strings.Contains(out, "making a new one") {
		t.Fatalf("after the data was deleted: owner %s, output:\n%s", fresh.OwnerID, out)
	}
}
