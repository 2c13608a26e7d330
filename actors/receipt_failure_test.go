package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/rail"
)

// brokenSigner cannot sign: its key store is gone, say.
type brokenSigner struct{}

func (brokenSigner) Sign(policy.ReceiptClaims) (string, string, error) {
	return "", "", errors.New("signing key unavailable")
}

// A payment the vendor settled stays settled when its receipt cannot be
// signed: the money moved. Its receipt_id is null, in the spend and in its
// spend.settled event, which still carries settlement.receipt_id (spec
// 6.2), so that a receiver walking the receipts sees the gap.
func TestASettledSpendWhoseReceiptCannotBeSignedSaysSo(t *testing.T) {
	store, err := persistence.Open(persistence.Options{Path: filepath.Join(t.TempDir(), "journal.db")})
	if err != nil {
		t.Fatal(err)
	}
	clock := guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	sys, err := actors.New(actors.Config{Store: store, Clock: clock, Signer: brokenSigner{},
		PracticeRail: rail.NewSimulated(rail.SimulatedOptions{}), PracticePool: policy.MustAmount("100.00")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close(); _ = store.Close() })
	ctx := context.Background()
	owner := guardtest.PracticeOwner(t, sys, "o", "o@owner.invalid")
	trusted := []string{"api.vendor.com"}
	payer := guardtest.AgentPrincipal(t, sys, owner, "payer", &policy.RulesInput{TrustedDestinations: &trusted})

	res, err := sys.CreateSpend(ctx, payer, actors.SpendInput{Amount: policy.MustAmount("1.00"), Currency: "usdc",
		Destination: "api.vendor.com", URL: "https://api.vendor.com/x", IdempotencyKey: "k1",
		Resource: policy.Resource{Host: "api.vendor.com", Path: "/x", Method: "GET"}})
	if err != nil || res.Err != nil {
		t.Fatalf("CreateSpend: %v %v", err, res.Err)
	}
	var sp struct {
		Status     string `json:"status"`
		Settlement struct {
			ReceiptID *string `json:"receipt_id"`
		} `json:"settlement"`
	}
	if err := json.Unmarshal(res.Body, &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Status != "settled" || sp.Settlement.ReceiptID != nil {
		t.Fatalf("status %s receipt_id %v, want settled without a receipt", sp.Status, sp.Settlement.ReceiptID)
	}

	page, err := sys.ListEvents(owner, actors.ListParams{Type: "spend.settled"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Fatalf("%d spend.settled events, want 1", len(page.Items))
	}
	var ev struct {
		Data struct {
			Object map[string]json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(page.Items[0], &ev); err != nil {
		t.Fatal(err)
	}
	if got := string(ev.Data.Object["settlement"]); got != `{"receipt_id":null}` {
		t.Errorf("spend.settled carries settlement %s, want {\"receipt_id\":null}", got)
	}
}
