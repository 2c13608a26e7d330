package actors

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// AuditReport summarizes a consistency audit.
type AuditReport struct {
	Spends   int
	Settled  int
	Active   int
	Agents   int
	Problems []string
}

// Err is nil when the audit found nothing wrong.
func (r AuditReport) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("audit: %d problems, first: %s", len(r.Problems), r.Problems[0])
}

// Audit recomputes every counter from the spends themselves and compares:
// each environment's held amount equals the holds of its active spends and
// its balance equals the initial pool minus what settled; each agent's
// counters equal the sums of its settled spends; no settled amount exceeds
// what the agent accepted; the active index lists exactly the spends that
// hold; the owners' index of keys lists exactly the keys; the summary of
// each spend's hour allows for it. initialPool maps "owner|env" to the pool it started with (deposits
// included). Run it on a store no service is writing to.
func Audit(store *persistence.Store, initialPool map[string]policy.Amount) AuditReport {
	var r AuditReport
	bad := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }

	type agentSums struct {
		day, month map[string]policy.Amount // by window key
		lifetime   policy.Amount
	}
	held := map[string]policy.Amount{}    // owner|env
	settled := map[string]policy.Amount{} // owner|env
	agents := map[string]*Agent{}
	sums := map[string]*agentSums{}
	active := map[string]bool{}

	_ = store.Scan(bAgents, nil, nil, false, func(k, v []byte) bool {
		var a Agent
		if json.Unmarshal(v, &a) != nil {
			bad("agent %s does not decode", k)
			return true
		}
		agents[a.ID] = &a
		sums[a.ID] = &agentSums{day: map[string]policy.Amount{}, month: map[string]policy.Amount{}}
		return true
	})
	r.Agents = len(agents)
	_ = store.Scan(bActive, nil, nil, false, func(k, _ []byte) bool {
		if i := indexByte(k, '|'); i > 0 {
			active[string(k[i+1:])] = true
		}
		return true
	})
	_ = store.Scan(bSpends, nil, nil, false, func(k, v []byte) bool {
		var sp policy.Spend
		if json.Unmarshal(v, &sp) != nil {
			bad("spend %s does not decode", k)
			return true
		}
		r.Spends++
		ag := agents[sp.AgentID]
		if ag == nil {
			bad("spend %s belongs to unknown agent %s", sp.ID, sp.AgentID)
			return true
		}
		envKey := string(join(ag.OwnerID, string(EnvOf(ag.Livemode))))
		if sp.Status.Holds() != active[sp.ID] {
			bad("spend %s is %s but the active index says %v", sp.ID, sp.Status, active[sp.ID])
		}
		if sp.Status.Holds() {
			r.Active++
			held[envKey] = held[envKey].Add(sp.Amount)
			if sp.Hold == nil || !sp.Hold.Amount.Equal(sp.Amount) {
				bad("active spend %s has no hold of its amount", sp.ID)
			}
		} else if sp.Hold != nil {
			bad("%s spend %s still shows a hold", sp.Status, sp.ID)
		}
		if sp.Status == policy.StatusSettled {
			r.Settled++
			if sp.AmountSettled == nil {
				bad("settled spend %s has no amount_settled", sp.ID)
				return true
			}
			if sp.AmountSettled.Cmp(sp.Amount) > 0 {
				bad("spend %s settled %s above its maximum %s", sp.ID, sp.AmountSettled, sp.Amount)
			}
			if sp.Settlement == nil || sp.Settlement.ReceiptID == nil {
				bad("settled spend %s has no receipt", sp.ID)
			}
			settled[envKey] = settled[envKey].Add(*sp.AmountSettled)
			s := sums[sp.AgentID]
			at := sp.UpdatedAt
			s.day[at.Format("2006-01-02")] = s.day[at.Format("2006-01-02")].Add(*sp.AmountSettled)
			s.month[at.Format("2006-01")] = s.month[at.Format("2006-01")].Add(*sp.AmountSettled)
			s.lifetime = s.lifetime.Add(*sp.AmountSettled)
		} else if sp.AmountSettled != nil {
			bad("%s spend %s has amount_settled", sp.Status, sp.ID)
		}
		return true
	})
	for id := range active {
		if ok, _ := store.Get(bSpends, []byte(id)); ok == nil {
			bad("active index names missing spend %s", id)
		}
	}
	_ = store.Scan(bEnvs, nil, nil, false, func(k, v []byte) bool {
		var st EnvState
		if json.Unmarshal(v, &st) != nil {
			bad("environment %s does not decode", k)
			return true
		}
		key := string(k)
		if !st.Held.Equal(held[key]) {
			bad("environment %s holds %s but its active spends hold %s", key, st.Held, held[key])
		}
		if initial, ok := initialPool[key]; ok {
			if want := initial.Sub(settled[key]); !st.Balance.Equal(want) {
				bad("environment %s balance is %s, want %s (initial %s minus settled %s)", key, st.Balance, want, initial, settled[key])
			}
		}
		if st.Balance.Sub(st.Held).Sub(st.ReserveFloor).Sign() < 0 {
			bad("environment %s pool is overdrawn: balance %s, held %s, floor %s", key, st.Balance, st.Held, st.ReserveFloor)
		}
		return true
	})
	for id, ag := range agents {
		var l policy.Ledger
		if raw, _ := store.Get(bLedgers, []byte(id)); raw == nil || json.Unmarshal(raw, &l) != nil {
			bad("agent %s has no ledger", id)
			continue
		}
		s := sums[id]
		if !l.LifetimeSettled.Equal(s.lifetime) {
			bad("agent %s lifetime counter %s, spends sum to %s", id, l.LifetimeSettled, s.lifetime)
		}
		if l.Day != "" && !l.DaySettled.Equal(s.day[l.Day]) {
			bad("agent %s day %s counter %s, spends sum to %s", id, l.Day, l.DaySettled, s.day[l.Day])
		}
		if l.Month != "" && !l.MonthSettled.Equal(s.month[l.Month]) {
			bad("agent %s month %s counter %s, spends sum to %s", id, l.Month, l.MonthSettled, s.month[l.Month])
		}
		if pol, ok := latestPolicy(store, id); ok {
			if l.DaySettled.Cmp(pol.DailyCap) > 0 || l.MonthSettled.Cmp(pol.MonthlyCap) > 0 {
				bad("agent %s exceeded a cap: day %s of %s, month %s of %s", id, l.DaySettled, pol.DailyCap, l.MonthSettled, pol.MonthlyCap)
			}
			if pol.LifetimeCap != nil && l.LifetimeSettled.Cmp(*pol.LifetimeCap) > 0 {
				bad("agent %s exceeded its lifetime cap", id)
			}
		}
		_ = ag
	}
	auditKeyIndex(store, bad)
	auditSpendHours(store, agents, bad)
	auditEventBlocks(store, bad)
	return r
}

// auditEventBlocks checks that the summary of each event's block may hold
// the event for every filter it passes (event_blocks.go).
func auditEventBlocks(store *persistence.Store, bad func(string, ...any)) {
	if mark, _ := store.Get(bMeta, []byte(eventBlocksIndexed)); mark == nil {
		return
	}
	_ = store.Scan(bEvents, nil, nil, false, func(k, v []byte) bool {
		var ev StoredEvent
		if len(k) < 9 || json.Unmarshal(v, &ev) != nil {
			bad("event %q does not decode", k)
			return true
		}
		var b eventSummary
		raw, _ := store.Get(bEventBlocks, blockKeyOf(k))
		if len(raw) != len(b) {
			bad("event %s has no summary of its block", ev.ID)
			return true
		}
		copy(b[:], raw)
		ok := b.mayHold(ev.Type, "", false)
		if f := family(ev.Type); f != "" {
			ok = ok && b.mayHold(f+"*", "", false)
		}
		if ev.AgentID != "" {
			ok = ok && b.mayHold(ev.Type, ev.AgentID, false)
			if hasAudience(ev.AudienceList, "agent") {
				ok = ok && b.mayHold(ev.Type, ev.AgentID, true)
			}
		}
		if !ok {
			bad("the summary of event %s's block leaves out its type %s or agent %q", ev.ID, ev.Type, ev.AgentID)
		}
		return true
	})
}

// auditSpendHours checks that the summary of each spend's hour, in its
// agent's index and its environment's, may hold the spend's status and
// destination: a list passing over that hour would miss the spend
// otherwise (spend_hours.go). Summaries may hold more; that is no fault.
func auditSpendHours(store *persistence.Store, agents map[string]*Agent, bad func(string, ...any)) {
	if mark, _ := store.Get(bMeta, []byte(spendHoursIndexed)); mark == nil {
		return
	}
	_ = store.Scan(bSpends, nil, nil, false, func(k, v []byte) bool {
		var sp policy.Spend
		hour, ok := spendHour(k)
		if json.Unmarshal(v, &sp) != nil || !ok {
			return true // reported by Audit
		}
		ag := agents[sp.AgentID]
		if ag == nil {
			return true
		}
		for _, key := range [][]byte{hourKey(hoursOfAgent, prefixOf(sp.AgentID), hour),
			hourKey(hoursOfEnv, prefixOf(ag.OwnerID, string(EnvOf(ag.Livemode))), hour)} {
			var h hourSummary
			raw, _ := store.Get(bSpendHours, key)
			if len(raw) != len(h) {
				bad("spend %s has no summary of its hour (%q)", sp.ID, key)
				continue
			}
			copy(h[:], raw)
			if !h.mayHold(sp.Status, sp.Destination) || !h.mayHold(sp.Status, "") || !h.mayHold("", sp.Destination) {
				bad("the summary of spend %s's hour (%q) leaves out its status %s or destination %s", sp.ID, key, sp.Status, sp.Destination)
			}
		}
		return true
	})
}

// auditKeyIndex checks that the owners' index of keys and the keys agree
// entry for entry, once the store has the index (keys_index.go).
func auditKeyIndex(store *persistence.Store, bad func(string, ...any)) {
	if mark, _ := store.Get(bMeta, []byte(ownerKeysIndexed)); mark == nil {
		return
	}
	want := map[string]string{} // index entry -> agent id
	_ = store.Scan(bKeys, nil, nil, false, func(k, v []byte) bool {
		var key APIKey
		if json.Unmarshal(v, &key) != nil {
			bad("key %s does not decode", k)
			return true
		}
		want[string(ownerKeyEntry(&key))] = key.AgentID
		return true
	})
	_ = store.Scan(bOwnerKeys, nil, nil, false, func(k, v []byte) bool {
		agentID, ok := want[string(k)]
		switch {
		case !ok:
			bad("the owners' key index holds %s, which names no key of that owner", k)
		case agentID != string(v):
			bad("the owners' key index gives %s agent %q, the key says %q", k, v, agentID)
		}
		delete(want, string(k))
		return true
	})
	for entry := range want {
		bad("key %s has no entry in the owners' key index", entry)
	}
}

func latestPolicy(store *persistence.Store, agentID string) (policy.Policy, bool) {
	p, found, _ := effectivePolicy(store, agentID, time.Now())
	return p, found
}
