package notify_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/approvallink"
	"github.com/agentpay/guard/transport/notify"
)

var now = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

func newSender(t *testing.T, smtpCfg *notify.SMTPConfig) *notify.Sender {
	t.Helper()
	// The test servers are on loopback, which live notices reach only
	// when private targets are allowed (TestLiveChatGoesOnlyToPublicAddresses).
	return newSenderOf(t, notify.Config{SMTP: smtpCfg, PrivateLiveTargets: true})
}

// newSenderOf builds a sender of cfg with fresh link keys and the test's
// clock.
func newSenderOf(t *testing.T, cfg notify.Config) *notify.Sender {
	t.Helper()
	key, err := approvallink.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Links, err = approvallink.New(key); err != nil {
		t.Fatal(err)
	}
	cfg.Now = func() time.Time { return now }
	s, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A live chat message connects only to public addresses unless the
// operator allows private targets; a practice one goes to a local relay.
func TestLiveChatGoesOnlyToPublicAddresses(t *testing.T) {
	chat := guardtest.StartChatServer(t, nil)
	s := newSenderOf(t, notify.Config{})
	live := notice("chat", chat.URL)
	_, err := deliver(t, s, live)
	var perm *actors.PermanentError
	if err == nil || !errors.As(err, &perm) || !strings.Contains(err.Error(), "not public") || strings.Contains(err.Error(), "webhook-secret-token") {
		t.Fatalf("live chat to loopback: %v, want a permanent refusal naming the address as not public (and no secret)", err)
	}
	practice := live
	practice.Livemode = false
	if _, err := deliver(t, s, practice); err != nil {
		t.Fatalf("practice chat to loopback: %v", err)
	}
	chat.Next(t, 5*time.Second)
}

func notice(typ, target string) actors.ApprovalNotice {
	return actors.ApprovalNotice{
		Channel:    actors.NotificationChannel{ID: "ntc_0123456789abcdef0123456789abcdef", Type: typ, Target: target},
		ApprovalID: "apr_0123456789abcdef0123456789abcdef", ItemsHash: "sha256:" + strings.Repeat("ab", 32), ShortCode: "#K7QZ",
		OwnerURL:  "https://console.example.com/approvals/apr_0123456789abcdef0123456789abcdef",
		ExpiresAt: now.Add(15 * time.Minute), Now: now, SpendID: "spd_0123456789abcdef0123456789abcdef",
		AgentID: "agt_0123456789abcdef0123456789abcdef", AgentName: "Bücher-Agent", Amount: policy.MustAmount("42.5"),
		Currency: "usdc", Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/r", Method: "POST"},
		Reason: "unknown_destination", Livemode: true, Attempt: 1,
	}
}

// selfSigned is a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mail.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, pool
}

func deliver(t *testing.T, s *notify.Sender, n actors.ApprovalNotice) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Deliver(ctx, n)
}

// With STARTTLS offered the session is encrypted before the credentials
// go out, and the message arrives whole.
func TestMailOverStartTLSWithAuth(t *testing.T) {
	cert, pool := selfSigned(t)
	srv := guardtest.StartMailServer(t, guardtest.MailOptions{TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		User: "guard", Password: "s3cret"})
	s := newSender(t, &notify.SMTPConfig{Addr: srv.Addr, From: "Guard <guard@example.com>", Username: "guard", Password: "s3cret",
		RequireTLS: true, TLSConfig: &tls.Config{RootCAs: pool}})
	ref, err := deliver(t, s, notice("email", "owner@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	m := srv.Next(t, 5*time.Second)
	if !m.TLS || m.User != "guard" || m.From != "guard@example.com" || len(m.To) != 1 || m.To[0] != "owner@example.com" {
		t.Errorf("session: tls %v, user %q, from %q, to %v", m.TLS, m.User, m.From, m.To)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	for _, want := range []string{`"Bücher-Agent"`, "42.50 USDC", "POST api.vendor.com/r", "not on the trusted list", "Environment: live", "15 minutes left"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if !strings.Contains(msg.Header.Get("Message-ID"), ref) || strings.HasPrefix(msg.Header.Get("Subject"), "[practice]") {
		t.Errorf("Message-ID %q (reference %s), Subject %q", msg.Header.Get("Message-ID"), ref, msg.Header.Get("Subject"))
	}
}

func TestMailRefusals(t *testing.T) {
	// TLS required but not offered: nothing is sent, and the error says why.
	plain := guardtest.StartMailServer(t, guardtest.MailOptions{})
	s := newSender(t, &notify.SMTPConfig{Addr: plain.Addr, From: "guard@example.com", RequireTLS: true})
	if _, err := deliver(t, s, notice("email", "owner@example.com")); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("RequireTLS without STARTTLS: %v", err)
	}
	// Credentials are never sent in the clear to a remote server; a
	// loopback server is this machine, so the guard holds there (the
	// server is plain and wants no AUTH: the username is refused).
	s = newSender(t, &notify.SMTPConfig{Addr: plain.Addr, From: "guard@example.com", Username: "u", Password: "p"})
	if _, err := deliver(t, s, notice("email", "owner@example.com")); err == nil || !strings.Contains(err.Error(), "AUTH") {
		t.Errorf("username against a server without AUTH: %v", err)
	}
	select {
	case m := <-plain.Mail:
		t.Fatalf("a refused exchange delivered mail to %v", m.To)
	default:
	}

	// 5xx is final, 4xx may pass later.
	for _, c := range []struct {
		code      int
		permanent bool
	}{{550, true}, {451, false}} {
		srv := guardtest.StartMailServer(t, guardtest.MailOptions{Refuse: func(stage, _ string) error {
			if stage == "rcpt" {
				return &smtp.SMTPError{Code: c.code, Message: "no"}
			}
			return nil
		}})
		s := newSender(t, &notify.SMTPConfig{Addr: srv.Addr, From: "guard@example.com"})
		_, err := deliver(t, s, notice("email", "owner@example.com"))
		var perm *actors.PermanentError
		if err == nil || errors.As(err, &perm) != c.permanent {
			t.Errorf("reply %d: %v, want permanent %v", c.code, err, c.permanent)
		}
	}
}

func TestChatAnswers(t *testing.T) {
	for _, c := range []struct {
		status    int
		ok        bool
		permanent bool
	}{
		{200, true, false}, {204, true, false}, {301, false, true}, {400, false, true}, {404, false, true},
		{408, false, false}, {429, false, false}, {500, false, false}, {503, false, false},
	} {
		chat := guardtest.StartChatServer(t, func(int) int { return c.status })
		s := newSender(t, nil)
		_, err := deliver(t, s, notice("chat", chat.URL))
		var perm *actors.PermanentError
		if (err == nil) != c.ok || errors.As(err, &perm) != c.permanent {
			t.Errorf("chat answered %d: %v, want ok %v, permanent %v", c.status, err, c.ok, c.permanent)
		}
		if err != nil && strings.Contains(err.Error(), "webhook-secret-token") {
			t.Errorf("the error shows the webhook secret: %v", err)
		}
		if r := chat.Next(t, 5*time.Second); r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q", r.Header.Get("Content-Type"))
		}
	}
	// A redirect is not followed: the message goes only where the owner said.
	target := guardtest.StartChatServer(t, nil)
	redirect := &http.Server{Handler: http.RedirectHandler(target.URL, http.StatusTemporaryRedirect)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = redirect.Serve(ln) }()
	defer redirect.Close()
	if _, err := deliver(t, newSender(t, nil), notice("chat", "http://"+ln.Addr().String()+"/hook/secret-path-token")); err == nil ||
		strings.Contains(err.Error(), "secret-path-token") {
		t.Errorf("redirect: %v", err)
	}
	if target.Count() != 0 {
		t.Error("the redirect was followed")
	}
	// A chat that is not there: the error names the host, never the path.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln2.Addr().String()
	ln2.Close()
	_, err = deliver(t, newSender(t, nil), notice("chat", "http://"+addr+"/hook/secret-path-token"))
	if err == nil || strings.Contains(err.Error(), "secret-path-token") || !strings.Contains(err.Error(), addr) {
		t.Errorf("refused connection: %v", err)
	}
}

func TestSupports(t *testing.T) {
	if s := newSender(t, nil); !s.Supports("chat") || s.Supports("email") || s.Supports("sms") {
		t.Error("without SMTP: chat only")
	}
	if s := newSender(t, &notify.SMTPConfig{Addr: "127.0.0.1:25", From: "g@example.com"}); !s.Supports("email") {
		t.Error("with SMTP: e-mail")
	}
	if _, err := notify.New(notify.Config{}); err == nil {
		t.Error("New without Links")
	}
	key, _ := approvallink.NewKey()
	links, _ := approvallink.New(key)
	if _, err := notify.New(notify.Config{Links: links, SMTP: &notify.SMTPConfig{Addr: "x", From: "g@example.com"}}); err == nil {
		t.Error("New with a bad SMTP address")
	}
}

// An alert goes out by e-mail as a proper message without any link: its
// subject and lines, a Message-ID of its event and channel, the owner's
// address.
func TestAlertByEmail(t *testing.T) {
	srv := guardtest.StartMailServer(t, guardtest.MailOptions{})
	s := newSender(t, &notify.SMTPConfig{Addr: srv.Addr, From: "Guard <guard@example.com>"})
	a := actors.Alert{Channel: actors.NotificationChannel{ID: "ntc_1", Type: actors.ChannelEmail, Target: "owner@example.com"},
		ID: "evt_1", Subject: "Webhook endpoint paused: we_1", Lines: []string{"Your webhook endpoint we_1 is paused.", "", "Re-enable it."}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Alert(ctx, a); err != nil {
		t.Fatal(err)
	}
	m := srv.Next(t, 10*time.Second)
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if len(m.To) != 1 || m.To[0] != "owner@example.com" || msg.Header.Get("Subject") != a.Subject ||
		msg.Header.Get("Message-Id") != "<evt_1.ntc_1@example.com>" ||
		!strings.Contains(string(body), "Your webhook endpoint we_1 is paused.\r\n\r\nRe-enable it.") || strings.Contains(string(body), "http") {
		t.Fatalf("alert to %v, subject %q, id %q:\n%s", m.To, msg.Header.Get("Subject"), msg.Header.Get("Message-Id"), body)
	}
}
