package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Every command group refuses a command it does not have the same way:
// its usage on stderr, an error that names the command and lists those
// the group takes, and the usage error's exit status, 2.
func TestUnknownCommandOfEveryGroup(t *testing.T) {
	for _, g := range []struct{ name, takes string }{
		{"owner", "create"},
		{"agents", "list, create, rename, pause, resume, archive"},
		{"keys", "list, create, revoke, rotate"},
		{"policy", "show, set"},
	} {
		out, errOut, err := cliRun(t, nil, g.name, "frob")
		if err == nil || !strings.Contains(err.Error(), `unknown command "frob"`) || !strings.Contains(err.Error(), g.takes) {
			t.Errorf("guard %s frob: %v; want unknown command \"frob\" and the commands (%s)", g.name, err, g.takes)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("guard %s frob exits with %d, want 2", g.name, code)
		}
		if !strings.Contains(errOut, "usage: guard "+g.name+" COMMAND") || out != "" {
			t.Errorf("guard %s frob: stdout %q, stderr %q; want the usage on stderr", g.name, out, errOut)
		}
		if _, _, err := cliRun(t, nil, g.name); exitCode(err) != 2 || !strings.Contains(err.Error(), "missing command") {
			t.Errorf("guard %s: %v (exit %d); want a usage error", g.name, err, exitCode(err))
		}
		if out, _, err := cliRun(t, nil, g.name, "-h"); err != nil || !strings.Contains(out, "usage: guard "+g.name) {
			t.Errorf("guard %s -h: %v, stdout %q", g.name, err, out)
		}
	}
	if _, _, err := cliRun(t, nil, "frob"); exitCode(err) != 2 || !strings.Contains(err.Error(), `unknown command "frob"`) {
		t.Errorf("guard frob: %v (exit %d)", err, exitCode(err))
	}
}

// A command line that cannot run is a usage error (2); a command that
// ran and failed is not (1).
func TestUsageErrorsExitTwo(t *testing.T) {
	env := map[string]string{"GUARD_OWNER_KEY": "k", "GUARD_SERVER": "http://127.0.0.1:1"}
	for _, args := range [][]string{
		{},
		{"keys", "list", "-bogus"},
		{"agents", "pause"},
		{"agents", "pause", "a", "b"},
		{"agents", "pause", "a", "-reason", "x"},
		{"agents", "create"},
		{"policy", "set", "agt_1"},
		{"owner", "create", "-bogus"},
		{"owner", "create", "-name", "A"},
		{"owner", "create", "-name", "A", "-email", "a@example.org", "extra"},
	} {
		_, errOut, err := cliRun(t, env, args...)
		if code := exitCode(err); code != 2 {
			t.Errorf("guard %s: %v, exit %d; want a usage error (2)", strings.Join(args, " "), err, code)
		}
		if !strings.Contains(errOut, "usage:") {
			t.Errorf("guard %s printed no usage: %q", strings.Join(args, " "), errOut)
		}
	}
	// serve's own flags: the flag package prints their list.
	for _, args := range [][]string{{"serve", "-bogus"}, {"serve", "-dev", "extra"}} {
		if _, _, err := cliRun(t, env, args...); exitCode(err) != 2 {
			t.Errorf("guard %s: %v, exit %d; want a usage error (2)", strings.Join(args, " "), err, exitCode(err))
		}
	}
	for _, args := range [][]string{
		{"keys", "list"}, // no server listens there
		{"owner", "create", "-name", "A", "-email", "not an address"},
		{"serve", "-addr", "nope"}, // read, and refused for its value
	} {
		if _, _, err := cliRun(t, env, args...); exitCode(err) != 1 {
			t.Errorf("guard %s: %v, exit %d; want 1", strings.Join(args, " "), err, exitCode(err))
		}
	}
	if _, _, err := cliRun(t, env, "owner", "create", "-h"); exitCode(err) != 0 {
		t.Errorf("guard owner create -h: %v", err)
	}
}

// The process's exit status, through main: this test runs itself again
// as the guard command.
func TestMainExitStatus(t *testing.T) {
	if args, ok := os.LookupEnv("GUARD_TEST_MAIN_ARGS"); ok {
		os.Args = append([]string{"guard"}, strings.Fields(args)...)
		main()
		return
	}
	for _, tc := range []struct {
		args string
		want int
	}{
		{"owner frob", 2},
		{"policy frob", 2},
		{"help", 0},
		{"keys list -server http://127.0.0.1:1 -key k", 1},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainExitStatus$")
		cmd.Env = append(os.Environ(), "GUARD_TEST_MAIN_ARGS="+tc.args)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("guard %s: %v", tc.args, err)
		}
		if code != tc.want {
			t.Errorf("guard %s exited with %d, want %d\n%s", tc.args, code, tc.want, out)
		}
	}
}

// A port another process holds is named as such, with how to choose
// another, and the service it opened is closed again (its data directory
// may be used at once).
func TestServeOnAPortInUseSaysHowToChooseAnother(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := t.TempDir()
	_, _, err = cliRun(t, nil, "serve", "-data", data, "-addr", ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "another process uses the port") || !strings.Contains(err.Error(), "GUARD_ADDR") {
		t.Fatalf("serve on a port in use: %v", err)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit %d, want 1", exitCode(err))
	}
	// The store was released: another start on the same data succeeds
	// as far as the port.
	if _, _, err = cliRun(t, nil, "serve", "-data", data, "-addr", ln.Addr().String()); err == nil || strings.Contains(err.Error(), "store") {
		t.Fatalf("a second start on the data directory: %v", err)
	}
}
