package console

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/approvallink"
	"github.com/agentpay/guard/transport/ratelimit"
)

// approvalItem is one approval as the inbox and the approval page show it.
type approvalItem struct {
	ApprovalID    string
	SpendID       string
	ShortCode     string
	Amount        policy.Amount
	Currency      string
	Destination   string
	Resource      policy.Resource
	AgentID       string
	AgentName     string
	Memo          string
	Rule          string // why the rules asked the owner
	RuleName      string
	PolicyVersion int
	ItemsHash     string
	ExpiresAt     time.Time
	Left          time.Duration
	Status        policy.Status
	Message       string // the spend's own account of its state
	Paused        string // how a pause holds the payment back; empty when none does
	Livemode      bool
}

// ruleText explains an approval reason in words.
func ruleText(reason *string, pol *policy.Policy) string {
	if reason == nil {
		return "The rules asked for the owner's approval."
	}
	switch *reason {
	case policy.ApprovalOverReason:
		if pol != nil {
			return "The amount is above approval_over (" + pol.ApprovalOver.Display() + ")."
		}
		return "The amount is above approval_over."
	case policy.ReasonUnknownDestination:
		return "The destination is not on the trusted list, and unknown destinations ask the owner."
	case policy.DestinationWindowReason:
		if pol != nil && pol.DestinationWindowOver != nil {
			return "The sum paid to this destination in 24 hours would pass destination_window_over (" + pol.DestinationWindowOver.Display() + ")."
		}
		return "The sum paid to this destination in 24 hours would pass destination_window_over."
	}
	return "The rule " + *reason + " asked for the owner's approval."
}

// itemOf builds the item of a pending spend.
func itemOf(sp *policy.Spend, agentName string, pol *policy.Policy, now time.Time) approvalItem {
	it := approvalItem{SpendID: sp.ID, Amount: sp.Amount, Currency: sp.Currency, Destination: sp.Destination,
		Resource: sp.Resource, AgentID: sp.AgentID, AgentName: agentName, Memo: sp.Memo, PolicyVersion: sp.PolicyVersion,
		Status: sp.Status, Message: sp.Message, Livemode: sp.Livemode}
	if sp.PauseDetail != nil && sp.Status == policy.StatusPendingApproval {
		it.Paused = sp.PauseDetail.Message
	}
	if pol != nil && pol.Version != sp.PolicyVersion {
		pol = nil // the threshold shown must be the one that applied
	}
	it.Rule = ruleText(sp.ApprovalReason, pol)
	if sp.ApprovalReason != nil {
		it.RuleName = *sp.ApprovalReason
	}
	if a := sp.Approval; a != nil {
		it.ApprovalID, it.ShortCode, it.ItemsHash, it.ExpiresAt = a.ID, a.ShortCode, a.ItemsHash, a.ExpiresAt
		if left := a.ExpiresAt.Sub(now); left > 0 {
			it.Left = left
		}
	}
	return it
}

// agentsOf lists every agent of the principal's environment by id.
func (c *Console) agentsOf(p actors.Principal) (map[string]actors.Agent, []actors.Agent, error) {
	byID := map[string]actors.Agent{}
	var list []actors.Agent
	q := actors.ListParams{Limit: actors.MaxPageSize}
	for range 20 {
		page, err := c.sys.ListAgents(p, q)
		if err != nil {
			return nil, nil, err
		}
		for _, raw := range page.Items {
			var ag actors.Agent
			if json.Unmarshal(raw, &ag) == nil {
				byID[ag.ID] = ag
				list = append(list, ag)
				q.StartingAfter = ag.ID
			}
		}
		if !page.HasMore {
			break
		}
	}
	return byID, list, nil
}

// pendingSpends lists the spends waiting for the owner, newest first.
func (c *Console) pendingSpends(p actors.Principal) ([]policy.Spend, error) {
	var out []policy.Spend
	q := actors.ListParams{Limit: actors.MaxPageSize, Status: policy.StatusPendingApproval}
	for range 20 {
		page, err := c.sys.ListSpends(p, q)
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Items {
			var sp policy.Spend
			if json.Unmarshal(raw, &sp) == nil {
				out = append(out, sp)
				q.StartingAfter = sp.ID
			}
		}
		if !page.HasMore {
			break
		}
	}
	return out, nil
}

type inboxData struct {
	Items []approvalItem
	Now   time.Time
	Done  string
}

func (c *Console) inbox(r *request) error {
	spends, err := c.pendingSpends(r.who)
	if err != nil {
		return fromActors(err, "Approvals could not be listed")
	}
	agents, _, err := c.agentsOf(r.who)
	if err != nil {
		return fromActors(err, "Approvals could not be listed")
	}
	now := c.sys.EnvNow(r.who)
	policies := map[string]*policy.Policy{}
	d := inboxData{Now: now, Done: doneText(query(r, "done"))}
	for i := range spends {
		sp := &spends[i]
		pol, seen := policies[sp.AgentID]
		if !seen {
			if p, err := c.sys.Policy(r.who, sp.AgentID); err == nil {
				pol = &p
			}
			policies[sp.AgentID] = pol
		}
		d.Items = append(d.Items, itemOf(sp, agents[sp.AgentID].Name, pol, now))
	}
	return c.ok(r, "inbox", "Approvals", d)
}

// doneText is the notice after a change, from a fixed list, so that no
// text of the address reaches the page.
func doneText(code string) string {
	return map[string]string{
		"approve":   "Approved. The payment goes ahead now.",
		"reject":    "Rejected. Nothing was paid and the allowance was released.",
		"pause":     "The agent is paused: its new payments are declined until you resume it.",
		"resume":    "The agent is active again.",
		"policy":    "The new rules are published.",
		"loosen":    "The new rules are published and wait before they apply, because they loosen the rules.",
		"cancel":    "The waiting rule change was cancelled; it will never apply.",
		"revoke":    "The key was revoked; it stops working at once.",
		"signedout": "You are signed out.",
	}[code]
}

// decisionText is the notice after a decision on it: an approval the rules
// in effect overruled (they changed or expired while the payment waited)
// must not read "goes ahead", since nothing was paid (spec 1.7).
func decisionText(dec string, it approvalItem) string {
	if dec == actors.DecisionApprove && it.Status == policy.StatusDeclined {
		return "You approved, but the agent's rules changed or expired while the payment waited, and the rules in effect now decline it. Nothing was paid and the allowance was released."
	}
	return doneText(dec)
}

type approvalData struct {
	Item approvalItem
	// Confirm is "approve" or "reject" on the confirmation step.
	Confirm string
	Done    string
	Pending bool
	// CSRF is the token of the decision form: the session's, or for a
	// signed link one bound to the link and this browser.
	CSRF string
	// Link is the signed link token the decision form sends back.
	Link    string
	Channel string
	Refusal string
}

// approvalPage shows one approval: with ?link= to whoever holds a signed
// link, otherwise to the signed-in owner.
func (c *Console) approvalPage(r *request) error {
	id := param(r, "id")
	if token := query(r, "link"); token != "" {
		return c.linkPage(r, id, token)
	}
	if r.sess == nil {
		return c.toSignIn(r)
	}
	it, env, err := c.ownerApproval(r, id)
	if err != nil {
		return err
	}
	d := approvalData{Item: it, Pending: it.Status == policy.StatusPendingApproval, CSRF: r.sess.CSRF,
		Done: decisionText(query(r, "done"), it)}
	if dec := query(r, "decision"); d.Pending && (dec == actors.DecisionApprove || dec == actors.DecisionReject) {
		d.Confirm = dec
	}
	if !d.Pending && d.Done == "" {
		d.Refusal = alreadyDecided(it)
	}
	c.render(r, 200, "approval", "Approval "+it.ShortCode, env, d)
	return nil
}

var errNoApproval = &pageError{status: 404, title: "Approval not found", message: "There is no such approval for this owner."}

// ownerApproval reads an approval of the signed-in owner, in whichever
// environment it lives.
func (c *Console) ownerApproval(r *request, id string) (approvalItem, actors.Env, error) {
	ownerID, env, err := c.sys.ApprovalOwner(id)
	if err != nil {
		return approvalItem{}, "", errNoApproval
	}
	if ownerID != r.sess.OwnerID {
		return approvalItem{}, "", errNoApproval
	}
	it, err := c.approvalItem(actors.OwnerPrincipal(ownerID, env), id)
	return it, env, err
}

// approvalItem reads an approval and its spend as p sees them.
func (c *Console) approvalItem(p actors.Principal, id string) (approvalItem, error) {
	appr, err := c.sys.GetApproval(p, id)
	if err != nil {
		return approvalItem{}, errNoApproval
	}
	body, err := c.sys.GetSpend(context.Background(), p, appr.SpendID, 0)
	if err != nil {
		return approvalItem{}, fromActors(err, "The approval could not be read")
	}
	var sp policy.Spend
	if err := json.Unmarshal(body, &sp); err != nil {
		return approvalItem{}, err
	}
	var pol *policy.Policy
	if pp, err := c.sys.Policy(p, sp.AgentID); err == nil {
		pol = &pp
	}
	name := ""
	if ag, err := c.sys.Agent(p, sp.AgentID); err == nil {
		name = ag.Name
	}
	return itemOf(&sp, name, pol, c.sys.EnvNow(p)), nil
}

// alreadyDecided says why an approval takes no decision any more.
func alreadyDecided(it approvalItem) string {
	switch st := it.Status; st {
	case policy.StatusApproved, policy.StatusProcessing, policy.StatusSettled, policy.StatusFailed:
		return "This approval was already approved; the payment is " + string(st) + ". A decision is given once."
	case policy.StatusDeclined:
		return "This approval was already decided: the payment was declined. A decision is given once."
	case policy.StatusExpired:
		return "The approval expired before a decision; nothing was paid."
	case policy.StatusCancelled:
		// The agent cancelled it, or the owner archived the agent: the
		// spend's message says which.
		return "The payment was cancelled before a decision. " + it.Message
	}
	return "This approval takes no decision."
}

// checkedLink is a signed link that verified and names a live approval.
type checkedLink struct {
	claims  approvallink.Claims
	ownerID string
	env     actors.Env
	item    approvalItem
}

// checkLink verifies a link token for approval id: signed by this
// service, naming this approval and its purchase, not expired on the
// approval's own clock.
func (c *Console) checkLink(id, token string) (checkedLink, error) {
	claims, err := c.cfg.Links.Verify(token, c.sys.Now())
	switch {
	case errors.Is(err, approvallink.ErrExpired):
		return checkedLink{}, &pageError{status: 410, title: "Link expired",
			message: "This approval link has expired together with its approval; nothing was paid."}
	case errors.Is(err, approvallink.ErrForged):
		return checkedLink{}, &pageError{status: 403, title: "Link refused",
			message: "This approval link was not issued by this service. Nothing was decided; open the approval from the console instead."}
	case err != nil:
		return checkedLink{}, &pageError{status: 400, title: "Link refused",
			message: "This approval link is incomplete or damaged. Nothing was decided; open the approval from the console instead."}
	}
	if claims.ApprovalID != id {
		return checkedLink{}, &pageError{status: 403, title: "Link refused",
			message: "This link was made for another approval. Nothing was decided."}
	}
	ownerID, env, err := c.sys.ApprovalOwner(id)
	if err != nil {
		return checkedLink{}, errNoApproval
	}
	// A link is only as good as the channel it went to: removed or
	// pointed elsewhere, the channel takes its links with it.
	if why, err := c.sys.LinkChannelCurrent(ownerID, env, claims.ChannelID, claims.ChannelRevision); err != nil {
		return checkedLink{}, err
	} else if why != "" {
		return checkedLink{}, &pageError{status: 403, title: "Link refused", env: env,
			message: "This approval link no longer works: " + why + ". Nothing was decided; open the approval from the console instead."}
	}
	p := actors.OwnerPrincipal(ownerID, env)
	if !c.sys.EnvNow(p).Before(claims.ExpiresAt) {
		return checkedLink{}, &pageError{status: 410, title: "Link expired", env: env,
			message: "This approval link has expired together with its approval; nothing was paid."}
	}
	it, err := c.approvalItem(p, id)
	if err != nil {
		return checkedLink{}, err
	}
	if it.ItemsHash != claims.ItemsHash {
		return checkedLink{}, &pageError{status: 409, title: "Link refused", env: env,
			message: "The purchase changed since this link was sent; nothing was decided. Open the approval from the console."}
	}
	return checkedLink{claims: claims, ownerID: ownerID, env: env, item: it}, nil
}

// linkPage is the confirmation page a signed link opens.
func (c *Console) linkPage(r *request, id, token string) error {
	l, err := c.checkLink(id, token)
	if err != nil {
		return err
	}
	if l.item.Status != policy.StatusPendingApproval {
		return &pageError{status: 409, title: "Approval closed", env: l.env, message: alreadyDecided(l.item)}
	}
	nonce := c.formNonce(r, linkCookie, c.base+"/approvals/")
	d := approvalData{Item: l.item, Pending: true, Link: token, Channel: l.claims.Channel,
		CSRF: c.mac("link", nonce, l.claims.LinkID, id)}
	c.render(r, 200, "approval", "Approval "+l.item.ShortCode, l.env, d)
	return nil
}

// decide records the owner's decision, from a signed link or a session.
func (c *Console) decide(r *request) error {
	id := param(r, "id")
	dec := form(r, "decision")
	if dec != actors.DecisionApprove && dec != actors.DecisionReject {
		return &pageError{status: 400, title: "No decision", message: `decision must be "approve" or "reject".`}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if token := form(r, "link"); token != "" {
		l, err := c.checkLink(id, token)
		if err != nil {
			return err
		}
		if l.item.Status != policy.StatusPendingApproval {
			return &pageError{status: 409, title: "Approval closed", env: l.env, message: alreadyDecided(l.item)}
		}
		if err := c.checkOrigin(r); err != nil {
			return err
		}
		nonce := string(r.ctx.Request.Header.Cookie(linkCookie))
		if nonce == "" || !tokenEqual(form(r, "csrf"), c.mac("link", nonce, l.claims.LinkID, id)) {
			return errForgery
		}
		_, err = c.sys.DecideApproval(ctx, l.ownerID, actors.Decision{ApprovalID: id, Decision: dec,
			ItemsHash: l.claims.ItemsHash, Channel: l.claims.Channel, Reference: l.claims.LinkID})
		if err != nil {
			return c.decisionRefused(err, l.env)
		}
		// The nonce cookie stays: link pages open in other tabs are bound
		// to it.
		it, err := c.approvalItem(actors.OwnerPrincipal(l.ownerID, l.env), id)
		if err != nil {
			return err
		}
		c.render(r, 200, "approval", "Approval "+it.ShortCode, l.env, approvalData{Item: it, Done: decisionText(dec, it)})
		return nil
	}
	if r.sess == nil {
		return errSignInFirst
	}
	if err := c.checkOrigin(r); err != nil {
		return err
	}
	if !tokenEqual(form(r, "csrf"), r.sess.CSRF) {
		return errForgery
	}
	if err := c.limit(r, ratelimit.AdminWrites, "console|"+r.sess.ID); err != nil {
		return err
	}
	_, env, err := c.ownerApproval(r, id)
	if err != nil {
		return err
	}
	_, err = c.sys.DecideApproval(ctx, r.sess.OwnerID, actors.Decision{ApprovalID: id, Decision: dec,
		ItemsHash: form(r, "items_hash"), Channel: "console", Reference: r.sess.ID})
	if err != nil {
		return c.decisionRefused(err, env)
	}
	return redirect(c.base + "/approvals/" + id + "?done=" + dec)
}

// decisionRefused explains a decision the approval refused.
func (c *Console) decisionRefused(err error, env actors.Env) error {
	pe := fromActors(err, "Decision refused")
	pe.env = env
	return pe
}
