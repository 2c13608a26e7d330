package actors_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentpay/guard/actors"
)

// A store written before the owners' index of keys existed gets the index
// at the next start: the lists show every key again and the quotas count
// them, while another owner's keys stay out of both.
func TestOwnerKeyIndexIsBuiltOnAnOlderStore(t *testing.T) {
	h, _, owner, ownerSecret := practiceHarness(t, "100.00")
	ctx := context.Background()
	other, _ := h.newOwner(t, "p")
	ag, _, err := h.sys.CreateAgent(ctx, owner, "payer", nil)
	if err != nil {
		t.Fatal(err)
	}
	otherAgent, _, err := h.sys.CreateAgent(ctx, other, "payer", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range actors.MaxKeysPerAgent - 1 {
		if _, err := h.sys.CreateAgentKey(ctx, owner, ag.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sys.CreateAgentKey(ctx, other, otherAgent.ID); err != nil {
			t.Fatal(err)
		}
	}
	before, err := h.sys.ListKeys(owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sys.DropOwnerKeyIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if keys, err := h.sys.ListKeys(owner); err != nil || len(keys) != 0 {
		t.Fatalf("without its index the owner lists %d keys (%v): the lists do not read it", len(keys), err)
	}

	h.close()
	h.open("100.00")
	if owner, err = h.sys.Authenticate(ownerSecret); err != nil {
		t.Fatal(err)
	}
	after, err := h.sys.ListKeys(owner)
	if err != nil || len(after) != len(before) {
		t.Fatalf("after the restart the owner lists %d keys (%v), want the %d listed before", len(after), err, len(before))
	}
	for i := range after {
		if after[i].ID != before[i].ID {
			t.Fatalf("key %d is %s after the restart, %s before", i, after[i].ID, before[i].ID)
		}
	}
	page, err := h.sys.ListKeyPage(owner, actors.ListParams{AgentID: ag.ID})
	if err != nil || len(page.Items) != actors.MaxKeysPerAgent-1 {
		t.Fatalf("the agent's page holds %d keys (%v), want %d", len(page.Items), err, actors.MaxKeysPerAgent-1)
	}
	// The quota counts the keys the index found: one more fits, the next
	// does not.
	if _, err := h.sys.CreateAgentKey(ctx, owner, ag.ID); err != nil {
		t.Fatalf("the agent's last key: %v", err)
	}
	var e *actors.Error
	if _, err := h.sys.CreateAgentKey(ctx, owner, ag.ID); !errors.As(err, &e) || e.Code != actors.CodeQuotaExceeded {
		t.Fatalf("a key over the quota: %v, want quota_exceeded", err)
	}
}
