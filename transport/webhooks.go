package transport

import (
	"time"

	"github.com/fasthttp/router"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/ratelimit"
)

// Webhook endpoints (owner keys) and the practice re-delivery of an event.
// Writes count as administration writes; re-delivery is a practice
// control with its limit, and answers 404 to a live key.
func (s *Server) webhookRoutes(r *router.Router) {
	r.POST("/v1/webhook_endpoints", s.wrap(s.ownerOnly(noQuery(s.createWebhookEndpoint), ratelimit.AdminWrites)))
	r.GET("/v1/webhook_endpoints", s.wrap(s.ownerOnly(s.listWebhookEndpoints)))
	r.GET("/v1/webhook_endpoints/{id}", s.wrap(s.ownerOnly(s.getWebhookEndpoint)))
	r.POST("/v1/webhook_endpoints/{id}", s.wrap(s.ownerOnly(noQuery(s.updateWebhookEndpoint), ratelimit.AdminWrites)))
	r.DELETE("/v1/webhook_endpoints/{id}", s.wrap(s.ownerOnly(noQuery(s.deleteWebhookEndpoint), ratelimit.AdminWrites)))
	r.POST("/v1/webhook_endpoints/{id}/rotate_secret", s.wrap(s.ownerOnly(noQuery(s.rotateWebhookSecret), ratelimit.AdminWrites)))
	r.POST("/v1/webhook_endpoints/{id}/test", s.wrap(s.ownerOnly(noQuery(s.testWebhookEndpoint), ratelimit.AdminWrites)))
	r.POST("/v1/test/events/{id}/redeliver", s.wrap(s.practiceControl(noQuery(s.redeliverEvent))))
}

type webhookEndpointCreate struct {
	URL           *string   `json:"url"`
	EnabledEvents *[]string `json:"enabled_events"`
}

type webhookEndpointChange struct {
	URL           *string   `json:"url"`
	EnabledEvents *[]string `json:"enabled_events"`
	Status        *string   `json:"status"`
}

func (s *Server) createWebhookEndpoint(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body webhookEndpointCreate
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.URL == nil {
		return badParam(codeParameterMissing, "url", "url is required: the https address the events are posted to.")
	}
	if body.EnabledEvents == nil {
		return badParam(codeParameterMissing, "enabled_events",
			`enabled_events is required: the event types to receive, like ["spend.*"], or ["*"] for every event.`)
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	e, err := s.sys.CreateWebhookEndpoint(ctx, c.who, *body.URL, *body.EnabledEvents)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, e)
	return nil
}

func (s *Server) listWebhookEndpoints(c *call) *apiError {
	if err := noParams(c, "GET /v1/webhook_endpoints", "it lists every endpoint (at most 10)."); err != nil {
		return err
	}
	eps, err := s.sys.WebhookEndpoints(c.who)
	if err != nil {
		return fromActors(err)
	}
	writeWholeList(c, "/v1/webhook_endpoints", eps)
	return nil
}

func (s *Server) getWebhookEndpoint(c *call) *apiError {
	if err := noParams(c, "GET /v1/webhook_endpoints/{id}", "it answers for the endpoint of the path."); err != nil {
		return err
	}
	e, err := s.sys.GetWebhookEndpoint(c.who, webhookPathID(c))
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, e)
	return nil
}

func (s *Server) updateWebhookEndpoint(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body webhookEndpointChange
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if err := refuseNulls(c.ctx.PostBody(), "url", "enabled_events", "status"); err != nil {
		return err
	}
	if body.URL == nil && body.EnabledEvents == nil && body.Status == nil {
		return badParam(codeParameterMissing, "", "Send at least one of url, enabled_events and status.")
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	e, err := s.sys.UpdateWebhookEndpoint(ctx, c.who, webhookPathID(c),
		actors.WebhookEndpointUpdate{URL: body.URL, EnabledEvents: body.EnabledEvents, Status: body.Status})
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, e)
	return nil
}

func (s *Server) deleteWebhookEndpoint(c *call) *apiError {
	if len(c.ctx.PostBody()) > 0 {
		return badParam(codeParameterInvalid, "", "DELETE takes no body; send an empty request.")
	}
	id := webhookPathID(c)
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	if err := s.sys.DeleteWebhookEndpoint(ctx, c.who, id); err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true})
	return nil
}

// rotateWebhookSecret answers POST /v1/webhook_endpoints/{id}/rotate_secret.
// The body is optional; an omitted grace_period_hours is 24.
func (s *Server) rotateWebhookSecret(c *call) *apiError {
	grace, aerr := graceHours(c, actors.DefaultWebhookGraceHours)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	e, err := s.sys.RotateWebhookSecret(ctx, c.who, webhookPathID(c), grace)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, e)
	return nil
}

func (s *Server) testWebhookEndpoint(c *call) *apiError {
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	d, err := s.sys.TestWebhookEndpoint(ctx, c.who, webhookPathID(c))
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, d)
	return nil
}

// redeliverEvent answers POST /v1/test/events/{id}/redeliver, a practice
// control: the deliveries it queued, possibly none.
func (s *Server) redeliverEvent(c *call) *apiError {
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	id := webhookPathID(c)
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	ds, err := s.sys.RedeliverEvent(ctx, c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeWholeList(c, "/v1/test/events/"+id+"/redeliver", ds)
	return nil
}

func webhookPathID(c *call) string {
	id, _ := c.ctx.UserValue("id").(string)
	return id
}
