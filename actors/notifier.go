package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// Messenger delivers approval notices to owners. The implementations (an
// SMTP client, a chat webhook client) live in the transport; the notifier
// here decides what to send, when to retry and what was sent.
type Messenger interface {
	// Supports reports whether channels of this type can be delivered:
	// e-mail needs an SMTP server configured by the operator.
	Supports(channelType string) bool
	// Deliver sends one notice through its channel, honouring ctx, and
	// returns a reference for the record of what was sent (the signed
	// link's id). A *PermanentError says that retrying cannot help.
	Deliver(ctx context.Context, n ApprovalNotice) (reference string, err error)
	// Alert sends one notice about the service rather than an approval
	// (a webhook endpoint paused), honouring ctx. It carries no link.
	Alert(ctx context.Context, a Alert) error
}

// Alert is a notice that tells the owner something needs them outside
// any approval: spec 6.3 has the owner told when an endpoint is paused,
// and the event alone may go nowhere (the paused endpoint may be the
// owner's only receiver). Words only: it decides nothing.
type Alert struct {
	// Channel is the channel with its full target.
	Channel NotificationChannel
	// ID is the event the alert tells of: unique per alert and channel
	// together with the channel's id.
	ID       string
	Subject  string
	Lines    []string
	Livemode bool
}

// PermanentError is a delivery failure that a retry would repeat: the
// chat webhook answered 404, the mail server refused the recipient.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// ApprovalNotice is what one message about one pending approval carries.
type ApprovalNotice struct {
	// Channel is the channel with its full target.
	Channel    NotificationChannel
	ApprovalID string
	ItemsHash  string
	ShortCode  string
	// OwnerURL is the approval's page in the console; the signed link
	// adds its token to it.
	OwnerURL  string
	ExpiresAt time.Time
	// Now is the environment's time when the notice was composed (the
	// practice clock counts), for "time left".
	Now         time.Time
	SpendID     string
	AgentID     string
	AgentName   string
	Amount      policy.Amount
	Currency    string
	Destination string
	Resource    policy.Resource
	// Reason is the spend's approval_reason.
	Reason   string
	Livemode bool
	// Attempt counts the tries of this notice through this channel, from 1.
	Attempt int
}

// notificationSent is the durable mark that an approval's message went
// out through a channel: it keeps a restart from sending it again.
type notificationSent struct {
	ChannelID string    `json:"channel_id"`
	Type      string    `json:"type"`
	SentAt    time.Time `json:"sent_at"`
	Attempts  int       `json:"attempts"`
	Reference string    `json:"reference"`
	// Revision is the channel's revision it went to: a channel pointed
	// elsewhere since gets the approval again, at its new target, with a
	// link that works there (the old one no longer decides).
	Revision int `json:"revision,omitempty"`
}

// notifier sends every new approval to the channels of its owner
// environment. It hears approval.requested from the hub once the approval
// is durable, and each delivery runs in a goroutine of its own, owned by
// the notifier and stopped by System.Close: nothing of it runs on the
// spend path. A failed delivery is retried after the delays of
// Config.NotifyBackoff while the approval is still pending; a successful
// one is marked in the journal, and on start every pending approval is
// looked at again, so a message not yet sent when the service stopped is
// sent after the restart. A crash between the send and its mark sends the
// message twice: at least once, like the events.
type notifier struct {
	sys *System
	m   Messenger
	log *slog.Logger
	// sem bounds the sends in flight: a burst of approvals queues here
	// instead of opening hundreds of connections.
	sem chan struct{}

	mu       sync.Mutex
	stopped  bool
	inflight map[string]bool // approval id|channel id being delivered or waiting to retry
	wg       sync.WaitGroup
}

// maxConcurrentSends bounds the messages being sent at once.
const maxConcurrentSends = 8

// startNotifier subscribes a notifier to the hub and resumes the
// deliveries a previous run left unsent. Without a Messenger nothing is
// sent (and no channel can be created).
func startNotifier(s *System) *notifier {
	if s.cfg.Messenger == nil {
		return nil
	}
	n := &notifier{sys: s, m: s.cfg.Messenger, log: s.log.With("component", "notifier"),
		sem: make(chan struct{}, maxConcurrentSends), inflight: map[string]bool{}}
	s.hub.subscribe(n.onEvent)
	n.spawn(n.resume)
	return n
}

// stop waits for every delivery goroutine; System.Close cancels their
// context first, so sends in flight end at once and parked retries leave.
func (n *notifier) stop() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.wg.Wait()
}

// spawn runs f in a goroutine the notifier owns. It counts as busy work
// for Quiesce while it runs (not while parked on a retry timer).
func (n *notifier) spawn(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return false
	}
	n.wg.Add(1)
	n.sys.busy.add(1)
	go func() {
		defer n.wg.Done()
		defer n.sys.busy.add(-1)
		f()
	}()
	return true
}

// onEvent runs in the hub's goroutine for every durable event: it must
// only hand work over.
func (n *notifier) onEvent(ev StoredEvent) {
	switch ev.Type {
	case "approval.requested":
		if id := objectID(ev.Data.Object); id != "" {
			n.spawn(func() { n.notify(id) })
		}
	case "webhook_endpoint.paused":
		n.spawn(func() { n.alertPaused(ev) })
	}
}

// alertPaused tells the owner, through every confirmed channel of the
// endpoint's environment, that the endpoint is paused and what to do. A
// failed alert is retried a few times; the event stays readable in
// GET /v1/events whatever happens to it.
func (n *notifier) alertPaused(ev StoredEvent) {
	var e WebhookEndpoint
	if b, err := json.Marshal(ev.Data.Object); err != nil || json.Unmarshal(b, &e) != nil || e.ID == "" {
		n.log.Error("cannot read the paused endpoint of an event", "event", ev.ID)
		return
	}
	env := EnvOf(ev.Livemode)
	chans, err := n.sys.channelsOf(ev.OwnerID, env)
	if err != nil {
		n.log.Error("cannot read the notification channels", "event", ev.ID, "err", err)
		return
	}
	prefix, where := "", "live"
	if !ev.Livemode {
		prefix, where = "[practice] ", "practice"
	}
	lines := []string{
		fmt.Sprintf("Your webhook endpoint %s (%s environment) is paused: its last %d deliveries failed in a row.", e.ID, where, e.ConsecutiveFailures),
		"",
		"URL:    " + clipText(e.URL, 300),
		"Paused: " + ev.Created.UTC().Format("2006-01-02 15:04 UTC"),
		"",
		"No more events are sent to it, and the deliveries that waited for it were dropped.",
		"Every event stays readable for 30 days with GET /v1/events: catch up from there.",
		`When the receiver works again, re-enable it: POST /v1/webhook_endpoints/` + e.ID + ` with {"status":"enabled"}.`,
	}
	for _, ch := range chans {
		if !ch.Active() {
			continue
		}
		a := Alert{Channel: ch, ID: ev.ID, Subject: prefix + "Webhook endpoint paused: " + e.ID, Lines: lines, Livemode: ev.Livemode}
		n.spawn(func() { n.sendAlert(a) })
	}
}

// alertAttempts bounds the tries of one alert through one channel.
const alertAttempts = 3

// sendAlert sends one alert, retrying after the first delays of
// NotifyBackoff.
func (n *notifier) sendAlert(a Alert) {
	backoff := n.sys.cfg.NotifyBackoff
	log := n.log.With("event", a.ID, "channel", a.Channel.ID, "type", a.Channel.Type)
	for attempt := 1; ; attempt++ {
		err := n.withSlot(func(ctx context.Context) error { return n.m.Alert(ctx, a) })
		if err == nil {
			log.Info("alert sent", "attempt", attempt)
			return
		}
		var perm *PermanentError
		if n.sys.ctx.Err() != nil || errors.As(err, &perm) || attempt == alertAttempts {
			log.Error("alert not delivered", "attempt", attempt, "err", err)
			return
		}
		if !n.park(backoff[min(attempt, len(backoff))-1]) {
			return
		}
	}
}

// objectID is the id of an event's object, whatever its Go type.
func objectID(obj any) string {
	switch o := obj.(type) {
	case map[string]any:
		id, _ := o["id"].(string)
		return id
	case json.RawMessage:
		var v struct{ ID string }
		_ = json.Unmarshal(o, &v)
		return v.ID
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return ""
	}
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &v)
	return v.ID
}

// resume looks at every pending approval once at start.
func (n *notifier) resume() { n.resumeFor("", "") }

// resumeFor looks at every pending approval of one owner environment (of
// all of them when ownerID is empty): at start, and when the owner
// confirms a channel, which then gets the approvals already waiting.
func (n *notifier) resumeFor(ownerID string, env Env) {
	var spendIDs []string
	err := n.sys.store.Scan(bActive, nil, nil, false, func(k, _ []byte) bool {
		if i := indexByte(k, '|'); i > 0 {
			spendIDs = append(spendIDs, string(k[i+1:]))
		}
		return true
	})
	if err != nil {
		n.log.Error("cannot look for approvals to notify", "err", err)
		return
	}
	for _, id := range spendIDs {
		var sp policy.Spend
		if ok, err := n.sys.getJSON(bSpends, []byte(id), &sp); err != nil || !ok ||
			sp.Status != policy.StatusPendingApproval || sp.Approval == nil {
			continue
		}
		if ownerID != "" {
			var ag Agent
			if ok, err := n.sys.getJSON(bAgents, []byte(sp.AgentID), &ag); err != nil || !ok ||
				ag.OwnerID != ownerID || EnvOf(sp.Livemode) != env {
				continue
			}
		}
		n.notify(sp.Approval.ID)
	}
}

// notify starts a delivery for every channel of the approval's owner
// environment that has not had this approval yet.
func (n *notifier) notify(approvalID string) {
	sp, ag, ok := n.pending(approvalID)
	if !ok {
		return
	}
	chans, err := n.sys.channelsOf(ag.OwnerID, EnvOf(sp.Livemode))
	if err != nil {
		n.log.Error("cannot read the notification channels", "approval", approvalID, "err", err)
		return
	}
	for _, ch := range chans {
		if !ch.Active() {
			continue // sends nothing until the owner confirms it
		}
		key := string(join(approvalID, ch.ID))
		if !n.claim(key) {
			continue
		}
		channelID := ch.ID
		if !n.spawn(func() { defer n.release(key); n.deliver(approvalID, channelID) }) {
			n.release(key)
		}
	}
}

func (n *notifier) claim(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inflight[key] {
		return false
	}
	n.inflight[key] = true
	return true
}

func (n *notifier) release(key string) {
	n.mu.Lock()
	delete(n.inflight, key)
	n.mu.Unlock()
}

// pending reads an approval's spend and agent; ok is false unless the
// approval is still waiting for the owner.
func (n *notifier) pending(approvalID string) (policy.Spend, Agent, bool) {
	var sp policy.Spend
	var ag Agent
	spendID, err := n.sys.store.Get(bApprovals, []byte(approvalID))
	if err != nil || spendID == nil {
		return sp, ag, false
	}
	if ok, err := n.sys.getJSON(bSpends, spendID, &sp); err != nil || !ok ||
		sp.Status != policy.StatusPendingApproval || sp.Approval == nil || sp.Approval.ID != approvalID {
		return sp, ag, false
	}
	if ok, err := n.sys.getJSON(bAgents, []byte(sp.AgentID), &ag); err != nil || !ok {
		return sp, ag, false
	}
	return sp, ag, n.sys.nowFor(ag.OwnerID, EnvOf(sp.Livemode)).Before(sp.Approval.ExpiresAt)
}

// compose builds the notice for one channel from the durable state; ok is
// false when there is nothing to send any more: the approval was decided
// or expired, the channel deleted or waiting for confirmation again, or
// the message already sent.
func (n *notifier) compose(approvalID, channelID string) (ApprovalNotice, bool) {
	sp, ag, ok := n.pending(approvalID)
	if !ok {
		return ApprovalNotice{}, false
	}
	env := EnvOf(sp.Livemode)
	ch, found, err := n.sys.channel(ag.OwnerID, env, channelID)
	if err != nil || !found || !ch.Active() {
		return ApprovalNotice{}, false
	}
	var mark notificationSent
	if sent, err := n.sys.getJSON(bNotifySent, join(approvalID, channelID), &mark); err != nil ||
		sent && max(mark.Revision, 1) == ch.LinkRevision() {
		return ApprovalNotice{}, false
	}
	reason := ""
	if sp.ApprovalReason != nil {
		reason = *sp.ApprovalReason
	}
	a := sp.Approval
	return ApprovalNotice{Channel: ch, ApprovalID: a.ID, ItemsHash: a.ItemsHash, ShortCode: a.ShortCode,
		OwnerURL: a.OwnerURL, ExpiresAt: a.ExpiresAt, Now: n.sys.nowFor(ag.OwnerID, env), SpendID: sp.ID,
		AgentID: ag.ID, AgentName: ag.Name, Amount: sp.Amount, Currency: sp.Currency, Destination: sp.Destination,
		Resource: sp.Resource, Reason: reason, Livemode: sp.Livemode}, true
}

// deliver sends one approval through one channel, retrying while it
// fails and the approval is pending: after the delays of NotifyBackoff,
// every last delay, until the approval is decided or expires. An owner
// who cannot be reached cannot decide, and an approval lives up to an
// hour.
func (n *notifier) deliver(approvalID, channelID string) {
	backoff := n.sys.cfg.NotifyBackoff
	for attempt := 1; ; attempt++ {
		notice, ok := n.compose(approvalID, channelID)
		if !ok {
			return
		}
		notice.Attempt = attempt
		ref, err := n.send(notice)
		if err == nil {
			n.markSent(notice, ref)
			return
		}
		if n.sys.ctx.Err() != nil {
			return // shutting down: the next start sends it
		}
		log := n.log.With("approval", approvalID, "channel", channelID, "type", notice.Channel.Type,
			"attempt", attempt, "err", err)
		var perm *PermanentError
		switch {
		case errors.As(err, &perm):
			log.Error("approval notice refused by the channel; not retrying")
			return
		}
		delay := backoff[min(attempt, len(backoff))-1]
		if !notice.Now.Add(delay).Before(notice.ExpiresAt) {
			log.Error("approval notice not delivered; the approval expires before the next attempt")
			return
		}
		log.Warn("approval notice not delivered; will retry", "retry_in", delay)
		if !n.park(delay) {
			return
		}
	}
}

// send runs one attempt, within the bound of concurrent sends.
func (n *notifier) send(notice ApprovalNotice) (ref string, err error) {
	err = n.withSlot(func(ctx context.Context) error {
		ref, err = n.m.Deliver(ctx, notice)
		return err
	})
	return ref, err
}

// withSlot runs f within the bound of concurrent sends, with the send
// timeout.
func (n *notifier) withSlot(f func(ctx context.Context) error) error {
	select {
	case n.sem <- struct{}{}:
	case <-n.sys.ctx.Done():
		return n.sys.ctx.Err()
	}
	defer func() { <-n.sem }()
	ctx, cancel := context.WithTimeout(n.sys.ctx, n.sys.cfg.NotifyTimeout)
	defer cancel()
	return f(ctx)
}

// park waits d on the service clock; while parked the goroutine is not
// busy for Quiesce. It reports false when the system is closing.
func (n *notifier) park(d time.Duration) bool {
	fire := make(chan struct{})
	// The timer exists before the goroutine stops counting as busy: a
	// Quiesce that sees it idle may advance the clock at once, and a timer
	// registered after that advance would wait for the next one.
	t := n.sys.clock.AfterFunc(d, func() { n.sys.busy.add(1); close(fire) })
	n.sys.busy.add(-1)
	select {
	case <-fire:
		return true
	case <-n.sys.ctx.Done():
		if t.Stop() {
			n.sys.busy.add(1)
		} else {
			<-fire // the timer is running: it counts the goroutine busy again
		}
		return false
	}
}

// markSent records the delivery durably. A mark that fails to be recorded
// only means the message may go out again after a restart.
func (n *notifier) markSent(notice ApprovalNotice, ref string) {
	mark := notificationSent{ChannelID: notice.Channel.ID, Type: notice.Channel.Type, SentAt: n.sys.clock.Now().UTC(),
		Attempts: notice.Attempt, Reference: ref, Revision: notice.Channel.LinkRevision()}
	t := n.sys.store.Append(n.sys.store.Gen(), persistence.Record{Ops: []persistence.Op{
		persistence.Put(bNotifySent, join(notice.ApprovalID, notice.Channel.ID), mustJSON(mark))}})
	// Not the system's context: a delivery that finished as the service
	// stops should still get its mark, and the store is open until Close
	// has waited for this goroutine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := t.Wait(ctx)
	log := n.log.With("approval", notice.ApprovalID, "channel", notice.Channel.ID, "type", notice.Channel.Type,
		"attempt", notice.Attempt, "reference", ref)
	if err != nil {
		log.Warn("approval notice sent, but its mark was not recorded; it may be sent again after a restart", "err", err)
		return
	}
	log.Info("approval notice sent")
}

// NotificationSent reports whether the message of an approval went out
// through a channel (the journal's mark), with its reference.
func (s *System) NotificationSent(approvalID, channelID string) (sent bool, reference string, err error) {
	var m notificationSent
	ok, err := s.getJSON(bNotifySent, join(approvalID, channelID), &m)
	return ok, m.Reference, err
}
