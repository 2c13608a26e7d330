package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport/approvallink"
	"github.com/agentpay/guard/transport/console"
)

// world is a running service with a signed-up owner and one agent whose
// payments above 1.00 wait for the owner.
type world struct {
	srv      *guardtest.Server
	email    string
	password string
	ownerKey string
	agentID  string
	agentKey string
}

func setup(t *testing.T) world {
	t.Helper()
	srv := guardtest.Start(t)
	w := world{srv: srv, email: strings.ToLower(t.Name()) + "@browser.invalid", password: "a browser test password"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	oc, err := srv.System().CreateOwner(ctx, "Browser owner", w.email, console.HashPassword(w.password))
	if err != nil {
		t.Fatal(err)
	}
	w.ownerKey = oc.Keys[actors.EnvTest]
	w.agentID, w.agentKey = srv.NewAgent(t, w.ownerKey, `{"approval_over":"1.00","trusted_destinations":["api.vendor.com"],"daily_cap":"8.00","monthly_cap":"200.00"}`)
	return w
}

var spendSeq int

// spend asks for a payment as the agent and returns the answer.
func (w world) spend(t *testing.T, amount, memo string) map[string]any {
	t.Helper()
	spendSeq++
	r := w.srv.Do(t, http.MethodPost, "/v1/spends", w.agentKey, map[string]string{"Idempotency-Key": fmt.Sprintf("browser-%d", spendSeq)},
		map[string]any{"amount": amount, "destination": "api.vendor.com", "memo": memo,
			"resource": map[string]string{"url": "https://api.vendor.com/reports/weekly"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /v1/spends %s: %d %s", amount, r.Status, r.Raw)
	}
	return r.Body
}

func approvalOf(t *testing.T, sp map[string]any) (id, code, itemsHash string, expires time.Time) {
	t.Helper()
	a, ok := sp["approval"].(map[string]any)
	if !ok {
		t.Fatalf("spend %v has no approval: %v %v %v", sp["id"], sp["status"], sp["decline_reason"], sp["message"])
	}
	exp, err := time.Parse(time.RFC3339Nano, a["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return a["id"].(string), a["short_code"].(string), a["items_hash"].(string), exp
}

// signIn signs in through the form, starting from a console page that
// needs a session.
func (w world) signIn(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, "signing in",
		chromedp.Navigate(w.srv.URL+"/console/approvals"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), w.email),
		chromedp.SendKeys(chromedp.ID("password"), w.password),
		chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label=Console]`)),
	)
}

// status reads a spend as its agent does.
func (w world) status(t *testing.T, id string) map[string]any {
	t.Helper()
	r := w.srv.Do(t, http.MethodGet, "/v1/spends/"+id, w.agentKey, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/spends/%s: %d %s", id, r.Status, r.Raw)
	}
	return r.Body
}

// history makes settled spends on several practice days, for the chart.
func (w world) history(t *testing.T) {
	t.Helper()
	for day, n := range []int{3, 6, 2, 7, 1} {
		if day > 0 {
			r := w.srv.Do(t, http.MethodPost, "/v1/test/clock/advance", w.ownerKey, nil, map[string]any{"seconds": 86400})
			if r.Status != http.StatusOK {
				t.Fatalf("advancing the practice clock: %d %s", r.Status, r.Raw)
			}
		}
		for range n {
			if sp := w.spend(t, "0.90", "daily data"); sp["status"] != "settled" {
				t.Fatalf("history spend: %v", sp["status"])
			}
		}
	}
}

// TestOwnerDecidesInBrowser: sign in, see approvals the agent created
// through the API, approve one while the agent long-polls it to settled,
// reject another, and check every page with axe-core.
func TestOwnerDecidesInBrowser(t *testing.T) {
	ctx := tab(t)
	w := setup(t)
	w.history(t)
	a := w.spend(t, "2.50", "market data for the weekly report")
	b := w.spend(t, "3.00", "second source")
	aID, aCode, _, _ := approvalOf(t, a)
	bID, bCode, _, _ := approvalOf(t, b)

	do(t, ctx, "opening the sign-in page", chromedp.Navigate(w.srv.URL+"/console/signin"), chromedp.WaitVisible(chromedp.ID("email")))
	checkAccessibility(t, ctx, "sign-in")
	w.signIn(t, ctx)
	text := mainText(t, ctx)
	for _, want := range []string{aCode, bCode, "2.50 usdc", "api.vendor.com", "/reports/weekly", "market data for the weekly report", "approval_over"} {
		if !strings.Contains(text, want) {
			t.Errorf("inbox does not show %q:\n%s", want, text)
		}
	}
	if band, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".envband"))); !strings.Contains(band, "PRACTICE") {
		t.Errorf("practice band missing: %q", band)
	}
	screenshot(t, ctx, "", "inbox.png")
	checkAccessibility(t, ctx, "inbox")

	// The agent waits for the owner the way agents do: a long poll.
	polled := make(chan string, 1)
	go func() {
		r, err := w.srv.Send(http.MethodGet, "/v1/spends/"+a["id"].(string)+"?wait_seconds=20", w.agentKey, nil, nil)
		if err != nil {
			polled <- "error: " + err.Error()
			return
		}
		s, _ := r.Body["status"].(string)
		polled <- s
	}()

	do(t, ctx, "opening the approval confirmation",
		chromedp.Click(chromedp.CSS(`a[href$="/approvals/`+aID+`?decision=approve"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-title")))
	checkAccessibility(t, ctx, "approval confirmation")
	do(t, ctx, "confirming the approval",
		chromedp.Click(chromedp.CSS(`section.confirm button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	if text := mainText(t, ctx); !strings.Contains(text, "Approved") {
		t.Fatalf("after approving:\n%s", text)
	}
	var first string
	select {
	case first = <-polled:
	case <-time.After(25 * time.Second):
		t.Fatal("the long poll did not return")
	}
	// The poll returns at the first change: approved, or already settled.
	st := first
	for i := 0; st != "settled" && i < 5; i++ {
		if st != "approved" && st != "processing" {
			t.Fatalf("after approval the agent saw %q", st)
		}
		r := w.srv.Do(t, http.MethodGet, "/v1/spends/"+a["id"].(string)+"?wait_seconds=20", w.agentKey, nil, nil)
		st, _ = r.Body["status"].(string)
	}
	if st != "settled" {
		t.Fatalf("approved spend ended %q (first poll %q), want settled", st, first)
	}

	do(t, ctx, "rejecting the second approval",
		chromedp.Navigate(w.srv.URL+"/console/approvals"),
		chromedp.Click(chromedp.CSS(`a[href$="/approvals/`+bID+`?decision=reject"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-title")),
		chromedp.Click(chromedp.CSS(`section.confirm button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	if text := mainText(t, ctx); !strings.Contains(text, "Rejected") {
		t.Fatalf("after rejecting:\n%s", text)
	}
	if sp := w.status(t, b["id"].(string)); sp["status"] != "declined" || sp["decline_reason"] != "owner_rejected" {
		t.Fatalf("rejected spend: status %v reason %v", sp["status"], sp["decline_reason"])
	}
	checkAccessibility(t, ctx, "decided approval")

	do(t, ctx, "opening the settled spend", chromedp.Navigate(w.srv.URL+"/console/spends/"+a["id"].(string)),
		chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)))
	text = mainText(t, ctx)
	for _, want := range []string{"approval.decided", "spend.settled", "verified"} {
		if !strings.Contains(text, want) {
			t.Errorf("spend page does not show %q:\n%s", want, text)
		}
	}
	checkAccessibility(t, ctx, "spend")

	for _, p := range []struct{ path, name, wait string }{
		{"/console/spends?status=settled", "spends", "table.list"},
		{"/console/agents", "agents", "table.list"},
		{"/console/agents/" + w.agentID, "agent", "form.rules"},
		{"/console/keys", "keys", "table.list"},
	} {
		do(t, ctx, "opening "+p.name, chromedp.Navigate(w.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		checkAccessibility(t, ctx, p.name)
	}

	do(t, ctx, "creating a key", chromedp.Navigate(w.srv.URL+"/console/keys"),
		chromedp.Click(chromedp.CSS(`form[action$="/keys"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("secret")))
	secret, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("secret").value`))
	if err != nil || !strings.HasPrefix(secret, "svc_test_agent_") {
		t.Fatalf("new key secret %q (%v)", secret, err)
	}
	if r := w.srv.Do(t, http.MethodGet, "/v1/balance", secret, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("the key shown once does not work: %d %s", r.Status, r.Raw)
	}
	checkAccessibility(t, ctx, "new key")

	do(t, ctx, "opening the balance", chromedp.Navigate(w.srv.URL+"/console/balance"),
		chromedp.WaitVisible(chromedp.CSS(`svg.chart`)))
	rects, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart rect.bar").length`))
	if err != nil || rects != 14 {
		t.Fatalf("chart bars: %d (%v), want 14", rects, err)
	}
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("svg.chart title").textContent`))
	if err != nil || !strings.Contains(title, "daily cap of 8.00") {
		t.Fatalf("chart title %q (%v)", title, err)
	}
	screenshot(t, ctx, `section.chart-card`, "balance-chart.png")
	checkAccessibility(t, ctx, "balance")
}

// TestSignedLinksAndForgeryInBrowser opens approval links as an owner
// would from an e-mail: a forged one is refused, a genuine one decides
// once and is refused when reused, and posts without the form's token are
// refused.
func TestSignedLinksAndForgeryInBrowser(t *testing.T) {
	ctx := tab(t)
	w := setup(t)
	sp := w.spend(t, "4.00", "link test")
	aprID, code, itemsHash, expires := approvalOf(t, sp)
	// The link goes out through a confirmed channel, as every link does.
	chat := guardtest.StartChatServer(t, nil)
	channelID := w.srv.AddChannel(t, w.ownerKey, "chat", chat.URL)
	token, _, err := w.srv.Service().Links().Mint(approvallink.Claims{ApprovalID: aprID, ItemsHash: itemsHash,
		Channel: "chat", ChannelID: channelID, ChannelRevision: 1, ExpiresAt: expires})
	if err != nil {
		t.Fatal(err)
	}
	link := w.srv.URL + "/console/approvals/" + aprID + "?link="

	// A forged link: the signature does not match.
	forged := token[:len(token)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(token, "AA")]
	do(t, ctx, "opening a forged link", chromedp.Navigate(link+forged), chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	if text := mainText(t, ctx); !strings.Contains(text, "not issued by this service") {
		t.Fatalf("forged link page:\n%s", text)
	}
	checkAccessibility(t, ctx, "refused link")

	do(t, ctx, "opening the signed link", chromedp.Navigate(link+token), chromedp.WaitVisible(chromedp.CSS(`div.decide`)))
	if text := mainText(t, ctx); !strings.Contains(text, code) || !strings.Contains(text, "4.00 usdc") {
		t.Fatalf("link page:\n%s", text)
	}
	checkAccessibility(t, ctx, "link confirmation")
	csrf, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("div.decide input[name=csrf]").value`))
	if err != nil || csrf == "" {
		t.Fatalf("link form token %q (%v)", csrf, err)
	}

	// The same form without its token is refused and decides nothing.
	postForm(t, ctx, "/console/approvals/"+aprID+"/decide", map[string]string{"decision": "approve", "link": token})
	if text := mainText(t, ctx); !strings.Contains(text, "Request refused") {
		t.Fatalf("post without token:\n%s", text)
	}
	if st := w.status(t, sp["id"].(string))["status"]; st != "pending_approval" {
		t.Fatalf("a refused post changed the spend to %v", st)
	}

	do(t, ctx, "approving through the link", chromedp.Navigate(link+token),
		chromedp.Click(chromedp.CSS(`div.decide form:first-child button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	if text := mainText(t, ctx); !strings.Contains(text, "Approved") {
		t.Fatalf("after approving by link:\n%s", text)
	}

	// Reused: opening it again, or sending its form again, is refused.
	do(t, ctx, "reopening the used link", chromedp.Navigate(link+token), chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	if text := mainText(t, ctx); !strings.Contains(text, "already approved") {
		t.Fatalf("reused link page:\n%s", text)
	}
	postForm(t, ctx, "/console/approvals/"+aprID+"/decide", map[string]string{"decision": "reject", "link": token, "csrf": csrf})
	if text := mainText(t, ctx); !strings.Contains(text, "already") {
		t.Fatalf("resent link form:\n%s", text)
	}

	// Signed in, a state change without the session's token is refused.
	w.signIn(t, ctx)
	postForm(t, ctx, "/console/agents/"+w.agentID+"/pause", map[string]string{})
	if text := mainText(t, ctx); !strings.Contains(text, "Request refused") {
		t.Fatalf("pause without token:\n%s", text)
	}
	r := w.srv.Do(t, http.MethodGet, "/v1/agents/"+w.agentID, w.ownerKey, nil, nil)
	if r.Body["status"] != "active" {
		t.Fatalf("a refused post paused the agent: %v", r.Body["status"])
	}
}

// postForm submits a form built in the page, as a page of the console
// could, and waits for the answer page.
func postForm(t *testing.T, ctx context.Context, action string, fields map[string]string) {
	t.Helper()
	js := `(() => { const f = document.createElement("form"); f.method = "post"; f.action = ` + jsString(action) + `;`
	for k, v := range fields {
		js += `{ const i = document.createElement("input"); i.type = "hidden"; i.name = ` + jsString(k) + `; i.value = ` + jsString(v) + `; f.append(i); }`
	}
	js += `document.body.append(f); document.body.dataset.posted = "1"; f.submit(); return true; })()`
	do(t, ctx, "posting "+action, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](js)(ctx, tg)
		return err
	}), chromedp.WaitVisible(chromedp.CSS(`body:not([data-posted]) main`)))
}

func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
