package transport

import (
	"time"
)

func (s *Server) listAgents(c *call) *apiError {
	q, err := listParams(c)
	if err != nil {
		return err
	}
	if q.AgentID != "" {
		return badParam(codeParameterUnknown, "agent_id", "agent_id is not a filter of the agent list; read one agent with GET /v1/agents/{id}.")
	}
	page, aerr := s.sys.ListAgents(c.who, q)
	if aerr != nil {
		return fromActors(aerr)
	}
	writeList(c, "/v1/agents", page)
	return nil
}

// agentAction answers POST /v1/agents/{id}/pause, /resume and /archive.
func (s *Server) agentAction(action string) handler {
	return func(c *call) *apiError {
		id, _ := c.ctx.UserValue("id").(string)
		if err := optionalEmptyBody(c); err != nil {
			return err
		}
		ctx, cancel := requestContext(10 * time.Second)
		defer cancel()
		ag, err := s.sys.ChangeAgent(ctx, c.who, id, action)
		if err != nil {
			return fromActors(err)
		}
		writeJSON(c.ctx, 200, c.reqID, ag)
		return nil
	}
}

func (s *Server) listKeys(c *call) *apiError {
	q, err := listParams(c)
	if err != nil {
		return err
	}
	page, aerr := s.sys.ListKeyPage(c.who, q)
	if aerr != nil {
		return fromActors(aerr)
	}
	writeList(c, "/v1/keys", page)
	return nil
}

func (s *Server) revokeKey(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	k, err := s.sys.RevokeKey(ctx, c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, k)
	return nil
}

func (s *Server) cancelPolicyChange(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	pc, err := s.sys.CancelPolicyChange(ctx, c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, pc)
	return nil
}

// listPolicyChanges answers the agent's versions that wait to apply,
// oldest first: what the owner may still cancel.
func (s *Server) listPolicyChanges(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	changes, err := s.sys.PolicyChanges(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeWholeList(c, "/v1/agents/"+id+"/policy_changes", changes)
	return nil
}

func (s *Server) getPolicyChange(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	pc, err := s.sys.PolicyChange(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, pc)
	return nil
}

type renameBody struct {
	Name *string `json:"name"`
}

// renameAgent answers POST /v1/agents/{id}: an update in the Stripe style,
// whose only writable field is name.
func (s *Server) renameAgent(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := requireJSON(c); err != nil {
		return err
	}
	var body renameBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	if body.Name == nil {
		return badParam(codeParameterMissing, "name", "name is required: the agent's new label, 1 to 100 characters.")
	}
	ctx, cancel := requestContext(10 * time.Second)
	defer cancel()
	ag, err := s.sys.RenameAgent(ctx, c.who, id, *body.Name)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, ag)
	return nil
}

type pauseAllBody struct {
	Reason *string `json:"reason"`
}

// pauseAllAgents answers POST /v1/agents/pause_all, the emergency pause
// of every agent of the key's environment. The body is optional.
func (s *Server) pauseAllAgents(c *call) *apiError {
	var body pauseAllBody
	if len(c.ctx.PostBody()) > 0 {
		if err := requireJSON(c); err != nil {
			return err
		}
		if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
			return err
		}
	}
	ctx, cancel := requestContext(20 * time.Second)
	defer cancel()
	out, err := s.sys.PauseAll(ctx, c.who, body.Reason)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, out)
	return nil
}
