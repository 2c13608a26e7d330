package transport

import (
	"time"

	"github.com/agentpay/guard/actors"
)

// practiceOnly answers a live key on a practice control the way the spec
// says: the route does not exist for it.
func practiceOnly(c *call) *apiError {
	if c.who.Livemode {
		return badParam(string(actors.CodeNotFound), "",
			"No route "+string(c.ctx.Method())+" "+string(c.ctx.Path())+" exists for live keys; practice controls take a practice (svc_test_) owner key.")
	}
	return nil
}

func (s *Server) getTestClock(c *call) *apiError {
	clk, err := s.sys.PracticeClock(c.who)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, clk)
	return nil
}

type advanceBody struct {
	Seconds *int64 `json:"seconds"`
}

func (s *Server) advanceTestClock(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body advanceBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.Seconds == nil {
		return badParam(codeParameterMissing, "seconds", "seconds is required: how far to move the practice clock forward, 1 to 31622400.")
	}
	if *body.Seconds < 1 || *body.Seconds > int64(actors.MaxClockAdvance/time.Second) {
		return badParam(codeParameterInvalid, "seconds", "seconds must be a whole number from 1 to 31622400 (one year); the clock only moves forward.")
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	clk, err := s.sys.AdvanceClock(ctx, c.who, time.Duration(*body.Seconds)*time.Second)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, clk)
	return nil
}

// resetPractice answers POST /v1/test/reset. It may sweep many records,
// hence the longer wait.
func (s *Server) resetPractice(c *call) *apiError {
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(50 * time.Second)
	defer cancel()
	out, err := s.sys.ResetPractice(ctx, c.who)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, out)
	return nil
}
