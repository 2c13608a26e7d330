package actors

import (
	"time"

	"github.com/agentpay/guard/policy"
)

// recentPurchase is a resource this agent paid for (or is paying for)
// within the duplicate-purchase window.
type recentPurchase struct {
	spendID string
	at      time.Time
}

// duplicateWarning warns when the same resource was bought within 60 s under
// another idempotency key. The payment still proceeds: the owner's rules
// allow it, and two purchases can be intended.
func (a *agentActor) duplicateWarning(sp *policy.Spend, now time.Time) {
	if sp.Status == policy.StatusDeclined {
		return
	}
	k := sp.Resource.Method + " " + sp.Resource.Host + sp.Resource.Path
	r, ok := a.purchases()[k]
	if !ok || now.Sub(r.at) > policy.DuplicateWindow {
		return
	}
	sp.Message += " Warning: the same resource was bought " + now.Sub(r.at).Round(time.Second).String() +
		" ago by spend " + r.spendID + "."
	sp.NextAction.Suggestions = append(sp.NextAction.Suggestions,
		"If this is a repeat of spend "+r.spendID+", read its result with GET /v1/spends/"+r.spendID+" instead of paying again.")
}

// remember notes a purchase for the duplicate window and forgets old ones.
func (a *agentActor) remember(sp *policy.Spend, now time.Time) {
	m := a.purchases()
	for k, r := range m {
		if now.Sub(r.at) > policy.DuplicateWindow {
			delete(m, k)
		}
	}
	if sp.Status != policy.StatusDeclined {
		m[sp.Resource.Method+" "+sp.Resource.Host+sp.Resource.Path] = recentPurchase{spendID: sp.ID, at: now}
	}
}

func (a *agentActor) purchases() map[string]recentPurchase {
	if a.recentBuys == nil {
		a.recentBuys = make(map[string]recentPurchase)
	}
	return a.recentBuys
}
