package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/agentpay/guard/internal/egress"
)

// Notification channel types.
const (
	ChannelEmail = "email"
	ChannelChat  = "chat"
)

// Limits of notification channels.
const (
	// MaxNotificationChannels is how many channels one owner environment
	// may hold: every approval is sent through each of them, so the bound
	// is also a bound on the messages one approval causes.
	MaxNotificationChannels = 10
	// MaxEmailTarget is the longest address SMTP carries (RFC 5321 4.5.3.1.3).
	MaxEmailTarget = 254
	// MaxChatTarget is the longest webhook URL taken.
	MaxChatTarget = 2048
)

// NotificationChannel is where an owner environment's approval requests
// are sent: an e-mail address, or a chat incoming-webhook URL. It is
// stored with the full target; the API shows View, which hides the part of
// a webhook URL that works as a password.
type NotificationChannel struct {
	ID        string    `json:"id"`
	OwnerID   string    `json:"owner_id"`
	Livemode  bool      `json:"livemode"`
	Type      string    `json:"type"`
	Target    string    `json:"target"`
	CreatedAt time.Time `json:"created_at"`
}

// NotificationChannelView is a channel as the API and its events show it.
// Target is the e-mail address, or for chat only the webhook's scheme and
// host and its last four characters: a Slack-style incoming-webhook URL
// is a bearer secret, and it is never shown back once given.
type NotificationChannelView struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Type      string    `json:"type"`
	Target    string    `json:"target"`
	Livemode  bool      `json:"livemode"`
	CreatedAt time.Time `json:"created_at"`
}

// View is the channel's public form.
func (c NotificationChannel) View() NotificationChannelView {
	t := c.Target
	if c.Type == ChannelChat {
		t = redactURL(t)
	}
	return NotificationChannelView{ID: c.ID, Object: "notification_channel", Type: c.Type, Target: t,
		Livemode: c.Livemode, CreatedAt: c.CreatedAt}
}

// redactURL keeps the scheme, the host and the last four characters of a
// webhook URL, enough for the owner to tell two channels apart.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(hidden)"
	}
	base := u.Scheme + "://" + u.Host
	rest := strings.TrimPrefix(raw, base)
	switch {
	case rest == "" || rest == "/":
		return base
	case len(rest) <= 8:
		return base + "/..."
	}
	return base + "/..." + rest[len(rest)-4:]
}

// validateChannel checks a channel's type and target and returns the
// target as it will be stored.
func validateChannel(typ, target string) (string, *Error) {
	switch typ {
	case ChannelEmail:
		return validateEmail(target)
	case ChannelChat:
		return validateChatURL(target)
	}
	return "", &Error{Code: CodeParameterInvalid, Param: "type", Message: `type must be "email" or "chat".`}
}

func validateEmail(target string) (string, *Error) {
	bad := func(why string) *Error {
		return &Error{Code: CodeParameterInvalid, Param: "target",
			Message: "target must be one e-mail address like owner@example.com: " + why}
	}
	if target == "" || len(target) > MaxEmailTarget {
		return "", bad(fmt.Sprintf("1 to %d characters.", MaxEmailTarget))
	}
	for _, r := range target {
		if r <= ' ' || r >= 0x7f {
			return "", bad("ASCII only, without spaces or control characters.")
		}
	}
	a, err := mail.ParseAddress(target)
	// The parsed address must be the whole input: a display name, angle
	// brackets, a comment or a second address would put text the owner
	// did not mean as the recipient into the message headers.
	if err != nil || a.Name != "" || a.Address != target {
		return "", bad("no display name, angle brackets, comments or lists.")
	}
	local, domain, _ := strings.Cut(a.Address, "@")
	if local == "" || !strings.Contains(domain, ".") || strings.HasPrefix(domain, "[") || net.ParseIP(domain) != nil {
		return "", bad("the domain must be a host name with a dot, not an IP address.")
	}
	return target, nil
}

func validateChatURL(target string) (string, *Error) {
	bad := func(why string) *Error {
		return &Error{Code: CodeParameterInvalid, Param: "target",
			Message: "target must be the chat's incoming-webhook URL, absolute https://... (plain http:// only for a loopback host such as 127.0.0.1): " + why}
	}
	if target == "" || len(target) > MaxChatTarget {
		return "", bad(fmt.Sprintf("1 to %d characters.", MaxChatTarget))
	}
	for _, r := range target {
		if r <= ' ' || r == 0x7f {
			return "", bad("no spaces or control characters.")
		}
	}
	u, err := url.Parse(target)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "":
		return "", bad("it does not parse as an absolute URL.")
	case u.User != nil:
		return "", bad("no user name or password before the host.")
	case u.Hostname() == "":
		return "", bad("it has no host.")
	case u.Fragment != "" || strings.Contains(target, "#"):
		return "", bad("no #fragment.")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return "", bad("http:// is refused for " + u.Hostname() + "; use https://.")
		}
	default:
		return "", bad("the scheme " + u.Scheme + " is not https.")
	}
	return target, nil
}

// loopbackHost reports whether h names this machine: a local relay, or a
// test server.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func channelKey(ownerID string, env Env, id string) []byte {
	return join(ownerID, string(env), id)
}

// CreateNotificationChannel adds a channel to the principal's owner
// environment and emits notification_channel.added (without the secret
// part of a webhook URL). At most MaxNotificationChannels per environment;
// an e-mail channel needs the operator to have configured SMTP.
func (s *System) CreateNotificationChannel(ctx context.Context, p Principal, typ, target string) (NotificationChannelView, error) {
	if p.Kind != KindOwner {
		return NotificationChannelView{}, errorf(CodeInvalidRequest, "Only an owner key can add notification channels.")
	}
	target, verr := s.checkChannel(p, typ, target)
	if verr != nil {
		return NotificationChannelView{}, verr
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return NotificationChannelView{}, err
	}
	// The count and the new channel must not interleave with another
	// creation, and the store shows a channel only once durable: hold the
	// lock until then. Channel changes are rare.
	s.channelMu.Lock()
	defer s.channelMu.Unlock()
	chans, err := s.channelsOf(p.OwnerID, p.Env())
	if err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	if err := sameChannel(chans, "", typ, target); err != nil {
		return NotificationChannelView{}, err
	}
	if n := len(chans); n >= MaxNotificationChannels {
		return NotificationChannelView{}, &Error{Code: CodeQuotaExceeded,
			Message: fmt.Sprintf("This environment already has %d notification channels, the most allowed; delete one first.", MaxNotificationChannels)}
	}
	now := s.nowFor(p.OwnerID, p.Env())
	ch := NotificationChannel{ID: NewID("ntc", now), OwnerID: p.OwnerID, Livemode: p.Livemode, Type: typ, Target: target,
		CreatedAt: now}
	c := &change{}
	env.mu.Lock()
	c.put(bNotifyChannels, channelKey(p.OwnerID, p.Env(), ch.ID), ch)
	c.event(env, "", "notification_channel.added", ch.View(), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	return ch.View(), nil
}

// NotificationChannels lists the channels of the principal's owner
// environment, newest first.
func (s *System) NotificationChannels(p Principal) ([]NotificationChannelView, error) {
	out := []NotificationChannelView{}
	chans, err := s.channelsOf(p.OwnerID, p.Env())
	if err != nil {
		return nil, ErrUnavailable
	}
	for i := len(chans) - 1; i >= 0; i-- {
		out = append(out, chans[i].View())
	}
	return out, nil
}

// channelsOf reads an owner environment's channels, oldest first.
func (s *System) channelsOf(ownerID string, env Env) ([]NotificationChannel, error) {
	var out []NotificationChannel
	var bad error
	err := s.store.Scan(bNotifyChannels, prefixOf(ownerID, string(env)), nil, false, func(k, v []byte) bool {
		var ch NotificationChannel
		if err := json.Unmarshal(v, &ch); err != nil {
			bad = fmt.Errorf("actors: decoding channel %s: %w", k, err)
			return false
		}
		out = append(out, ch)
		return true
	})
	if err == nil {
		err = bad
	}
	return out, err
}

// channel reads one channel of an owner environment; found is false when
// it does not exist there (another environment's channel included).
func (s *System) channel(ownerID string, env Env, id string) (NotificationChannel, bool, error) {
	var ch NotificationChannel
	if !ValidID("ntc", id) {
		return ch, false, nil
	}
	ok, err := s.getJSON(bNotifyChannels, channelKey(ownerID, env, id), &ch)
	return ch, ok, err
}

// ownChannel reads one channel of the principal's environment, or says
// it does not exist.
func (s *System) ownChannel(p Principal, id string) (NotificationChannel, error) {
	ch, ok, err := s.channel(p.OwnerID, p.Env(), id)
	if err != nil {
		return ch, ErrUnavailable
	}
	if !ok {
		return ch, errorf(CodeNotFound, "No notification channel %s exists.", id)
	}
	return ch, nil
}

// NotificationChannel reads one channel of the principal's environment.
func (s *System) NotificationChannel(p Principal, id string) (NotificationChannelView, error) {
	ch, err := s.ownChannel(p, id)
	if err != nil {
		return NotificationChannelView{}, err
	}
	return ch.View(), nil
}

// DeleteNotificationChannel removes a channel: no message is sent through
// it any more, retries of earlier messages included.
func (s *System) DeleteNotificationChannel(ctx context.Context, p Principal, id string) (NotificationChannelView, error) {
	if p.Kind != KindOwner {
		return NotificationChannelView{}, errorf(CodeInvalidRequest, "Only an owner key can delete notification channels.")
	}
	s.channelMu.Lock()
	defer s.channelMu.Unlock()
	ch, err := s.ownChannel(p, id)
	if err != nil {
		return NotificationChannelView{}, err
	}
	c := &change{}
	c.del(bNotifyChannels, channelKey(p.OwnerID, p.Env(), id))
	if err := s.commit(s.store.Gen(), nil, c).Wait(ctx); err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	return ch.View(), nil
}

// checkChannel checks a channel's type and target for the principal's
// environment and returns the target as it will be stored.
func (s *System) checkChannel(p Principal, typ, target string) (string, *Error) {
	target, verr := validateChannel(typ, target)
	if verr != nil {
		return "", verr
	}
	if typ == ChannelChat && p.Livemode && !s.cfg.PrivateWebhookTargets {
		if u, err := url.Parse(target); err == nil && !egress.PublicHost(u.Hostname()) {
			return "", &Error{Code: CodeParameterInvalid, Param: "target", Message: fmt.Sprintf(
				"target host %s is not a public address (loopback, private, link-local or reserved); a live chat channel posts only to public addresses. Use the chat's public https webhook URL (an operator can allow private targets with private_webhook_targets).",
				clipText(u.Hostname(), 60))}
		}
	}
	if m := s.cfg.Messenger; m == nil || !m.Supports(typ) {
		return "", &Error{Code: CodeParameterInvalid, Param: "type",
			Message: fmt.Sprintf("This server cannot send %s notifications: its operator has not configured them (e-mail needs smtp_addr). Use another type or ask the operator.", typ)}
	}
	return target, nil
}

// sameChannel refuses a target another channel of the environment (other
// than except) already has: a second channel to the same place would send
// every notice, and every decision link, twice.
func sameChannel(chans []NotificationChannel, except, typ, target string) *Error {
	for _, ch := range chans {
		if ch.ID != except && ch.Type == typ && sameTarget(typ, ch.Target, target) {
			return &Error{Code: CodeConflict, Param: "target", Message: fmt.Sprintf(
				"Channel %s already sends %s notices to this target; each approval is sent there once.", ch.ID, typ)}
		}
	}
	return nil
}

// UpdateNotificationChannel points a channel at a new target of its type
// and emits notification_channel.updated: where approval links go is
// worth an audit trail. Notices already sent through the channel are not
// sent again; the next ones go to the new target. The type stays (delete
// the channel and add one of the other type).
func (s *System) UpdateNotificationChannel(ctx context.Context, p Principal, id, target string) (NotificationChannelView, error) {
	if p.Kind != KindOwner {
		return NotificationChannelView{}, errorf(CodeInvalidRequest, "Only an owner key can change notification channels.")
	}
	s.channelMu.Lock()
	defer s.channelMu.Unlock()
	ch, err := s.ownChannel(p, id)
	if err != nil {
		return NotificationChannelView{}, err
	}
	target, verr := s.checkChannel(p, ch.Type, target)
	if verr != nil {
		return NotificationChannelView{}, verr
	}
	if target == ch.Target {
		return ch.View(), nil // nothing changes
	}
	chans, err := s.channelsOf(p.OwnerID, p.Env())
	if err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	if err := sameChannel(chans, id, ch.Type, target); err != nil {
		return NotificationChannelView{}, err
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return NotificationChannelView{}, err
	}
	ch.Target = target
	now := s.nowFor(p.OwnerID, p.Env())
	c := &change{}
	env.mu.Lock()
	c.put(bNotifyChannels, channelKey(p.OwnerID, p.Env(), ch.ID), ch)
	c.event(env, "", "notification_channel.updated", ch.View(), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	return ch.View(), nil
}

// sameTarget reports whether two targets of a type are one place: e-mail
// addresses compare without case (as mail systems treat them), chat URLs
// exactly.
func sameTarget(typ, a, b string) bool {
	if typ == ChannelEmail {
		return strings.EqualFold(a, b)
	}
	return a == b
}
