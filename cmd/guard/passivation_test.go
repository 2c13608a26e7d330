package main_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// TestAgentPassivatesAfterUnknownOutcome: an agent whose idle timeout
// fires while a payment is still being verified must passivate once the
// verification is over. The receive timeout of the actor library fires
// once and then stays off, so an actor that declines to passivate at that
// moment has to arm it again, or it stays in memory for good.
func TestAgentPassivatesAfterUnknownOutcome(t *testing.T) {
	const idle = 300 * time.Millisecond
	ctx, sys, owner := openWithIdleTimeout(t, idle)
	trusted := []string{"api.vendor.com"}
	perSpend, daily, monthly := "100.00", "500.00", "5000.00"
	agent := guardtest.AgentPrincipal(t, sys, owner, "agent", &policy.RulesInput{TrustedDestinations: &trusted,
		PerSpendLimit: &perSpend, ApprovalOver: &perSpend, DailyCap: &daily, MonthlyCap: &monthly})

	// 98.00 is the practice amount whose outcome is unknown at first; the
	// service verifies it a couple of seconds later and it settles.
	r, err := sys.CreateSpend(ctx, agent, reportSpend("98.00", "api.vendor.com", "passivation-1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != policy.StatusProcessing {
		t.Fatalf("spend is %s, want processing", r.Status)
	}
	id := spendID(t, r.Body)
	for deadline := time.Now().Add(30 * time.Second); ; {
		body, err := sys.GetSpend(ctx, agent, id, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st := spendStatus(t, body); st == policy.StatusSettled {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("spend still %s after 30 s", st)
		}
	}

	// Nothing is left to do: the agent must passivate within a few idle
	// timeouts.
	deadline := time.Now().Add(10 * idle)
	for sys.ActiveAgents() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d agent actors still active %s after the spend settled (idle timeout %s)",
				sys.ActiveAgents(), 10*idle, idle)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadsKeepAgentActivated: an agent that only reads (polls its balance)
// is in use. Passivating it would reload its history from disk on the next
// read, over and over; it must stay activated while it is read and
// passivate once the reads stop.
func TestReadsKeepAgentActivated(t *testing.T) {
	const idle = 200 * time.Millisecond
	ctx, sys, owner := openWithIdleTimeout(t, idle)
	trusted := []string{"api.vendor.com"}
	agent := guardtest.AgentPrincipal(t, sys, owner, "agent", &policy.RulesInput{TrustedDestinations: &trusted})

	tick := time.NewTicker(idle / 10)
	defer tick.Stop()
	if _, err := sys.Balance(ctx, agent); err != nil { // activates it
		t.Fatal(err)
	}
	for end := time.Now().Add(8 * idle); time.Now().Before(end); <-tick.C {
		// Looked at before the read, which would activate it again.
		if n := sys.ActiveAgents(); n != 1 {
			t.Fatalf("%d agent actors active while the agent is read every %s (idle timeout %s), want 1", n, idle/10, idle)
		}
		if _, err := sys.Balance(ctx, agent); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * idle)
	for sys.ActiveAgents() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("agent still active %s after its reads stopped (idle timeout %s)", 10*idle, idle)
		}
		<-tick.C
	}
}

// openWithIdleTimeout opens a service whose agents passivate after idle,
// with one practice owner.
func openWithIdleTimeout(t *testing.T, idle time.Duration) (context.Context, *actors.System, actors.Principal) {
	t.Helper()
	cfg := wire.Defaults()
	cfg.Data = t.TempDir()
	cfg.IdleTimeout = idle
	svc, err := wire.Open(cfg, wire.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	sys := svc.System()
	return ctx, sys, guardtest.PracticeOwner(t, sys, "Owner", "owner@passivation.invalid")
}

// TestApprovalAfterPassivation: a spend waits for the owner while its
// agent, idle, passivates; the owner's approval reloads the agent from
// disk, and the payment settles with the authorization and rules it was
// created with (before, the reloaded spend had lost its nonce and the
// rail refused it).
func TestApprovalAfterPassivation(t *testing.T) {
	const idle = 300 * time.Millisecond
	ctx, sys, owner := openWithIdleTimeout(t, idle)
	trusted := []string{"api.vendor.com"}
	agent := guardtest.AgentPrincipal(t, sys, owner, "agent", &policy.RulesInput{TrustedDestinations: &trusted})

	r, err := sys.CreateSpend(ctx, agent, reportSpend("2.00", "new.vendor.io", "passivation-approval"))
	if err != nil {
		t.Fatal(err)
	}
	var pending policy.Spend
	if err := json.Unmarshal(r.Body, &pending); err != nil || pending.Status != policy.StatusPendingApproval {
		t.Fatalf("want a spend waiting for the owner, got %s (%v)", r.Body, err)
	}

	deadline := time.Now().Add(10 * idle)
	for sys.ActiveAgents() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not passivate within %s while its spend waited (idle timeout %s)", 10*idle, idle)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if _, err := sys.DecideApproval(ctx, owner.OwnerID, actors.Decision{ApprovalID: pending.Approval.ID,
		Decision: actors.DecisionApprove, ItemsHash: pending.Approval.ItemsHash, Channel: "console", Reference: "test"}); err != nil {
		t.Fatal(err)
	}
	var done policy.Spend
	for deadline := time.Now().Add(30 * time.Second); ; {
		body, err := sys.GetSpend(ctx, agent, pending.ID, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &done); err != nil {
			t.Fatal(err)
		}
		if done.Status != policy.StatusApproved && done.Status != policy.StatusProcessing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spend still %s 30 s after the approval", done.Status)
		}
	}
	if done.Status != policy.StatusSettled || done.Settlement == nil || done.Settlement.ReceiptID == nil {
		t.Fatalf("approved after passivation, the spend is %s: %s", done.Status, done.Message)
	}
}

// reportSpend buys https://host/report for amount.
func reportSpend(amount, host, idempotencyKey string) actors.SpendInput {
	return actors.SpendInput{Amount: policy.MustAmount(amount), Currency: "usdc", Destination: host,
		URL: "https://" + host + "/report", Resource: policy.Resource{Host: host, Path: "/report", Method: "GET"},
		IdempotencyKey: idempotencyKey}
}
