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
	sp.Warn(policy.Warning{
		Message: "Warning: the same resource was bought " + now.Sub(r.at).Round(time.Second).String() +
			" ago by spend " + r.spendID + ".",
		Suggestion: "If this is a repeat of spend " + r.spendID + ", read its result with GET /v1/spends/" + r.spendID +
			" instead of paying again.",
	})
}

// remember notes a purchase for the duplicate window and forgets old ones.
// Purchases expire in the order they were noted, from the front of
// buyOrder, so a spend costs the same however many purchases the window
// holds (an agent paying 100 times a second holds 6,000).
func (a *agentActor) remember(sp *policy.Spend, now time.Time) {
	n := 0
	for n < len(a.buyOrder) && now.Sub(a.buyOrder[n].at) > policy.DuplicateWindow {
		b := a.buyOrder[n]
		// A later purchase of the same resource replaced the entry:
		// that one expires with its own place in the queue.
		if r, ok := a.recentBuys[b.key]; ok && !r.at.After(b.at) {
			delete(a.recentBuys, b.key)
		}
		n++
	}
	if n == len(a.buyOrder) {
		a.buyOrder = a.buyOrder[:0]
	} else if n > 0 {
		a.buyOrder = a.buyOrder[n:]
	}
	if paying(sp.Status) {
		k := sp.Resource.Method + " " + sp.Resource.Host + sp.Resource.Path
		a.purchases()[k] = recentPurchase{spendID: sp.ID, at: now}
		a.buyOrder = append(a.buyOrder, boughtAt{key: k, at: now})
	}
}

// paying tells whether a spend in status s has paid or may be paying its
// vendor: a payment waiting for the owner has bought nothing yet, and
// another purchase of its resource repeats nothing (it is noted when the
// owner approves it); one the vendor refused at once bought nothing.
func paying(s policy.Status) bool {
	return s != policy.StatusDeclined && s != policy.StatusPendingApproval && s != policy.StatusFailed
}

// forgetUnpaid drops the purchase sp noted once sp ends without paying
// (declined by the owner, failed at the rail, expired or cancelled): a
// later spend of the same resource repeats nothing, and the suggestion to
// read the first one's result would point at a payment that has none.
func (a *agentActor) forgetUnpaid(sp *policy.Spend) {
	switch sp.Status {
	case policy.StatusDeclined, policy.StatusFailed, policy.StatusExpired, policy.StatusCancelled:
	default:
		return
	}
	k := sp.Resource.Method + " " + sp.Resource.Host + sp.Resource.Path
	if r, ok := a.recentBuys[k]; ok && r.spendID == sp.ID {
		delete(a.recentBuys, k)
	}
}

// boughtAt is a purchase in the order remember noted it.
type boughtAt struct {
	key string
	at  time.Time
}

func (a *agentActor) purchases() map[string]recentPurchase {
	if a.recentBuys == nil {
		a.recentBuys = make(map[string]recentPurchase)
	}
	return a.recentBuys
}
