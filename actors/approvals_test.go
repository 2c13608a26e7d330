package actors_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/rail"
)

type approvalFixture struct {
	h     *harness
	owner actors.Principal
	agent actors.Principal
	n     int
}

func newApprovalFixture(t *testing.T) *approvalFixture {
	t.Helper()
	clock := guardtest.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	h := newHarness(t, clock, "100.00")
	owner, _ := h.newOwner(t, "o")
	trusted := []string{"api.vendor.com"}
	agent := guardtest.AgentPrincipal(t, h.sys, owner, "a", &policy.RulesInput{TrustedDestinations: &trusted})
	return &approvalFixture{h: h, owner: owner, agent: agent}
}

// pending creates a spend waiting for the owner (an untrusted destination).
func (f *approvalFixture) pending(t *testing.T) policy.Spend {
	t.Helper()
	f.n++
	in := actors.SpendInput{Amount: policy.MustAmount("2.00"), Currency: "usdc", Destination: "shop.example.org",
		Resource: policy.Resource{Host: "shop.example.org", Path: "/item", Method: "GET"},
		URL:      "https://shop.example.org/item", IdempotencyKey: "k" + string(rune('a'+f.n))}
	r, err := f.h.sys.CreateSpend(context.Background(), f.agent, in)
	if err != nil {
		t.Fatal(err)
	}
	var sp policy.Spend
	if err := json.Unmarshal(r.Body, &sp); err != nil || sp.Status != policy.StatusPendingApproval {
		t.Fatalf("want a pending spend, got %s (%v)", r.Body, err)
	}
	return sp
}

func (f *approvalFixture) decide(sp policy.Spend, decision string) (policy.Spend, error) {
	r, err := f.h.sys.DecideApproval(context.Background(), f.owner.OwnerID, actors.Decision{
		ApprovalID: sp.Approval.ID, Decision: decision, ItemsHash: sp.Approval.ItemsHash, Channel: "console", Reference: "test"})
	var out policy.Spend
	if err == nil {
		_ = json.Unmarshal(r.Body, &out)
	}
	return out, err
}

// approveUnder publishes edit, then approves sp, which the new rules must
// decline with policy_changed. It returns the declined spend and the
// version published.
func (f *approvalFixture) approveUnder(t *testing.T, sp policy.Spend, edit actors.PolicyEdit) (policy.Spend, policy.Policy) {
	t.Helper()
	pol, err := f.h.sys.PublishPolicy(context.Background(), f.owner, f.agent.AgentID, edit, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.decide(sp, actors.DecisionApprove)
	if err != nil || got.Status != policy.StatusDeclined || *got.DeclineReason != policy.ReasonPolicyChanged {
		t.Fatalf("approve under changed rules: %v %s %v", err, got.Status, got.DeclineReason)
	}
	return got, pol
}

func (f *approvalFixture) read(t *testing.T, id string) policy.Spend {
	t.Helper()
	quiesce(t, f.h)
	body, err := f.h.sys.GetSpend(context.Background(), f.agent, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sp policy.Spend
	_ = json.Unmarshal(body, &sp)
	return sp
}

// tightenAbove publishes rules tighter than sp was created under that
// still let it pass (a per-spend limit of 3.00 for its 2.00).
func (f *approvalFixture) tightenAbove(t *testing.T, sp policy.Spend) policy.Policy {
	t.Helper()
	pol, err := f.h.sys.PublishPolicy(context.Background(), f.owner, f.agent.AgentID, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.PerSpendLimit = policy.MustAmount("3.00")
		return r, nil
	}, nil)
	if err != nil || pol.Version == sp.PolicyVersion {
		t.Fatalf("publishing: version %d (the spend's %d), %v", pol.Version, sp.PolicyVersion, err)
	}
	return pol
}

func conflict(err error) bool {
	var e *actors.Error
	return errors.As(err, &e) && e.Code == actors.CodeConflict
}

func TestApproveSettles(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t)
	got, err := f.decide(sp, actors.DecisionApprove)
	if err != nil || got.Status != policy.StatusApproved || got.Approval.Status != "approved" {
		t.Fatalf("approve: %v %+v", err, got.Status)
	}
	// The hold ended with the approval's lifetime while it waited; now
	// it lasts until the payment settles or fails.
	if sp.Hold == nil || sp.Hold.ExpiresAt == nil || got.Hold == nil || got.Hold.ExpiresAt != nil {
		t.Fatalf("hold while waiting %+v, once approved %+v: want an expiry, then none", sp.Hold, got.Hold)
	}
	if done := f.read(t, sp.ID); done.Status != policy.StatusSettled || done.AmountSettled == nil {
		t.Fatalf("after approval the spend is %s, want settled", done.Status)
	}
	if r := actors.Audit(f.h.store, nil); r.Err() != nil {
		t.Fatal(r.Err())
	}
}

// A spend that waited for the owner across a restart (or the agent's
// passivation, which reloads it the same way) settles when approved: it
// keeps the payment authorization it was created with. Rules published
// while it waited, which still let it pass, are the version applied: in
// the spend and in its receipt (spec 2.1).
func TestApproveAfterRestartSettles(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t)
	pol := f.tightenAbove(t, sp)
	f.h.close()
	f.h.open("100.00")
	if _, err := f.decide(sp, actors.DecisionApprove); err != nil {
		t.Fatal(err)
	}
	done := f.read(t, sp.ID)
	if done.Status != policy.StatusSettled || done.AmountSettled == nil {
		t.Fatalf("approved after a restart, the spend is %s: %s", done.Status, done.Message)
	}
	// Its receipt names the rules it was decided under.
	rv, rh := receiptPolicy(t, f, done)
	if done.PolicyVersion != pol.Version || rv != pol.Version || rh != pol.Hash {
		t.Fatalf("spend policy_version %d, receipt's %d hash %q: want %d and %q, the rules it was approved under",
			done.PolicyVersion, rv, rh, pol.Version, pol.Hash)
	}
	if r := actors.Audit(f.h.store, nil); r.Err() != nil {
		t.Fatal(r.Err())
	}
}

func TestRejectDeclinesAndReleases(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t)
	got, err := f.decide(sp, actors.DecisionReject)
	if err != nil || got.Status != policy.StatusDeclined || *got.DeclineReason != policy.ReasonOwnerRejected || got.Hold != nil {
		t.Fatalf("reject: %v %+v", err, got)
	}
	b, _ := f.h.sys.Balance(context.Background(), f.agent)
	if b.Held != "0.00" || b.PendingCount != 0 {
		t.Fatalf("after a rejection held %s, pending %d", b.Held, b.PendingCount)
	}
	if _, err := f.decide(sp, actors.DecisionApprove); !conflict(err) {
		t.Fatalf("a second decision must be refused, got %v", err)
	}
}

// A caller that reads right after its answer sees its own change: the
// agent publishes the snapshot that balance and check read before it
// answers, for the spend it created, the owner's decision and the
// settlement alike.
func TestReadsAfterAnAnswerSeeItsChange(t *testing.T) {
	f := newApprovalFixture(t)
	ctx := context.Background()
	// A slow publication makes an answer sent before it visible to the
	// read; one sent after it is right however long it takes.
	t.Cleanup(actors.SlowViewPublication(2 * time.Millisecond))
	for round := range 20 {
		sp := f.pending(t)
		b, err := f.h.sys.Balance(ctx, f.agent)
		if err != nil || b.Held != "2.00" || b.PendingCount != 1 {
			t.Fatalf("round %d: right after a pending spend, held %s and pending %d (%v), want 2.00 and 1", round, b.Held, b.PendingCount, err)
		}
		// The owner rejects it, or the agent cancels it.
		ended := "a rejection"
		if round%2 == 0 {
			_, err = f.decide(sp, actors.DecisionReject)
		} else {
			ended = "a cancellation"
			_, err = f.h.sys.CancelSpend(ctx, f.agent, sp.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err = f.h.sys.Balance(ctx, f.agent)
		if err != nil || b.Held != "0.00" || b.PendingCount != 0 {
			t.Fatalf("round %d: right after %s, held %s and pending %d (%v), want 0.00 and 0", round, ended, b.Held, b.PendingCount, err)
		}

		// A payment to a trusted vendor is answered once it settled.
		before := policy.MustAmount(b.Components.DailyRemaining)
		r, err := f.h.sys.CreateSpend(ctx, f.agent, actors.SpendInput{Amount: policy.MustAmount("0.50"), Currency: "usdc",
			Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/r", Method: "GET"},
			URL: "https://api.vendor.com/r", IdempotencyKey: fmt.Sprintf("settle-%d", round)})
		if err != nil {
			t.Fatal(err)
		}
		var paid policy.Spend
		if err := json.Unmarshal(r.Body, &paid); err != nil || paid.Status != policy.StatusSettled || paid.AmountSettled == nil {
			t.Fatalf("round %d: want a settled spend, got %s (%v)", round, r.Body, err)
		}
		b, err = f.h.sys.Balance(ctx, f.agent)
		if err != nil {
			t.Fatal(err)
		}
		after := policy.MustAmount(b.Components.DailyRemaining)
		if got := before.Sub(after); got.Cmp(*paid.AmountSettled) != 0 || b.Held != "0.00" {
			t.Fatalf("round %d: right after settling %s, the daily remaining fell by %s and %s is held, want %s and 0.00",
				round, paid.AmountSettled.Display(), got.Display(), b.Held, paid.AmountSettled.Display())
		}
	}
}

// Exactly one decision wins when an approval and a rejection race.
func TestConcurrentDecisionsOneWins(t *testing.T) {
	f := newApprovalFixture(t)
	for round := 0; round < 4; round++ {
		sp := f.pending(t)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, d := range []string{actors.DecisionApprove, actors.DecisionReject} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = f.decide(sp, d)
			}()
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !conflict(err):
				t.Fatalf("unexpected error %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d decisions won, want exactly 1 (%v)", round, wins, errs)
		}
	}
	quiesce(t, f.h) // the approved payments settle after their decisions are answered
	if r := actors.Audit(f.h.store, nil); r.Err() != nil {
		t.Fatal(r.Err())
	}
}

func TestDecisionsRefusedAfterExpiryOrCancel(t *testing.T) {
	f := newApprovalFixture(t)
	expiring := f.pending(t)
	cancelled := f.pending(t)
	if _, err := f.h.sys.CancelSpend(context.Background(), f.agent, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.decide(cancelled, actors.DecisionApprove); !conflict(err) {
		t.Fatalf("approving a cancelled spend: %v", err)
	}
	f.h.clock.Advance(16 * time.Minute)
	quiesce(t, f.h)
	if _, err := f.decide(expiring, actors.DecisionApprove); !conflict(err) {
		t.Fatalf("approving an expired spend: %v", err)
	}
	if got := f.read(t, expiring.ID); got.Status != policy.StatusExpired {
		t.Fatalf("status %s, want expired", got.Status)
	}
	other := f.pending(t)
	other.Approval.ItemsHash = "sha256:" + "00"
	if _, err := f.decide(other, actors.DecisionApprove); !conflict(err) {
		t.Fatalf("a decision for other items must be refused: %v", err)
	}
	if _, err := f.h.sys.DecideApproval(context.Background(), "not-the-owner", actors.Decision{ApprovalID: other.Approval.ID, Decision: actors.DecisionApprove}); err == nil {
		t.Fatal("another owner decided this approval")
	}
}

// A spend approved after the rules changed to decline it is declined with
// policy_changed and never paid.
func TestApprovalUnderChangedRulesIsDeclined(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t)
	blocked := []string{"*.example.org"}
	got, _ := f.approveUnder(t, sp, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.BlockedDestinations, _ = parsePatterns(blocked)
		return r, nil
	})
	if done := f.read(t, sp.ID); done.Status != policy.StatusDeclined || done.Settlement != nil {
		t.Fatalf("the spend was paid after all: %+v", done.Status)
	}
	// The approval is closed, in the spend's summary and in its own
	// record, as approval.decided says: nobody is left waiting on it.
	if got.Approval == nil || got.Approval.Status != "rejected" {
		t.Errorf("approval in the declined spend: %+v, want status rejected", got.Approval)
	}
	for _, p := range []actors.Principal{f.agent, f.owner} {
		apr, err := f.h.sys.GetApproval(p, sp.Approval.ID)
		if err != nil || apr.Status != "rejected" || apr.SpendStatus != policy.StatusDeclined {
			t.Errorf("GET approval as %s: %+v %v, want rejected with a declined spend", p.Kind, apr, err)
		}
	}
}

func parsePatterns(ss []string) ([]policy.Pattern, error) {
	out := make([]policy.Pattern, 0, len(ss))
	for _, s := range ss {
		p, err := policy.ParsePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Rules that expire while a payment waits decline it when the owner then
// approves (policy_expired), though their version did not change: a new
// payment would be declined for the same reason.
func TestApprovalAfterTheRulesExpiredIsDeclined(t *testing.T) {
	f := newApprovalFixture(t)
	until := f.h.clock.Now().Add(10 * time.Minute)
	if _, err := f.h.sys.PublishPolicy(context.Background(), f.owner, f.agent.AgentID, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.ValidUntil = &until // an earlier expiry tightens: it applies at once
		return r, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	sp := f.pending(t)
	f.h.clock.Advance(11 * time.Minute) // the approval (15 min) is still open
	got, err := f.decide(sp, actors.DecisionApprove)
	if err != nil || got.Status != policy.StatusDeclined || *got.DeclineReason != policy.ReasonPolicyExpired {
		t.Fatalf("approve after the rules expired: %v %s %v", err, got.Status, got.DeclineReason)
	}
	if done := f.read(t, sp.ID); done.Status != policy.StatusDeclined || done.Settlement != nil {
		t.Fatalf("the spend was paid under expired rules: %s", done.Status)
	}
}

// max_pending limits how many payments may ask; it never turns an owner's
// approval into a decline, though the rules changed and other payments
// still wait: approving shortens the queue.
func TestApprovalIsNotRefusedForTheQueueItShortens(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t)
	f.pending(t)
	f.pending(t)
	if _, err := f.h.sys.PublishPolicy(context.Background(), f.owner, f.agent.AgentID, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.MaxPending = 2 // a new version, below the queue
		return r, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := f.decide(sp, actors.DecisionApprove)
	if err != nil || got.Status != policy.StatusApproved {
		t.Fatalf("approve with the queue over max_pending: %v %s %v", err, got.Status, got.DeclineReason)
	}
}

// Archiving the agent cancels its waiting payments, and their approvals
// with them: none is left pending for a decision that can no longer come.
func TestArchivingClosesApprovals(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t)
	if _, err := f.h.sys.ChangeAgent(context.Background(), f.owner, f.agent.AgentID, actors.ActionArchive); err != nil {
		t.Fatal(err)
	}
	quiesce(t, f.h)
	body, err := f.h.sys.GetSpend(context.Background(), f.owner, sp.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got policy.Spend
	_ = json.Unmarshal(body, &got)
	if got.Status != policy.StatusCancelled || got.Approval == nil || got.Approval.Status != "cancelled" {
		t.Fatalf("after archiving: spend %s, approval %+v", got.Status, got.Approval)
	}
}

// A decline at approval under newer rules reports the rules that declined
// it: their version, and the detail of the amount rule (spec 2.1, 2.4).
func TestPolicyChangedDeclineReportsTheNewRules(t *testing.T) {
	f := newApprovalFixture(t)
	sp := f.pending(t) // 2.00
	got, pol := f.approveUnder(t, sp, func(r policy.Rules) (policy.Rules, *actors.Error) {
		r.PerSpendLimit = policy.MustAmount("1.00")
		return r, nil
	})
	if got.PolicyVersion != pol.Version || got.PolicyVersion == sp.PolicyVersion {
		t.Errorf("policy_version %d, want the version that declined it, %d (was %d)", got.PolicyVersion, pol.Version, sp.PolicyVersion)
	}
	if r := got.Rule; r == nil || r.Name != policy.ReasonPerSpendLimit || r.Limit != "1.00" || r.Requested != "2.00" {
		t.Errorf("rule %+v, want the per_spend_limit detail (limit 1.00, requested 2.00)", got.Rule)
	}
	if done := f.read(t, sp.ID); done.PolicyVersion != pol.Version || done.Rule == nil {
		t.Errorf("the stored spend: version %d, rule %+v", done.PolicyVersion, done.Rule)
	}
}

// A spend approved under newer rules that still let it pass reports that
// version (spec 2.1). Stopped between the approval and the vendor's
// answer, the service picks the payment up at its next start from the
// active record, which must carry the newer version too: the payment ends
// still reporting the rules it was approved under, and so does its receipt.
func TestApprovedUnderNewerRulesKeepsTheirVersionAcrossARestart(t *testing.T) {
	f := newApprovalFixture(t)
	// A vendor that answers only when the service stops waiting.
	f.h.close()
	f.h.vendor = rail.SimulatedOptions{Latency: time.Hour}
	f.h.open("100.00")
	sp := f.pending(t)
	pol := f.tightenAbove(t, sp)
	got, err := f.decide(sp, actors.DecisionApprove)
	if err != nil || got.Status != policy.StatusApproved || got.PolicyVersion != pol.Version {
		t.Fatalf("approve: %v, status %s, version %d (want approved under %d)", err, got.Status, got.PolicyVersion, pol.Version)
	}
	f.h.close()
	f.h.vendor = rail.SimulatedOptions{}
	f.h.open("100.00")
	// The next start verifies the payment (it never re-sends it).
	var done policy.Spend
	for range 50 {
		f.h.clock.Advance(2 * time.Second)
		if done = f.read(t, sp.ID); done.Status.Terminal() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !done.Status.Terminal() {
		t.Fatalf("after the restart the spend is still %s", done.Status)
	}
	if done.Status != policy.StatusSettled || done.PolicyVersion != pol.Version {
		t.Fatalf("the spend ended %s under version %d; want settled under %d, the version it was approved under",
			done.Status, done.PolicyVersion, pol.Version)
	}
	if v, h := receiptPolicy(t, f, done); v != pol.Version || h != pol.Hash {
		t.Fatalf("the receipt names version %d hash %q; the spend was approved under %d %q", v, h, pol.Version, pol.Hash)
	}
	if r := actors.Audit(f.h.store, nil); r.Err() != nil {
		t.Fatal(r.Err())
	}
}

// receiptPolicy is the policy version and hash a settled spend's receipt
// signs.
func receiptPolicy(t *testing.T, f *approvalFixture, sp policy.Spend) (int, string) {
	t.Helper()
	rc, err := f.h.sys.Receipt(f.agent, *sp.Settlement.ReceiptID)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(rc.JWS, ".")
	if len(parts) != 3 {
		t.Fatalf("receipt %q is not a compact JWS", rc.JWS)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("receipt payload %q: %v", parts[1], err)
	}
	var claims struct {
		PolicyVersion int    `json:"policy_version"`
		PolicyHash    string `json:"policy_hash"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims.PolicyVersion, claims.PolicyHash
}

// A loosening that waits is announced (policy.updated) when it comes due
// even if the service restarted meanwhile and nothing wakes the agent: the
// start arms its timer again. One that came due while the service was down
// is announced at the start. Either way the agent's record then names the
// version in effect.
func TestWaitingLooseningIsAnnouncedAfterARestart(t *testing.T) {
	for _, c := range []struct {
		name string
		down time.Duration // how long the service is down
	}{{"due after the start", 0}, {"due while down", 2 * time.Hour}} {
		t.Run(c.name, func(t *testing.T) {
			f := newApprovalFixture(t)
			ctx := context.Background()
			pol, err := f.h.sys.PublishPolicy(ctx, f.owner, f.agent.AgentID, func(r policy.Rules) (policy.Rules, *actors.Error) {
				r.PerSpendLimit = r.PerSpendLimit.Add(policy.MustAmount("1.00"))
				return r, nil
			}, nil)
			if err != nil || !pol.EffectiveAt.After(f.h.clock.Now()) {
				t.Fatalf("publishing a loosening: effective %v (now %v), %v", pol.EffectiveAt, f.h.clock.Now(), err)
			}
			f.h.close()
			f.h.clock.Advance(c.down)
			f.h.open("100.00")
			if c.down == 0 {
				f.h.clock.Advance(2 * time.Hour)
			}
			var ag actors.Agent
			for range 200 {
				if ag, err = f.h.sys.Agent(f.owner, f.agent.AgentID); err != nil {
					t.Fatal(err)
				}
				if ag.PolicyVersion == pol.Version {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if ag.PolicyVersion != pol.Version {
				t.Fatalf("the agent names version %d after its loosening %d came due", ag.PolicyVersion, pol.Version)
			}
			page, err := f.h.sys.ListEvents(f.owner, actors.ListParams{Type: "policy.updated"})
			if err != nil {
				t.Fatal(err)
			}
			announced := 0
			for _, id := range eventObjectIDs(t, page) {
				if id == pol.ID {
					announced++
				}
			}
			if announced != 1 {
				t.Fatalf("policy.updated for %s seen %d times, want once", pol.ID, announced)
			}
		})
	}
}

// Approvals that ran out while the service was down expire at its start in
// the order they ran out, so their spend.expired events keep that order.
func TestApprovalsThatRanOutWhileDownExpireInOrder(t *testing.T) {
	f := newApprovalFixture(t)
	var want []string
	ranOut := map[string]time.Time{}
	for range 5 {
		sp := f.pending(t)
		want = append(want, sp.ID)
		ranOut[sp.ID] = sp.Approval.ExpiresAt
		f.h.clock.Advance(time.Second)
	}
	f.h.close()
	f.h.clock.Advance(2 * time.Hour)
	f.h.open("100.00")
	var got []string
	for range 200 {
		page, err := f.h.sys.ListEvents(f.owner, actors.ListParams{Type: "spend.expired"})
		if err != nil {
			t.Fatal(err)
		}
		got = eventObjectIDs(t, page)
		if len(got) == len(want) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("spend.expired came for %v, want %v (the order the approvals ran out)", got, want)
	}
	// Each expired when its approval ran out, not when the start found it.
	for id, at := range ranOut {
		r, err := f.h.sys.GetSpend(context.Background(), f.agent, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var sp policy.Spend
		if err := json.Unmarshal(r, &sp); err != nil {
			t.Fatal(err)
		}
		if sp.Status != policy.StatusExpired || !sp.UpdatedAt.Equal(at) {
			t.Errorf("spend %s: %s at %v, want expired at %v", id, sp.Status, sp.UpdatedAt, at)
		}
	}
	if r := actors.Audit(f.h.store, nil); r.Err() != nil {
		t.Fatal(r.Err())
	}
}

// eventObjectIDs are the ids of the objects of a page of events, oldest
// first.
func eventObjectIDs(t *testing.T, page actors.Page) []string {
	t.Helper()
	ids := make([]string, 0, len(page.Items))
	for i := len(page.Items) - 1; i >= 0; i-- {
		var e struct {
			Data struct {
				Object struct {
					ID string `json:"id"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(page.Items[i], &e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.Data.Object.ID)
	}
	return ids
}
