package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentpay/guard/persistence"
)

// The owner's operations on webhook endpoints. Each change is journaled
// and answered once durable; a change that decides which events an
// endpoint receives (creation, re-enabling, deletion, a new subscription)
// is put in effect for fan-out under the environment lock, as it is
// appended, so that the events appended after it are fanned out with it.

func newWebhookSecret() string { return "whsec_" + RandomHex(32) }

func ownerOnlyErr(p Principal, what string) error {
	if p.Kind != KindOwner {
		return errorf(CodeInvalidRequest, "Only an owner key can %s.", what)
	}
	return nil
}

// hookFor finds an endpoint of the principal's environment whose creation
// is durable.
func (s *System) hookFor(p Principal, id string) (*hook, error) {
	notFound := errorf(CodeNotFound, "No webhook endpoint %s exists.", id)
	if !ValidID("we", id) {
		return nil, notFound
	}
	s.webhooks.mu.Lock()
	h := s.webhooks.hooks[id]
	s.webhooks.mu.Unlock()
	if h == nil || h.shown.Load() == nil {
		return nil, notFound
	}
	if h.owner != p.OwnerID || h.env != p.Env() {
		return nil, notFoundFor(p, "webhook endpoint", id, h.owner, h.env.Livemode())
	}
	return h, nil
}

// CreateWebhookEndpoint registers an endpoint of the principal's
// environment and emits webhook_endpoint.created (without the secret).
// The endpoint receives the events that come after that one. Its secret
// is in the answer only.
func (s *System) CreateWebhookEndpoint(ctx context.Context, p Principal, url string, enabled []string) (WebhookEndpointWithSecret, error) {
	if err := ownerOnlyErr(p, "create webhook endpoints"); err != nil {
		return WebhookEndpointWithSecret{}, err
	}
	if err := s.checkWebhookURL(url, p.Env()); err != nil {
		return WebhookEndpointWithSecret{}, err
	}
	events, verr := CheckEnabledEvents(enabled)
	if verr != nil {
		return WebhookEndpointWithSecret{}, verr
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return WebhookEndpointWithSecret{}, err
	}
	w := s.webhooks
	w.createMu.Lock()
	defer w.createMu.Unlock()
	// The quota is per owner (spec 8.3): practice and live together.
	if n := len(w.envHooks(p.OwnerID, EnvTest)) + len(w.envHooks(p.OwnerID, EnvLive)); n >= MaxWebhookEndpoints {
		return WebhookEndpointWithSecret{}, &Error{Code: CodeQuotaExceeded,
			Message: fmt.Sprintf("This owner already has %d webhook endpoints, practice and live together, the most allowed; delete one first.", n)}
	}
	now := s.nowFor(p.OwnerID, p.Env())
	e := &webhookEndpoint{ID: NewID("we", now), OwnerID: p.OwnerID, Livemode: p.Livemode, URL: url,
		EnabledEvents: events, Status: WebhookEnabled, Secret: newWebhookSecret(), CreatedAt: now, UpdatedAt: now}
	h := &hook{id: e.ID, owner: p.OwnerID, env: p.Env(), pending: map[string]*pendingDelivery{}}
	c := &change{}
	env.mu.Lock()
	c.event(env, "", "webhook_endpoint.created", e.view(now), audienceOwner, now)
	e.FromSequence = env.state.Sequence
	c.put(bWebhookEndpoints, []byte(e.ID), e)
	h.cur.Store(e)
	w.add(h)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		w.mu.Lock()
		w.remove(h)
		w.mu.Unlock()
		return WebhookEndpointWithSecret{}, ErrUnavailable
	}
	h.shown.Store(e)
	s.logOwnerAction("webhook_endpoint_created", p, slog.String("endpoint", e.ID))
	return WebhookEndpointWithSecret{WebhookEndpoint: e.view(now), Secret: e.Secret}, nil
}

// WebhookEndpoints lists the endpoints of the principal's environment,
// oldest first.
func (s *System) WebhookEndpoints(p Principal) ([]WebhookEndpoint, error) {
	if err := ownerOnlyErr(p, "list webhook endpoints"); err != nil {
		return nil, err
	}
	now := s.nowFor(p.OwnerID, p.Env())
	out := []WebhookEndpoint{}
	for _, h := range s.webhooks.envHooks(p.OwnerID, p.Env()) {
		if e := h.shown.Load(); e != nil {
			out = append(out, e.view(now))
		}
	}
	return out, nil
}

// GetWebhookEndpoint reads one endpoint.
func (s *System) GetWebhookEndpoint(p Principal, id string) (WebhookEndpoint, error) {
	h, err := s.hookFor(p, id)
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return h.shown.Load().view(s.nowFor(p.OwnerID, p.Env())), nil
}

// WebhookEndpointUpdate names the fields to change; nil leaves one as is.
type WebhookEndpointUpdate struct {
	URL           *string
	EnabledEvents *[]string
	// Status "enabled" re-enables a paused endpoint (its failure count
	// starts again at 0; it receives the events after the re-enabling);
	// "paused" pauses it (its pending deliveries are dropped).
	Status *string
}

// UpdateWebhookEndpoint changes an endpoint.
func (s *System) UpdateWebhookEndpoint(ctx context.Context, p Principal, id string, u WebhookEndpointUpdate) (WebhookEndpoint, error) {
	if err := ownerOnlyErr(p, "change webhook endpoints"); err != nil {
		return WebhookEndpoint{}, err
	}
	if u.URL != nil {
		if err := s.checkWebhookURL(*u.URL, p.Env()); err != nil {
			return WebhookEndpoint{}, err
		}
	}
	var events []string
	if u.EnabledEvents != nil {
		var verr *Error
		if events, verr = CheckEnabledEvents(*u.EnabledEvents); verr != nil {
			return WebhookEndpoint{}, verr
		}
	}
	if u.Status != nil && *u.Status != WebhookEnabled && *u.Status != WebhookPaused {
		return WebhookEndpoint{}, &Error{Code: CodeParameterInvalid, Param: "status",
			Message: `status must be "enabled" (re-enable a paused endpoint) or "paused".`}
	}
	h, err := s.hookFor(p, id)
	if err != nil {
		return WebhookEndpoint{}, err
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return WebhookEndpoint{}, err
	}
	w := s.webhooks
	h.change.Lock()
	defer h.change.Unlock()
	cur := h.cur.Load()
	e := *cur
	now := s.nowFor(p.OwnerID, p.Env())
	e.UpdatedAt = now
	if u.URL != nil {
		e.URL = *u.URL
	}
	if u.EnabledEvents != nil {
		e.EnabledEvents = events
	}
	c := &change{}
	pausing := false
	env.mu.Lock()
	if u.Status != nil && *u.Status != e.Status {
		switch *u.Status {
		case WebhookEnabled:
			e.Status, e.PausedAt, e.Failures = WebhookEnabled, nil, 0
			e.FromSequence = env.state.Sequence
		case WebhookPaused:
			pausing = true
			e.Status, e.PausedAt = WebhookPaused, &now
			w.mu.Lock()
			for did := range h.pending {
				c.del(bWebhookDeliveries, []byte(did))
			}
			w.mu.Unlock()
		}
	}
	c.put(bWebhookEndpoints, []byte(e.ID), e)
	h.cur.Store(&e)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		h.cur.CompareAndSwap(&e, cur)
		return WebhookEndpoint{}, ErrUnavailable
	}
	h.shown.Store(&e)
	if pausing {
		w.mu.Lock()
		w.forgetAll(h)
		w.mu.Unlock()
	}
	return e.view(now), nil
}

// DeleteWebhookEndpoint removes an endpoint and its pending deliveries.
func (s *System) DeleteWebhookEndpoint(ctx context.Context, p Principal, id string) error {
	if err := ownerOnlyErr(p, "delete webhook endpoints"); err != nil {
		return err
	}
	h, err := s.hookFor(p, id)
	if err != nil {
		return err
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return err
	}
	w := s.webhooks
	h.change.Lock()
	defer h.change.Unlock()
	c := &change{}
	c.del(bWebhookEndpoints, []byte(id))
	env.mu.Lock()
	w.mu.Lock()
	if w.hooks[id] != h {
		w.mu.Unlock()
		env.mu.Unlock()
		return errorf(CodeNotFound, "No webhook endpoint %s exists.", id)
	}
	for did := range h.pending {
		c.del(bWebhookDeliveries, []byte(did))
	}
	w.remove(h)
	w.mu.Unlock()
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		// Not deleted after all; its pending deliveries come back with the
		// next start, which loads them from the disk.
		w.add(h)
		return ErrUnavailable
	}
	s.logOwnerAction("webhook_endpoint_deleted", p, slog.String("endpoint", id))
	return nil
}

// RotateWebhookSecret gives an endpoint a new secret, returned once. The
// secret it replaces keeps signing, as a second v1 value, for graceHours
// (0 to 168; 0 ends it at once) on the environment's clock; a secret
// replaced earlier stops at once.
func (s *System) RotateWebhookSecret(ctx context.Context, p Principal, id string, graceHours int) (WebhookEndpointWithSecret, error) {
	if err := ownerOnlyErr(p, "rotate webhook secrets"); err != nil {
		return WebhookEndpointWithSecret{}, err
	}
	if graceHours < 0 || graceHours > MaxWebhookGraceHours {
		return WebhookEndpointWithSecret{}, &Error{Code: CodeParameterInvalid, Param: "grace_period_hours",
			Message: fmt.Sprintf("grace_period_hours must be a whole number from 0 to %d (7 days); omit it for %d.", MaxWebhookGraceHours, DefaultWebhookGraceHours)}
	}
	h, err := s.hookFor(p, id)
	if err != nil {
		return WebhookEndpointWithSecret{}, err
	}
	h.change.Lock()
	defer h.change.Unlock()
	cur := h.cur.Load()
	e := *cur
	now := s.nowFor(p.OwnerID, p.Env())
	if graceHours > 0 && cur.PreviousSecret != "" && cur.PreviousUntil != nil && now.Before(*cur.PreviousUntil) {
		// Deliveries are signed with the current secret and the one
		// before it: a second rotation with a grace would end the first
		// one's grace early, without a word, while its receiver may still
		// check the oldest secret. As with keys, one overlap at a time.
		return WebhookEndpointWithSecret{}, &Error{Code: CodeConflict, Message: fmt.Sprintf(
			"The secret replaced by the last rotation still signs deliveries until %s; rotate with grace_period_hours 0 to end it now with this rotation, or wait until then.",
			cur.PreviousUntil.UTC().Format(time.RFC3339))}
	}
	e.PreviousSecret, e.PreviousUntil = "", nil
	if graceHours > 0 {
		until := now.Add(time.Duration(graceHours) * time.Hour)
		e.PreviousSecret, e.PreviousUntil = cur.Secret, &until
	}
	e.Secret, e.UpdatedAt = newWebhookSecret(), now
	c := &change{}
	c.put(bWebhookEndpoints, []byte(e.ID), e)
	t := s.store.Append(s.store.Gen(), persistence.Record{Ops: c.ops})
	if err := t.Wait(ctx); err != nil {
		return WebhookEndpointWithSecret{}, ErrUnavailable
	}
	h.cur.Store(&e)
	h.shown.Store(&e)
	s.logOwnerAction("webhook_secret_rotated", p, slog.String("endpoint", e.ID))
	return WebhookEndpointWithSecret{WebhookEndpoint: e.view(now), Secret: e.Secret}, nil
}

// TestWebhookEndpoint emits a webhook.test event for one endpoint and
// queues its delivery to that endpoint only, whatever it subscribes to.
func (s *System) TestWebhookEndpoint(ctx context.Context, p Principal, id string) (WebhookDelivery, error) {
	if err := ownerOnlyErr(p, "test webhook endpoints"); err != nil {
		return WebhookDelivery{}, err
	}
	h, err := s.hookFor(p, id)
	if err != nil {
		return WebhookDelivery{}, err
	}
	e := h.cur.Load()
	if e.Status != WebhookEnabled {
		return WebhookDelivery{}, &Error{Code: CodeConflict,
			Message: fmt.Sprintf("Webhook endpoint %s is paused; re-enable it (status \"enabled\") before sending a test event.", id)}
	}
	env, err := s.env(p.OwnerID, p.Env())
	if err != nil {
		return WebhookDelivery{}, err
	}
	now := s.nowFor(p.OwnerID, p.Env())
	c := &change{}
	env.mu.Lock()
	c.event(env, "", "webhook.test", WebhookTestObject{ID: NewID("wht", now), Object: "webhook_test", WebhookEndpointID: id},
		audienceOwner, now)
	d := newDeliveryRecord(e, &c.events[0].Event, now)
	c.put(bWebhookDeliveries, []byte(d.ID), d)
	t := s.commit(s.store.Gen(), env, c)
	env.mu.Unlock()
	if err := t.Wait(ctx); err != nil {
		return WebhookDelivery{}, ErrUnavailable
	}
	s.webhooks.queue(h, d)
	return d.view(), nil
}

// RedeliverEvent queues one event of the principal's practice environment
// again to every enabled endpoint that subscribes to it (a webhook.test
// event: to the endpoint it was sent to), and answers what was queued.
// Receivers see the same event id again.
func (s *System) RedeliverEvent(ctx context.Context, p Principal, eventID string) ([]WebhookDelivery, error) {
	if p.Livemode {
		return nil, errorf(CodeNotFound, "Practice control is not available with a live key.")
	}
	notFound := errorf(CodeNotFound, "No event %s exists.", eventID)
	if !ValidID("evt", eventID) {
		return nil, notFound
	}
	seq, err := s.store.Get(bEventIDs, []byte(eventID))
	if err != nil {
		return nil, ErrUnavailable
	}
	if len(seq) != 8 {
		return nil, notFound
	}
	var ev StoredEvent
	if ok, err := s.getJSON(bEvents, seqKey(prefixOf(p.OwnerID, string(p.Env())), seqOf(seq)), &ev); err != nil {
		return nil, ErrUnavailable
	} else if !ok || ev.ID != eventID {
		return nil, notFound
	}
	now := s.nowFor(p.OwnerID, p.Env())
	if ev.Created.Before(now.Add(-EventRetention)) {
		// Past the retention GET /v1/events keeps, by the clock it clips
		// with: an event the list no longer shows is not sent either.
		return nil, errorf(CodeNotFound, "No event %s exists: events are kept %d days, and this one is older.", eventID, int(EventRetention.Hours()/24))
	}
	target := ""
	if ev.Type == "webhook.test" {
		if m, ok := ev.Data.Object.(map[string]any); ok {
			target, _ = m["webhook_endpoint_id"].(string)
		}
	}
	type queued struct {
		h *hook
		d webhookDelivery
	}
	var qs []queued
	c := &change{}
	for _, h := range s.webhooks.envHooks(p.OwnerID, p.Env()) {
		e := h.shown.Load()
		if e == nil || e.Status != WebhookEnabled {
			continue
		}
		if target != "" && e.ID != target || target == "" && !subscribes(e.EnabledEvents, ev.Type) {
			continue
		}
		d := newDeliveryRecord(e, &ev.Event, now)
		c.put(bWebhookDeliveries, []byte(d.ID), d)
		qs = append(qs, queued{h, d})
	}
	out := make([]WebhookDelivery, 0, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	t := s.store.Append(s.store.Gen(), persistence.Record{Ops: c.ops})
	if err := t.Wait(ctx); err != nil {
		return nil, ErrUnavailable
	}
	for _, q := range qs {
		s.webhooks.queue(q.h, q.d)
		out = append(out, q.d.view())
	}
	return out, nil
}
