package wire_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/policy"
)

// A notice the chat could not take before the service stopped is sent
// when the service starts again, once: the delivery mark in the journal
// keeps a second restart from sending it again.
func TestApprovalNoticeSurvivesRestart(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	chat := guardtest.StartChatServer(t, func(int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	clock := guardtest.NewFakeClock(time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC))
	cfg := wire.Defaults()
	cfg.Data = t.TempDir()
	cfg.ConsoleURL = "https://console.guard.test"
	open := func() *wire.Service {
		t.Helper()
		svc, err := wire.Open(cfg, wire.Options{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiesce := func(svc *wire.Service) {
		t.Helper()
		if err := svc.System().Quiesce(ctx); err != nil {
			t.Fatal(err)
		}
	}

	svc := open()
	sys := svc.System()
	oc, err := sys.CreateOwner(ctx, "o", "o@owner.invalid", "")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := sys.Authenticate(oc.Keys[actors.EnvTest])
	if err != nil {
		t.Fatal(err)
	}
	ch, err := sys.CreateNotificationChannel(ctx, owner, actors.ChannelChat, chat.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.ConfirmNotificationChannel(ctx, actors.OwnerPrincipal(owner.OwnerID, owner.Env()), ch.ID); err != nil {
		t.Fatal(err)
	}
	over, limit, trusted := "5.00", "100.00", []string{"api.vendor.com"}
	agent := guardtest.AgentPrincipal(t, sys, owner, "buyer", &policy.RulesInput{ApprovalOver: &over, PerSpendLimit: &limit,
		TrustedDestinations: &trusted})
	r, err := sys.CreateSpend(ctx, agent, actors.SpendInput{Amount: policy.MustAmount("12.50"), Currency: "usdc",
		Destination: "api.vendor.com", Resource: policy.Resource{Host: "api.vendor.com", Path: "/report", Method: "GET"},
		URL: "https://api.vendor.com/report", IdempotencyKey: "restart-1"})
	if err != nil {
		t.Fatal(err)
	}
	var sp policy.Spend
	if err := json.Unmarshal(r.Body, &sp); err != nil || sp.Approval == nil {
		t.Fatalf("want a pending spend, got %s (%v)", r.Body, err)
	}
	chat.Next(t, 10*time.Second) // answered 503
	quiesce(svc)
	if sent, _, _ := sys.NotificationSent(sp.Approval.ID, ch.ID); sent {
		t.Fatal("a notice answered 503 is marked sent")
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	down.Store(false)
	svc = open()
	req := chat.Next(t, 10*time.Second)
	m := regexp.MustCompile(`/approvals/(apr_[0-9a-f]{32})\?link=([A-Za-z0-9_.-]+)`).FindStringSubmatch(string(req.Body))
	if m == nil || m[1] != sp.Approval.ID {
		t.Fatalf("the resent notice has no link to %s: %s", sp.Approval.ID, req.Body)
	}
	claims, err := svc.Links().Verify(m[2], clock.Now())
	if err != nil || claims.ApprovalID != sp.Approval.ID || claims.ItemsHash != sp.Approval.ItemsHash || claims.ChannelID != ch.ID {
		t.Fatalf("the resent link: %+v, %v", claims, err)
	}
	quiesce(svc)
	if sent, ref, _ := svc.System().NotificationSent(sp.Approval.ID, ch.ID); !sent || ref != claims.LinkID {
		t.Fatalf("after the restart: sent %v, reference %q", sent, ref)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	svc = open()
	quiesce(svc)
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := chat.Count(); n != 2 {
		t.Fatalf("the chat got %d requests, want 2 (one refused, one resent after the restart)", n)
	}
}

// Every mail setting is checked at start and named when wrong.
func TestConfigValidateSMTP(t *testing.T) {
	mail := func(c *wire.Config) { c.SMTPAddr, c.SMTPFrom = "mail.example.com:587", "guard@example.com" }
	cases := []struct {
		field string
		edit  func(*wire.Config)
	}{
		{"smtp_from", func(c *wire.Config) { c.SMTPFrom = "guard@example.com" }},
		{"smtp_username", func(c *wire.Config) { c.SMTPUsername = "u" }},
		{"smtp_require_tls", func(c *wire.Config) { c.SMTPRequireTLS = true }},
		{"smtp_addr", func(c *wire.Config) { mail(c); c.SMTPAddr = "mail.example.com" }},
		{"smtp_addr", func(c *wire.Config) { mail(c); c.SMTPAddr = ":587" }},
		{"smtp_from", func(c *wire.Config) { mail(c); c.SMTPFrom = "" }},
		{"smtp_from", func(c *wire.Config) { mail(c); c.SMTPFrom = "not an address" }},
		{"smtp_password", func(c *wire.Config) { mail(c); c.SMTPUsername = "u" }},
		{"smtp_username", func(c *wire.Config) { mail(c); c.SMTPPassword = "p" }},
	}
	for _, tc := range cases {
		c := wire.Defaults()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.field)
		}
	}
	for _, ok := range []func(*wire.Config){
		mail,
		func(c *wire.Config) {
			mail(c)
			c.SMTPFrom, c.SMTPUsername, c.SMTPPassword, c.SMTPRequireTLS = "Guard <guard@example.com>", "u", "p", true
		},
	} {
		c := wire.Defaults()
		ok(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("a valid mail configuration is refused: %v", err)
		}
	}
	// From the environment, like every setting.
	c, err := wire.LoadConfig(nil, func(k string) string {
		return map[string]string{"GUARD_SMTP_ADDR": "127.0.0.1:2525", "GUARD_SMTP_FROM": "guard@example.com",
			"GUARD_SMTP_REQUIRE_TLS": "true"}[k]
	})
	if err != nil || c.SMTPAddr != "127.0.0.1:2525" || !c.SMTPRequireTLS {
		t.Errorf("LoadConfig from the environment: %+v, %v", c, err)
	}
}
