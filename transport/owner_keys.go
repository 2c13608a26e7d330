package transport

import (
	"time"

	"github.com/agentpay/guard/actors"
)

type rotateKeyBody struct {
	GracePeriodHours *int `json:"grace_period_hours"`
}

// rotateKey answers POST /v1/keys/{id}/rotate. The body is optional; an
// omitted grace_period_hours is 24.
func (s *Server) rotateKey(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	grace := actors.DefaultGracePeriodHours
	if len(c.ctx.PostBody()) > 0 {
		if err := requireJSON(c); err != nil {
			return err
		}
		var body rotateKeyBody
		if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
			return err
		}
		if body.GracePeriodHours != nil {
			grace = *body.GracePeriodHours
		}
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	k, err := s.sys.RotateKey(ctx, c.who, id, grace)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, k)
	return nil
}

// createOwnerKey answers POST /v1/owner_keys: a new owner key of the
// caller's owner and environment. The body is optional and, when sent,
// must be an empty object.
func (s *Server) createOwnerKey(c *call) *apiError {
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	k, err := s.sys.CreateOwnerKey(ctx, c.who)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, k)
	return nil
}
