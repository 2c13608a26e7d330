package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/agentpay/guard/actors"
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
}

// Sender sends deliveries over HTTP.
type Sender struct {
	client    *http.Client
	transport *http.Transport
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
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	return &Sender{transport: tr, userAgent: o.UserAgent, client: &http.Client{
		Transport: tr,
		Timeout:   o.Timeout,
		// A redirect is not a delivery: the endpoint must answer 2xx itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
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
	resp, err := s.client.Do(req)
	if err != nil {
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
func (s *Sender) Close() { s.transport.CloseIdleConnections() }
