package wire

import (
	"context"
	"io"
	"log/slog"
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
	tok, _, err := svc.Links().Mint(approvallink.Claims{ApprovalID: "apr_1", ItemsHash: "h", Channel: "email", ChannelID: "ntc_1", ExpiresAt: now.Add(time.Hour)})
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
