package transport

import (
	"time"

	"github.com/agentpay/guard/actors"
)

// rotateBody is the optional body of a key or webhook secret rotation.
type rotateBody struct {
	GracePeriodHours *int `json:"grace_period_hours"`
}

// graceHours reads the optional rotation body: grace_period_hours, or def
// when the body or the field is omitted.
func graceHours(c *call, def int) (int, *apiError) {
	if len(c.ctx.PostBody()) == 0 {
		return def, nil
	}
	if err := requireJSON(c); err != nil {
		return 0, err
	}
	var body rotateBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return 0, err
	}
	if body.GracePeriodHours == nil {
		return def, nil
	}
	return *body.GracePeriodHours, nil
}

// rotateKey answers POST /v1/keys/{id}/rotate. The body is optional; an
// omitted grace_period_hours is 24.
func (s *Server) rotateKey(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	grace, aerr := graceHours(c, actors.DefaultGracePeriodHours)
	if aerr != nil {
		return aerr
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
