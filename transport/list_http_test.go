package transport_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// listIDs fetches one page and returns its ids and has_more.
func listIDs(t *testing.T, s *guardtest.Server, key, path string) ([]string, bool) {
	t.Helper()
	r := call(t, s, http.MethodGet, path, key, nil, nil)
	mustStatus(t, r, http.StatusOK)
	data, ok := r.Body["data"].([]any)
	if r.Body["object"] != "list" || !ok {
		t.Fatalf("GET %s is not a list: %s", path, r.Raw)
	}
	ids := make([]string, 0, len(data))
	for _, d := range data {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	more, _ := r.Body["has_more"].(bool)
	return ids, more
}

func settledSpend(t *testing.T, e *env, path string) string {
	t.Helper()
	sp := created(t, e.srv, e.agentKey, spendBody("0.10", "api.vendor.com", path))
	return sp["id"].(string)
}

// Paging back with starting_after and forward with ending_before visits
// every spend exactly once, newest first within each page, while new spends
// keep arriving.
func TestSpendPaginationBothWaysUnderInserts(t *testing.T) {
	e := start(t)
	var made []string // oldest first
	for i := 0; i < 23; i++ {
		made = append(made, settledSpend(t, e, fmt.Sprintf("/p/%d", i)))
	}
	// Backward (older) pages: inserts during the walk are newer than every
	// cursor, so they never appear and nothing is skipped or repeated.
	var back []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "/v1/spends?limit=5"
		if cursor != "" {
			q += "&starting_after=" + cursor
		}
		ids, more := listIDs(t, e.srv, e.agentKey, q)
		back = append(back, ids...)
		settledSpend(t, e, fmt.Sprintf("/during-back/%d", pages)) // a concurrent insert
		if !more {
			break
		}
		cursor = ids[len(ids)-1]
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(back) != len(made) {
		t.Fatalf("walking back saw %d spends, want the %d that existed when it began", len(back), len(made))
	}
	for i, id := range back {
		if want := made[len(made)-1-i]; id != want {
			t.Fatalf("item %d is %s, want %s (newest first, none lost or repeated)", i, id, want)
		}
	}

	// Forward (newer) pages from the oldest: every spend newer than the
	// cursor appears once, including the ones inserted meanwhile.
	all, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?limit=50")
	seen := map[string]bool{}
	cursor = made[0]
	var forward []string
	for pages := 0; ; pages++ {
		ids, more := listIDs(t, e.srv, e.agentKey, "/v1/spends?limit=4&ending_before="+cursor)
		for i := 1; i < len(ids); i++ {
			if ids[i-1] < ids[i] {
				t.Fatalf("page %v is not newest first", ids)
			}
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s appeared twice", id)
			}
			seen[id] = true
		}
		forward = append(forward, ids...)
		if !more || len(ids) == 0 {
			break
		}
		cursor = ids[0] // the newest of this page
		if pages > 20 {
			t.Fatal("pagination does not end")
		}
	}
	if len(forward) != len(all)-1 {
		t.Fatalf("walking forward saw %d spends, want every one newer than the oldest (%d)", len(forward), len(all)-1)
	}
}

// A created[gte] older than 30 days is clipped to the retention window,
// not refused; events older than 30 days are not served.
func TestEventsWindowIsClipped(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	e := start(t, guardtest.WithClock(clock))
	old := settledSpend(t, e, "/old")
	clock.Advance(31 * 24 * time.Hour)
	fresh := settledSpend(t, e, "/fresh")

	since := url.QueryEscape(clock.Now().Add(-40 * 24 * time.Hour).Format(time.RFC3339))
	r := call(t, e.srv, http.MethodGet, "/v1/events?limit=50&created[gte]="+since, e.agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	sawFresh := false
	for _, d := range r.Body["data"].([]any) {
		ev := d.(map[string]any)
		obj := obj(t, obj(t, ev, "data"), "object")
		switch obj["id"] {
		case old:
			t.Fatalf("an event of %s, 31 days old, was served: %v", old, ev)
		case fresh:
			sawFresh = true
		}
		created, err := time.Parse(time.RFC3339Nano, ev["created"].(string))
		if err != nil || clock.Now().Sub(created) > 30*24*time.Hour {
			t.Fatalf("event %v is outside the 30-day window", ev)
		}
	}
	if !sawFresh {
		t.Fatalf("the recent spend's events are missing: %s", r.Raw)
	}
	// The old spend itself is still readable: GET /v1/spends is the history.
	mustStatus(t, getSpend(t, e.srv, e.agentKey, old, ""), http.StatusOK)
}

// One agent can neither read nor cancel another agent's spend, approval or
// events, even under the same owner; the owner sees both.
func TestAgentsAreIsolated(t *testing.T) {
	e := start(t)
	_, otherKey := e.srv.NewAgent(t, e.owner.TestKey, testPolicy)
	pending := created(t, e.srv, e.agentKey, spendBody("1.00", "untrusted.example.org", "/x"))
	if pending["status"] != "pending_approval" {
		t.Fatalf("want a pending spend, got %v", pending["status"])
	}
	id := pending["id"].(string)
	apr := obj(t, pending, "approval")["id"].(string)

	wantError(t, call(t, e.srv, http.MethodGet, "/v1/spends/"+id, otherKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/spends/"+id+"/cancel", otherKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/approvals/"+apr, otherKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	for _, path := range []string{"/v1/spends?limit=50", "/v1/events?limit=50"} {
		ids, _ := listIDs(t, e.srv, otherKey, path)
		r := call(t, e.srv, http.MethodGet, path, otherKey, nil, nil)
		for _, d := range r.Body["data"].([]any) {
			if d.(map[string]any)["agent_id"] == e.agentID {
				t.Fatalf("%s shows the other agent's objects: %v", path, ids)
			}
		}
	}
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/spends/"+id, e.owner.TestKey, nil, nil), http.StatusOK)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/approvals/"+apr, e.owner.TestKey, nil, nil), http.StatusOK)
	// The spend is still pending: the refused cancel changed nothing.
	if got := getSpend(t, e.srv, e.agentKey, id, "").Body["status"]; got != "pending_approval" {
		t.Fatalf("status %v after another agent's cancel", got)
	}
	// The owner's events include approval.requested; an agent's never do
	// (its audience is the owner only).
	r := call(t, e.srv, http.MethodGet, "/v1/events?type=approval.*", e.agentKey, nil, nil)
	if n := len(r.Body["data"].([]any)); n != 0 {
		t.Fatalf("an agent sees %d owner-only events", n)
	}
	r = call(t, e.srv, http.MethodGet, "/v1/events?type=approval.*", e.owner.TestKey, nil, nil)
	if n := len(r.Body["data"].([]any)); n == 0 {
		t.Fatal("the owner does not see approval.requested")
	}
}

// A created[...] bound in Unix seconds beyond what a timestamp can name is
// refused with a 400, not wrapped round: a far-future upper bound once
// turned into one in the far past and answered an empty page with 200.
// The last second of year 9999 is still a bound, and works as one.
func TestCreatedFilterBounds(t *testing.T) {
	e := start(t)
	id := settledSpend(t, e, "/bounds")
	for _, path := range []string{"/v1/spends", "/v1/events"} {
		for _, q := range []string{"created[lte]=9223372036854775807", "created[gte]=9223372036854775807",
			"created[lt]=253402300800", "created[gt]=-62135596801"} {
			r := call(t, e.srv, http.MethodGet, path+"?"+q, e.agentKey, nil, nil)
			param := q[:strings.IndexByte(q, '=')]
			e := wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", param)
			if msg, _ := e["message"].(string); !strings.Contains(msg, "year 9999") {
				t.Errorf("%s?%s: the message does not give the range: %q", path, q, msg)
			}
		}
	}
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?created[lte]=253402300799"); len(ids) != 1 || ids[0] != id {
		t.Errorf("created[lte] at the end of year 9999: %v, want [%s]", ids, id)
	}
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?created[gte]=253402300799"); len(ids) != 0 {
		t.Errorf("created[gte] at the end of year 9999: %v, want none", ids)
	}
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?created[gte]=-62135596800"); len(ids) != 1 {
		t.Errorf("created[gte] at the start of year 1: %v, want [%s]", ids, id)
	}
}

// Balance, policy and me take no parameters (spec 4.7), and say so rather
// than ignore one: an agent asking for another agent's policy must not
// read its own as the answer.
func TestReadsWithoutParametersRefuseThem(t *testing.T) {
	e := start(t)
	otherID, _ := e.srv.NewAgent(t, e.owner.TestKey, testPolicy)
	for _, c := range []struct{ path, key, param string }{
		{"/v1/balance?foo=1", e.agentKey, "foo"},
		{"/v1/policy?agent_id=" + otherID, e.agentKey, "agent_id"},
		{"/v1/me?verbose", e.agentKey, "verbose"},
		{"/v1/me?x=1", e.owner.TestKey, "x"},
	} {
		r := call(t, e.srv, http.MethodGet, c.path, c.key, nil, nil)
		er := wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", c.param)
		if msg, _ := er["message"].(string); !strings.Contains(msg, "takes no parameters") {
			t.Errorf("GET %s: message %q does not say what to fix", c.path, msg)
		}
	}
	for _, path := range []string{"/v1/balance", "/v1/policy", "/v1/me"} {
		mustStatus(t, call(t, e.srv, http.MethodGet, path, e.agentKey, nil, nil), http.StatusOK)
	}
}

// An events cursor must be an event the caller could have been shown:
// each owner and environment numbers its own events, so another owner's
// (or, for an agent key, another agent's) event id would place the page by
// a count that is not the caller's. Both get the 400 of an unknown cursor.
func TestEventCursorsOfOthersAreRefused(t *testing.T) {
	e := start(t)
	otherID, otherKey := e.srv.NewAgent(t, e.owner.TestKey, testPolicy)
	settledSpend(t, e, "/mine")
	created(t, e.srv, otherKey, spendBody("0.10", "api.vendor.com", "/theirs"))
	stranger := e.srv.NewOwner(t)
	_, strangerAgentKey := e.srv.NewAgent(t, stranger.TestKey, testPolicy)
	created(t, e.srv, strangerAgentKey, spendBody("0.10", "api.vendor.com", "/stranger"))

	mine, _ := listIDs(t, e.srv, e.agentKey, "/v1/events")
	theirs, _ := listIDs(t, e.srv, otherKey, "/v1/events")
	strangers, _ := listIDs(t, e.srv, stranger.TestKey, "/v1/events")
	if len(mine) == 0 || len(theirs) == 0 || len(strangers) == 0 {
		t.Fatalf("events: %d mine, %d of the other agent, %d of the other owner", len(mine), len(theirs), len(strangers))
	}
	for _, c := range []struct{ key, cursor, who string }{
		{e.owner.TestKey, strangers[0], "an owner with another owner's event"},
		{e.agentKey, strangers[0], "an agent with another owner's event"},
		{e.agentKey, theirs[0], "an agent with another agent's event"},
	} {
		for _, param := range []string{"starting_after", "ending_before"} {
			r := call(t, e.srv, http.MethodGet, "/v1/events?"+param+"="+c.cursor, c.key, nil, nil)
			if r.Status != http.StatusBadRequest {
				t.Errorf("%s as %s: %d, want 400: %s", c.who, param, r.Status, r.Raw)
				continue
			}
			wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", param)
		}
	}
	// The caller's own cursors still page, and an owner pages over its
	// agents' events.
	if rest, _ := listIDs(t, e.srv, e.agentKey, "/v1/events?starting_after="+mine[0]); fmt.Sprint(rest) != fmt.Sprint(mine[1:]) {
		t.Errorf("paging after my own first event: %v, want %v", rest, mine[1:])
	}
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/events?starting_after="+theirs[0], e.owner.TestKey, nil, nil), http.StatusOK)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/events?agent_id="+otherID+"&ending_before="+theirs[len(theirs)-1], e.owner.TestKey, nil, nil), http.StatusOK)
}

// A spends cursor must be a spend the list holds. Spend ids sort by the
// time inside them, so any well-formed id would place a page; another
// agent's, another owner's or one never issued is reported, not guessed at.
func TestSpendCursorsMustBeOnTheList(t *testing.T) {
	e := start(t)
	first := settledSpend(t, e, "/a")
	settledSpend(t, e, "/b")
	otherID, otherKey := e.srv.NewAgent(t, e.owner.TestKey, testPolicy)
	theirs := created(t, e.srv, otherKey, spendBody("0.10", "api.vendor.com", "/theirs"))["id"].(string)
	stranger := e.srv.NewOwner(t)
	_, strangerAgentKey := e.srv.NewAgent(t, stranger.TestKey, testPolicy)
	strangers := created(t, e.srv, strangerAgentKey, spendBody("0.10", "api.vendor.com", "/s"))["id"].(string)
	never := "spd_ffffffffffffffffffffffffffffffff"

	for _, c := range []struct{ key, query, why string }{
		{e.agentKey, "starting_after=" + theirs, "an agent with another agent's spend"},
		{e.agentKey, "ending_before=" + theirs, "an agent with another agent's spend"},
		{e.agentKey, "starting_after=" + never, "an id never issued"},
		{e.owner.TestKey, "starting_after=" + strangers, "an owner with another owner's spend"},
		{e.owner.TestKey, "agent_id=" + e.agentID + "&starting_after=" + theirs, "an owner's agent filter with another agent's spend"},
		{e.owner.LiveKey, "starting_after=" + first, "a live key with a practice spend"},
	} {
		param := "starting_after"
		if strings.HasPrefix(c.query, "ending_before") {
			param = "ending_before"
		}
		r := call(t, e.srv, http.MethodGet, "/v1/spends?"+c.query, c.key, nil, nil)
		er := wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", param)
		if msg, _ := er["message"].(string); !strings.Contains(msg, "earlier page") {
			t.Errorf("%s: message %q", c.why, msg)
		}
	}
	// The caller's own spends are cursors, for the owner too, with or
	// without the agent filter.
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?ending_before="+first); len(ids) != 1 {
		t.Errorf("ending_before the first spend: %v, want the second", ids)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/spends?starting_after="+theirs); len(ids) != 2 {
		t.Errorf("owner, starting_after the newest spend: %v, want the two before it", ids)
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/spends?agent_id="+otherID+"&ending_before="+theirs); len(ids) != 0 {
		t.Errorf("owner, ending_before the other agent's only spend: %v", ids)
	}
}

// The destination filter finds a declined spend whose invalid destination
// was kept as written, in any case; an empty or overlong filter is refused.
func TestDestinationFilter(t *testing.T) {
	e := start(t)
	declined := created(t, e.srv, e.agentKey, `{"amount":"1.00","destination":"LocalHost"}`)
	if declined["status"] != "declined" || declined["destination"] != "LocalHost" {
		t.Fatalf("spend to LocalHost: %s %v", declined["status"], declined["destination"])
	}
	settled := settledSpend(t, e, "/x")
	for _, c := range []struct {
		filter string
		want   any
	}{
		{"LocalHost", declined["id"]},
		{"localhost", declined["id"]},
		{"LOCALHOST", declined["id"]},
		{"API.Vendor.com", settled},
	} {
		ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?destination="+c.filter)
		if len(ids) != 1 || ids[0] != c.want {
			t.Errorf("destination=%s: %v, want %v", c.filter, ids, c.want)
		}
	}
	for _, q := range []string{"destination=", "destination=" + strings.Repeat("a", 254)} {
		r := call(t, e.srv, http.MethodGet, "/v1/spends?"+q, e.agentKey, nil, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "destination")
	}
}

// limit is digits only: "+5" is not a number the documents allow.
func TestLimitIsDigitsOnly(t *testing.T) {
	e := start(t)
	for _, q := range []string{"+5", "-0", "5.0", " 5", "0x5", "1000000000000"} {
		r := call(t, e.srv, http.MethodGet, "/v1/spends?limit="+url.QueryEscape(q), e.agentKey, nil, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "limit")
	}
	if _, more := listIDs(t, e.srv, e.agentKey, "/v1/spends?limit=05"); more {
		t.Error("limit=05 on an empty list has more")
	}
}

// The events' type filter takes one type or one family; anything else is
// a 400 naming type, not an empty page that looks like "no such events".
// A parameter given twice is refused on every list and on the long poll.
func TestEventTypeFilterAndRepeatedParameters(t *testing.T) {
	e := start(t)
	settledSpend(t, e, "/x")
	created(t, e.srv, e.agentKey, spendBody("99.00", "api.vendor.com", "/y")) // failed (magic amount)
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=spend.settled"); len(ids) != 1 {
		t.Fatalf("type=spend.settled: %d events, want 1", len(ids))
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=spend.*"); len(ids) != 2 {
		t.Fatalf("type=spend.*: %d events, want settled and failed", len(ids))
	}
	// A type of the right shape the service does not know is not an error:
	// the list of types is open.
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=spend.refunded"); len(ids) != 0 {
		t.Fatalf("type=spend.refunded: %d events, want 0", len(ids))
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/events?type=spe*"); len(ids) < 2 {
		t.Fatalf("type=spe*: %d events, want approved and settled", len(ids))
	}
	for _, f := range []string{"", "spend", "Spend.Settled", "spend.*,approval.*", "*.settled", "spend.", ".settled", "spend..settled", "spend settled", "spend.**"} {
		r := call(t, e.srv, http.MethodGet, "/v1/events?type="+url.QueryEscape(f), e.owner.TestKey, nil, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "type")
	}
	for _, c := range []struct{ path, param string }{
		{"/v1/events?type=spend.settled&type=spend.failed", "type"},
		{"/v1/events?limit=5&limit=2", "limit"},
		{"/v1/spends?limit=5&limit=2", "limit"},
		{"/v1/spends?status=settled&status=declined", "status"},
	} {
		r := call(t, e.srv, http.MethodGet, c.path, e.agentKey, nil, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", c.param)
	}
	id := settledSpend(t, e, "/y")
	r := call(t, e.srv, http.MethodGet, "/v1/spends/"+id+"?wait_seconds=1&wait_seconds=2", e.agentKey, nil, nil)
	wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "wait_seconds")
}

// An agents cursor must be an agent the list holds: an id never issued or
// another owner's agent is reported, as for spends and keys, instead of
// placing the page (and telling where the other owner's agent sorts).
func TestAgentCursorsMustBeOnTheList(t *testing.T) {
	e := start(t)
	mine, _ := e.srv.NewAgent(t, e.owner.TestKey, testPolicy)
	stranger := e.srv.NewOwner(t)
	theirs, _ := e.srv.NewAgent(t, stranger.TestKey, testPolicy)
	for _, q := range []string{
		"starting_after=agt_ffffffffffffffffffffffffffffffff",
		"starting_after=" + theirs,
		"ending_before=" + theirs,
	} {
		param, _, _ := strings.Cut(q, "=")
		r := call(t, e.srv, http.MethodGet, "/v1/agents?"+q, e.owner.TestKey, nil, nil)
		er := wantError(t, r, http.StatusBadRequest, "invalid_request_error", "parameter_invalid", param)
		if msg, _ := er["message"].(string); !strings.Contains(msg, "an agent this list holds") {
			t.Errorf("%s: message %q", q, msg)
		}
	}
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/agents?starting_after="+mine, e.owner.LiveKey, nil, nil),
		http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "starting_after")
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/agents?starting_after="+mine); len(ids) != 1 || ids[0] != e.agentID {
		t.Errorf("starting_after the newest agent: %v, want the first agent %s", ids, e.agentID)
	}
}
