package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport"
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
		{"receipts", "get, verify"},
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

// "guard help" names every command of every group, so none is found only
// by reading the group's own usage.
func TestUsageNamesEveryCommand(t *testing.T) {
	for _, g := range []cmdGroup{ownerGroup, receiptKeysGroup, agentsGroup, keysGroup, policyGroup, receiptsGroup} {
		named := map[string]bool{}
		for _, line := range strings.Split(usage, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "guard "+g.name+" ")
			if !ok {
				continue
			}
			verbs, _, _ := strings.Cut(rest, " ")
			for _, v := range strings.Split(verbs, "|") {
				named[v] = true
			}
		}
		for _, sc := range g.cmds {
			if !named[sc.name] {
				t.Errorf("guard help does not name guard %s %s", g.name, sc.name)
			}
		}
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
		{"receipts", "get"},
		{"receipts", "get", "rcp_1", "rcp_2"},
		{"receipts", "verify", "extra"},
		{"receipts", "verify", "-limit", "0"},
		{"receipts", "verify", "-limit", "51"},
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
		{"receipts verify -limit 0 -key k", 2},
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
// another, and the data directory stays free (another start may use it at
// once).
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

// serve -h is asked for: the list goes to standard output, so that
// guard serve -h | less shows it, and nothing goes to standard error.
func TestServeHelpGoesToStandardOutput(t *testing.T) {
	out, errOut, err := cliRun(t, nil, "serve", "-h")
	if err != nil || exitCode(err) != 0 {
		t.Fatalf("serve -h: %v", err)
	}
	if !strings.Contains(out, "usage: guard serve") || !strings.Contains(out, "-addr host:port") || errOut != "" {
		t.Fatalf("serve -h: stdout %q, stderr %q", out, errOut)
	}
	out, errOut, err = cliRun(t, nil, "serve", "-bogus")
	if exitCode(err) != 2 || out != "" || !strings.Contains(errOut, "-addr host:port") {
		t.Fatalf("serve -bogus: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// guard version says which build this is, the API version it serves and
// the Go release, for a problem report; it takes no arguments.
func TestVersion(t *testing.T) {
	out, _, err := cliRun(t, nil, "version")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "guard ") || len(lines[0]) <= len("guard ") ||
		lines[1] != "api_version "+transport.APIVersion || !strings.HasPrefix(lines[2], runtime.Version()+" ") {
		t.Fatalf("guard version printed %q", out)
	}
	if _, _, err := cliRun(t, nil, "version", "extra"); exitCode(err) != 2 {
		t.Fatalf("guard version extra: %v, want a usage error", err)
	}
}

// A command for a running server that finds none says so, and how to
// start one or name another, instead of the dialer's own words alone.
func TestNoServerListeningSaysSo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, _, err = cliRun(t, nil, "agents", "list", "-server", "http://"+addr, "-key", "svc_test_owner_x")
	if err == nil || !strings.Contains(err.Error(), "no server listens at "+addr) || !strings.Contains(err.Error(), "GUARD_SERVER") {
		t.Fatalf("agents list against a closed port: %v", err)
	}
}

// A server on port 0 tells the port it got: the --dev notes name a
// console address that answers, not port 0, and the log names the data
// directory in full though it was given relative.
func TestServeOnPortZeroNamesThePortItGot(t *testing.T) {
	t.Chdir(t.TempDir())
	srv := serveInBackground(t, "-dev", "-addr", "127.0.0.1:0", "-data", "data", "-log-level", "info")
	defer srv.stop()
	m := srv.waitForLog(regexp.MustCompile(`msg=serving addr=127\.0\.0\.1:(\d+) data=(\S+)`))
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "data"); m[2] != want {
		t.Errorf("the log names data=%s, want %s", m[2], want)
	}
	console := "http://127.0.0.1:" + m[1] + "/console"
	if !strings.Contains(srv.out.String(), "console:   "+console+" ") {
		t.Fatalf("the --dev notes do not name %s:\n%s", console, srv.out.String())
	}
	resp, err := http.Get(console)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", console, resp.StatusCode)
	}
}

// backgroundServer is `guard serve` running in the test's process.
type backgroundServer struct {
	t           *testing.T
	out, errOut guardtest.SyncBuffer
	cancel      context.CancelFunc
	done        chan error
	stopped     bool
}

// serveInBackground runs `guard serve args...` until stop, which the test
// must call (a second call does nothing).
func serveInBackground(t *testing.T, args ...string) *backgroundServer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &backgroundServer{t: t, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- Run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), &s.out, &s.errOut, func(string) string { return "" })
	}()
	return s
}

// waitForLog returns the submatches of the first log text re matches,
// failing the test (and stopping the server) if none comes in 30 s.
func (s *backgroundServer) waitForLog(re *regexp.Regexp) []string {
	s.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.errOut.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			s.stop()
			s.t.Fatalf("no log line matches %s:\n%s", re, s.errOut.String())
		}
	}
}

// stop stops the server gracefully and fails the test if it did not
// exit cleanly.
func (s *backgroundServer) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	if err := <-s.done; err != nil {
		s.t.Errorf("serve: %v", err)
	}
}
