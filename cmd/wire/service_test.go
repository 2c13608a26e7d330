package wire

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/agentpay/guard/transport/approvallink"
)

// An approval link sent before a restart must still open after it: the
// link key is created once and read back from the journal.
func TestLinkKeySurvivesRestart(t *testing.T) {
	cfg := Defaults()
	cfg.Data = t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := Open(cfg, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, _, err := svc.Links().Mint(approvallink.Claims{ApprovalID: "apr_1", ItemsHash: "h", Channel: "email", ChannelID: "ntc_1", ChannelRevision: 1, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err = Open(cfg, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	if _, err := svc.Links().Verify(tok, now); err != nil {
		t.Fatalf("link minted before the restart: %v", err)
	}
}

// The spare processors go on top of the runtime's own default, however many
// services the process opens; spare_procs 0 and an explicit GOMAXPROCS
// leave the setting alone.
func TestSpareProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(spare int) {
		t.Helper()
		cfg := Defaults()
		cfg.Data = t.TempDir()
		cfg.SpareProcs = spare
		svc, err := Open(cfg, Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	base := defaultProcs()
	for i := range 3 {
		open(2)
		if got := runtime.GOMAXPROCS(0); got != base+2 {
			t.Fatalf("after Open number %d with spare_procs 2: GOMAXPROCS %d, want %d (the default %d plus 2)", i+1, got, base+2, base)
		}
	}
	runtime.GOMAXPROCS(base + 5)
	open(0)
	if got := runtime.GOMAXPROCS(0); got != base+5 {
		t.Fatalf("spare_procs 0 changed GOMAXPROCS to %d; it was %d", got, base+5)
	}
	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	open(2)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("with GOMAXPROCS=1 in the environment the service set %d processors", got)
	}
}
