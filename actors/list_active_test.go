package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// A list filtered to a status that holds allowance (pending_approval,
// approved, processing) is made from the index of active spends: it must
// give, page by page in both directions, exactly what the whole history
// filtered by hand gives, for an agent and for its owner.
func TestListActiveStatusesMatchesTheHistory(t *testing.T) {
	h, clock, owner, _ := practiceHarness(t, "1000.00")
	ctx := context.Background()
	trusted := []string{"api.vendor.com"}
	pending := 20
	rules := &policy.RulesInput{TrustedDestinations: &trusted, MaxPending: &pending, PerSpendLimit: strp("100.00"),
		ApprovalOver: strp("100.00"), DailyCap: strp("1000.00"), MonthlyCap: strp("1000.00")}
	agents := []actors.Principal{
		guardtest.AgentPrincipal(t, h.sys, owner, "a", rules),
		guardtest.AgentPrincipal(t, h.sys, owner, "b", rules),
	}
	// Settled, waiting for the owner (an untrusted host), and processing
	// (98.00), interleaved across both agents and the clock.
	for i := range 18 {
		in := vendorSpend("1.00", fmt.Sprintf("/r%d", i), fmt.Sprintf("k-%d", i))
		switch i % 3 {
		case 1:
			in.Destination, in.Resource.Host, in.URL = "other.example.org", "other.example.org", "https://other.example.org/r"
		case 2:
			in.Amount = policy.MustAmount("98.00")
		}
		createSpend(t, h.sys, agents[i%2], in)
		// Apart in time, but short of the first verification (a second),
		// which would settle the processing ones.
		clock.Advance(10 * time.Millisecond)
	}

	type spend struct {
		ID          string `json:"id"`
		Status      string `json:"status"`
		Destination string `json:"destination"`
	}
	ids := func(page actors.Page) []string { return pageIDs(t, page) }
	everything := func(p actors.Principal, q actors.ListParams) []string { return listAll(t, h.sys, p, q) }
	// byHand filters the unfiltered history by status, or by destination
	// (without case) when one is given.
	byHand := func(p actors.Principal, agentID string, status policy.Status, dest ...string) []string {
		var out []string
		for _, id := range everything(p, actors.ListParams{AgentID: agentID, Limit: actors.MaxPageSize}) {
			sp, err := h.sys.GetSpend(ctx, p, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			var s spend
			if err := json.Unmarshal(sp, &s); err != nil {
				t.Fatal(err)
			}
			if len(dest) == 0 && s.Status == string(status) || len(dest) > 0 && strings.EqualFold(s.Destination, dest[0]) {
				out = append(out, id)
			}
		}
		return out
	}
	scopes := []struct {
		name    string
		p       actors.Principal
		agentID string
	}{
		{"agent a", agents[0], ""},
		{"agent b", agents[1], ""},
		{"the owner", owner, ""},
		{"the owner, agent b", owner, agents[1].AgentID},
	}
	for _, sc := range scopes {
		// Settled is read from the history, passing over the spends
		// without its bytes; the others from the active spends.
		for _, status := range []policy.Status{policy.StatusPendingApproval, policy.StatusProcessing, policy.StatusApproved, policy.StatusSettled} {
			want := byHand(sc.p, sc.agentID, status)
			if status != policy.StatusApproved && len(want) < 3 {
				t.Fatalf("%s: the setup made %d %s spends, want at least 3", sc.name, len(want), status)
			}
			got := everything(sc.p, actors.ListParams{AgentID: sc.agentID, Status: status, Limit: 2})
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s, pages of 2 going back: %v, want %v", sc.name, status, got, want)
			}
			if len(want) < 3 {
				continue
			}
			// ending_before the oldest: the page just newer than it, newest
			// first, with more beyond it when there are.
			page, err := h.sys.ListSpends(sc.p, actors.ListParams{AgentID: sc.agentID, Status: status, Limit: 2,
				EndingBefore: want[len(want)-1]})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(page); !slices.Equal(got, want[len(want)-3:len(want)-1]) || page.HasMore != (len(want) > 3) {
				t.Errorf("%s, %s, ending_before the oldest: %v (has_more %v), want %v (has_more %v)", sc.name, status,
					got, page.HasMore, want[len(want)-3:len(want)-1], len(want) > 3)
			}
		}
	}
	// The destination filter, read from the history without decoding the
	// spends whose destination differs, compares without case.
	for _, sc := range scopes {
		for _, dest := range []string{"Other.Example.ORG", "api.vendor.com", "nothing.example.com"} {
			want := byHand(sc.p, sc.agentID, "", dest)
			got := everything(sc.p, actors.ListParams{AgentID: sc.agentID, Destination: dest, Limit: 4})
			if !slices.Equal(got, want) || dest != "nothing.example.com" && len(want) == 0 {
				t.Errorf("%s, destination %s: %v, want %v (not none)", sc.name, dest, got, want)
			}
		}
	}
	// A cursor the list does not hold is still refused.
	var e *actors.Error
	if _, err := h.sys.ListSpends(agents[0], actors.ListParams{Status: policy.StatusPendingApproval,
		StartingAfter: "spd_00000000000000000000000000000000"}); !errors.As(err, &e) || e.Param != "starting_after" {
		t.Errorf("an unknown cursor: %v, want a 400 on starting_after", err)
	}
}

// pageIDs are the ids of a page of spends, in its order.
func pageIDs(t *testing.T, page actors.Page) []string {
	t.Helper()
	var out []string
	for _, raw := range page.Items {
		var sp struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &sp); err != nil {
			t.Fatal(err)
		}
		out = append(out, sp.ID)
	}
	return out
}

// listAll pages through a list of spends newest first, with
// starting_after, and returns every id.
func listAll(t *testing.T, sys *actors.System, p actors.Principal, q actors.ListParams) []string {
	t.Helper()
	var out []string
	for {
		page, err := sys.ListSpends(p, q)
		if err != nil {
			t.Fatal(err)
		}
		got := pageIDs(t, page)
		out = append(out, got...)
		if !page.HasMore {
			return out
		}
		q.StartingAfter = got[len(got)-1]
	}
}
