package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
)

// A key made while its agent was being archived, durable only after the
// archive read the agent's keys, is revoked by the archive's second look:
// it stops working, and the owner hears of it.
func TestArchiveRevokesAKeyMadeMeanwhile(t *testing.T) {
	h, _, owner, _ := practiceHarness(t, "100.00")
	ctx := context.Background()
	ag, _, err := h.sys.CreateAgent(ctx, owner, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sys.ChangeAgent(ctx, owner, ag.ID, actors.ActionArchive); err != nil {
		t.Fatal(err)
	}
	secret, err := h.sys.AddKeyBehindArchive(ctx, owner.OwnerID, ag.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sys.Authenticate(secret); err != nil {
		t.Fatalf("setup: the late key does not work before the second look: %v", err)
	}
	if err := h.sys.RevokeLateKeys(ctx, owner, ag.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sys.Authenticate(secret); !errors.Is(err, actors.ErrInvalidKey) {
		t.Fatalf("the late key after the second look: %v, want it refused", err)
	}
	page, err := h.sys.ListEvents(owner, actors.ListParams{Type: "api_key.revoked"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("%d api_key.revoked events (%v), want the late key's", len(page.Items), err)
	}
}

// Keys made while their agents are archived, at the same moment: whichever
// wins, no key of an archived agent works afterwards.
func TestArchiveAndKeyCreationRace(t *testing.T) {
	clock := guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	h := newHarness(t, clock, "100.00")
	ctx := context.Background()
	for o := range 3 {
		owner, _ := h.newOwner(t, fmt.Sprintf("o%d", o))
		for i := range 5 {
			ag, _, err := h.sys.CreateAgent(ctx, owner, fmt.Sprintf("a%d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var secret string
			wg.Add(2)
			go func() {
				defer wg.Done()
				if k, err := h.sys.CreateAgentKey(ctx, owner, ag.ID); err == nil {
					secret = k.Secret
				}
			}()
			go func() {
				defer wg.Done()
				if _, err := h.sys.ChangeAgent(ctx, owner, ag.ID, actors.ActionArchive); err != nil {
					t.Error(err)
				}
			}()
			wg.Wait()
			if secret == "" {
				continue // the key was refused: the archive came first
			}
			if _, err := h.sys.Authenticate(secret); !errors.Is(err, actors.ErrInvalidKey) {
				t.Fatalf("owner %d agent %d: a key of the archived agent still works (%v)", o, i, err)
			}
		}
	}
}
