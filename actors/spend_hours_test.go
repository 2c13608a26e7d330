package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// TestListsPassOverHoursWithoutAMatch: a list filtered by a final status
// or a destination passes over the hours whose summary shows no match,
// and still gives exactly the spends the whole history holds, paged
// either way, for an agent and for the owner; also on a store whose
// summaries are built at the start, and with the summaries audited.
func TestListsPassOverHoursWithoutAMatch(t *testing.T) {
	h, clock, owner, ownerSecret := practiceHarness(t, "1000.00")
	ctx := context.Background()
	rules := vendorRules("api.vendor.com", "other.example.org")
	agents := []actors.Principal{
		guardtest.AgentPrincipal(t, h.sys, owner, "a", rules),
		guardtest.AgentPrincipal(t, h.sys, owner, "b", rules),
	}
	// Ten hours of settled spends by both agents; one declined spend
	// (over the per-spend limit) in hour 2, one failed (the magic 99.00)
	// in hour 5, and one to the other vendor, written in mixed case, in
	// hour 7.
	n := 0
	for hour := range 10 {
		for i := range 3 {
			n++
			in := vendorSpend("1.00", fmt.Sprintf("/h%d/%d", hour, i), fmt.Sprintf("k-%d", n))
			want := policy.StatusSettled
			switch {
			case hour == 2 && i == 1:
				in.Amount, want = policy.MustAmount("150.00"), policy.StatusDeclined
			case hour == 5 && i == 0:
				in.Amount, want = policy.MustAmount("99.00"), policy.StatusFailed
			case hour == 7 && i == 2:
				in.Destination, in.Resource.Host, in.URL = "Other.Example.org", "other.example.org", "https://other.example.org/h7"
			}
			if sp := createSpend(t, h.sys, agents[i%2], in); sp.Status != want {
				t.Fatalf("hour %d, spend %d: %s (%v), want %s", hour, i, sp.Status, sp.DeclineReason, want)
			}
			clock.Advance(time.Minute)
		}
		clock.Advance(time.Hour)
	}

	back := func(p actors.Principal, q actors.ListParams) []string { return listAll(t, h.sys, p, q) }
	// forth pages from the oldest with ending_before, and gives the
	// result newest first.
	forth := func(p actors.Principal, q actors.ListParams, oldest string) []string {
		out := []string{oldest}
		q.EndingBefore = oldest
		for {
			page, err := h.sys.ListSpends(p, q)
			if err != nil {
				t.Fatal(err)
			}
			got := pageIDs(t, page)
			out = append(slices.Clone(got), out...)
			if !page.HasMore {
				return out
			}
			q.EndingBefore = got[0]
		}
	}
	byHand := func(p actors.Principal, agentID string, status policy.Status, dest string) []string {
		var out []string
		for _, id := range back(p, actors.ListParams{AgentID: agentID, Limit: actors.MaxPageSize}) {
			raw, err := h.sys.GetSpend(ctx, p, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			var sp policy.Spend
			if err := json.Unmarshal(raw, &sp); err != nil {
				t.Fatal(err)
			}
			if (status == "" || sp.Status == status) && (dest == "" || strings.EqualFold(sp.Destination, dest)) {
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
		{"the owner, agent a", owner, agents[0].AgentID},
	}
	filters := []struct {
		status policy.Status
		dest   string
	}{
		{policy.StatusDeclined, ""}, {policy.StatusFailed, ""}, {policy.StatusSettled, ""}, {policy.StatusExpired, ""},
		{"", "OTHER.example.org"}, {"", "api.vendor.com"}, {"", "nothing.example.com"},
		{policy.StatusSettled, "other.example.org"}, {policy.StatusDeclined, "other.example.org"},
	}
	check := func(when string) {
		t.Helper()
		for _, sc := range scopes {
			for _, f := range filters {
				want := byHand(sc.p, sc.agentID, f.status, f.dest)
				q := actors.ListParams{AgentID: sc.agentID, Status: f.status, Destination: f.dest, Limit: 2}
				if got := back(sc.p, q); !slices.Equal(got, want) {
					t.Errorf("%s, %s, status %q, destination %q, newest first: %v, want %v", when, sc.name, f.status, f.dest, got, want)
				}
				if len(want) > 1 {
					if got := forth(sc.p, q, want[len(want)-1]); !slices.Equal(got, want) {
						t.Errorf("%s, %s, status %q, destination %q, oldest first: %v, want %v", when, sc.name, f.status, f.dest, got, want)
					}
				}
			}
		}
		if r := actors.Audit(h.store, nil); r.Err() != nil {
			t.Errorf("%s: %v", when, r.Problems)
		}
	}
	// The setup made what the filters look for.
	if got := byHand(owner, "", policy.StatusDeclined, ""); len(got) != 1 {
		t.Fatalf("the owner has %d declined spends, want 1", len(got))
	}
	if got := byHand(owner, "", "", "other.example.org"); len(got) != 1 {
		t.Fatalf("the owner has %d spends to the other vendor, want 1", len(got))
	}

	before := h.sys.PassedOver()
	check("as written")
	// A declined spend in one hour of ten: the other hours, of the owner's
	// index and of each agent's, are passed over unread.
	passed := h.sys.PassedOver()
	mark := passed
	back(owner, actors.ListParams{Status: policy.StatusDeclined})
	if got := h.sys.PassedOver() - mark; got < 9 {
		t.Errorf("the owner's declined spends passed over %d hours, want the 9 without one", got)
	}
	if passed == before {
		t.Fatal("no list passed over an hour")
	}

	// A store written before the summaries gets them at the start.
	if err := h.sys.DropSpendHours(ctx); err != nil {
		t.Fatal(err)
	}
	h.close()
	h.open("1000.00")
	if _, err := h.sys.Authenticate(ownerSecret); err != nil {
		t.Fatal(err)
	}
	check("built at the start")
	mark = h.sys.PassedOver()
	back(agents[1], actors.ListParams{Destination: "other.example.org"})
	if got := h.sys.PassedOver() - mark; got < 9 {
		t.Errorf("after the rebuild, agent b's spends to the other vendor passed over %d hours, want the 9 without one", got)
	}
}
