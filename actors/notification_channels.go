package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// Notification channel statuses. A channel carries signed approval
// links, and a link decides an approval: so a channel is a way to decide,
// and no API key may open one on its own (spec 1.9: approving needs the
// owner's own session). A channel added or pointed elsewhere through the
// API waits, sending nothing, until the owner confirms it in the console,
// signed in with the password.
const (
	ChannelPendingConfirmation = "pending_confirmation"
	ChannelActive              = "active"
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
	// Status is ChannelActive once the owner confirmed the channel at its
	// current target; anything else (a record from before confirmation
	// existed included) sends nothing.
	Status      string     `json:"status,omitempty"`
	ConfirmedAt *time.Time `json:"confirmed_at,omitempty"`
	// Revision counts the channel's targets. A link carries the revision
	// it was sent under, so that a link sent to an old target stops
	// working when the channel moves.
	Revision int `json:"revision,omitempty"`
}

// Active reports whether the channel sends approval notices, and whether
// the links it sent may decide.
func (c NotificationChannel) Active() bool { return c.Status == ChannelActive }

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
	// Status is pending_confirmation or active; ConfirmURL is the console
	// page where the owner confirms a pending channel (null once active).
	Status      string     `json:"status"`
	ConfirmURL  *string    `json:"confirm_url"`
	ConfirmedAt *time.Time `json:"confirmed_at"`
}

// View is the channel's public form; consoleURL is the console's base
// address, for the confirmation page.
func (c NotificationChannel) View(consoleURL string) NotificationChannelView {
	v := NotificationChannelView{ID: c.ID, Object: "notification_channel", Type: c.Type, Target: c.ShownTarget(),
		Livemode: c.Livemode, CreatedAt: c.CreatedAt, Status: ChannelActive, ConfirmedAt: c.ConfirmedAt}
	if !c.Active() {
		u := consoleURL + "/channels"
		v.Status, v.ConfirmURL = ChannelPendingConfirmation, &u
	}
	return v
}

// channelView is the channel's public form on this service.
func (s *System) channelView(c NotificationChannel) NotificationChannelView {
	return c.View(s.cfg.ConsoleURL)
}

// ShownTarget is the target as it may be shown: the address of an e-mail
// channel, a chat webhook's URL without the part that works as a password.
func (c NotificationChannel) ShownTarget() string {
	if c.Type == ChannelChat {
		return redactURL(c.Target)
	}
	return c.Target
}

// LinkRevision is the revision a link sent through the channel carries
// (records from before revisions are revision 1).
func (c NotificationChannel) LinkRevision() int { return max(c.Revision, 1) }

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
	if !strings.Contains(target, "@") {
		return "", bad("it has no @ between the mailbox and the domain.")
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
// environment, pending the owner's confirmation in the console, and emits
// notification_channel.added (without the secret part of a webhook URL).
// At most MaxNotificationChannels per environment; an e-mail channel needs
// the operator to have configured SMTP.
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
		CreatedAt: now, Status: ChannelPendingConfirmation, Revision: 1}
	c := &change{}
	env.mu.Lock()
	c.put(bNotifyChannels, channelKey(p.OwnerID, p.Env(), ch.ID), ch)
	c.event(env, "", "notification_channel.added", s.channelView(ch), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	s.logOwnerAction("notification_channel_added", p, slog.String("channel", ch.ID), slog.String("type", typ),
		slog.String("status", ch.Status))
	return s.channelView(ch), nil
}

// ConfirmNotificationChannel makes a pending channel active: from now on
// every new approval of its environment is sent there, and the approvals
// already waiting are sent at once. Only the console calls it, for the
// owner signed in with the password. Confirming an active channel changes
// nothing.
func (s *System) ConfirmNotificationChannel(ctx context.Context, p Principal, id string) (NotificationChannelView, error) {
	s.channelMu.Lock()
	defer s.channelMu.Unlock()
	ch, err := s.ownChannel(p, id)
	if err != nil {
		return NotificationChannelView{}, err
	}
	if ch.Active() {
		return s.channelView(ch), nil
	}
	now := s.nowFor(p.OwnerID, p.Env())
	ch.Status, ch.ConfirmedAt = ChannelActive, &now
	c := &change{}
	c.put(bNotifyChannels, channelKey(p.OwnerID, p.Env(), ch.ID), ch)
	if err := s.commit(s.store.Gen(), nil, c).Wait(ctx); err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	s.logOwnerAction("notification_channel_confirmed", p, slog.String("channel", ch.ID), slog.String("type", ch.Type))
	if s.notifier != nil {
		s.notifier.spawn(func() { s.notifier.resumeFor(p.OwnerID, p.Env()) })
	}
	return s.channelView(ch), nil
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
		out = append(out, s.channelView(chans[i]))
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
	return s.channelView(ch), nil
}

// DeleteNotificationChannel removes a channel: no message is sent through
// it any more, retries of earlier messages included, and the links it
// sent no longer decide. The console (a zero KeyID) may remove one too.
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
	s.logOwnerAction("notification_channel_deleted", p, slog.String("channel", ch.ID), slog.String("type", ch.Type))
	return s.channelView(ch), nil
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
	if typ == ChannelChat {
		if u, err := url.Parse(target); err == nil && egress.NoReceiverHost(u.Hostname()) {
			return "", &Error{Code: CodeParameterInvalid, Param: "target", Message: fmt.Sprintf(
				"target host %s is a link-local, multicast or unspecified address (the cloud metadata endpoint is one), which no chat relay has. Use the chat's webhook URL: a loopback or private relay is fine in practice.",
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
// worth an audit trail. The channel waits for the owner's confirmation
// again, as a new one does, and the links sent to the old target no
// longer decide. Notices already sent through the channel are not sent
// again. The type stays (delete the channel and add one of the other
// type).
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
		return s.channelView(ch), nil // nothing changes
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
	ch.Target, ch.Status, ch.ConfirmedAt = target, ChannelPendingConfirmation, nil
	ch.Revision = ch.LinkRevision() + 1
	now := s.nowFor(p.OwnerID, p.Env())
	c := &change{}
	env.mu.Lock()
	c.put(bNotifyChannels, channelKey(p.OwnerID, p.Env(), ch.ID), ch)
	c.event(env, "", "notification_channel.updated", s.channelView(ch), audienceOwner, now)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return NotificationChannelView{}, ErrUnavailable
	}
	s.logOwnerAction("notification_channel_updated", p, slog.String("channel", ch.ID), slog.String("type", ch.Type),
		slog.Int("revision", ch.Revision))
	return s.channelView(ch), nil
}

// LinkChannelCurrent reports why a signed link sent through a channel may
// no longer decide, or "" when it still may: the channel still exists in
// the approval's environment, is confirmed, and has the target the link
// was sent to (the link's revision). A channel removed because it leaked
// takes its links with it.
func (s *System) LinkChannelCurrent(ownerID string, env Env, channelID string, revision int) (string, error) {
	ch, ok, err := s.channel(ownerID, env, channelID)
	switch {
	case err != nil:
		return "", ErrUnavailable
	case !ok:
		return "the notification channel it was sent through has been removed", nil
	case !ch.Active() || ch.LinkRevision() != revision:
		return "the notification channel it was sent through has been changed since", nil
	}
	return "", nil
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
