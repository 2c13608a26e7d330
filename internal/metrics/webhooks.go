package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentpay/guard/actors"
)

// Webhooks returns s counting each attempt it makes.
func (m *Metrics) Webhooks(s actors.WebhookSender) actors.WebhookSender {
	return &countingSender{next: s,
		delivered: m.webhookAttempts.WithLabelValues("delivered"),
		rejected:  m.webhookAttempts.WithLabelValues("rejected"),
		noAnswer:  m.webhookAttempts.WithLabelValues("no_answer"),
		duration:  m.webhookDurations,
	}
}

type countingSender struct {
	next                          actors.WebhookSender
	delivered, rejected, noAnswer prometheus.Counter
	duration                      prometheus.Observer
}

func (c *countingSender) Send(ctx context.Context, r actors.WebhookRequest) actors.WebhookResult {
	start := time.Now()
	res := c.next.Send(ctx, r)
	c.duration.Observe(time.Since(start).Seconds())
	switch {
	case res.OK():
		c.delivered.Inc()
	case res.Status == 0:
		c.noAnswer.Inc()
	default:
		c.rejected.Inc()
	}
	return res
}
