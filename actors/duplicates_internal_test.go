package actors

import (
	"strconv"
	"testing"
	"time"

	"github.com/agentpay/guard/policy"
)

// The duplicate window forgets purchases as they age out, whatever order
// of resources and repeats: it holds exactly the purchases of the last
// 60 s, each with its newest spend.
func TestRememberKeepsExactlyTheWindow(t *testing.T) {
	var a agentActor
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	type bought struct {
		id string
		at time.Time
	}
	newest := map[string]bought{} // the model: every purchase ever, newest per resource
	var all []time.Time           // and when each was made
	for i := range 5_000 {
		now := start.Add(time.Duration(i) * 100 * time.Millisecond) // 10 per second
		path := "/item/" + strconv.Itoa(i%900)                      // repeats every 90 s
		if i%3 == 0 {
			path = "/hot/" + strconv.Itoa(i%40) // repeats within the window
		}
		status := policy.StatusApproved
		switch {
		case i%7 == 0:
			status = policy.StatusDeclined // declined spends buy nothing
		case i%11 == 0:
			status = policy.StatusPendingApproval // nor do spends waiting for the owner
		}
		sp := &policy.Spend{ID: "sp" + strconv.Itoa(i), Status: status,
			Resource: policy.Resource{Method: "GET", Host: "api.vendor.com", Path: path}}
		a.remember(sp, now)
		if status != policy.StatusDeclined && status != policy.StatusPendingApproval {
			newest["GET api.vendor.com"+path] = bought{sp.ID, now}
			all = append(all, now)
		}
		want := 0
		for k, b := range newest {
			inWindow := now.Sub(b.at) <= policy.DuplicateWindow
			if inWindow {
				want++
			}
			r, ok := a.recentBuys[k]
			if inWindow && (!ok || r.spendID != b.id) {
				t.Fatalf("step %d: %s bought by %s %v ago is not remembered as such (%+v)", i, k, b.id, now.Sub(b.at), r)
			}
		}
		if len(a.recentBuys) != want {
			t.Fatalf("step %d: the window holds %d purchases, want %d", i, len(a.recentBuys), want)
		}
		recent := 0
		for _, at := range all {
			if now.Sub(at) <= policy.DuplicateWindow {
				recent++
			}
		}
		if len(a.buyOrder) != recent {
			t.Fatalf("step %d: the expiry queue holds %d entries for %d purchases in the window", i, len(a.buyOrder), recent)
		}
	}
}
