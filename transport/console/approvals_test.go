package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport/approvallink"
)

func TestInboxApproveAndReject(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	a := spend(t, srv, agentKey, "2.00", "inbox-a")
	b := spend(t, srv, agentKey, "3.00", "inbox-b")
	aprA, aprB := approvalOf(t, a), approvalOf(t, b)
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	inbox := c.get("/console/approvals")
	for _, want := range []string{aprA["short_code"].(string), aprB["short_code"].(string), "2.00 usdc", "3.00 usdc", "approval_over", " min "} {
		if !strings.Contains(inbox.body, want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	// The confirmation step carries the items hash the owner saw.
	confirm := c.get("/console/approvals/" + aprA["id"].(string) + "?decision=approve")
	if !strings.Contains(confirm.body, "Confirm approval") || !strings.Contains(confirm.body, aprA["items_hash"].(string)) {
		t.Fatalf("confirmation page:\n%s", confirm.body)
	}
	decide := func(apr map[string]any, decision, itemsHash string) page {
		return c.post("/console/approvals/"+apr["id"].(string)+"/decide",
			url.Values{"csrf": {token}, "decision": {decision}, "items_hash": {itemsHash}}, "")
	}
	// A decision for a purchase other than the one shown is refused, and
	// so is one that names no purchase at all.
	if p := decide(aprA, "approve", "sha256:00"); p.status != http.StatusConflict {
		t.Fatalf("other items hash: %d", p.status)
	}
	if p := decide(aprA, "approve", ""); p.status != http.StatusBadRequest || !strings.Contains(p.body, "items_hash") {
		t.Fatalf("no items hash: %d\n%s", p.status, p.body)
	}
	if r := srv.Do(t, http.MethodGet, "/v1/spends/"+a["id"].(string), agentKey, nil, nil); r.Body["status"] != "pending_approval" {
		t.Fatalf("a refused decision changed the spend: %v", r.Body["status"])
	}
	if p := decide(aprA, "approve", aprA["items_hash"].(string)); p.status != http.StatusSeeOther || !strings.HasSuffix(p.location(), "?done=approve") {
		t.Fatalf("approve: %d %q\n%s", p.status, p.location(), p.body)
	}
	r := srv.Do(t, http.MethodGet, "/v1/spends/"+a["id"].(string)+"?wait_seconds=20", agentKey, nil, nil)
	for i := 0; r.Body["status"] != "settled" && i < 5; i++ {
		r = srv.Do(t, http.MethodGet, "/v1/spends/"+a["id"].(string)+"?wait_seconds=20", agentKey, nil, nil)
	}
	if r.Body["status"] != "settled" {
		t.Fatalf("approved spend is %v", r.Body["status"])
	}
	if p := decide(aprB, "reject", aprB["items_hash"].(string)); p.status != http.StatusSeeOther {
		t.Fatalf("reject: %d", p.status)
	}
	if r := srv.Do(t, http.MethodGet, "/v1/spends/"+b["id"].(string), agentKey, nil, nil); r.Body["decline_reason"] != "owner_rejected" {
		t.Fatalf("rejected spend: %v %v", r.Body["status"], r.Body["decline_reason"])
	}
	// A second decision is refused and says why.
	p := decide(aprB, "approve", aprB["items_hash"].(string))
	if p.status != http.StatusConflict || !strings.Contains(p.body, "already decided") {
		t.Fatalf("second decision: %d\n%s", p.status, p.body)
	}
	// The decision names the console and the session, not a key.
	ev := srv.Do(t, http.MethodGet, "/v1/events?type=approval.decided", o.testKey, nil, nil)
	data := ev.Body["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("approval.decided events: %d", len(data))
	}
	obj := data[0].(map[string]any)["data"].(map[string]any)["object"].(map[string]any)
	if obj["channel"] != "console" || !strings.HasPrefix(obj["reference"].(string), "cs_") {
		t.Fatalf("decision recorded as %v / %v", obj["channel"], obj["reference"])
	}
	if strings.Contains(c.get("/console/approvals").body, "<tbody>") {
		t.Fatal("the inbox still lists decided approvals")
	}
	// The operator's log has each decision once, with who made it.
	for apr, decision := range map[string]string{aprA["id"].(string): "approve", aprB["id"].(string): "reject"} {
		loggedOnce(t, srv, "action=approval_decided", "by=console", "decision="+decision, "approval="+apr, "owner="+o.id, "env=test")
	}
}

// loggedOnce fails unless exactly one line of the server's log carries
// every one of want.
func loggedOnce(t *testing.T, srv *guardtest.Server, want ...string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(srv.Logs(), "\n") {
		all := line != ""
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d log lines carry %q, want 1; the log:\n%s", n, want, srv.Logs())
	}
}

func TestOtherOwnersApprovalIsNotFound(t *testing.T) {
	srv := guardtest.Start(t)
	o, other := newOwner(t, srv), newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	apr := approvalOf(t, spend(t, srv, agentKey, "2.00", "other-owner"))
	c := newClient(t, srv)
	token := c.mustSignIn(other)
	if p := c.get("/console/approvals/" + apr["id"].(string)); p.status != http.StatusNotFound {
		t.Fatalf("another owner's approval: %d", p.status)
	}
	p := c.post("/console/approvals/"+apr["id"].(string)+"/decide", url.Values{"csrf": {token}, "decision": {"approve"},
		"items_hash": {apr["items_hash"].(string)}}, "")
	if p.status != http.StatusNotFound {
		t.Fatalf("deciding another owner's approval: %d", p.status)
	}
}

// TestKeysCannotDecide: no API key, agent or owner, reaches a decision:
// the console's decision path needs a session and its token, and the API
// has no decision route.
func TestKeysCannotDecide(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	sp := spend(t, srv, agentKey, "2.00", "keys-cannot-decide")
	apr := approvalOf(t, sp)
	id := apr["id"].(string)
	raw := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, key, body string) int {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	form := "decision=approve&items_hash=" + url.QueryEscape(apr["items_hash"].(string))
	for _, key := range []string{agentKey, o.testKey} {
		for _, tc := range []struct {
			method, path, body string
			want               []int
		}{
			{"POST", "/console/approvals/" + id + "/decide", form, []int{403}},
			{"POST", "/console/approvals/" + id + "/decide", form + "&csrf=x", []int{403}},
			{"POST", "/v1/approvals/" + id + "/approve", "", []int{404}},
			{"POST", "/v1/approvals/" + id + "/decide", "", []int{404}},
			{"POST", "/v1/approvals/" + id, "", []int{404}},
			{"GET", "/console/approvals/" + id + "?decision=approve", "", []int{303}}, // to sign-in
		} {
			if got := send(tc.method, tc.path, key, tc.body); got != tc.want[0] {
				t.Errorf("%s %s with a %s key: %d, want %d", tc.method, tc.path, key[:14], got, tc.want[0])
			}
		}
	}
	if r := srv.Do(t, http.MethodGet, "/v1/spends/"+sp["id"].(string), agentKey, nil, nil); r.Body["status"] != "pending_approval" {
		t.Fatalf("a key changed the spend to %v", r.Body["status"])
	}
}

// linkFixture is a pending approval and a link minted for it.
type linkFixture struct {
	srv      *guardtest.Server
	owner    owner
	agentKey string
	spendID  string
	id       string
	token    string
	claims   approvallink.Claims
}

func newLinkFixture(t *testing.T, opts ...guardtest.Option) linkFixture {
	srv := guardtest.Start(t, opts...)
	o := newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	sp := spend(t, srv, agentKey, "2.00", "link-"+t.Name())
	apr := approvalOf(t, sp)
	exp, err := time.Parse(time.RFC3339Nano, apr["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	// The link goes out through a real, confirmed channel: a link decides
	// only while its channel is there, at the target it was sent to.
	chat := guardtest.StartChatServer(t, nil)
	channelID := srv.AddChannel(t, o.testKey, "chat", chat.URL)
	token, claims, err := srv.Service().Links().Mint(approvallink.Claims{ApprovalID: apr["id"].(string),
		ItemsHash: apr["items_hash"].(string), Channel: "chat", ChannelID: channelID, ChannelRevision: 1, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	return linkFixture{srv: srv, owner: o, agentKey: agentKey, spendID: sp["id"].(string), id: apr["id"].(string), token: token, claims: claims}
}

func (f linkFixture) path() string { return "/console/approvals/" + f.id }

func (f linkFixture) status(t *testing.T) any {
	return f.srv.Do(t, http.MethodGet, "/v1/spends/"+f.spendID, f.agentKey, nil, nil).Body["status"]
}

func TestSignedLinkDecidesOnce(t *testing.T) {
	f := newLinkFixture(t)
	c := newClient(t, f.srv)
	p := c.get(f.path() + "?link=" + url.QueryEscape(f.token))
	if p.status != http.StatusOK || !strings.Contains(p.body, "Approve and pay 2.00 usdc") || !strings.Contains(p.body, "PRACTICE") {
		t.Fatalf("link page: %d\n%s", p.status, p.body)
	}
	token := csrf(t, p)
	decide := func(cl *client, form url.Values, origin string) page {
		return cl.post(f.path()+"/decide", form, origin)
	}
	// Refused: no token, a token from another browser (no cookie), another origin.
	for name, tc := range map[string]struct {
		cl     *client
		form   url.Values
		origin string
	}{
		"no token":      {c, url.Values{"decision": {"approve"}, "link": {f.token}}, ""},
		"other browser": {newClient(t, f.srv), url.Values{"decision": {"approve"}, "link": {f.token}, "csrf": {token}}, ""},
		"other origin":  {c, url.Values{"decision": {"approve"}, "link": {f.token}, "csrf": {token}}, "https://evil.example"},
	} {
		if got := decide(tc.cl, tc.form, tc.origin); got.status != http.StatusForbidden {
			t.Errorf("%s: %d", name, got.status)
		}
	}
	if st := f.status(t); st != "pending_approval" {
		t.Fatalf("refused posts changed the spend to %v", st)
	}
	if got := decide(c, url.Values{"decision": {"approve"}, "link": {f.token}, "csrf": {token}}, ""); got.status != http.StatusOK ||
		!strings.Contains(got.body, "Approved") {
		t.Fatalf("approve by link: %d\n%s", got.status, got.body)
	}
	// The decision records the link's channel and id.
	ev := f.srv.Do(t, http.MethodGet, "/v1/events?type=approval.decided", f.owner.testKey, nil, nil)
	obj := ev.Body["data"].([]any)[0].(map[string]any)["data"].(map[string]any)["object"].(map[string]any)
	if obj["channel"] != "chat" || obj["reference"] != f.claims.LinkID {
		t.Fatalf("decision recorded as %v / %v, want chat / %s", obj["channel"], obj["reference"], f.claims.LinkID)
	}
	loggedOnce(t, f.srv, "action=approval_decided", "by=chat", "decision=approve", "approval="+f.claims.ApprovalID, "owner="+f.owner.id)
	// Reused: opened again or posted again, refused with a clear message.
	if p := c.get(f.path() + "?link=" + url.QueryEscape(f.token)); p.status != http.StatusConflict || !strings.Contains(p.body, "already approved") {
		t.Fatalf("reopened link: %d\n%s", p.status, p.body)
	}
	if p := decide(c, url.Values{"decision": {"reject"}, "link": {f.token}, "csrf": {token}}, ""); p.status != http.StatusConflict {
		t.Fatalf("reposted link: %d", p.status)
	}
}

func TestBadLinksAreRefused(t *testing.T) {
	clock := guardtest.NewFakeClock(epoch)
	f := newLinkFixture(t, guardtest.WithClock(clock))
	other, err := approvallink.New(make([]byte, approvallink.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, _ := other.Mint(f.claims)
	moved := f.claims
	moved.ApprovalID = "apr_00000000000000000000000000000000"
	elsewhere, _, _ := f.srv.Service().Links().Mint(moved)
	changed := f.claims
	changed.ItemsHash = "sha256:0000"
	changedTok, _, _ := f.srv.Service().Links().Mint(changed)
	c := newClient(t, f.srv)
	for _, tc := range []struct {
		name, token string
		status      int
		says        string
	}{
		{"another key", foreign, 403, "not issued by this service"},
		{"damaged", f.token[:20], 400, "incomplete or damaged"},
		{"tampered", f.token[:len(f.token)-3] + "AAA", 403, "not issued by this service"},
		{"another approval", elsewhere, 403, "another approval"},
		{"another purchase", changedTok, 409, "purchase changed"},
	} {
		p := c.get(f.path() + "?link=" + url.QueryEscape(tc.token))
		if p.status != tc.status || !strings.Contains(p.body, tc.says) {
			t.Errorf("%s: %d, want %d saying %q\n%s", tc.name, p.status, tc.status, tc.says, p.body)
		}
		q := c.post(f.path()+"/decide", url.Values{"decision": {"approve"}, "link": {tc.token}, "csrf": {"x"}}, "")
		if q.status != tc.status {
			t.Errorf("%s: decide answered %d, want %d", tc.name, q.status, tc.status)
		}
	}
	// Expired: the approval's lifetime passed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(16 * time.Minute)
	if err := f.srv.System().Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	p := c.get(f.path() + "?link=" + url.QueryEscape(f.token))
	if p.status != http.StatusGone || !strings.Contains(p.body, "expired") {
		t.Fatalf("expired link: %d\n%s", p.status, p.body)
	}
	if st := f.status(t); st != "expired" {
		t.Fatalf("spend is %v, want expired", st)
	}
}

// An approval the rules in effect overrule (they were tightened while the
// payment waited) must not tell the owner the payment goes ahead.
func TestOverruledApprovalSaysNothingWasPaid(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	agentID, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	a := spend(t, srv, agentKey, "2.00", "overruled")
	apr := approvalOf(t, a)
	if r := srv.Do(t, http.MethodPost, "/v1/agents/"+agentID+"/policy", o.testKey, nil,
		`{"approval_over":"1.00","per_spend_limit":"1.50","trusted_destinations":["api.vendor.com"]}`); r.Status != http.StatusOK {
		t.Fatalf("tightening: %d %s", r.Status, r.Raw)
	}
	c := newClient(t, srv)
	token := c.mustSignIn(o)
	p := c.post("/console/approvals/"+apr["id"].(string)+"/decide",
		url.Values{"csrf": {token}, "decision": {"approve"}, "items_hash": {apr["items_hash"].(string)}}, "")
	if p.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", p.status, p.body)
	}
	done := c.get(strings.TrimPrefix(p.location(), c.base))
	if strings.Contains(done.body, "goes ahead") || !strings.Contains(done.body, "Nothing was paid") {
		t.Fatalf("the notice after an overruled approval:\n%s", done.body)
	}
	if r := srv.Do(t, http.MethodGet, "/v1/spends/"+a["id"].(string), agentKey, nil, nil); r.Body["decline_reason"] != "policy_changed" {
		t.Fatalf("the spend: %v %v", r.Body["status"], r.Body["decline_reason"])
	}
}

// An approval whose agent the owner archived is closed, and every way of
// deciding it says so: not "no such approval", not "the agent cancelled",
// not "link already used".
func TestArchivedAgentsApprovalSaysSo(t *testing.T) {
	f := newLinkFixture(t)
	agentID := f.srv.Do(t, http.MethodGet, "/v1/spends/"+f.spendID, f.agentKey, nil, nil).Body["agent_id"].(string)
	if r := f.srv.Do(t, http.MethodPost, "/v1/agents/"+agentID+"/archive", f.owner.testKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("archive: %d %s", r.Status, r.Raw)
	}
	says := func(what string, p page) {
		t.Helper()
		if p.status != http.StatusConflict || !strings.Contains(p.body, "archived the agent") ||
			strings.Contains(p.body, "already used") || strings.Contains(p.body, "agent cancelled") {
			t.Errorf("%s: %d\n%s", what, p.status, p.body)
		}
	}
	says("the signed link", newClient(t, f.srv).get(f.path()+"?link="+url.QueryEscape(f.token)))
	c := newClient(t, f.srv)
	token := c.mustSignIn(f.owner)
	says("a decision in the console", c.post(f.path()+"/decide",
		url.Values{"csrf": {token}, "decision": {"approve"}, "items_hash": {f.claims.ItemsHash}}, ""))
	if p := c.get(f.path()); !strings.Contains(p.body, "archived the agent") || strings.Contains(p.body, "agent cancelled") {
		t.Errorf("the approval's page:\n%s", p.body)
	}
}

// The approval of a paused agent says so, and that approving waits for a
// resume; after the resume it no longer does.
func TestPausedAgentsApprovalSaysSo(t *testing.T) {
	f := newLinkFixture(t)
	agentID := f.srv.Do(t, http.MethodGet, "/v1/spends/"+f.spendID, f.agentKey, nil, nil).Body["agent_id"].(string)
	c := newClient(t, f.srv)
	c.mustSignIn(f.owner)
	for _, step := range []struct {
		action string
		paused bool
	}{{"pause", true}, {"resume", false}} {
		if r := f.srv.Do(t, http.MethodPost, "/v1/agents/"+agentID+"/"+step.action, f.owner.testKey, nil, nil); r.Status != http.StatusOK {
			t.Fatalf("%s: %d", step.action, r.Status)
		}
		p := c.get(f.path())
		if says := strings.Contains(p.body, "Resume the agent before approving"); says != step.paused {
			t.Errorf("after %s the page says the agent is paused: %v\n%s", step.action, says, p.body)
		}
		inbox := c.get("/console/approvals")
		if says := strings.Contains(inbox.body, "Resume the agent to approve"); says != step.paused ||
			strings.Contains(inbox.body, "?decision=approve") == step.paused {
			t.Errorf("after %s the inbox says the agent is paused: %v\n%s", step.action, says, inbox.body)
		}
	}
}

// Text an agent wrote is shown as written, not obeyed: a right-to-left
// override that would make "gnp.exe" read "exe.png" is shown as a
// replacement character. The memo is labelled as the agent's words.
func TestAgentTextIsShownNotObeyed(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	_, agentKey := srv.NewAgent(t, o.testKey, approvalPolicy)
	r := srv.Do(t, http.MethodPost, "/v1/spends", agentKey, map[string]string{"Idempotency-Key": "bidi"},
		map[string]any{"amount": "2.00", "destination": "api.vendor.com", "memo": "PAY NOW \u202egnp.exe\u202c",
			"resource": map[string]string{"url": "https://api.vendor.com/x"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("spend: %d %s", r.Status, r.Raw)
	}
	c := newClient(t, srv)
	c.mustSignIn(o)
	for _, path := range []string{"/console/approvals", "/console/approvals/" + approvalOf(t, r.Body)["id"].(string), "/console/spends"} {
		p := c.get(path)
		if strings.ContainsRune(p.body, '\u202e') || !strings.Contains(p.body, "PAY NOW \ufffdgnp.exe\ufffd") {
			t.Errorf("%s shows the memo obeying its controls:\n%s", path, p.body)
		}
	}
	if p := c.get("/console/approvals"); !strings.Contains(p.body, "Memo (the agent") {
		t.Errorf("the inbox does not label the memo as the agent's words")
	}
}

// A link decides only while its channel is there at the target it was
// sent to: a channel pointed elsewhere (it could have leaked) or removed
// takes its links with it, even once confirmed again.
func TestLinkStopsWhenItsChannelMovesOrGoes(t *testing.T) {
	f := newLinkFixture(t)
	c := newClient(t, f.srv)
	if p := c.get(f.path() + "?link=" + url.QueryEscape(f.token)); p.status != http.StatusOK {
		t.Fatalf("the link before its channel moved: %d\n%s", p.status, p.body)
	}
	token := csrf(t, c.get(f.path()+"?link="+url.QueryEscape(f.token)))
	channel := "/v1/notification_channels/" + f.claims.ChannelID
	moved := guardtest.StartChatServer(t, nil)
	if r := f.srv.Do(t, http.MethodPost, channel, f.owner.testKey, nil, map[string]string{"target": moved.URL}); r.Status != http.StatusOK {
		t.Fatalf("moving the channel: %d %s", r.Status, r.Raw)
	}
	f.srv.ConfirmChannel(t, f.owner.testKey, f.claims.ChannelID)
	if p := c.get(f.path() + "?link=" + url.QueryEscape(f.token)); p.status != http.StatusForbidden || !strings.Contains(p.body, "has been changed since") {
		t.Fatalf("the old target's link: %d\n%s", p.status, p.body)
	}
	if p := c.post(f.path()+"/decide", url.Values{"decision": {"approve"}, "link": {f.token}, "csrf": {token}}, ""); p.status != http.StatusForbidden {
		t.Fatalf("a decision through the old target's link: %d\n%s", p.status, p.body)
	}
	if st := f.status(t); st != "pending_approval" {
		t.Fatalf("the refused link changed the spend to %v", st)
	}

	// A link sent to the new target works, until the channel is removed.
	current := f.claims
	current.LinkID, current.ChannelRevision = "", 2
	fresh, _, err := f.srv.Service().Links().Mint(current)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.get(f.path() + "?link=" + url.QueryEscape(fresh)); p.status != http.StatusOK {
		t.Fatalf("the new target's link: %d\n%s", p.status, p.body)
	}
	if r := f.srv.Do(t, http.MethodDelete, channel, f.owner.testKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("removing the channel: %d %s", r.Status, r.Raw)
	}
	if p := c.get(f.path() + "?link=" + url.QueryEscape(fresh)); p.status != http.StatusForbidden || !strings.Contains(p.body, "has been removed") {
		t.Fatalf("a removed channel's link: %d\n%s", p.status, p.body)
	}
}
