package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/receipt"
)

// withService runs f on the service of a data directory, then stops it.
func withService(t *testing.T, dir string, f func(*wire.Service)) {
	t.Helper()
	cfg := wire.Defaults()
	cfg.Data = dir
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	f(svc)
}

// settledReceipt pays 1.00 as the agent of secret and returns the receipt.
func settledReceipt(t *testing.T, sys *actors.System, secret, idempotencyKey string) actors.Receipt {
	t.Helper()
	agent, err := sys.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sys.CreateSpend(context.Background(), agent, actors.SpendInput{Amount: policy.MustAmount("1.00"), Currency: "usdc",
		Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/r", Method: "GET"},
		URL: "https://api.vendor.com/r", IdempotencyKey: idempotencyKey})
	if err != nil {
		t.Fatal(err)
	}
	var sp policy.Spend
	if err := json.Unmarshal(r.Body, &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Status != policy.StatusSettled || sp.Settlement == nil || sp.Settlement.ReceiptID == nil {
		t.Fatalf("the spend did not settle with a receipt: %s", r.Body)
	}
	rc, err := sys.Receipt(agent, *sp.Settlement.ReceiptID)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func receiptKeys(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = Run(ctx, append([]string{"receipt-keys"}, args...), strings.NewReader(""), &out, &errOut, func(string) string { return "" })
	return out.String(), errOut.String(), err
}

// The operator rotates the receipt key on the stopped server: receipts
// signed before keep verifying with the JWKS, new ones carry the new key,
// and each owner's chain goes on across the change. A withdrawn key
// leaves the JWKS, and what it signed stops verifying.
func TestReceiptKeyRotation(t *testing.T) {
	dir := t.TempDir()
	var secret string
	var first actors.Receipt
	withService(t, dir, func(svc *wire.Service) {
		sys, ctx := svc.System(), context.Background()
		oc, err := sys.CreateOwner(ctx, "Ada", "ada@example.org", "")
		if err != nil {
			t.Fatal(err)
		}
		owner, err := sys.Authenticate(oc.Keys[actors.EnvTest])
		if err != nil {
			t.Fatal(err)
		}
		trusted, limit := []string{"api.vendor.com"}, "10.00"
		ag, _, err := sys.CreateAgent(ctx, owner, "payer", &policy.RulesInput{TrustedDestinations: &trusted, PerSpendLimit: &limit})
		if err != nil {
			t.Fatal(err)
		}
		k, err := sys.CreateAgentKey(ctx, owner, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		secret = k.Secret
		first = settledReceipt(t, sys, secret, "k1")
	})

	out, _, err := receiptKeys(t, "rotate", "-data", dir, "-json")
	if err != nil {
		t.Fatal(err)
	}
	var rotated struct{ Current, Retired receiptKeyView }
	if err := json.Unmarshal([]byte(out), &rotated); err != nil {
		t.Fatalf("rotate -json printed %q: %v", out, err)
	}
	if rotated.Retired.ID != first.KeyID || rotated.Retired.RetiredAt == nil || rotated.Current.ID == first.KeyID ||
		rotated.Current.Status != "current" {
		t.Fatalf("rotate: %s (the first receipt was signed by %s)", out, first.KeyID)
	}
	out, _, err = receiptKeys(t, "list", "-data", dir)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 ||
		!strings.HasPrefix(lines[1], rotated.Current.ID+" ") || !strings.Contains(lines[1], "current") ||
		!strings.HasPrefix(lines[2], first.KeyID+" ") || !strings.Contains(lines[2], "retired") {
		t.Fatalf("list after the rotation:\n%s", out)
	}

	withService(t, dir, func(svc *wire.Service) {
		second := settledReceipt(t, svc.System(), secret, "k2")
		if second.KeyID != rotated.Current.ID {
			t.Errorf("after the rotation a receipt is signed by %s, want %s", second.KeyID, rotated.Current.ID)
		}
		if _, err := receipt.Verify(first.JWS, svc.JWKS()); err != nil {
			t.Errorf("a receipt of the retired key no longer verifies: %v", err)
		}
		claims, err := receipt.Verify(second.JWS, svc.JWKS())
		if err != nil {
			t.Fatalf("a receipt of the new key does not verify: %v", err)
		}
		if claims.PrevHash != receipt.ChainHash(first.JWS) {
			t.Errorf("the chain broke at the rotation: prev %q, want %q", claims.PrevHash, receipt.ChainHash(first.JWS))
		}
	})

	// Withdrawing: never the current key, and only when confirmed.
	var ue usageError
	if _, _, err := receiptKeys(t, "withdraw", "-data", dir, first.KeyID); !errors.As(err, &ue) || !strings.Contains(err.Error(), "-yes") {
		t.Errorf("withdraw without -yes: %v", err)
	}
	if _, _, err := receiptKeys(t, "withdraw", "-data", dir, "-yes", rotated.Current.ID); err == nil || !strings.Contains(err.Error(), "rotate it first") {
		t.Errorf("withdrawing the current key: %v", err)
	}
	if _, _, err := receiptKeys(t, "withdraw", "-data", dir, "-yes", "rk_0000000000000000"); err == nil || !strings.Contains(err.Error(), "no receipt key") {
		t.Errorf("withdrawing an unknown key: %v", err)
	}
	if _, _, err := receiptKeys(t, "withdraw", "-data", dir, "-yes", first.KeyID); err != nil {
		t.Fatal(err)
	}
	withService(t, dir, func(svc *wire.Service) {
		if _, err := receipt.Verify(first.JWS, svc.JWKS()); err == nil {
			t.Error("a receipt of the withdrawn key still verifies")
		}
		if bytes.Contains(svc.JWKS(), []byte(first.KeyID)) {
			t.Errorf("the JWKS still lists the withdrawn key: %s", svc.JWKS())
		}
		third := settledReceipt(t, svc.System(), secret, "k3")
		if _, err := receipt.Verify(third.JWS, svc.JWKS()); err != nil {
			t.Errorf("a new receipt does not verify after the withdrawal: %v", err)
		}
	})
}

// A data directory without data is not taken for an empty service.
func TestReceiptKeysNeedTheServersData(t *testing.T) {
	for _, cmd := range []string{"list", "rotate"} {
		_, _, err := receiptKeys(t, cmd, "-data", t.TempDir())
		if !errors.Is(err, wire.ErrNoData) {
			t.Errorf("%s on an empty directory: %v", cmd, err)
		}
	}
}
