package transport_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport/approvallink"
)

// askingPolicy sends every spend above 5.00 to the owner.
const askingPolicy = `{"per_spend_limit":"100.00","approval_over":"5.00","trusted_destinations":["api.vendor.com"]}`

// deliveryWait bounds the wait for a message the service sends on its own.
const deliveryWait = 10 * time.Second

var linkPattern = regexp.MustCompile(regexp.QuoteMeta(consoleURL) + `/approvals/(apr_[0-9a-f]{32})\?link=([A-Za-z0-9_.-]+)`)

// pendingSpend makes the agent ask for 12.50 (above approval_over) and
// returns the spend, pending_approval, and its approval summary.
func pendingSpend(t *testing.T, s *guardtest.Server, agentKey string) (spend, approval map[string]any) {
	t.Helper()
	sp := created(t, s, agentKey, spendBody("12.50", "api.vendor.com", "/reports/q3?format=pdf"))
	if sp["status"] != "pending_approval" || sp["approval_reason"] != "approval_over" {
		t.Fatalf("spend is %v (%v), want pending_approval for approval_over", sp["status"], sp["approval_reason"])
	}
	return sp, obj(t, sp, "approval")
}

// checkLink finds the signed link in text and checks that it opens the
// approval's console page and verifies, with the service's key, as bound
// to that approval, its items_hash, the channel and its expiry.
func checkLink(t *testing.T, s *guardtest.Server, text string, approval map[string]any, channel, channelID string) approvallink.Claims {
	t.Helper()
	m := linkPattern.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no approval link to %s in:\n%s", consoleURL, text)
	}
	if m[1] != approval["id"] {
		t.Errorf("the link opens approval %s, want %v", m[1], approval["id"])
	}
	claims, err := s.Service().Links().Verify(m[2], s.Clock.Now())
	if err != nil {
		t.Fatalf("the link's token does not verify: %v", err)
	}
	exp, _ := time.Parse(time.RFC3339, approval["expires_at"].(string))
	if claims.ApprovalID != approval["id"] || claims.ItemsHash != approval["items_hash"] || claims.Channel != channel ||
		claims.ChannelID != channelID || !claims.ExpiresAt.Equal(exp.Truncate(time.Second)) || claims.LinkID == "" {
		t.Errorf("link claims %+v, want approval %v, items_hash %v, channel %s %s, expiry %v",
			claims, approval["id"], approval["items_hash"], channel, channelID, exp)
	}
	// Moved to another approval or altered, it is refused.
	if _, err := s.Service().Links().Verify(m[2]+"x", s.Clock.Now()); err == nil {
		t.Error("an altered token verifies")
	}
	return claims
}

// checkNoticeText checks that a notice says what the owner needs to decide.
func checkNoticeText(t *testing.T, text string, agentName, agentID string, approval map[string]any) {
	t.Helper()
	for _, want := range []string{"12.50 USDC", "api.vendor.com", "GET api.vendor.com/reports/q3?format=pdf", agentName, agentID,
		approval["short_code"].(string), "approval_over", "15 minutes left", approval["id"].(string), "practice"} {
		if !strings.Contains(text, want) {
			t.Errorf("the notice does not mention %q:\n%s", want, text)
		}
	}
}

func agentName(t *testing.T, s *guardtest.Server, ownerKey, agentID string) string {
	t.Helper()
	r := call(t, s, http.MethodGet, "/v1/agents/"+agentID, ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	return r.Body["name"].(string)
}

// A real SMTP exchange: the service sends the new approval to the owner's
// address through a mail server the test runs; the message is a proper
// RFC 5322 message whose link verifies for that approval; nothing goes to
// other owners' or the live environment's channels.
func TestApprovalNoticeByEmail(t *testing.T) {
	mailSrv := guardtest.StartMailServer(t, guardtest.MailOptions{})
	e := start(t, withMail(mailSrv.Addr))
	ch := addChannel(t, e.srv, e.owner.TestKey, "email", "owner@example.com")
	addChannel(t, e.srv, e.owner.LiveKey, "email", "live-owner@example.com")
	other := e.srv.NewOwner(t)
	addChannel(t, e.srv, other.TestKey, "email", "someone-else@example.com")
	agentID, agentKey := e.srv.NewAgent(t, e.owner.TestKey, askingPolicy)
	name := agentName(t, e.srv, e.owner.TestKey, agentID)

	sp, approval := pendingSpend(t, e.srv, agentKey)
	msg := mailSrv.Next(t, deliveryWait)

	if msg.From != "guard@guard.example.com" || len(msg.To) != 1 || msg.To[0] != "owner@example.com" {
		t.Errorf("envelope from %q to %v", msg.From, msg.To)
	}
	if bytes.Contains(bytes.ReplaceAll(msg.Data, []byte("\r\n"), nil), []byte("\n")) {
		t.Error("the message has bare LF line endings; RFC 5322 wants CRLF")
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(msg.Data))
	if err != nil {
		t.Fatalf("the message does not parse: %v\n%s", err, msg.Data)
	}
	h := parsed.Header
	subject, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
	if err != nil || !strings.Contains(subject, approval["short_code"].(string)) || !strings.Contains(subject, "12.50 USDC") {
		t.Errorf("Subject %q (%v) lacks the short code %v or the amount", subject, err, approval["short_code"])
	}
	if from, err := mail.ParseAddress(h.Get("From")); err != nil || from.Address != "guard@guard.example.com" {
		t.Errorf("From %q", h.Get("From"))
	}
	if h.Get("To") != "owner@example.com" {
		t.Errorf("To %q", h.Get("To"))
	}
	if d, err := h.Date(); err != nil || !d.Equal(e.srv.Clock.Now()) {
		t.Errorf("Date %q (%v), want the service's time %v", h.Get("Date"), err, e.srv.Clock.Now())
	}
	if id := h.Get("Message-ID"); !strings.HasPrefix(id, "<"+approval["id"].(string)+".") || !strings.HasSuffix(id, "@guard.example.com>") {
		t.Errorf("Message-ID %q", id)
	}
	if h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Errorf("Content-Type %q, Content-Transfer-Encoding %q", h.Get("Content-Type"), h.Get("Content-Transfer-Encoding"))
	}
	body, err := io.ReadAll(quotedprintable.NewReader(parsed.Body))
	if err != nil {
		t.Fatalf("the body is not quoted-printable: %v", err)
	}
	checkNoticeText(t, string(body), name, agentID, approval)
	claims := checkLink(t, e.srv, string(body), approval, "email", ch["id"].(string))

	// The delivery is marked in the journal, with the link it carried.
	e.srv.Quiesce(t, deliveryWait)
	sent, ref, err := e.srv.System().NotificationSent(approval["id"].(string), ch["id"].(string))
	if err != nil || !sent || ref != claims.LinkID {
		t.Errorf("delivery mark: sent %v, reference %q (%v), want the link id %s", sent, ref, err, claims.LinkID)
	}
	// Everything the approval caused has happened: one message, to this
	// owner's practice channel only.
	select {
	case extra := <-mailSrv.Mail:
		t.Errorf("a second message went to %v", extra.To)
	default:
	}
	if got := getSpend(t, e.srv, agentKey, sp["id"].(string), "").Body["status"]; got != "pending_approval" {
		t.Errorf("the spend is %v after the notice, want pending_approval", got)
	}
}

// The chat channel: a JSON POST of {"text": ...} to the webhook, received
// by a local server, carrying a link bound to the approval and the chat.
func TestApprovalNoticeByChat(t *testing.T) {
	chat := guardtest.StartChatServer(t, nil)
	e := start(t)
	ch := addChannel(t, e.srv, e.owner.TestKey, "chat", chat.URL)
	agentID, agentKey := e.srv.NewAgent(t, e.owner.TestKey, askingPolicy)
	name := agentName(t, e.srv, e.owner.TestKey, agentID)

	_, approval := pendingSpend(t, e.srv, agentKey)
	req := chat.Next(t, deliveryWait)
	if req.Method != http.MethodPost || req.Path != "/services/T000/B000/webhook-secret-token" {
		t.Errorf("chat got %s %s", req.Method, req.Path)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var payload map[string]any
	dec := json.NewDecoder(bytes.NewReader(req.Body))
	if err := dec.Decode(&payload); err != nil {
		t.Fatalf("the body is not JSON: %v: %s", err, req.Body)
	}
	text, _ := payload["text"].(string)
	if len(payload) != 1 || text == "" {
		t.Fatalf("the body is %s, want {\"text\": ...}", req.Body)
	}
	checkNoticeText(t, text, name, agentID, approval)
	claims := checkLink(t, e.srv, text, approval, "chat", ch["id"].(string))

	e.srv.Quiesce(t, deliveryWait)
	if sent, ref, err := e.srv.System().NotificationSent(approval["id"].(string), ch["id"].(string)); err != nil || !sent || ref != claims.LinkID {
		t.Errorf("delivery mark: sent %v, reference %q (%v)", sent, ref, err)
	}
	if n := chat.Count(); n != 1 {
		t.Errorf("the chat got %d messages, want 1", n)
	}
}

// A chat that is down (503) gets the notice again after the first delay;
// the spend is untouched meanwhile. A chat that answers 404 (the webhook
// was removed) is not retried.
func TestApprovalNoticeRetried(t *testing.T) {
	down := guardtest.StartChatServer(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	gone := guardtest.StartChatServer(t, func(int) int { return http.StatusNotFound })
	e := start(t)
	downCh := addChannel(t, e.srv, e.owner.TestKey, "chat", down.URL)
	addChannel(t, e.srv, e.owner.TestKey, "chat", gone.URL)
	_, agentKey := e.srv.NewAgent(t, e.owner.TestKey, askingPolicy)

	sp, approval := pendingSpend(t, e.srv, agentKey)
	first := down.Next(t, deliveryWait)
	gone.Next(t, deliveryWait)
	e.srv.Quiesce(t, deliveryWait) // the failure is handled: a retry waits on the clock
	if sent, _, _ := e.srv.System().NotificationSent(approval["id"].(string), downCh["id"].(string)); sent {
		t.Fatal("a delivery that got 503 is marked sent")
	}
	before := getSpend(t, e.srv, agentKey, sp["id"].(string), "")
	if before.Body["status"] != "pending_approval" || before.Body["updated_at"] != sp["updated_at"] {
		t.Fatalf("a failed notice changed the spend: %s", before.Raw)
	}

	e.srv.Clock.Advance(10 * time.Second)
	second := down.Next(t, deliveryWait)
	e.srv.Quiesce(t, deliveryWait)
	c1 := checkLink(t, e.srv, string(first.Body), approval, "chat", downCh["id"].(string))
	c2 := checkLink(t, e.srv, string(second.Body), approval, "chat", downCh["id"].(string))
	if c1.LinkID == c2.LinkID {
		t.Error("the retry reused the first attempt's link id")
	}
	if sent, ref, _ := e.srv.System().NotificationSent(approval["id"].(string), downCh["id"].(string)); !sent || ref != c2.LinkID {
		t.Errorf("after the retry: sent %v, reference %q, want %s", sent, ref, c2.LinkID)
	}

	// Nothing more is sent, however long the approval waits: the 404 was
	// final and the other channel has its message.
	e.srv.Clock.Advance(14 * time.Minute)
	e.srv.Quiesce(t, deliveryWait)
	if down.Count() != 2 || gone.Count() != 1 {
		t.Errorf("requests: %d to the recovered chat (want 2), %d to the removed one (want 1)", down.Count(), gone.Count())
	}
}

// A mail server that refuses connections: the spend is registered as
// usual and the message goes out once the server is back, on the retry.
// A server that answers 451 to the message is tried again as well.
func TestApprovalNoticeMailServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	e := start(t, withMail(addr))
	ch := addChannel(t, e.srv, e.owner.TestKey, "email", "owner@example.com")
	_, agentKey := e.srv.NewAgent(t, e.owner.TestKey, askingPolicy)

	sp, approval := pendingSpend(t, e.srv, agentKey)
	e.srv.Quiesce(t, deliveryWait)
	if sent, _, _ := e.srv.System().NotificationSent(approval["id"].(string), ch["id"].(string)); sent {
		t.Fatal("a message to a server that is down is marked sent")
	}
	if got := getSpend(t, e.srv, agentKey, sp["id"].(string), "").Body["status"]; got != "pending_approval" {
		t.Fatalf("spend %v", got)
	}

	var refusals atomic.Int32
	mailSrv := guardtest.StartMailServer(t, guardtest.MailOptions{Addr: addr, Refuse: func(stage, _ string) error {
		if stage == "data" && refusals.Add(1) == 1 {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		}
		return nil
	}})
	e.srv.Clock.Advance(10 * time.Second) // the second attempt meets the 451
	e.srv.Quiesce(t, deliveryWait)
	e.srv.Clock.Advance(30 * time.Second) // the third is accepted
	msg := mailSrv.Next(t, deliveryWait)
	body, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(msg.Data)))
	if err != nil {
		t.Fatal(err)
	}
	checkLink(t, e.srv, string(body), approval, "email", ch["id"].(string))
	e.srv.Quiesce(t, deliveryWait)
	if sent, _, _ := e.srv.System().NotificationSent(approval["id"].(string), ch["id"].(string)); !sent {
		t.Error("the delivered message is not marked sent")
	}
	if n := refusals.Load(); n != 2 {
		t.Errorf("the server saw %d messages, want 2 (one refused, one accepted)", n)
	}
}

// A chat that stays down is tried as long as the approval waits: past the
// growing delays, every 15 minutes, until the approval expires (an hour
// here), and not after.
func TestApprovalNoticeRetriedWhileTheApprovalWaits(t *testing.T) {
	down := guardtest.StartChatServer(t, func(int) int { return http.StatusServiceUnavailable })
	e := start(t)
	addChannel(t, e.srv, e.owner.TestKey, "chat", down.URL)
	_, agentKey := e.srv.NewAgent(t, e.owner.TestKey,
		`{"per_spend_limit":"100.00","approval_over":"5.00","approval_ttl_minutes":60,"trusted_destinations":["api.vendor.com"]}`)
	pendingSpend(t, e.srv, agentKey)
	down.Next(t, deliveryWait)
	// The delays: 10 s, 30 s, 1, 2, 5, 10, 15 min (33 min 40 s in all),
	// then 15 min again: attempts at 0 s and 7 more, then at 48 min 40 s;
	// the next would come after the expiry at 60 min.
	for range 70 {
		e.srv.Quiesce(t, deliveryWait)
		e.srv.Clock.Advance(time.Minute)
	}
	e.srv.Quiesce(t, deliveryWait)
	if n := down.Count(); n != 9 {
		t.Fatalf("the chat that stayed down got %d attempts over the approval's hour, want 9", n)
	}
}

// A channel is a way to decide approvals (its links decide), and no API
// key decides one: a channel the API adds or points elsewhere sends
// nothing until the owner confirms it, signed in to the console, and the
// approvals already waiting go out on confirmation. (That its old links
// stop deciding is the console's part: see its tests.)
func TestChannelSendsNothingUntilTheOwnerConfirmsIt(t *testing.T) {
	chat := guardtest.StartChatServer(t, nil)
	elsewhere := guardtest.StartChatServer(t, nil)
	e := start(t)
	owner := e.owner.TestKey
	r := call(t, e.srv, http.MethodPost, channelsPath, owner, nil, map[string]string{"type": "chat", "target": chat.URL})
	mustStatus(t, r, http.StatusCreated)
	chID := r.Body["id"].(string)
	_, agentKey := e.srv.NewAgent(t, owner, askingPolicy)
	_, first := pendingSpend(t, e.srv, agentKey)
	e.srv.Quiesce(t, deliveryWait)
	if n := chat.Count(); n != 0 {
		t.Fatalf("an unconfirmed channel got %d messages", n)
	}

	e.srv.ConfirmChannel(t, owner, chID)
	checkLink(t, e.srv, string(chat.Next(t, deliveryWait).Body), first, "chat", chID)
	logLine(t, e.srv, "action=notification_channel_confirmed", "channel="+chID, "by=console")

	// Pointed elsewhere, the channel waits for the owner again.
	r = call(t, e.srv, http.MethodPost, channelsPath+"/"+chID, owner, nil, map[string]string{"target": elsewhere.URL})
	mustStatus(t, r, http.StatusOK)
	if r.Body["status"] != "pending_confirmation" {
		t.Fatalf("a moved channel is %v", r.Body["status"])
	}
	logLine(t, e.srv, "action=notification_channel_updated", "channel="+chID, "revision=2")
	_, second := pendingSpend(t, e.srv, agentKey)
	e.srv.Quiesce(t, deliveryWait)
	if chat.Count() != 1 || elsewhere.Count() != 0 {
		t.Fatalf("a moved, unconfirmed channel sent: %d to the old target, %d to the new", chat.Count()-1, elsewhere.Count())
	}
	e.srv.ConfirmChannel(t, owner, chID)
	seen := map[string]bool{}
	for range 2 {
		text := string(elsewhere.Next(t, deliveryWait).Body)
		if m := linkPattern.FindStringSubmatch(text); m != nil {
			seen[m[1]] = true
			if claims, err := e.srv.Service().Links().Verify(m[2], e.srv.Clock.Now()); err != nil || claims.ChannelRevision != 2 {
				t.Errorf("a link sent to the new target: revision %d (%v), want 2", claims.ChannelRevision, err)
			}
		}
	}
	if !seen[first["id"].(string)] || !seen[second["id"].(string)] {
		t.Fatalf("confirmed at its new target, the channel got links for %v, want both waiting approvals", seen)
	}
	mustStatus(t, call(t, e.srv, http.MethodDelete, channelsPath+"/"+chID, owner, nil, nil), http.StatusOK)
	logLine(t, e.srv, "action=notification_channel_deleted", "channel="+chID, "owner="+e.owner.ID)
}
