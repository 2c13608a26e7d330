package transport

import (
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// A practice deposit that could not be completed is a conflict with the
// state of the pool, not bad input: 409, like the other state conflicts.
func (s *Server) getFunding(c *call) *apiError {
	if err := noParams(c, "GET /v1/funding", "it answers for the owner of the key."); err != nil {
		return err
	}
	f, err := s.sys.Funding(c.who)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, f)
	return nil
}

type fundingBody struct {
	ReserveFloor        *string `json:"reserve_floor"`
	LowBalanceThreshold *string `json:"low_balance_threshold"`
}

// settingAmount parses a funding setting: a decimal string, 0 or more.
func settingAmount(param string, s *string) (*policy.Amount, *apiError) {
	if s == nil {
		return nil, nil
	}
	a, err := policy.ParseAmount(*s)
	if err != nil {
		return nil, badParam(codeParameterInvalid, param, param+": "+amountProblem(err))
	}
	return &a, nil
}

// updateFunding answers POST /v1/funding: the fields sent change, the
// others stay.
func (s *Server) updateFunding(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body fundingBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if err := refuseNulls(c.ctx.PostBody(), "reserve_floor", "low_balance_threshold"); err != nil {
		return err
	}
	var ch actors.FundingChange
	var aerr *apiError
	if ch.ReserveFloor, aerr = settingAmount("reserve_floor", body.ReserveFloor); aerr != nil {
		return aerr
	}
	if ch.LowBalanceThreshold, aerr = settingAmount("low_balance_threshold", body.LowBalanceThreshold); aerr != nil {
		return aerr
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	f, err := s.sys.UpdateFunding(ctx, c.who, ch)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, f)
	return nil
}

type depositBody struct {
	Amount *string `json:"amount"`
}

// testDeposit answers POST /v1/test/deposits, a practice control (see
// practiceControl).
func (s *Server) testDeposit(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body depositBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.Amount == nil {
		return badParam(codeParameterMissing, "amount", `amount is required: the sum to deposit, a decimal string like "100.00".`)
	}
	amount, aerr := parseAmount("amount", *body.Amount)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	d, err := s.sys.Deposit(ctx, c.who, amount)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, struct {
		actors.Funding
		Deposit string `json:"deposit"`
	}{d.Funding, d.ID})
	return nil
}
