package transport

import (
	"time"

	"github.com/fasthttp/router"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/ratelimit"
)

// notificationRoutes registers the owner's notification channels
// (api-decisions.md: CRUD /v1/notification_channels[/{id}]). An update
// changes a channel's target; its type stays.
func (s *Server) notificationRoutes(r *router.Router) {
	r.POST("/v1/notification_channels/{id}", s.wrap(s.ownerOnly(noQuery(s.updateNotificationChannel), ratelimit.AdminWrites)))
	r.POST("/v1/notification_channels", s.wrap(s.ownerOnly(noQuery(s.createNotificationChannel), ratelimit.AdminWrites)))
	r.GET("/v1/notification_channels", s.wrap(s.ownerOnly(s.listNotificationChannels)))
	r.GET("/v1/notification_channels/{id}", s.wrap(s.ownerOnly(noQuery(s.getNotificationChannel))))
	r.DELETE("/v1/notification_channels/{id}", s.wrap(s.ownerOnly(noQuery(s.deleteNotificationChannel), ratelimit.AdminWrites)))
}

type notificationChannelBody struct {
	Type   *string `json:"type"`
	Target *string `json:"target"`
}

// createNotificationChannel answers POST /v1/notification_channels.
func (s *Server) createNotificationChannel(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body notificationChannelBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.Type == nil {
		return badParam(codeParameterMissing, "type", `type is required: "email" or "chat".`)
	}
	if body.Target == nil {
		return badParam(codeParameterMissing, "target",
			"target is required: an e-mail address for type email, the incoming-webhook URL (https://...) for type chat.")
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	ch, err := s.sys.CreateNotificationChannel(ctx, c.who, *body.Type, *body.Target)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, ch)
	return nil
}

// updateNotificationChannel answers POST /v1/notification_channels/{id}:
// {"target": ...}, and "type" only as the channel's own.
func (s *Server) updateNotificationChannel(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := requireJSON(c); err != nil {
		return err
	}
	var body notificationChannelBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if err := refuseNulls(c.ctx.PostBody(), "type", "target"); err != nil {
		return err
	}
	if body.Target == nil {
		return badParam(codeParameterMissing, "target",
			"target is required: the channel's new e-mail address or incoming-webhook URL (https://...).")
	}
	if body.Type != nil {
		cur, err := s.sys.NotificationChannel(c.who, id)
		if err != nil {
			return fromActors(err)
		}
		if *body.Type != cur.Type {
			return badParam(codeParameterInvalid, "type", "A channel's type cannot change; delete this "+cur.Type+" channel and add a "+clip(*body.Type, 20)+" one.")
		}
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	ch, err := s.sys.UpdateNotificationChannel(ctx, c.who, id, *body.Target)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, ch)
	return nil
}

// listNotificationChannels answers GET /v1/notification_channels: every
// channel of the environment (at most actors.MaxNotificationChannels, so
// one page), newest first.
func (s *Server) listNotificationChannels(c *call) *apiError {
	if err := noParams(c, "GET /v1/notification_channels", "it lists every channel at once."); err != nil {
		return err
	}
	chans, err := s.sys.NotificationChannels(c.who)
	if err != nil {
		return fromActors(err)
	}
	writeWholeList(c, "/v1/notification_channels", chans)
	return nil
}

func (s *Server) getNotificationChannel(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	ch, err := s.sys.NotificationChannel(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, ch)
	return nil
}

// deleteNotificationChannel answers DELETE /v1/notification_channels/{id}
// with the channel and "deleted": true.
func (s *Server) deleteNotificationChannel(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if len(c.ctx.PostBody()) > 0 {
		return badParam(codeParameterInvalid, "", "This operation takes no body; send an empty request.")
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	ch, err := s.sys.DeleteNotificationChannel(ctx, c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, struct {
		actors.NotificationChannelView
		Deleted bool `json:"deleted"`
	}{ch, true})
	return nil
}
