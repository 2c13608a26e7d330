package transport

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// policyBody is the writable part of spec 2.6. Null-able fields are raw so
// that an explicit null (remove the limit) differs from an omitted field.
type policyBody struct {
	PerSpendLimit         *string         `json:"per_spend_limit"`
	DailyCap              *string         `json:"daily_cap"`
	MonthlyCap            *string         `json:"monthly_cap"`
	LifetimeCap           json.RawMessage `json:"lifetime_cap"`
	AllowedDestinations   *[]string       `json:"allowed_destinations"`
	TrustedDestinations   *[]string       `json:"trusted_destinations"`
	BlockedDestinations   *[]string       `json:"blocked_destinations"`
	UnknownDestination    *string         `json:"unknown_destination"`
	ApprovalOver          *string         `json:"approval_over"`
	DestinationWindowOver json.RawMessage `json:"destination_window_over"`
	MaxPending            *int            `json:"max_pending"`
	ApprovalTTLMinutes    *int            `json:"approval_ttl_minutes"`
	ValidUntil            json.RawMessage `json:"valid_until"`
}

// policyNotNull are the policy fields that take no null: only
// lifetime_cap, destination_window_over and valid_until do (null: none).
var policyNotNull = []string{"per_spend_limit", "daily_cap", "monthly_cap", "allowed_destinations", "trusted_destinations",
	"blocked_destinations", "unknown_destination", "approval_over", "max_pending", "approval_ttl_minutes"}

// refusePolicyNulls names a field of a policy body sent as null where it
// takes none. Decoded, null reads as "left out", which means the default:
// "daily_cap": null would publish 50.00 where the owner meant no cap.
func refusePolicyNulls(raw []byte, prefix string) *apiError {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil // decodeStrict has judged the body already
	}
	for _, f := range policyNotNull {
		if v, ok := fields[f]; ok && string(v) == "null" {
			return badParam(codeParameterInvalid, prefix+f, prefix+f+
				" cannot be null (only lifetime_cap, destination_window_over and valid_until take null, meaning none); give a value, or leave it out for the default.")
		}
	}
	return nil
}

// refuseNulls names the first of fields that body sends as null. In a
// partial update, null would read as "left out" and change nothing, while
// the client meant to clear the value: a success there would hide that the
// old value stays in force.
func refuseNulls(body []byte, fields ...string) *apiError {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil // decodeStrict has judged the body already
	}
	for _, f := range fields {
		if v, ok := raw[f]; ok && string(v) == "null" {
			return badParam(codeParameterInvalid, f, f+" cannot be null; send a new value, or leave "+f+" out to keep it.")
		}
	}
	return nil
}

func nullableString(param string, raw json.RawMessage) (policy.Nullable[string], *apiError) {
	var n policy.Nullable[string]
	if raw == nil {
		return n, nil
	}
	n.Set = true
	if string(raw) == "null" {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return n, badParam(codeParameterInvalid, param, param+" must be a JSON string or null.")
	}
	n.Value = &s
	return n, nil
}

func (b *policyBody) input(prefix string) (policy.RulesInput, *apiError) {
	in := policy.RulesInput{PerSpendLimit: b.PerSpendLimit, DailyCap: b.DailyCap, MonthlyCap: b.MonthlyCap,
		AllowedDestinations: b.AllowedDestinations, TrustedDestinations: b.TrustedDestinations,
		BlockedDestinations: b.BlockedDestinations, UnknownDestination: b.UnknownDestination,
		ApprovalOver: b.ApprovalOver, MaxPending: b.MaxPending, ApprovalTTLMinutes: b.ApprovalTTLMinutes}
	var err *apiError
	if in.LifetimeCap, err = nullableString(prefix+"lifetime_cap", b.LifetimeCap); err != nil {
		return in, err
	}
	if in.DestinationWindowOver, err = nullableString(prefix+"destination_window_over", b.DestinationWindowOver); err != nil {
		return in, err
	}
	if in.ValidUntil, err = nullableString(prefix+"valid_until", b.ValidUntil); err != nil {
		return in, err
	}
	return in, nil
}

type createAgentBody struct {
	Name   *string     `json:"name"`
	Policy *policyBody `json:"policy"`
}

func (s *Server) createAgent(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	var body createAgentBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.Name == nil {
		return badParam(codeParameterMissing, "name", "name is required: a label for the agent, 1 to 100 characters.")
	}
	var in *policy.RulesInput
	if body.Policy != nil {
		var raw struct {
			Policy json.RawMessage `json:"policy"`
		}
		if json.Unmarshal(c.ctx.PostBody(), &raw) == nil {
			if err := refusePolicyNulls(raw.Policy, "policy."); err != nil {
				return err
			}
		}
		ri, err := body.Policy.input("policy.")
		if err != nil {
			return err
		}
		in = &ri
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	ag, pol, err := s.sys.CreateAgent(ctx, c.who, *body.Name, in)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, struct {
		actors.Agent
		Policy policy.Policy `json:"policy"`
	}{ag, pol})
	return nil
}

func (s *Server) getAgent(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if id == "pause_all" {
		// The emergency pause's path, asked with the wrong method: say so
		// rather than that no agent "pause_all" exists.
		return badParam(codeRouteNotFound, "", "No route "+string(c.ctx.Method())+" /v1/agents/pause_all exists; the emergency pause of every agent is POST /v1/agents/pause_all.")
	}
	ag, err := s.sys.Agent(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, ag)
	return nil
}

func (s *Server) createAgentKey(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	k, err := s.sys.CreateAgentKey(ctx, c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 201, c.reqID, k)
	return nil
}

func (s *Server) ownerPolicy(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	p, err := s.sys.Policy(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, p)
	return nil
}

// publishPolicy takes a full policy body: omitted fields take the defaults.
func (s *Server) publishPolicy(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := requireJSON(c); err != nil {
		return err
	}
	var body policyBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if err := refusePolicyNulls(c.ctx.PostBody(), ""); err != nil {
		return err
	}
	in, aerr := body.input("")
	if aerr != nil {
		return aerr
	}
	rules, ferr := in.Validate(policy.DefaultRules())
	if ferr != nil {
		return badParam(codeParameterInvalid, ferr.Param, ferr.Param+": "+ferr.Message)
	}
	return s.publish(c, id, func(policy.Rules) (policy.Rules, *actors.Error) { return rules, nil }, nil)
}

func (s *Server) publish(c *call, agentID string, edit actors.PolicyEdit, dest *actors.DestinationChange) *apiError {
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	p, err := s.sys.PublishPolicy(ctx, c.who, agentID, edit, dest)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, p)
	return nil
}

type destinationBody struct {
	Pattern *string `json:"pattern"`
	List    *string `json:"list"`
}

func (s *Server) addDestination(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := requireJSON(c); err != nil {
		return err
	}
	var body destinationBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.Pattern == nil {
		return badParam(codeParameterMissing, "pattern", `pattern is required: a host like "api.vendor.com" or "*.vendor.com".`)
	}
	if body.List == nil {
		return badParam(codeParameterMissing, "list", `list is required: "allowed", "trusted" or "blocked".`)
	}
	edit, change, eerr := actors.EditDestinations(*body.List, *body.Pattern, true)
	if eerr != nil {
		return fromActors(eerr)
	}
	return s.publish(c, id, edit, change)
}

func (s *Server) removeDestination(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if len(c.ctx.PostBody()) > 0 {
		return badParam(codeParameterInvalid, "", "This operation takes no body; send an empty request.")
	}
	list, _ := c.ctx.UserValue("list").(string)
	pattern, _ := c.ctx.UserValue("pattern").(string)
	if p, err := url.PathUnescape(pattern); err == nil {
		pattern = p
	}
	edit, change, eerr := actors.EditDestinations(list, pattern, false)
	if eerr != nil {
		return fromActors(eerr)
	}
	return s.publish(c, id, edit, change)
}

// optionalEmptyBody accepts no body or an empty JSON object, and refuses
// anything else by name.
func optionalEmptyBody(c *call) *apiError {
	if len(c.ctx.PostBody()) == 0 {
		return nil
	}
	if err := requireJSON(c); err != nil {
		return err
	}
	var empty struct{}
	return decodeStrict(c.ctx.PostBody(), &empty)
}
