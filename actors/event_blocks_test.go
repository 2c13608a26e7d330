package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// TestEventListsPassOverBlocksWithoutAMatch: a quiet agent's events and
// a rare type are listed by passing over the blocks of busy events that
// cannot hold them, and the lists still give exactly what the whole
// history filtered by hand gives, paged either way; also on a store
// whose summaries are built at the start, and with them audited.
func TestEventListsPassOverBlocksWithoutAMatch(t *testing.T) {
	h, _, owner, ownerSecret := practiceHarness(t, "1000.00")
	ctx := context.Background()
	rules := vendorRules("api.vendor.com")
	quiet := guardtest.AgentPrincipal(t, h.sys, owner, "quiet", rules)
	busy := guardtest.AgentPrincipal(t, h.sys, owner, "busy", rules)
	createSpend(t, h.sys, quiet, vendorSpend("1.00", "/quiet/1", "q-1"))
	// More than three blocks of the busy agent's events.
	spendAtOnce(t, h.sys, busy, 16, 200)
	createSpend(t, h.sys, quiet, vendorSpend("1.00", "/quiet/2", "q-2"))

	type event struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		AgentID string `json:"agent_id"`
	}
	page := func(p actors.Principal, q actors.ListParams) ([]event, bool) {
		pg, err := h.sys.ListEvents(p, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []event
		for _, raw := range pg.Items {
			var ev event
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
		return out, pg.HasMore
	}
	back := func(p actors.Principal, q actors.ListParams) []event {
		var out []event
		for {
			got, more := page(p, q)
			out = append(out, got...)
			if !more {
				return out
			}
			q.StartingAfter = got[len(got)-1].ID
		}
	}
	forth := func(p actors.Principal, q actors.ListParams, oldest string) []string {
		out := []string{oldest}
		q.EndingBefore = oldest
		for {
			got, more := page(p, q)
			var ids []string
			for _, ev := range got {
				ids = append(ids, ev.ID)
			}
			out = append(ids, out...)
			if !more {
				return out
			}
			q.EndingBefore = ids[0]
		}
	}
	idsOf := func(evs []event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	all := back(owner, actors.ListParams{Limit: actors.MaxPageSize})
	if len(all) < 3*1024 {
		t.Fatalf("the setup made %d events, want more than three blocks", len(all))
	}
	// What an agent sees: its own events whose audience includes agents,
	// which for a settled spend is its spend.settled event.
	byHand := func(agentID, typ string, agentSees bool) []string {
		var out []string
		for _, ev := range all {
			if agentID != "" && ev.AgentID != agentID || typ != "" && !actorsMatchType(typ, ev.Type) ||
				agentSees && ev.Type != "spend.settled" {
				continue
			}
			out = append(out, ev.ID)
		}
		return out
	}
	cases := []struct {
		name      string
		p         actors.Principal
		q         actors.ListParams
		agentSees bool
	}{
		{"the quiet agent's key", quiet, actors.ListParams{}, true},
		{"the quiet agent's key, spend.*", quiet, actors.ListParams{Type: "spend.*"}, true},
		{"the owner, agent_id quiet", owner, actors.ListParams{AgentID: quiet.AgentID}, false},
		{"the owner, agent.created", owner, actors.ListParams{Type: "agent.created"}, false},
		{"the owner, api_key.*", owner, actors.ListParams{Type: "api_key.*"}, false},
		{"the owner, spend.declined", owner, actors.ListParams{Type: "spend.declined"}, false},
		{"the owner, busy's spend.settled", owner, actors.ListParams{AgentID: busy.AgentID, Type: "spend.settled"}, false},
	}
	check := func(when string) {
		t.Helper()
		for _, c := range cases {
			want := byHand(c.q.AgentID, c.q.Type, c.agentSees)
			if c.agentSees {
				want = byHand(c.p.AgentID, c.q.Type, true)
			}
			q := c.q
			q.Limit = 2
			if c.name == "the owner, busy's spend.settled" {
				q.Limit = actors.MaxPageSize
			}
			if got := idsOf(back(c.p, q)); !slices.Equal(got, want) {
				t.Errorf("%s, %s, newest first: %d events, want %d", when, c.name, len(got), len(want))
			}
			if len(want) > 1 && len(want) < 100 {
				if got := forth(c.p, q, want[len(want)-1]); !slices.Equal(got, want) {
					t.Errorf("%s, %s, oldest first: %v, want %v", when, c.name, got, want)
				}
			}
		}
		if r := actors.Audit(h.store, nil); r.Err() != nil {
			t.Errorf("%s: %v", when, r.Problems)
		}
	}
	if n := len(byHand(quiet.AgentID, "", true)); n != 2 {
		t.Fatalf("the quiet agent sees %d events, want its 2 settlements", n)
	}
	check("as written")
	mark := h.sys.PassedOver()
	back(quiet, actors.ListParams{})
	if got := h.sys.PassedOver() - mark; got < 2 {
		t.Errorf("the quiet agent's events passed over %d blocks, want the busy ones between its two", got)
	}

	if err := h.sys.DropEventBlocks(ctx); err != nil {
		t.Fatal(err)
	}
	h.close()
	h.open("1000.00")
	if _, err := h.sys.Authenticate(ownerSecret); err != nil {
		t.Fatal(err)
	}
	check("built at the start")
	mark = h.sys.PassedOver()
	back(owner, actors.ListParams{Type: "spend.declined"})
	if got := h.sys.PassedOver() - mark; got < 3 {
		t.Errorf("after the rebuild, the owner's spend.declined passed over %d blocks, want every busy one", got)
	}
}

// actorsMatchType is the type filter of the list: exact, or a family's
// prefix with "*".
func actorsMatchType(filter, typ string) bool {
	if p, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(typ, p)
	}
	return filter == typ
}

// TestRetentionDropsTheSummariesOfDeletedBlocks: once the retention sweep
// has deleted every event of a block, the block's summary goes too; the
// blocks of the events kept stay, and the audit finds each kept event's
// summary.
func TestRetentionDropsTheSummariesOfDeletedBlocks(t *testing.T) {
	h, _, owner, _ := practiceHarness(t, "1000.00")
	ctx := context.Background()
	rules := vendorRules("api.vendor.com")
	ag := guardtest.AgentPrincipal(t, h.sys, owner, "payer", rules)
	spendAtOnce(t, h.sys, ag, 8, 160)
	if blocks := h.sys.EventBlocks(owner.OwnerID, actors.EnvTest); len(blocks) < 2 {
		t.Fatalf("the setup filled %v blocks, want at least 2", blocks)
	}
	if _, err := h.sys.AdvanceClock(ctx, owner, actors.EventDeleteAfter+time.Hour); err != nil {
		t.Fatal(err)
	}
	// A young event: every older one goes.
	createSpend(t, h.sys, ag, vendorSpend("0.01", "/young", "young"))
	if _, err := h.sys.SweepExpiredEvents(ctx); err != nil {
		t.Fatal(err)
	}
	seqs, _ := h.sys.EventKeys(owner.OwnerID, actors.EnvTest)
	if len(seqs) != 1 {
		t.Fatalf("after the sweep %d events are left, want the young one", len(seqs))
	}
	if blocks := h.sys.EventBlocks(owner.OwnerID, actors.EnvTest); !slices.Equal(blocks, []uint64{seqs[0] / 1024}) {
		t.Errorf("after the sweep the summarized blocks are %v, want only %d, the young event's", blocks, seqs[0]/1024)
	}
	if r := actors.Audit(h.store, nil); r.Err() != nil {
		t.Error(r.Problems)
	}
}

// spendAtOnce makes conns*each practice spends of 0.01 as p, from conns
// goroutines at once.
func spendAtOnce(t *testing.T, sys *actors.System, p actors.Principal, conns, each int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range conns {
		wg.Go(func() {
			for i := range each {
				in := vendorSpend("0.01", fmt.Sprintf("/at-once/%d/%d", g, i), fmt.Sprintf("at-once-%d-%d", g, i))
				if _, err := sys.CreateSpend(context.Background(), p, in); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// vendorRules trust the destinations given, with limits of 100.00 a
// spend and 1,000.00 a day and a month.
func vendorRules(trusted ...string) *policy.RulesInput {
	return &policy.RulesInput{TrustedDestinations: &trusted, PerSpendLimit: strp("100.00"),
		ApprovalOver: strp("100.00"), DailyCap: strp("1000.00"), MonthlyCap: strp("1000.00")}
}
