package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Webhooks (spec 6.3, 8.3, 8.4). An owner registers up to
// MaxWebhookEndpoints endpoints, practice and live together, each in one
// environment; every durable event of that environment whose type an endpoint subscribes to is delivered to it
// at least once, signed with the endpoint's secret, by a supervisor the
// System owns: a dispatcher that turns events into durable deliveries, and
// one worker per endpoint with deliveries due, so a slow endpoint holds up
// only itself. See webhooks_fanout.go and webhooks_delivery.go.

// Webhook limits.
const (
	// MaxWebhookEndpoints is the quota of endpoints of one owner,
	// practice and live together (spec 8.3), enabled or paused.
	MaxWebhookEndpoints = 10
	// WebhookAttempts is how often one delivery is tried (spec 8.4).
	WebhookAttempts = 8
	// WebhookPauseAfter consecutive failed attempts, of any deliveries,
	// pause an endpoint (spec 6.3).
	WebhookPauseAfter = 20
	// DefaultWebhookGraceHours is how long the secret a rotation replaced
	// keeps signing when the rotation names no grace period.
	DefaultWebhookGraceHours = 24
	// MaxWebhookGraceHours bounds that overlap, as for API keys (7 days).
	MaxWebhookGraceHours = 168
	// maxWebhookSends bounds the attempts in flight across all endpoints.
	maxWebhookSends = 32
)

// webhookRetryDelays are the waits after failed attempts 1 to 7: the eight
// attempts of a delivery span 23 h 36 min, "about 24 hours" (spec 8.4).
// Times are on the environment's clock, so the practice clock moves them.
var webhookRetryDelays = [WebhookAttempts - 1]time.Duration{
	time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 8 * time.Hour, 8 * time.Hour,
}

// Endpoint statuses.
const (
	WebhookEnabled = "enabled"
	WebhookPaused  = "paused"
)

// WebhookSender sends one signed webhook request. The transport implements
// it (HTTP, with the 5-second limit of spec 6.3); a nil sender leaves every
// delivery queued, durable, until a service with a sender starts.
type WebhookSender interface {
	Send(ctx context.Context, r WebhookRequest) WebhookResult
}

// WebhookRequest is one attempt.
type WebhookRequest struct {
	URL  string
	Body []byte
	// Livemode is the environment of the endpoint: a sender may send live
	// deliveries only to public addresses.
	Livemode bool
	// Secrets sign the body, newest first: each gives one v1 value.
	Secrets []string
	// Timestamp is the t of the signature: the service clock, never the
	// practice clock, since receivers compare it with their own clock.
	Timestamp time.Time
}

// WebhookResult is what the endpoint answered.
type WebhookResult struct {
	// Status is the HTTP status, 0 when no answer came in time.
	Status int
	// Err says why there was no answer.
	Err string
}

// OK reports a delivered attempt: any 2xx.
func (r WebhookResult) OK() bool { return r.Status >= 200 && r.Status <= 299 }

// webhookEndpoint is an endpoint as stored. The secrets are kept in the
// journal in clear, like the receipt signing key: signing needs them.
type webhookEndpoint struct {
	ID             string     `json:"id"`
	OwnerID        string     `json:"owner_id"`
	Livemode       bool       `json:"livemode"`
	URL            string     `json:"url"`
	EnabledEvents  []string   `json:"enabled_events"`
	Status         string     `json:"status"`
	Secret         string     `json:"secret"`
	PreviousSecret string     `json:"previous_secret,omitempty"`
	PreviousUntil  *time.Time `json:"previous_secret_expires_at,omitempty"`
	Failures       int        `json:"consecutive_failures"`
	// FromSequence: the endpoint receives the events after this one of
	// its environment (its creation, or its last re-enabling).
	FromSequence uint64     `json:"from_sequence"`
	PausedAt     *time.Time `json:"paused_at"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

func (e *webhookEndpoint) env() Env { return EnvOf(e.Livemode) }

// secrets are the secrets that sign at now, newest first.
func (e *webhookEndpoint) secrets(now time.Time) []string {
	out := []string{e.Secret}
	if e.PreviousSecret != "" && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		out = append(out, e.PreviousSecret)
	}
	return out
}

// WebhookEndpoint is an endpoint as the API shows it: never a secret.
type WebhookEndpoint struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Status        string   `json:"status"`
	Livemode      bool     `json:"livemode"`
	// ConsecutiveFailures counts failed attempts since the last delivered
	// one; at WebhookPauseAfter the endpoint pauses.
	ConsecutiveFailures int        `json:"consecutive_failures"`
	PausedAt            *time.Time `json:"paused_at"`
	// PreviousSecretExpiresAt is when the secret replaced by the last
	// rotation stops signing; null when only the current secret signs.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

func (e *webhookEndpoint) view(now time.Time) WebhookEndpoint {
	v := WebhookEndpoint{ID: e.ID, Object: "webhook_endpoint", URL: e.URL, EnabledEvents: e.EnabledEvents,
		Status: e.Status, Livemode: e.Livemode, ConsecutiveFailures: e.Failures, PausedAt: e.PausedAt,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if e.PreviousSecret != "" && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		v.PreviousSecretExpiresAt = e.PreviousUntil
	}
	return v
}

// WebhookEndpointWithSecret is the answer of creation and rotation, the
// only ones that show the secret.
type WebhookEndpointWithSecret struct {
	WebhookEndpoint
	Secret string `json:"secret"`
}

// webhookDelivery is one event on its way to one endpoint, stored while
// pending: deleted once delivered, given up after WebhookAttempts, or
// dropped with its endpoint (paused or deleted).
type webhookDelivery struct {
	ID            string    `json:"id"`
	EndpointID    string    `json:"endpoint_id"`
	OwnerID       string    `json:"owner_id"`
	Livemode      bool      `json:"livemode"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	EventSeq      uint64    `json:"event_seq"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time `json:"created_at"`
}

// WebhookDelivery is a queued delivery as the API shows it.
type WebhookDelivery struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	WebhookEndpointID string    `json:"webhook_endpoint_id"`
	EventID           string    `json:"event_id"`
	EventType         string    `json:"event_type"`
	Status            string    `json:"status"`
	Attempts          int       `json:"attempts"`
	NextAttemptAt     time.Time `json:"next_attempt_at"`
	Livemode          bool      `json:"livemode"`
	CreatedAt         time.Time `json:"created_at"`
}

func (d *webhookDelivery) view() WebhookDelivery {
	return WebhookDelivery{ID: d.ID, Object: "webhook_delivery", WebhookEndpointID: d.EndpointID, EventID: d.EventID,
		EventType: d.EventType, Status: "pending", Attempts: d.Attempts, NextAttemptAt: d.NextAttemptAt,
		Livemode: d.Livemode, CreatedAt: d.CreatedAt}
}

// WebhookTestObject is the data object of a webhook.test event. It names
// the endpoint it was sent to: no other endpoint receives it.
type WebhookTestObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	WebhookEndpointID string `json:"webhook_endpoint_id"`
}

// hook is the supervisor's handle on one endpoint.
type hook struct {
	id    string
	owner string
	env   Env
	// change serializes the durable changes of this endpoint (owner
	// updates, attempt results), each held until its record is durable.
	change sync.Mutex
	// cur is the endpoint as fan-out and delivery see it: replaced under
	// the environment lock when its change is appended, so events appended
	// later are fanned out with it. shown is what the API reads: replaced
	// once the change is durable.
	cur   atomic.Pointer[webhookEndpoint]
	shown atomic.Pointer[webhookEndpoint]

	// Guarded by webhooks.mu.
	pending map[string]*pendingDelivery
	ready   []*pendingDelivery // due, in event sequence order
	running bool               // a worker goroutine serves ready
}

// pendingDelivery is a delivery in memory, waiting on its timer or ready.
type pendingDelivery struct {
	rec   webhookDelivery
	timer Timer
	gen   uint64 // moves on every (re)scheduling: a stale timer does nothing
	ready bool
}

// webhooks is the supervisor. Its goroutines (the dispatcher, the
// endpoint workers) and timers are stopped by System.Close.
type webhooks struct {
	sys    *System
	sender WebhookSender
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sends  chan struct{} // semaphore of attempts in flight

	// createMu serializes creations, so the quota check and the commit
	// do not interleave with another creation.
	createMu sync.Mutex

	mu      sync.Mutex
	stopped bool
	hooks   map[string]*hook            // by endpoint id
	byEnv   map[string]map[string]*hook // owner|env -> id -> hook
	count   atomic.Int64                // len(hooks): the hub skips all work at 0

	// The dispatcher's inbox: durable events of environments that have
	// endpoints, in journal order.
	inboxMu sync.Mutex
	inbox   []StoredEvent
	wake    chan struct{}
	// cursor and safe are the dispatcher's own (no lock): the last event
	// examined per environment, and the last one whose deliveries are
	// durable (written back on stop).
	cursor map[string]uint64
	safe   map[string]uint64
	saved  map[string]uint64
}

func envKeyOf(ownerID string, env Env) string { return string(join(ownerID, string(env))) }

// endpoints of one environment, in creation order (ids sort by time).
func (w *webhooks) envHooks(ownerID string, env Env) []*hook {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.byEnv[envKeyOf(ownerID, env)]
	out := make([]*hook, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	sortHooks(out)
	return out
}

func sortHooks(hs []*hook) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].id < hs[j-1].id; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}
