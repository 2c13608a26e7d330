package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/mail"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/egress"
	"github.com/agentpay/guard/transport/approvallink"
)

// Config is what a Sender needs.
type Config struct {
	// Links mints the signed approval links.
	Links *approvallink.Signer
	// SMTP is the operator's mail server; nil means no e-mail channels.
	SMTP *SMTPConfig
	// Now is the time written in the Date header; time.Now when nil.
	Now func() time.Time
	// PrivateLiveTargets lets chat messages of live environments connect
	// to loopback, private and other non-public addresses; without it
	// they connect only to public ones (egress.Dialer).
	PrivateLiveTargets bool
}

// Sender delivers approval notices by e-mail and chat webhook.
type Sender struct {
	links *approvallink.Signer
	smtp  *SMTPConfig
	from  *mail.Address
	now   func() time.Time
	chat  *http.Client // practice channels
	live  *http.Client // live channels
}

var _ actors.Messenger = (*Sender)(nil)

// New checks cfg and builds a Sender.
func New(cfg Config) (*Sender, error) {
	if cfg.Links == nil {
		return nil, fmt.Errorf("notify: Config.Links is required")
	}
	s := &Sender{links: cfg.Links, now: cfg.Now, chat: newChatClient(egress.LocalDialer(ChatTimeout))}
	s.live = s.chat
	if !cfg.PrivateLiveTargets {
		s.live = newChatClient(egress.Dialer(ChatTimeout))
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.SMTP != nil {
		if err := cfg.SMTP.Validate(); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
		c := *cfg.SMTP
		s.smtp = &c
		s.from, _ = mail.ParseAddress(c.From)
	}
	return s, nil
}

// Supports reports whether a channel type can be delivered: chat always,
// e-mail when a mail server is configured.
func (s *Sender) Supports(channelType string) bool {
	switch channelType {
	case actors.ChannelChat:
		return true
	case actors.ChannelEmail:
		return s.smtp != nil
	}
	return false
}

// Deliver mints a signed link for the notice and sends the message once.
// The reference returned is the link's id.
func (s *Sender) Deliver(ctx context.Context, n actors.ApprovalNotice) (string, error) {
	token, claims, err := s.links.Mint(approvallink.Claims{ApprovalID: n.ApprovalID, ItemsHash: n.ItemsHash,
		Channel: n.Channel.Type, ChannelID: n.Channel.ID, ChannelRevision: n.Channel.LinkRevision(), ExpiresAt: n.ExpiresAt})
	if err != nil {
		return "", &actors.PermanentError{Err: err}
	}
	m := compose(n, n.OwnerURL+"?link="+token)
	switch n.Channel.Type {
	case actors.ChannelEmail:
		if s.smtp == nil {
			return "", fmt.Errorf("e-mail is not configured on this server (smtp_addr)")
		}
		msg := mailMessage(m, s.from, n.Channel.Target, s.now().UTC(), messageID(n, claims.LinkID, s.from))
		return claims.LinkID, s.sendMail(ctx, n.Channel.Target, msg)
	case actors.ChannelChat:
		client := s.chat
		if n.Livemode {
			client = s.live
		}
		return claims.LinkID, s.postChat(ctx, client, n.Channel, chatBody(m))
	}
	return "", &actors.PermanentError{Err: fmt.Errorf("unknown channel type %q", n.Channel.Type)}
}

// Alert sends a notice without a link through its channel, once.
func (s *Sender) Alert(ctx context.Context, a actors.Alert) error {
	m := message{subject: a.Subject, lines: a.Lines}
	switch a.Channel.Type {
	case actors.ChannelEmail:
		if s.smtp == nil {
			return fmt.Errorf("e-mail is not configured on this server (smtp_addr)")
		}
		msg := mailMessage(m, s.from, a.Channel.Target, s.now().UTC(), a.ID+"."+a.Channel.ID+"@"+mailDomain(s.from))
		return s.sendMail(ctx, a.Channel.Target, msg)
	case actors.ChannelChat:
		client := s.chat
		if a.Livemode {
			client = s.live
		}
		return s.postChat(ctx, client, a.Channel, chatBody(m))
	}
	return &actors.PermanentError{Err: fmt.Errorf("unknown channel type %q", a.Channel.Type)}
}
