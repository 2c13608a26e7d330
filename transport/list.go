package transport

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/policy"
)

// eventTypeFilter reports whether f is the shape of an event type
// ("spend.settled": lower-case words joined by dots) or a prefix of types
// ending in "*" ("spend.*"; "*" alone is every type). Types the service
// does not know pass: the list of types is open (spec 6.2), and a filter
// on one simply finds nothing yet.
func eventTypeFilter(f string) bool {
	prefix, isPrefix := strings.CutSuffix(f, "*")
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; (c < 'a' || c > 'z') && c != '_' && c != '.' {
			return false
		}
	}
	if strings.HasPrefix(prefix, ".") || strings.Contains(prefix, "..") {
		return false
	}
	return isPrefix || strings.Contains(f, ".") && !strings.HasSuffix(f, ".")
}

// listParams reads the common list query: limit, cursors, created[...],
// agent_id. Unknown parameters are refused so a typo is not silently
// ignored.
func listParams(c *call, extra ...string) (actors.ListParams, *apiError) {
	var q actors.ListParams
	var bad *apiError
	allowed := map[string]bool{"limit": true, "starting_after": true, "ending_before": true, "agent_id": true,
		"created[gte]": true, "created[gt]": true, "created[lte]": true, "created[lt]": true}
	for _, e := range extra {
		allowed[e] = true
	}
	for k, v := range c.ctx.QueryArgs().All() {
		if bad != nil {
			break
		}
		key, val := string(k), string(v)
		if !allowed[key] {
			bad = badParam(codeParameterUnknown, key, key+" is not a parameter of this list; remove it (check the spelling).")
			continue
		}
		if len(c.ctx.QueryArgs().PeekMulti(key)) > 1 {
			bad = repeatedParam(key)
			continue
		}
		switch key {
		case "limit":
			n, ok := wholeNumber(v)
			if !ok || n < 1 || n > actors.MaxPageSize {
				bad = badParam(codeParameterInvalid, "limit", "limit must be a whole number from 1 to 50.")
			}
			q.Limit = n
		case "starting_after":
			q.StartingAfter = val
		case "ending_before":
			q.EndingBefore = val
		case "agent_id":
			if !actors.ValidID("agt", val) {
				bad = badParam(codeParameterInvalid, "agent_id", "agent_id must be an agent id (agt_ followed by 32 hex characters).")
			}
			q.AgentID = val
		case "created[gte]", "created[gt]", "created[lte]", "created[lt]":
			t, err := parseTime(val)
			if err != nil {
				bad = badParam(codeParameterInvalid, key, key+" must be an RFC 3339 timestamp (2026-11-22T10:00:00Z) or Unix seconds, from year 1 to year 9999.")
				continue
			}
			switch key {
			case "created[gte]":
				q.Created.Gte = &t
			case "created[gt]":
				q.Created.Gt = &t
			case "created[lte]":
				q.Created.Lte = &t
			default:
				q.Created.Lt = &t
			}
		}
	}
	if bad == nil && q.StartingAfter != "" && q.EndingBefore != "" {
		bad = badParam(codeParameterInvalid, "ending_before", "Use starting_after or ending_before, not both.")
	}
	if bad == nil && q.AgentID != "" && c.who.Kind == actors.KindAgent && q.AgentID != c.who.AgentID {
		// An agent key only ever sees its own agent; the answer does not
		// say whether the other agent exists.
		bad = badParam(codeParameterInvalid, "agent_id", "An agent key lists only its own agent's objects; omit agent_id or pass your own agent's id.")
	}
	return q, bad
}

// wholeNumber reads a query value made of decimal digits only, as the
// documents describe it: strconv.Atoi would also take "+5". Nine digits
// at most, far above any bound a parameter has, so it cannot overflow.
func wholeNumber(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return n, true
}

// Unix seconds of the first and the last second an RFC 3339 timestamp can
// name. Outside them time.Unix overflows, and a far-future upper bound
// would turn into one in the far past: a filter that silently inverts.
const (
	minFilterUnix = -62135596800 // 0001-01-01T00:00:00Z
	maxFilterUnix = 253402300799 // 9999-12-31T23:59:59Z
)

func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < minFilterUnix || n > maxFilterUnix {
			return time.Time{}, fmt.Errorf("unix seconds %d outside years 1 to 9999", n)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Parse(time.RFC3339, s)
}

// writeList writes the list envelope around stored objects.
func writeList(c *call, url string, page actors.Page) { writeListOf(c, url, page, nil) }

// writeSpendList is writeList for spends: each item is a whole Spend of
// spec 2.1, with the idempotent_replay and request_id a GET of it shows.
func writeSpendList(c *call, url string, page actors.Page) {
	tail := append([]byte(`,"idempotent_replay":false,"request_id":`), fastjson.AppendString(nil, c.reqID)...)
	writeListOf(c, url, page, append(tail, '}'))
}

// wholeList is a list answered in one page, in the field order of the
// paged lists.
type wholeList struct {
	Object  string `json:"object"`
	Data    any    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// writeWholeList answers a list that is never paged (its size is bounded).
func writeWholeList(c *call, url string, data any) {
	writeJSON(c.ctx, 200, c.reqID, wholeList{Object: "list", Data: data, URL: url})
}

// writeListOf writes a page; a non-nil itemTail closes each item in place
// of its final brace.
func writeListOf(c *call, url string, page actors.Page, itemTail []byte) {
	n := 64
	for _, it := range page.Items {
		n += len(it) + 1 + len(itemTail)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"object":"list","data":[`...)
	for i, it := range page.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if itemTail != nil && len(it) > 2 && it[len(it)-1] == '}' {
			b = append(append(b, it[:len(it)-1]...), itemTail...)
			continue
		}
		b = append(b, it...)
	}
	b = append(b, `],"has_more":`...)
	b = strconv.AppendBool(b, page.HasMore)
	b = append(b, `,"url":`...)
	b = fastjson.AppendString(b, url)
	b = append(b, '}')
	writeObject(c.ctx, fasthttp.StatusOK, c.reqID, b, nil)
}

func (s *Server) listSpends(c *call) *apiError {
	q, err := listParams(c, "status", "destination")
	if err != nil {
		return err
	}
	args := c.ctx.QueryArgs()
	if v := args.Peek("status"); v != nil {
		st := policy.Status(v)
		if !st.Valid() {
			return badParam(codeParameterInvalid, "status", "status must be one of pending_approval, approved, declined, processing, settled, failed, expired, cancelled.")
		}
		q.Status = st
	}
	if v := args.Peek("destination"); v != nil {
		if len(v) == 0 || utf8.RuneCount(v) > maxDestination {
			return badParam(codeParameterInvalid, "destination", "destination must be a host name of 1 to 253 characters; omit it to list every destination.")
		}
		h, herr := policy.CanonicalHost(string(v))
		if herr != nil {
			// A declined spend keeps an invalid destination as written;
			// the list compares it without case.
			h = string(v)
		}
		q.Destination = h
	}
	page, aerr := s.sys.ListSpends(c.who, q)
	if aerr != nil {
		return fromActors(aerr)
	}
	writeSpendList(c, "/v1/spends", page)
	return nil
}

// listReceipts is GET /v1/receipts: the receipts of the key's spends (an
// agent's) or of the environment (an owner's, agent_id to narrow it), in
// the order of their spends, newest first, paged like the other lists.
func (s *Server) listReceipts(c *call) *apiError {
	q, err := listParams(c)
	if err != nil {
		return err
	}
	page, aerr := s.sys.ListReceipts(c.who, q)
	if aerr != nil {
		return fromActors(aerr)
	}
	// Each item as GET /v1/receipts/{id} shows it, request_id included.
	tail := append([]byte(`,"request_id":`), fastjson.AppendString(nil, c.reqID)...)
	writeListOf(c, "/v1/receipts", page, append(tail, '}'))
	return nil
}

func (s *Server) listEvents(c *call) *apiError {
	q, err := listParams(c, "type")
	if err != nil {
		return err
	}
	if args := c.ctx.QueryArgs(); args.Has("type") {
		q.Type = string(args.Peek("type"))
		if !eventTypeFilter(q.Type) {
			return badParam(codeParameterInvalid, "type", "type must be one event type, like spend.settled, or a prefix ending in *, like spend.*; got \""+
				clip(q.Type, 60)+"\". Leave it out for every type.")
		}
	}
	page, aerr := s.sys.ListEvents(c.who, q)
	if aerr != nil {
		return fromActors(aerr)
	}
	writeList(c, "/v1/events", page)
	return nil
}
