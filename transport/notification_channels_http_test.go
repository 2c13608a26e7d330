package transport_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

const channelsPath = "/v1/notification_channels"

var channelIDPattern = regexp.MustCompile(`^ntc_[0-9a-f]{32}$`)

// withMail configures a mail server address; nothing listens there unless
// the test starts one (channels can be managed without it).
func withMail(addr string) guardtest.Option {
	return guardtest.WithConfig(func(c *wire.Config) {
		c.SMTPAddr = addr
		c.SMTPFrom = "Payment Guard <guard@guard.example.com>"
	})
}

// addChannel creates a channel that must answer 201, pending the owner's
// confirmation, confirms it as the owner does in the console, and returns
// it as it then reads.
func addChannel(t *testing.T, s *guardtest.Server, ownerKey, typ, target string) map[string]any {
	t.Helper()
	r := call(t, s, http.MethodPost, channelsPath, ownerKey, nil, map[string]string{"type": typ, "target": target})
	mustStatus(t, r, http.StatusCreated)
	checkChannel(t, r.Body, typ, r.Body["livemode"] == true)
	if r.Body["status"] != "pending_confirmation" || r.Body["confirm_url"] != consoleURL+"/channels" || r.Body["confirmed_at"] != nil {
		t.Fatalf("a channel the API adds is %v (confirm at %v), want pending_confirmation at %s/channels", r.Body["status"], r.Body["confirm_url"], consoleURL)
	}
	id := r.Body["id"].(string)
	s.ConfirmChannel(t, ownerKey, id)
	r = call(t, s, http.MethodGet, channelsPath+"/"+id, ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if r.Body["status"] != "active" || r.Body["confirm_url"] != nil || r.Body["confirmed_at"] == nil {
		t.Fatalf("a confirmed channel reads %s", r.Raw)
	}
	return r.Body
}

// checkChannel checks the shape of a channel object.
func checkChannel(t *testing.T, ch map[string]any, typ string, live bool) {
	t.Helper()
	if id, _ := ch["id"].(string); !channelIDPattern.MatchString(id) {
		t.Errorf("channel id %v", ch["id"])
	}
	if ch["object"] != "notification_channel" || ch["type"] != typ || ch["livemode"] != live {
		t.Errorf("channel %v, want a %s channel with livemode %v", ch, typ, live)
	}
	if _, ok := ch["created_at"].(string); !ok {
		t.Errorf("channel has no created_at: %v", ch)
	}
}

// channelIDs lists the ids GET /v1/notification_channels answers, in order.
func channelIDs(t *testing.T, s *guardtest.Server, ownerKey string) []string {
	t.Helper()
	r := call(t, s, http.MethodGet, channelsPath, ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if r.Body["object"] != "list" || r.Body["url"] != channelsPath || r.Body["has_more"] != false {
		t.Fatalf("channel list envelope: %s", r.Raw)
	}
	var out []string
	for _, it := range r.Body["data"].([]any) {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return out
}

func TestNotificationChannelsCRUD(t *testing.T) {
	e := start(t, withMail("127.0.0.1:25"))
	owner := e.owner.TestKey
	const hook = "https://hooks.chat.example.com/services/T0001/B0002/SuperSecretToken9"

	mail := addChannel(t, e.srv, owner, "email", "owner@example.com")
	if mail["target"] != "owner@example.com" {
		t.Errorf("email target shown as %v", mail["target"])
	}
	chat := addChannel(t, e.srv, owner, "chat", hook)
	if chat["target"] != "https://hooks.chat.example.com/...ken9" {
		t.Errorf("chat target shown as %v, want the host and the last four characters only", chat["target"])
	}
	mailID, chatID := mail["id"].(string), chat["id"].(string)

	if got := channelIDs(t, e.srv, owner); fmt.Sprint(got) != fmt.Sprint([]string{chatID, mailID}) {
		t.Fatalf("list %v, want newest first [%s %s]", got, chatID, mailID)
	}
	r := call(t, e.srv, http.MethodGet, channelsPath+"/"+chatID, owner, nil, nil)
	mustStatus(t, r, http.StatusOK)
	checkChannel(t, r.Body, "chat", false)
	if r.Body["target"] != chat["target"] {
		t.Errorf("read target %v, created %v", r.Body["target"], chat["target"])
	}

	// Each creation emitted notification_channel.added, to the owner only,
	// and no event, list or read ever carries the webhook's secret.
	ev := call(t, e.srv, http.MethodGet, "/v1/events?type=notification_channel.added", owner, nil, nil)
	mustStatus(t, ev, http.StatusOK)
	data := ev.Body["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("%d notification_channel.added events, want 2: %s", len(data), ev.Raw)
	}
	got := map[string]bool{}
	for _, it := range data {
		o := obj(t, obj(t, it.(map[string]any), "data"), "object")
		got[o["id"].(string)] = true
		if o["object"] != "notification_channel" {
			t.Errorf("event object %v", o)
		}
	}
	if !got[mailID] || !got[chatID] {
		t.Errorf("events name %v, want %s and %s", got, mailID, chatID)
	}
	for what, raw := range map[string][]byte{"events": ev.Raw, "list": call(t, e.srv, http.MethodGet, channelsPath, owner, nil, nil).Raw, "read": r.Raw} {
		if strings.Contains(string(raw), "SuperSecretToken") {
			t.Errorf("%s shows the webhook secret: %s", what, raw)
		}
	}
	agentEvents := call(t, e.srv, http.MethodGet, "/v1/events?type=notification_channel.added", e.agentKey, nil, nil)
	mustStatus(t, agentEvents, http.StatusOK)
	if n := len(agentEvents.Body["data"].([]any)); n != 0 {
		t.Errorf("the agent sees %d notification_channel.added events", n)
	}

	// Agent keys never manage channels.
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, channelsPath}, {http.MethodGet, channelsPath},
		{http.MethodGet, channelsPath + "/" + mailID}, {http.MethodDelete, channelsPath + "/" + mailID},
	} {
		var body any
		if c.method == http.MethodPost {
			body = `{"type":"chat","target":"https://chat.example.com/x"}`
		}
		wantError(t, call(t, e.srv, c.method, c.path, e.agentKey, nil, body), 403, "permission_error", "key_kind_not_allowed", "")
	}

	// Practice and live are separate: the live key sees none of them.
	live := e.owner.LiveKey
	if ids := channelIDs(t, e.srv, live); len(ids) != 0 {
		t.Fatalf("the live environment lists practice channels %v", ids)
	}
	wantError(t, call(t, e.srv, http.MethodGet, channelsPath+"/"+mailID, live, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodDelete, channelsPath+"/"+mailID, live, nil, nil), 404, "not_found_error", "resource_missing", "")
	liveChat := addChannel(t, e.srv, live, "chat", hook)
	if liveChat["livemode"] != true {
		t.Errorf("live channel livemode %v", liveChat["livemode"])
	}
	wantError(t, call(t, e.srv, http.MethodGet, channelsPath+"/"+liveChat["id"].(string), owner, nil, nil), 404, "not_found_error", "resource_missing", "")

	// Delete answers the channel, marked deleted; it is gone afterwards.
	d := call(t, e.srv, http.MethodDelete, channelsPath+"/"+mailID, owner, nil, nil)
	mustStatus(t, d, http.StatusOK)
	if d.Body["id"] != mailID || d.Body["deleted"] != true || d.Body["object"] != "notification_channel" {
		t.Fatalf("delete answered %s", d.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodGet, channelsPath+"/"+mailID, owner, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodDelete, channelsPath+"/"+mailID, owner, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodGet, channelsPath+"/ntc_x", owner, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodDelete, channelsPath+"/"+chatID, owner, nil, `{"force":true}`), 400, "invalid_request_error", "parameter_invalid", "")
	if ids := channelIDs(t, e.srv, owner); fmt.Sprint(ids) != fmt.Sprint([]string{chatID}) {
		t.Fatalf("after the delete the list is %v, want [%s]", ids, chatID)
	}
	wantError(t, call(t, e.srv, http.MethodGet, channelsPath+"?type=chat", owner, nil, nil), 400, "invalid_request_error", "parameter_unknown", "type")
}

func TestNotificationChannelValidation(t *testing.T) {
	e := start(t, withMail("127.0.0.1:25"))
	owner := e.owner.TestKey
	long := func(prefix string, n int, suffix string) string {
		return prefix + strings.Repeat("a", n-len(prefix)-len(suffix)) + suffix
	}
	for _, c := range []struct {
		name, body, code, param string
	}{
		{"no type", `{"target":"owner@example.com"}`, "parameter_missing", "type"},
		{"no target", `{"type":"email"}`, "parameter_missing", "target"},
		{"empty body", `{}`, "parameter_missing", "type"},
		{"unknown type", `{"type":"sms","target":"+15550100"}`, "parameter_invalid", "type"},
		{"type case", `{"type":"Email","target":"owner@example.com"}`, "parameter_invalid", "type"},
		{"type not a string", `{"type":1,"target":"owner@example.com"}`, "parameter_invalid", "type"},
		{"target not a string", `{"type":"chat","target":5}`, "parameter_invalid", "target"},
		{"unknown field", `{"type":"email","target":"owner@example.com","name":"me"}`, "parameter_unknown", "name"},
		{"duplicate key", `{"type":"email","type":"chat","target":"owner@example.com"}`, "invalid_json", "type"},
		{"email display name", `{"type":"email","target":"Owner <owner@example.com>"}`, "parameter_invalid", "target"},
		{"email angle brackets", `{"type":"email","target":"<owner@example.com>"}`, "parameter_invalid", "target"},
		{"email list", `{"type":"email","target":"owner@example.com, boss@example.com"}`, "parameter_invalid", "target"},
		{"email header injection", `{"type":"email","target":"owner@example.com\r\nBcc: thief@evil.example"}`, "parameter_invalid", "target"},
		{"email comment", `{"type":"email","target":"owner@example.com (me)"}`, "parameter_invalid", "target"},
		{"email no at", `{"type":"email","target":"owner.example.com"}`, "parameter_invalid", "target"},
		{"email no dot", `{"type":"email","target":"owner@localhost"}`, "parameter_invalid", "target"},
		{"email ip literal", `{"type":"email","target":"owner@[127.0.0.1]"}`, "parameter_invalid", "target"},
		{"email ip", `{"type":"email","target":"owner@127.0.0.1"}`, "parameter_invalid", "target"},
		{"email non-ascii", `{"type":"email","target":"öwner@example.com"}`, "parameter_invalid", "target"},
		{"email space", `{"type":"email","target":" owner@example.com"}`, "parameter_invalid", "target"},
		{"email empty", `{"type":"email","target":""}`, "parameter_invalid", "target"},
		{"email too long", `{"type":"email","target":"` + long("o", 255, "@example.com") + `"}`, "parameter_invalid", "target"},
		{"chat plain http", `{"type":"chat","target":"http://hooks.chat.example.com/x"}`, "parameter_invalid", "target"},
		{"chat userinfo", `{"type":"chat","target":"https://user:pw@hooks.chat.example.com/x"}`, "parameter_invalid", "target"},
		{"chat relative", `{"type":"chat","target":"/services/x"}`, "parameter_invalid", "target"},
		{"chat scheme", `{"type":"chat","target":"ftp://hooks.chat.example.com/x"}`, "parameter_invalid", "target"},
		{"chat javascript", `{"type":"chat","target":"javascript:alert(1)"}`, "parameter_invalid", "target"},
		{"chat fragment", `{"type":"chat","target":"https://hooks.chat.example.com/x#y"}`, "parameter_invalid", "target"},
		{"chat no host", `{"type":"chat","target":"https:///x"}`, "parameter_invalid", "target"},
		{"chat space", `{"type":"chat","target":"https://hooks.chat.example.com/a b"}`, "parameter_invalid", "target"},
		{"chat an address", `{"type":"chat","target":"owner@example.com"}`, "parameter_invalid", "target"},
		{"chat too long", `{"type":"chat","target":"` + long("https://hooks.chat.example.com/", 2049, "") + `"}`, "parameter_invalid", "target"},
		{"chat metadata endpoint", `{"type":"chat","target":"https://169.254.169.254/latest/meta-data"}`, "parameter_invalid", "target"},
		{"chat link-local", `{"type":"chat","target":"https://[fe80::1]/hook"}`, "parameter_invalid", "target"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := wantError(t, call(t, e.srv, http.MethodPost, channelsPath, owner, nil, c.body), 400, "invalid_request_error", c.code, c.param)
			if c.name == "chat plain http" && !strings.Contains(e["message"].(string), "loopback") {
				t.Errorf("the message does not say plain http is for loopback hosts: %v", e["message"])
			}
			if c.name == "email no at" && !strings.Contains(e["message"].(string), "no @") {
				t.Errorf("the message does not say the address lacks its @: %v", e["message"])
			}
		})
	}
	wantError(t, call(t, e.srv, http.MethodPost, channelsPath, owner, map[string]string{"Content-Type": "text/plain"},
		`{"type":"email","target":"owner@example.com"}`), 400, "invalid_request_error", "unsupported_content_type", "Content-Type")
	if ids := channelIDs(t, e.srv, owner); len(ids) != 0 {
		t.Fatalf("refused requests created channels %v", ids)
	}
	// The forms that pass: loopback http (a local relay), https with a
	// query, an address with plus and subdomain.
	for _, c := range []struct{ typ, target string }{
		{"chat", "http://127.0.0.1:8065/hooks/abc"},
		{"chat", "http://[::1]:8065/hooks/abc"},
		{"chat", "http://localhost/hooks/abc"},
		{"chat", "https://chat.example.com/hooks/abc?channel=ops"},
		{"email", "owner+guard@mail.example.co.uk"},
	} {
		addChannel(t, e.srv, owner, c.typ, c.target)
	}
	if ids := channelIDs(t, e.srv, owner); len(ids) != 5 {
		t.Fatalf("%d channels, want 5", len(ids))
	}
	// A live chat channel posts only to public addresses.
	for _, target := range []string{"http://127.0.0.1:8065/hooks/abc", "http://localhost/hooks/abc", "https://10.1.2.3/hooks/abc",
		"https://169.254.169.254/hooks"} {
		r := call(t, e.srv, http.MethodPost, channelsPath, e.owner.LiveKey, nil, `{"type":"chat","target":"`+target+`"}`)
		if msg := wantError(t, r, 400, "invalid_request_error", "parameter_invalid", "target")["message"].(string); !strings.Contains(msg, "public") {
			t.Errorf("live chat channel %s: %q, want it to say the host is not public", target, msg)
		}
	}
	addChannel(t, e.srv, e.owner.LiveKey, "chat", "https://chat.example.com/hooks/abc")
}

// Without a mail server e-mail channels are refused with a message saying
// why; chat channels still work.
func TestEmailChannelNeedsMailServer(t *testing.T) {
	e := start(t)
	r := call(t, e.srv, http.MethodPost, channelsPath, e.owner.TestKey, nil, `{"type":"email","target":"owner@example.com"}`)
	err := wantError(t, r, 400, "invalid_request_error", "parameter_invalid", "type")
	if !strings.Contains(err["message"].(string), "smtp_addr") {
		t.Errorf("message does not name what is missing: %v", err["message"])
	}
	addChannel(t, e.srv, e.owner.TestKey, "chat", "https://chat.example.com/hooks/abc")
}

func TestNotificationChannelQuota(t *testing.T) {
	e := start(t)
	owner := e.owner.TestKey
	var first string
	for i := range 10 {
		ch := addChannel(t, e.srv, owner, "chat", fmt.Sprintf("https://chat.example.com/hooks/%d", i))
		if i == 0 {
			first = ch["id"].(string)
		}
	}
	r := call(t, e.srv, http.MethodPost, channelsPath, owner, nil, `{"type":"chat","target":"https://chat.example.com/hooks/11"}`)
	err := wantError(t, r, 409, "invalid_request_error", "quota_exceeded", "")
	if !strings.Contains(err["message"].(string), "delete one") {
		t.Errorf("quota message does not say what to do: %v", err["message"])
	}
	if n := len(channelIDs(t, e.srv, owner)); n != 10 {
		t.Fatalf("%d channels after the refusal, want 10", n)
	}
	// The live environment has its own quota; a deletion frees a place.
	addChannel(t, e.srv, e.owner.LiveKey, "chat", "https://chat.example.com/hooks/live")
	mustStatus(t, call(t, e.srv, http.MethodDelete, channelsPath+"/"+first, owner, nil, nil), http.StatusOK)
	addChannel(t, e.srv, owner, "chat", "https://chat.example.com/hooks/again")
}

// A second channel to the same place would send every notice, and every
// decision link, twice: it is refused, naming the channel that exists.
// E-mail addresses compare without case.
func TestNotificationChannelTwiceIsRefused(t *testing.T) {
	e := start(t, withMail("127.0.0.1:1"))
	owner := e.owner.TestKey
	chat := addChannel(t, e.srv, owner, "chat", "https://chat.example.com/hooks/same")
	mail := addChannel(t, e.srv, owner, "email", "owner@example.com")
	for body, existing := range map[string]string{
		`{"type":"chat","target":"https://chat.example.com/hooks/same"}`: chat["id"].(string),
		`{"type":"email","target":"OWNER@Example.com"}`:                  mail["id"].(string),
	} {
		err := wantError(t, call(t, e.srv, http.MethodPost, channelsPath, owner, nil, body), 409, "invalid_request_error", "state_conflict", "target")
		if !strings.Contains(err["message"].(string), existing) {
			t.Errorf("%s: message %q does not name %s", body, err["message"], existing)
		}
	}
	if n := len(channelIDs(t, e.srv, owner)); n != 2 {
		t.Fatalf("%d channels after the refusals, want 2", n)
	}
}

// A channel's target can change (notification_channel.updated says so);
// its type cannot, and a target another channel has is refused.
func TestNotificationChannelUpdate(t *testing.T) {
	e := start(t, withMail("127.0.0.1:1"))
	owner := e.owner.TestKey
	ch := addChannel(t, e.srv, owner, "email", "old@example.com")
	other := addChannel(t, e.srv, owner, "email", "other@example.com")
	path := channelsPath + "/" + ch["id"].(string)
	r := call(t, e.srv, http.MethodPost, path, owner, nil, `{"target":"new@example.com"}`)
	mustStatus(t, r, http.StatusOK)
	if r.Body["id"] != ch["id"] || r.Body["target"] != "new@example.com" || r.Body["type"] != "email" {
		t.Fatalf("update answered %s", r.Raw)
	}
	if got := call(t, e.srv, http.MethodGet, path, owner, nil, nil); got.Body["target"] != "new@example.com" ||
		got.Body["status"] != "pending_confirmation" || got.Body["confirmed_at"] != nil {
		t.Fatalf("after the update the channel reads %s, want the new target pending the owner's confirmation", got.Raw)
	}
	if ids, _ := listIDs(t, e.srv, owner, "/v1/events?type=notification_channel.updated"); len(ids) != 1 {
		t.Fatalf("%d notification_channel.updated events, want 1", len(ids))
	}
	wantError(t, call(t, e.srv, http.MethodPost, path, owner, nil, `{"type":"chat","target":"https://chat.example.com/h"}`),
		400, "invalid_request_error", "parameter_invalid", "type")
	wantError(t, call(t, e.srv, http.MethodPost, path, owner, nil, `{"target":"Other@Example.com"}`),
		409, "invalid_request_error", "state_conflict", "target")
	wantError(t, call(t, e.srv, http.MethodPost, path, owner, nil, `{"target":"not an address"}`),
		400, "invalid_request_error", "parameter_invalid", "target")
	wantError(t, call(t, e.srv, http.MethodPost, path, owner, nil, `{}`), 400, "invalid_request_error", "parameter_missing", "target")
	wantError(t, call(t, e.srv, http.MethodPost, channelsPath+"/"+other["id"].(string), e.srv.NewOwner(t).TestKey, nil, `{"target":"x@example.com"}`),
		404, "not_found_error", "resource_missing", "")
	if got := call(t, e.srv, http.MethodGet, path, owner, nil, nil); got.Body["target"] != "new@example.com" {
		t.Fatalf("refused updates changed the channel: %s", got.Raw)
	}
}
