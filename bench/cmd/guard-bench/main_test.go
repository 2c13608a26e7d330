package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// run runs the command with args and returns its exit status and output.
func run(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// tiny are the flags of an in-process run that does as little as it can.
var tiny = []string{"-agents", "1", "-conns", "1", "-duration", "20ms", "-warmup", "0", "-idle-agents", "0", "-ceiling", "0", "-phases", "check"}

// TestHelp: -h prints the synopsis of both forms, the flags and the exit
// statuses on standard output, and exits 0.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help"} {
		code, stdout, stderr := run(context.Background(), arg)
		if code != 0 || stderr != "" {
			t.Errorf("%s: exit %d, stderr %q; want 0 and nothing", arg, code, stderr)
		}
		if !strings.HasPrefix(stdout, "Usage:\n  guard-bench [flags]\n") {
			t.Errorf("%s: the help does not open with the synopsis:\n%s", arg, stdout)
		}
		for _, want := range []string{"guard-bench -target http://HOST:PORT -owner-key KEY", "Flags:\n", "-duration duration",
			"Exit status:", "  1    the run failed", "  2    a usage error", "  130  interrupted by SIGINT"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: the help lacks %q:\n%s", arg, want, stdout)
			}
		}
	}
}

// TestUsageErrors: a flag value, flag or argument the run cannot start
// with exits 2 with a message naming the flag, before anything runs; a
// zero is not taken for the default. Each comes after the flags of a
// tiny run, which the run would be if the value were let through.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-duration", "10"}, `invalid value "10" for flag -duration: not a duration; give a duration like 10s`},
		{[]string{"-warmup", "2"}, "flag -warmup: not a duration"},
		{[]string{"-duration", "0"}, "-duration must be positive"},
		{[]string{"-agents", "0"}, "-agents must be at least 1"},
		{[]string{"-conns", "0"}, "-conns must be at least 1"},
		{[]string{"-idle-timeout", "0"}, "-idle-timeout must be positive"},
		{[]string{"-phases", ""}, `-phases "" names no phase`},
		{[]string{"-phases", ","}, `-phases "," names no phase`},
		{[]string{"-capacity-p99", "10"}, "flag -capacity-p99: not a duration"},
		{[]string{"-capacity-p99", "10ms", "-capacity-steps", "0"}, "-capacity-steps 0 must be from 1 to 20"},
		{[]string{"-rate", "1e11"}, "-rate 1e+11 is more than the bench can pace over 1 connections: at most 1000000 requests/s"},
		{[]string{"-target", "http://127.0.0.1:1", "-owner-key", "svc_test_agent_x"}, "is an agent key; -owner-key takes a practice owner key"},
	} {
		code, stdout, stderr := run(context.Background(), append(slices.Clone(tiny), c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "guard-bench -h lists the flags") || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestBadFlagLeavesTheProfileAlone: the profile and trace files are made
// only once every flag is good, so a refused run keeps an earlier
// profile; a path the bench cannot create is refused naming its flag.
func TestBadFlagLeavesTheProfileAlone(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.prof")
	if err := os.WriteFile(prof, []byte("an earlier profile"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(context.Background(), append(slices.Clone(tiny), "-profile-phase", "check", "-cpuprofile", prof, "-trace", prof, "-duration", "-1s")...)
	if code != 2 || !strings.Contains(stderr, "-duration") {
		t.Fatalf("exit %d, stderr %q; want 2 naming -duration", code, stderr)
	}
	if b, err := os.ReadFile(prof); err != nil || string(b) != "an earlier profile" {
		t.Errorf("the profile holds %q (%v) after a refused run", b, err)
	}
	code, _, stderr = run(context.Background(), append([]string{"-trace", filepath.Join(dir, "no", "such", "trace.out"), "-profile-phase", "check"}, tiny...)...)
	if code != 2 || !strings.Contains(stderr, "-trace: open ") {
		t.Errorf("an unwritable -trace: exit %d, stderr %q; want 2 naming -trace", code, stderr)
	}
}

// TestInterruptedExits130: a run ended by SIGINT exits 130 (143 for
// SIGTERM), and says it was interrupted.
func TestInterruptedExits130(t *testing.T) {
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(signalCause{sig})
		code, _, stderr := run(ctx, tiny...)
		if code != want || !strings.Contains(stderr, "interrupted") {
			t.Errorf("%v: exit %d, stderr %q; want %d", sig, code, stderr, want)
		}
	}
}

// TestFailedRunExits1: a run that could not set up (no server at the
// target) exits 1.
func TestFailedRunExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	code, stdout, stderr := run(context.Background(), "-target", "http://"+addr, "-owner-key", "svc_test_owner_x", "-conns", "1", "-duration", "20ms")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "connection refused") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the refused connection", code, stdout, stderr)
	}
}
