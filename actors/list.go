package actors

import (
	"bytes"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/policy"
)

// List limits (spec 8.2).
const (
	DefaultPageSize = 10
	MaxPageSize     = 50
	ListMemoLength  = 80
	EventRetention  = 30 * 24 * time.Hour
)

// TimeRange is a created[gte|gt|lte|lt] filter; nil bounds are open.
type TimeRange struct {
	Gte, Gt, Lte, Lt *time.Time
}

func (r TimeRange) contains(t time.Time) bool {
	return (r.Gte == nil || !t.Before(*r.Gte)) && (r.Gt == nil || t.After(*r.Gt)) &&
		(r.Lte == nil || !t.After(*r.Lte)) && (r.Lt == nil || t.Before(*r.Lt))
}

// older reports whether t is before every time the range admits: a scan
// going back in time can stop there.
func (r TimeRange) older(t time.Time) bool {
	return r.Gte != nil && t.Before(*r.Gte) || r.Gt != nil && !t.After(*r.Gt)
}

// newer reports whether t is after every time the range admits.
func (r TimeRange) newer(t time.Time) bool {
	return r.Lte != nil && t.After(*r.Lte) || r.Lt != nil && !t.Before(*r.Lt)
}

// ListParams are the query of a list call. Cursors are object ids.
type ListParams struct {
	Limit         int
	StartingAfter string
	EndingBefore  string
	Created       TimeRange
	Status        policy.Status // spends
	Destination   string        // spends: a canonical host, or an invalid destination as written (compared without case)
	AgentID       string        // owners: only this agent
	Type          string        // events: exact type or a prefix ending in ".*"
}

// Page is one page of stored objects, newest first.
type Page struct {
	Items   [][]byte
	HasMore bool
}

// pager walks an index newest first (or, with ending_before, oldest first
// from the cursor, then flips the page), so a page never loses or repeats
// an item when new ones are inserted meanwhile: new items only ever appear
// at the newest end.
type pager struct {
	sys    *System
	bucket string
	prefix []byte
	q      ListParams
	// load turns an index entry into the item, its time, and whether it
	// passes the filters.
	load func(key, value []byte) (item []byte, at time.Time, ok bool, err error)
	// skip, when set, passes over the parts of the index (hours of
	// spends, blocks of events) that hold no match.
	skip passer
}

// passer tells a walk to pass over the part of an index that holds the
// entry keyed prefix+rest, and where to go on from, when no entry of that
// part can match.
type passer interface {
	passOver(prefix, rest []byte, newestFirst bool) (next []byte, ok bool)
}

func (pg pager) run(cursorKey []byte) (Page, error) {
	return pg.walk(cursorKey, func(from []byte, reverse bool, fn func(k, v []byte) bool) error {
		return pg.sys.store.Scan(pg.bucket, pg.prefix, from, reverse, fn)
	})
}

// runOver is run over keys of pg's index held in memory, in ascending
// order, walked as Scan walks the bucket (values are nil).
func (pg pager) runOver(keys [][]byte, cursorKey []byte) (Page, error) {
	return pg.walk(cursorKey, func(from []byte, reverse bool, fn func(k, v []byte) bool) error {
		if reverse {
			for i := len(keys) - 1; i >= 0; i-- {
				if from != nil && bytes.Compare(keys[i], from) > 0 {
					continue
				}
				if !fn(keys[i], nil) {
					break
				}
			}
			return nil
		}
		for _, k := range keys {
			if from != nil && bytes.Compare(k, from) < 0 {
				continue
			}
			if !fn(k, nil) {
				break
			}
		}
		return nil
	})
}

// walk makes the page from the entries scan visits.
func (pg pager) walk(cursorKey []byte, scan func(from []byte, reverse bool, fn func(k, v []byte) bool) error) (Page, error) {
	limit := pg.q.Limit
	forward := pg.q.EndingBefore != ""
	var from []byte
	if cursorKey != nil {
		from = cursorKey
	}
	var items [][]byte
	var loadErr error
	more := false
	var jump []byte // where the scan goes on after a part passed over
	visit := func(k, v []byte) bool {
		if cursorKey != nil && bytes.Equal(k, cursorKey) {
			return true // the cursor itself is not part of the page
		}
		if pg.skip != nil {
			if next, ok := pg.skip.passOver(pg.prefix, k[len(pg.prefix):], !forward); ok {
				jump = next
				return false
			}
		}
		item, at, ok, err := pg.load(k, v)
		if err != nil {
			loadErr = err
			return false
		}
		if !forward && pg.q.Created.older(at) || forward && pg.q.Created.newer(at) {
			return false
		}
		if !ok || !pg.q.Created.contains(at) {
			return true
		}
		if len(items) == limit {
			more = true
			return false
		}
		items = append(items, item)
		return true
	}
	err := scan(from, !forward, visit)
	for err == nil && loadErr == nil && jump != nil {
		from, jump = jump, nil
		err = scan(from, !forward, visit)
	}
	if err == nil {
		err = loadErr
	}
	if err != nil {
		return Page{}, ErrUnavailable
	}
	if forward {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	return Page{Items: items, HasMore: more}, nil
}

// Scan's `from` is inclusive and, reversed, starts at the last key <= from;
// a nil from starts at the end of the prefix, which is what "newest first"
// wants. Forward scans need an explicit start.
func (pg pager) start(id string) []byte {
	if id == "" {
		return nil
	}
	return append(append([]byte{}, pg.prefix...), id...)
}

// startAt is where a page after or before cursor starts. The cursor
// must be a key this list holds, from an earlier page: ids sort by time,
// so any id would place a page, and an id of another agent or owner, or
// one never issued, is a mistake to report, not a position to guess.
// what names the list's objects ("a spend").
func (pg pager) startAt(q ListParams, cursor, what string) ([]byte, error) {
	key := pg.start(cursor)
	v, err := pg.sys.store.Get(pg.bucket, key)
	if err != nil {
		return nil, ErrUnavailable
	}
	if v == nil {
		return nil, &Error{Code: CodeParameterInvalid, Param: cursorParam(q),
			Message: "The cursor must be the id of " + what + " this list holds, from an earlier page; " + cursor + " is not one."}
	}
	return key, nil
}

func normalizeLimit(n int) int {
	if n <= 0 {
		return DefaultPageSize
	}
	if n > MaxPageSize {
		return MaxPageSize
	}
	return n
}

// ListSpends lists the spends the principal may see, newest first, with
// memo cut to 80 characters.
func (s *System) ListSpends(p Principal, q ListParams) (Page, error) {
	pg, cursor, err := s.spendIndex(p, q, "spd", "a spend")
	if err != nil {
		return Page{}, err
	}
	q = pg.q
	// A spend whose bytes show it fails a filter is passed over
	// undecoded, which makes a filtered page over a long history several
	// times cheaper. Only without created bounds, since a walk stops at
	// the first spend outside them, by its time.
	var statusBytes []byte
	skimmable := q.Created == (TimeRange{})
	if q.Status != "" && skimmable {
		statusBytes = []byte(`"status":"` + string(q.Status) + `"`)
	}
	pg.load = func(k, _ []byte) ([]byte, time.Time, bool, error) {
		id := string(k[len(pg.prefix):])
		raw, err := s.store.Get(bSpends, []byte(id))
		if err != nil {
			return nil, time.Time{}, false, err
		}
		if statusBytes != nil && raw != nil && !bytes.Contains(raw, statusBytes) ||
			q.Destination != "" && skimmable && raw != nil && plainDestinationIsNot(raw, q.Destination) {
			return nil, time.Time{}, false, nil
		}
		var sp policy.Spend
		if raw == nil || fastjson.Unmarshal(raw, &sp) != nil {
			return nil, time.Time{}, false, nil
		}
		if q.Status != "" && sp.Status != q.Status || q.Destination != "" && !strings.EqualFold(sp.Destination, q.Destination) {
			return nil, sp.CreatedAt, false, nil
		}
		if utf8.RuneCountInString(sp.Memo) > ListMemoLength {
			sp.Memo = string([]rune(sp.Memo)[:ListMemoLength])
			raw = spendJSON(&sp)
		}
		return raw, sp.CreatedAt, true, nil
	}
	var key []byte
	if cursor != "" {
		if key, err = pg.startAt(q, cursor, "a spend"); err != nil {
			return Page{}, err
		}
	}
	if q.Status.Holds() {
		// The spends that hold allowance are few and indexed apart: the
		// page is made from them, not by reading the whole history for
		// the odd one waiting.
		keys, err := s.activeSpendKeys(pg)
		if err != nil {
			return Page{}, ErrUnavailable
		}
		return pg.runOver(keys, key)
	}
	if f := newHourFilter(s, pg, q.Status, q.Destination); f != nil {
		pg.skip = f
	}
	return pg.run(key)
}

// activeSpendKeys lists, in pg's index and in ascending order, the keys of
// the spends that hold allowance now (bActive) among those pg lists: one
// agent's, or every agent's of an owner's environment (archived ones
// included: what they had approved still settles).
func (s *System) activeSpendKeys(pg pager) ([][]byte, error) {
	var agents []string
	if pg.bucket == bAgentSpends {
		agents = []string{string(pg.prefix[:len(pg.prefix)-1])}
	} else if err := s.store.Scan(bOwnerAgents, pg.prefix, nil, false, func(k, _ []byte) bool {
		agents = append(agents, string(k[len(pg.prefix):]))
		return true
	}); err != nil {
		return nil, err
	}
	var keys [][]byte
	for _, id := range agents {
		prefix := prefixOf(id)
		if err := s.store.Scan(bActive, prefix, nil, false, func(k, _ []byte) bool {
			keys = append(keys, append(append([]byte{}, pg.prefix...), k[len(prefix):]...))
			return true
		}); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys, nil
}

// ListReceipts lists the receipts the principal may see, in the order of
// their spends, newest first: the spend index (the agent's, or the
// environment's) walked for the settled spends that have one. A receipt
// is the cursor; it places the page at its spend. The items are the
// receipts as GET /v1/receipts/{id} shows them.
func (s *System) ListReceipts(p Principal, q ListParams) (Page, error) {
	pg, cursor, err := s.spendIndex(p, q, "rcp", "a receipt")
	if err != nil {
		return Page{}, err
	}
	q = pg.q
	pg.load = func(k, _ []byte) ([]byte, time.Time, bool, error) {
		var sp struct {
			CreatedAt  time.Time `json:"created_at"`
			Settlement *struct {
				ReceiptID *string `json:"receipt_id"`
			} `json:"settlement"`
		}
		found, err := s.getJSON(bSpends, k[len(pg.prefix):], &sp)
		if err != nil {
			return nil, time.Time{}, false, err
		}
		if !found || sp.Settlement == nil || sp.Settlement.ReceiptID == nil {
			return nil, sp.CreatedAt, false, nil
		}
		raw, err := s.store.Get(bReceipts, []byte(*sp.Settlement.ReceiptID))
		if err != nil {
			return nil, time.Time{}, false, err
		}
		return raw, sp.CreatedAt, raw != nil, nil
	}
	if cursor == "" {
		return pg.run(nil)
	}
	// The cursor must be a receipt this list holds: one the principal may
	// read, whose spend is in the walked index.
	var r Receipt
	ok, err := s.getJSON(bReceipts, []byte(cursor), &r)
	if err != nil {
		return Page{}, ErrUnavailable
	}
	key := pg.start(r.SpendID)
	if ok && s.visible(p, r.AgentID, r.Livemode) && (q.AgentID == "" || r.AgentID == q.AgentID) {
		if v, err := s.store.Get(pg.bucket, key); err != nil {
			return Page{}, ErrUnavailable
		} else if v != nil {
			return pg.run(key)
		}
	}
	return Page{}, &Error{Code: CodeParameterInvalid, Param: cursorParam(q),
		Message: "The cursor must be the id of a receipt this list holds, from an earlier page; " + cursor + " is not one."}
}

// spendIndex is a pager over the spends the principal may see (its
// agent's index for an agent key or an agent_id, else the environment's)
// for a list of objects whose ids start with idPrefix, and the list's
// cursor, checked to be such an id ("what" names the objects).
func (s *System) spendIndex(p Principal, q ListParams, idPrefix, what string) (pager, string, error) {
	q.Limit = normalizeLimit(q.Limit)
	pg := pager{sys: s, q: q}
	cursor, err := cursorOf(q, idPrefix, what)
	if err != nil {
		return pg, "", err
	}
	switch {
	case p.Kind == KindAgent:
		pg.bucket, pg.prefix = bAgentSpends, prefixOf(p.AgentID)
	case q.AgentID != "":
		if _, err := s.Agent(p, q.AgentID); err != nil {
			return pg, "", &Error{Code: CodeParameterInvalid, Param: "agent_id", Message: "agent_id names no agent of this owner and environment."}
		}
		pg.bucket, pg.prefix = bAgentSpends, prefixOf(q.AgentID)
	default:
		pg.bucket, pg.prefix = bEnvSpends, prefixOf(p.OwnerID, string(p.Env()))
	}
	return pg, cursor, nil
}

// cursorOf is the list's cursor, checked to be an id of the listed kind.
func cursorOf(q ListParams, prefix, what string) (string, error) {
	cursor := q.StartingAfter
	if q.EndingBefore != "" {
		cursor = q.EndingBefore
	}
	if cursor != "" && !ValidID(prefix, cursor) {
		return "", &Error{Code: CodeParameterInvalid, Param: cursorParam(q),
			Message: "The cursor must be " + what + " id (" + prefix + "_ followed by 32 hex characters) from an earlier page."}
	}
	return cursor, nil
}

func cursorParam(q ListParams) string {
	if q.EndingBefore != "" {
		return "ending_before"
	}
	return "starting_after"
}

// ListEvents lists events of the last 30 days, newest first. An agent sees
// only its own agent's events whose audience includes agents.
func (s *System) ListEvents(p Principal, q ListParams) (Page, error) {
	q.Limit = normalizeLimit(q.Limit)
	floor := s.nowFor(p.OwnerID, p.Env()).Add(-EventRetention)
	// Events at or below the floor of a practice reset belong to the
	// removed environment: hidden from the moment the reset committed.
	var seqFloor uint64
	if e, err := s.env(p.OwnerID, p.Env()); err == nil {
		seqFloor = e.eventFloor.Load()
	}
	if q.Created.Gte == nil || q.Created.Gte.Before(floor) {
		q.Created.Gte = &floor // older history is clipped, not an error
	}
	cursor := q.StartingAfter
	if q.EndingBefore != "" {
		cursor = q.EndingBefore
	}
	pg := pager{sys: s, q: q, bucket: bEvents, prefix: prefixOf(p.OwnerID, string(p.Env()))}
	var cursorKey []byte
	if cursor != "" {
		badCursor := &Error{Code: CodeParameterInvalid, Param: cursorParam(q),
			Message: "The cursor must be the id of an event this key lists, from an earlier page (evt_ followed by 32 hex characters)."}
		seq, err := s.store.Get(bEventIDs, []byte(cursor))
		if err != nil {
			return Page{}, ErrUnavailable
		}
		if !ValidID("evt", cursor) || len(seq) != 8 {
			return Page{}, badCursor
		}
		cursorKey = append(append([]byte{}, pg.prefix...), seq...)
		// The index maps an id to a sequence only, and every owner and
		// environment numbers its own events: another owner's event id
		// would place the page by that owner's count. The cursor must be
		// an event the caller could have been shown.
		v, err := s.store.Get(bEvents, cursorKey)
		if err != nil {
			return Page{}, ErrUnavailable
		}
		var ev StoredEvent
		if v == nil || fastjson.Unmarshal(v, &ev) != nil || ev.ID != cursor ||
			(p.Kind == KindAgent && (ev.AgentID != p.AgentID || !hasAudience(ev.AudienceList, "agent"))) {
			return Page{}, badCursor
		}
	}
	agentID := q.AgentID
	if p.Kind == KindAgent {
		agentID = p.AgentID
	} else if agentID != "" {
		if _, err := s.Agent(p, agentID); err != nil {
			return Page{}, &Error{Code: CodeParameterInvalid, Param: "agent_id", Message: "agent_id names no agent of this owner and environment."}
		}
	}
	pg.load = func(_, v []byte) ([]byte, time.Time, bool, error) {
		var ev StoredEvent
		if fastjson.Unmarshal(v, &ev) != nil {
			return nil, time.Time{}, false, nil
		}
		if ev.Sequence <= seqFloor {
			// Older than anything listed: a scan going back in time
			// stops here (the zero time is before created[gte]).
			return nil, time.Time{}, false, nil
		}
		ok := (agentID == "" || ev.AgentID == agentID) && matchType(q.Type, ev.Type)
		if p.Kind == KindAgent && !hasAudience(ev.AudienceList, "agent") {
			ok = false
		}
		if !ok {
			return nil, ev.Created, false, nil
		}
		return mustJSON(ev.Event), ev.Created, true, nil
	}
	if f := newEventFilter(s, q.Type, agentID, p.Kind == KindAgent); f != nil {
		pg.skip = f
	}
	return pg.run(cursorKey)
}

func matchType(filter, typ string) bool {
	if filter == "" {
		return true
	}
	if p, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(typ, p)
	}
	return filter == typ
}

func hasAudience(list []string, who string) bool {
	for _, a := range list {
		if a == who {
			return true
		}
	}
	return false
}

// destinationKey opens a spend's destination in its stored form. The
// spend's own destination is written before any nested object, and a
// string's quotes are escaped, so its first occurrence is the spend's.
var destinationKey = []byte(`,"destination":"`)

// plainDestinationIsNot reports whether the stored spend raw certainly has
// a destination other than dest, compared without case as the filter
// compares: its destination is written plain (ASCII, nothing escaped) and
// differs. Any other destination is left to the decoded comparison, whose
// Unicode case folding may match what bytes do not.
func plainDestinationIsNot(raw []byte, dest string) bool {
	i := bytes.Index(raw, destinationKey)
	if i < 0 {
		return false
	}
	v := raw[i+len(destinationKey):]
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return false
	}
	v = v[:end]
	for _, c := range v {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return !strings.EqualFold(string(v), dest)
}
