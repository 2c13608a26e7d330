package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/egress"
)

// Timeout is how long an endpoint has to answer (spec 6.3).
const Timeout = 5 * time.Second

// maxAnswer is how much of an answer is read before the connection is
// reused; the content is never used.
const maxAnswer = 64 << 10

// Options configure a Sender.
type Options struct {
	// Timeout bounds one attempt, from dialling to the end of the answer's
	// headers and the bytes read of its body; default Timeout.
	Timeout time.Duration
	// UserAgent is sent with every delivery.
	UserAgent string
	// PrivateLiveTargets lets live deliveries connect to loopback,
	// private and other non-public addresses. Without it a live delivery
	// connects only to public ones (egress.Dialer), whatever its host
	// name resolves to; practice deliveries go anywhere (local receivers,
	// tests).
	PrivateLiveTargets bool
}

// Sender sends deliveries over HTTP.
type Sender struct {
	client    *http.Client // practice deliveries
	live      *http.Client // live deliveries
	userAgent string
}

var _ actors.WebhookSender = (*Sender)(nil)

// NewSender builds a sender.
func NewSender(o Options) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = Timeout
	}
	if o.UserAgent == "" {
		o.UserAgent = "guard-webhooks/" + actors.APIVersion
	}
	s := &Sender{userAgent: o.UserAgent, client: newClient(o.Timeout, egress.LocalDialer(o.Timeout))}
	s.live = s.client
	if !o.PrivateLiveTargets {
		s.live = newClient(o.Timeout, egress.Dialer(o.Timeout))
	}
	return s
}

// newClient is the client of deliveries, dialling with d.
func newClient(timeout time.Duration, d *net.Dialer) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	if d != nil {
		tr.DialContext = d.DialContext
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// A redirect is not a delivery: the endpoint must answer 2xx itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Send makes one attempt.
func (s *Sender) Send(ctx context.Context, r actors.WebhookRequest) actors.WebhookResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return actors.WebhookResult{Err: "the endpoint URL cannot be requested: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	req.Header.Set(Header, SignatureHeader(r.Timestamp.Unix(), r.Body, r.Secrets...))
	client := s.client
	if r.Livemode {
		client = s.live
	}
	resp, err := client.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return actors.WebhookResult{Err: refused.Error()}
		}
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return actors.WebhookResult{Err: "no answer within the time limit"}
		}
		return actors.WebhookResult{Err: err.Error()}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	return actors.WebhookResult{Status: resp.StatusCode}
}

// Close drops idle connections.
func (s *Sender) Close() {
	s.client.CloseIdleConnections()
	s.live.CloseIdleConnections()
}
