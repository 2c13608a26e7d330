package console

import (
	"context"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/receipt"
)

var spendStatuses = []policy.Status{policy.StatusPendingApproval, policy.StatusApproved, policy.StatusDeclined,
	policy.StatusProcessing, policy.StatusSettled, policy.StatusFailed, policy.StatusExpired, policy.StatusCancelled}

type spendFilter struct {
	Status, AgentID, Destination, From, To string
}

// query is the filter as a query string, for paging links.
func (f spendFilter) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "agent_id": f.AgentID, "destination": f.Destination,
		"from": f.From, "to": f.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

type spendRow struct {
	policy.Spend
	AgentName string
}

type spendListData struct {
	Filter   spendFilter
	Statuses []policy.Status
	Agents   []actors.Agent
	Rows     []spendRow
	Error    string
	Newer    string // link to the newer page, or ""
	Older    string // link to the older page, or ""
}

// parseFilter reads the spend filters; the error names what to fix.
func parseFilter(r *request) (spendFilter, actors.ListParams, string) {
	f := spendFilter{Status: query(r, "status"), AgentID: query(r, "agent_id"),
		Destination: strings.TrimSpace(query(r, "destination")), From: query(r, "from"), To: query(r, "to")}
	q := actors.ListParams{Limit: 25, StartingAfter: query(r, "starting_after"), EndingBefore: query(r, "ending_before")}
	if f.Status != "" {
		if !policy.Status(f.Status).Valid() {
			return f, q, "Status must be one of the listed statuses."
		}
		q.Status = policy.Status(f.Status)
	}
	if f.AgentID != "" {
		if !actors.ValidID("agt", f.AgentID) {
			return f, q, "Agent must be one of your agents."
		}
		q.AgentID = f.AgentID
	}
	if f.Destination != "" {
		h, err := policy.CanonicalHost(f.Destination)
		if err != nil {
			return f, q, "Destination must be a host name like api.vendor.com."
		}
		q.Destination = h
	}
	for _, d := range []struct {
		s   string
		dst **time.Time
		add int
	}{{f.From, &q.Created.Gte, 0}, {f.To, &q.Created.Lt, 1}} {
		if d.s == "" {
			continue
		}
		t, err := time.Parse("2006-01-02", d.s)
		if err != nil {
			return f, q, "Dates must be written as YYYY-MM-DD."
		}
		t = t.AddDate(0, 0, d.add) // "to" includes its whole day
		*d.dst = &t
	}
	if q.Created.Gte != nil && q.Created.Lt != nil && !q.Created.Gte.Before(*q.Created.Lt) {
		return f, q, "From must be on or before To."
	}
	return f, q, ""
}

func (c *Console) spendList(r *request) error {
	byID, agents, err := c.agentsOf(r.who)
	if err != nil {
		return fromActors(err, "Spends could not be listed")
	}
	f, q, problem := parseFilter(r)
	d := spendListData{Filter: f, Statuses: spendStatuses, Agents: agents}
	if problem != "" {
		d.Error = problem
		c.render(r, 400, "spends", "Spends", "", d)
		return nil
	}
	page, err := c.sys.ListSpends(r.who, q)
	if err != nil {
		pe := fromActors(err, "Spends could not be listed")
		if pe.status == 400 {
			d.Error = pe.message
			c.render(r, 400, "spends", "Spends", "", d)
			return nil
		}
		return pe
	}
	for _, raw := range page.Items {
		var sp policy.Spend
		if json.Unmarshal(raw, &sp) == nil {
			d.Rows = append(d.Rows, spendRow{Spend: sp, AgentName: byID[sp.AgentID].Name})
		}
	}
	if n := len(d.Rows); n > 0 {
		backward := q.EndingBefore != ""
		if page.HasMore || backward {
			v := f.query()
			v.Set("starting_after", d.Rows[n-1].ID)
			d.Older = c.base + "/spends?" + v.Encode()
		}
		if q.StartingAfter != "" || backward && page.HasMore {
			v := f.query()
			v.Set("ending_before", d.Rows[0].ID)
			d.Newer = c.base + "/spends?" + v.Encode()
		}
	}
	return c.ok(r, "spends", "Spends", d)
}

// timelineEvent is one event of a spend, oldest first on the page.
type timelineEvent struct {
	ID       string
	Type     string
	Created  time.Time
	Sequence uint64
	Detail   string
}

// receiptCheck is the result of verifying a spend's receipt.
type receiptCheck struct {
	ID       string
	KeyID    string
	JWS      string
	Valid    bool
	Problems []string
	Claims   policy.ReceiptClaims
}

type spendPageData struct {
	Spend     policy.Spend
	AgentName string
	Events    []timelineEvent
	Truncated bool
	Receipt   *receiptCheck
}

func (c *Console) spendPage(r *request) error {
	id := param(r, "id")
	body, err := c.sys.GetSpend(context.Background(), r.who, id, 0)
	if err != nil {
		return fromActors(err, "Spend not found")
	}
	var sp policy.Spend
	if err := json.Unmarshal(body, &sp); err != nil {
		return err
	}
	d := spendPageData{Spend: sp}
	if ag, err := c.sys.Agent(r.who, sp.AgentID); err == nil {
		d.AgentName = ag.Name
	}
	if d.Events, d.Truncated, err = c.timeline(r.who, &sp); err != nil {
		return fromActors(err, "The spend's events could not be read")
	}
	if sp.Settlement != nil && sp.Settlement.ReceiptID != nil {
		d.Receipt = c.verifyReceipt(r.who, &sp, *sp.Settlement.ReceiptID)
	}
	return c.ok(r, "spend", "Spend "+sp.ID, d)
}

// maxTimelinePages bounds the events read for one spend page: the events
// of the spend's agent since the spend was created, newest first.
const maxTimelinePages = 20

func (c *Console) timeline(p actors.Principal, sp *policy.Spend) ([]timelineEvent, bool, error) {
	from := sp.CreatedAt
	q := actors.ListParams{Limit: actors.MaxPageSize, AgentID: sp.AgentID, Created: actors.TimeRange{Gte: &from}}
	approvalID := ""
	if sp.Approval != nil {
		approvalID = sp.Approval.ID
	}
	var out []timelineEvent
	for i := 0; i < maxTimelinePages; i++ {
		page, err := c.sys.ListEvents(p, q)
		if err != nil {
			return nil, false, err
		}
		for _, raw := range page.Items {
			var ev struct {
				ID       string    `json:"id"`
				Type     string    `json:"type"`
				Created  time.Time `json:"created"`
				Sequence uint64    `json:"sequence"`
				Data     struct {
					Object map[string]any `json:"object"`
				} `json:"data"`
			}
			if json.Unmarshal(raw, &ev) != nil {
				continue
			}
			q.StartingAfter = ev.ID
			obj := ev.Data.Object
			str := func(k string) string { s, _ := obj[k].(string); return s }
			if str("id") != sp.ID && str("spend_id") != sp.ID && (approvalID == "" || str("id") != approvalID) {
				continue
			}
			te := timelineEvent{ID: ev.ID, Type: ev.Type, Created: ev.Created, Sequence: ev.Sequence}
			switch {
			case ev.Type == "approval.decided":
				te.Detail = str("status") + " by " + str("channel")
			case strings.HasPrefix(ev.Type, "spend."):
				te.Detail = "status " + str("status")
			}
			out = append(out, te)
		}
		if !page.HasMore {
			sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
			return out, false, nil
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return out, true, nil
}

// verifyReceipt checks the receipt's signature against the service's
// public keys (the JWKS anyone can fetch) and its claims against the
// spend.
func (c *Console) verifyReceipt(p actors.Principal, sp *policy.Spend, id string) *receiptCheck {
	rc := &receiptCheck{ID: id}
	rec, err := c.sys.Receipt(p, id)
	if err != nil {
		rc.Problems = append(rc.Problems, "The receipt could not be read: "+actors.AsError(err).Message)
		return rc
	}
	rc.KeyID, rc.JWS = rec.KeyID, rec.JWS
	claims, err := receipt.Verify(rec.JWS, c.cfg.JWKS())
	if err != nil {
		rc.Problems = append(rc.Problems, "The signature does not verify: "+err.Error())
		return rc
	}
	rc.Claims = claims
	if claims.SpendID != sp.ID || claims.AgentID != sp.AgentID {
		rc.Problems = append(rc.Problems, "The receipt names another spend or agent.")
	}
	if claims.Destination != sp.Destination {
		rc.Problems = append(rc.Problems, "The receipt names another destination.")
	}
	if got, err := policy.ParseAmount(claims.AmountSettled); err != nil || sp.AmountSettled == nil || got.Cmp(*sp.AmountSettled) != 0 {
		rc.Problems = append(rc.Problems, "The receipt's settled amount differs from the spend's.")
	}
	rc.Valid = len(rc.Problems) == 0
	return rc
}
