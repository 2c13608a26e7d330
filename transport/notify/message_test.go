package notify

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

var now = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

func testNotice() actors.ApprovalNotice {
	return actors.ApprovalNotice{
		Channel:    actors.NotificationChannel{ID: "ntc_0123456789abcdef0123456789abcdef", Type: "email", Target: "owner@example.com"},
		ApprovalID: "apr_0123456789abcdef0123456789abcdef", ShortCode: "#K7QZ", ExpiresAt: now.Add(90 * time.Second), Now: now,
		AgentID: "agt_0123456789abcdef0123456789abcdef", AgentName: "bot", Amount: policy.MustAmount("1"), Currency: "usdc",
		Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/x"}, Reason: "approval_over",
	}
}

// Text from outside cannot add headers or lines to a message.
func TestMessageCleansOutsideText(t *testing.T) {
	n := testNotice()
	n.AgentName = "bot\r\nBcc: thief@evil.example"
	n.Resource.Path = "/x\nSubject: pwned\u202e"
	n.Livemode = false
	m := compose(n, "https://console.example.com/approvals/x?link=t")
	raw := mailMessage(m, &mail.Address{Address: "guard@example.com"}, "owner@example.com", now, "id@example.com")
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("Bcc") != "" || len(msg.Header["Subject"]) != 1 || !strings.HasPrefix(msg.Header.Get("Subject"), "[practice] Approval needed #K7QZ") {
		t.Errorf("headers %v", msg.Header)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	for _, line := range strings.Split(string(body), "\r\n") {
		if strings.HasPrefix(line, "Bcc:") || strings.HasPrefix(line, "Subject:") || strings.ContainsRune(line, '\u202e') {
			t.Errorf("outside text broke a line: %q", line)
		}
	}
	if d, _ := msg.Header.Date(); !d.Equal(now) {
		t.Errorf("Date %q", msg.Header.Get("Date"))
	}
}

func TestChatEscapesMarkup(t *testing.T) {
	n := testNotice()
	n.AgentName = "<!channel> & co"
	var body struct{ Text string }
	if err := json.Unmarshal(chatBody(compose(n, "https://c/x")), &body); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(body.Text, "<!channel>") || !strings.Contains(body.Text, "&lt;!channel&gt; &amp; co") {
		t.Errorf("chat text %s", body.Text)
	}
}

func TestTimeLeft(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Second: "less than a minute left", 90 * time.Second: "1 minute left",
		15 * time.Minute: "15 minutes left", -time.Second: "less than a minute left"} {
		if got := timeLeft(d); got != want {
			t.Errorf("timeLeft(%v) = %q, want %q", d, got, want)
		}
	}
}
