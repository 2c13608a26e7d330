package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport/console"
)

const (
	oldConsolePassword = "correct horse battery"
	newConsolePassword = "a new password for the console"
)

// setPasswordData makes a data directory with an owner signed in to the
// console in two browsers, and returns the directory, the owner and the
// digests of its sessions. The service is stopped again, as set-password
// wants.
func setPasswordData(t *testing.T) (dir string, o actors.Owner, sessions []string) {
	t.Helper()
	dir = t.TempDir()
	if err := Run(context.Background(), []string{"owner", "create", "-data", dir, "-name", "Ada", "-email", "ada@example.org"},
		strings.NewReader(oldConsolePassword+"\n"), io.Discard, io.Discard, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	withData(t, dir, func(sys *actors.System) {
		var err error
		if o, err = sys.OwnerByEmail("ada@example.org"); err != nil {
			t.Fatal(err)
		}
		now := sys.Now()
		for _, d := range []string{strings.Repeat("a", 64), strings.Repeat("b", 64)} {
			cs := actors.ConsoleSession{OwnerID: o.ID, Env: actors.EnvTest, CSRF: "token", CreatedAt: now, LastSeenAt: now}
			if err := sys.PutConsoleSession(context.Background(), d, cs); err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, d)
		}
	})
	return dir, o, sessions
}

// withData runs f on the actors of a data directory, then stops them.
func withData(t *testing.T, dir string, f func(*actors.System)) {
	t.Helper()
	withService(t, dir, func(svc *wire.Service) { f(svc.System()) })
}

func setPassword(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = Run(ctx, append([]string{"owner", "set-password"}, args...), strings.NewReader(stdin), &out, &errOut, func(string) string { return "" })
	return out.String(), errOut.String(), err
}

// The password set-password reads is the one the console then accepts,
// the old one no longer is, every session of the owner is over, and the
// change is logged as the operator's.
func TestOwnerSetPassword(t *testing.T) {
	dir, o, sessions := setPasswordData(t)
	out, errOut, err := setPassword(t, newConsolePassword+"\n", "-data", dir, "-email", "ADA@example.org")
	if err != nil {
		t.Fatalf("set-password: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "The console password of ada@example.org (owner "+o.ID+") is set") {
		t.Errorf("stdout %q does not confirm the change", out)
	}
	if want := "action=console_password_set owner=" + o.ID + " by=cli sessions_ended=2"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q lacks the log line %q", errOut, want)
	}
	if strings.Contains(out+errOut, newConsolePassword) {
		t.Error("the password was printed")
	}
	withData(t, dir, func(sys *actors.System) {
		got, err := sys.OwnerByID(o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !console.VerifyPassword(got.PasswordHash, newConsolePassword) || console.VerifyPassword(got.PasswordHash, oldConsolePassword) {
			t.Error("the stored hash does not check the new password, or still checks the old one")
		}
		for _, d := range sessions {
			if _, found, err := sys.ConsoleSessionByDigest(d); found || err != nil {
				t.Errorf("session %s…: found %v (%v) after set-password", d[:8], found, err)
			}
		}
	})
}

// A refused run changes nothing: an unknown e-mail, a short password, a
// data directory without data (which it must not create either).
func TestOwnerSetPasswordRefusals(t *testing.T) {
	dir, o, sessions := setPasswordData(t)
	_, _, err := setPassword(t, newConsolePassword+"\n", "-data", dir, "-email", "nobody@example.org")
	if err == nil || !strings.Contains(err.Error(), `no owner signs in with "nobody@example.org"`) || exitCode(err) != 1 {
		t.Errorf("unknown e-mail: %v (exit %d), want it named and exit 1", err, exitCode(err))
	}
	_, _, err = setPassword(t, "short\n", "-data", dir, "-email", "ada@example.org")
	if err == nil || !strings.Contains(err.Error(), "12 characters") || exitCode(err) != 1 {
		t.Errorf("short password: %v (exit %d)", err, exitCode(err))
	}
	empty := filepath.Join(t.TempDir(), "typo")
	_, _, err = setPassword(t, newConsolePassword+"\n", "-data", empty, "-email", "ada@example.org")
	if err == nil || !strings.Contains(err.Error(), "no data file at") || exitCode(err) != 1 {
		t.Errorf("no data: %v (exit %d)", err, exitCode(err))
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("set-password made the data directory %s (%v)", empty, err)
	}
	withData(t, dir, func(sys *actors.System) {
		got, err := sys.OwnerByID(o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !console.VerifyPassword(got.PasswordHash, oldConsolePassword) {
			t.Error("a refused run changed the password")
		}
		for _, d := range sessions {
			if _, found, err := sys.ConsoleSessionByDigest(d); !found || err != nil {
				t.Errorf("a refused run ended session %s… (%v)", d[:8], err)
			}
		}
	})
}

// Command lines that cannot run are usage errors (exit 2, the usage on
// stderr), help is a success, and the command is listed with the others.
func TestOwnerSetPasswordUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-bogus"},
		{"-email", "ada@example.org", newConsolePassword},
		{"-email", "ada@example.org", "-password", newConsolePassword},
	} {
		_, errOut, err := setPassword(t, "", args...)
		if exitCode(err) != 2 || !strings.Contains(errOut, "usage: guard owner set-password") {
			t.Errorf("guard owner set-password %s: %v (exit %d), stderr %q; want a usage error",
				strings.Join(args, " "), err, exitCode(err), errOut)
		}
	}
	out, _, err := setPassword(t, "", "-h")
	if err != nil || !strings.Contains(out, "usage: guard owner set-password") || !strings.Contains(out, "-email") {
		t.Errorf("-h: %v, stdout %q", err, out)
	}
	for _, args := range [][]string{{"owner", "-h"}, {"help"}} {
		var help bytes.Buffer
		if err := Run(context.Background(), args, nil, &help, io.Discard, func(string) string { return "" }); err != nil ||
			!strings.Contains(help.String(), "guard owner set-password") {
			t.Errorf("guard %s does not list set-password: %v\n%s", strings.Join(args, " "), err, help.String())
		}
	}
}

// With the server running on the data directory, set-password says to
// stop it, and changes nothing.
func TestOwnerSetPasswordWhileTheServerRuns(t *testing.T) {
	dir, _, _ := setPasswordData(t)
	guardtest.Start(t, guardtest.WithConfig(func(c *wire.Config) { c.Data = dir }))
	_, _, err := setPassword(t, newConsolePassword+"\n", "-data", dir, "-email", "ada@example.org")
	if err == nil || !strings.Contains(err.Error(), "is a server already running on this data directory? stop it") {
		t.Fatalf("set-password beside a running server: %v", err)
	}
}
