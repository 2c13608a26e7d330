package main

// guard receipts verify walks an owner's receipt chain from the outside,
// with what the API gives any owner: the spend.settled events (which hold
// the receipt ids, in the order the spends settled: their sequence), each
// receipt, and the public keys. The service links each receipt to the one
// settled before it in the same environment, so the walk must see every
// receipt of the environment to check the links; with -agent it sees one
// agent's only and checks signatures and claims alone.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentpay/guard/transport/receipt"
)

const receiptsVerifyHelp = `Check the receipts of the owner key's environment: the spend.settled events of the last
30 days (GET /v1/events keeps 30 days), oldest first; each event's receipt, its EdDSA signature
with the server's public keys, and that its prev claim is the hash of the receipt settled
before it. The oldest receipt listed is the anchor: the receipt before it may be gone (events
are kept 30 days, and a practice reset removes them), so the chain is checked from the anchor on.
A settled spend without a receipt is reported and is no failure: no receipt was issued for it,
and the chain does not include it.
With -agent only that agent's receipts are checked, their signatures and claims, not the chain's
links: the chain runs through every agent's receipts, which -agent leaves out.
Any failure names the receipt and why, and the command exits with status 1.
-jwks FILE checks signatures with keys saved from a source you trust rather than the server's.
-json prints the report as JSON. A rate-limited read waits as the server's Retry-After asks.`

// settledEvent is what the walk reads of a spend.settled event.
type settledEvent struct {
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	Created  time.Time `json:"created"`
	Livemode bool      `json:"livemode"`
	Sequence uint64    `json:"sequence"`
	AgentID  string    `json:"agent_id"`
	Data     struct {
		Object struct {
			ID         string `json:"id"`
			Settlement *struct {
				ReceiptID *string `json:"receipt_id"`
			} `json:"settlement"`
		} `json:"object"`
	} `json:"data"`
}

// receiptID is the event's receipt, "" when the spend settled without one
// (the service leaves settlement out of the event then).
func (e *settledEvent) receiptID() string {
	if s := e.Data.Object.Settlement; s != nil && s.ReceiptID != nil {
		return *s.ReceiptID
	}
	return ""
}

// chainWalk checks receipts in the order the spends settled.
type chainWalk struct {
	c          *cli
	keys       *receiptKeySet
	rep        *chainReport
	checkLinks bool
	seen       map[string]bool
	// listed holds the receipts GET /v1/receipts gave, by id: a page
	// of them costs one request, where reading them one by one costs
	// one each (at live limits, a minute per 60).
	listed map[string]receiptView
	owner  string
	// The receipt before the current one: its id, its token as served,
	// whether it failed its own check, and whether there was one at all.
	prevID     string
	prevToken  string
	prevFailed bool
	started    bool
}

func receiptsVerify(c *cli, args []string) error {
	c.help = receiptsVerifyHelp
	fs := c.flags()
	agent := fs.String("agent", "", "check only the receipts of `AGENT_ID`: signatures and claims, not the chain's links")
	limit := fs.Int("limit", listPageSize, "events per request, `N` from 1 to 50 (every page is followed)")
	jwksFile := jwksFlag(fs)
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > listPageSize {
		return c.usageErr(fs, "-limit must be from 1 to %d, not %d", listPageSize, *limit)
	}
	agentID := strings.TrimSpace(*agent)
	events, err := c.settledEvents(agentID, *limit)
	if err != nil {
		return err
	}
	keys, err := c.receiptKeys(*jwksFile)
	if err != nil {
		return err
	}
	rep := &chainReport{Object: "receipt_chain_check", Livemode: keyLivemode(c.key, events),
		ChainChecked: agentID == "", Keys: []keyCount{}, WithoutReceipt: []chainEntry{}, Problems: []chainProblem{},
		failed: map[string]bool{}}
	if agentID != "" {
		rep.AgentID = &agentID
	}
	listed, err := c.listedReceipts(agentID, *limit)
	if err != nil {
		return err
	}
	w := &chainWalk{c: c, keys: keys, rep: rep, checkLinks: agentID == "", seen: map[string]bool{}, listed: listed}
	for i := range events {
		if err := w.step(&events[i]); err != nil {
			return err
		}
	}
	rep.Valid = len(rep.Problems) == 0
	if c.jsonOut {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if err := c.printJSON(b); err != nil {
			return err
		}
	} else if err := c.printChainReport(rep); err != nil {
		return err
	}
	if rep.Valid {
		return nil
	}
	p := rep.Problems[0]
	return fmt.Errorf("receipts verify: %d of %d %s failed; first %s: %s",
		len(rep.failed), rep.Receipts, plural(rep.Receipts, "receipt"), p.ReceiptID, p.Problem)
}

// keyLivemode is the environment the owner key lists: its prefix says,
// else the events do.
func keyLivemode(key string, events []settledEvent) bool {
	switch {
	case strings.HasPrefix(key, "svc_live_"):
		return true
	case strings.HasPrefix(key, "svc_test_"), len(events) == 0:
		return false
	}
	return events[0].Livemode
}

// settledEvents lists the spend.settled events of the key's environment
// (of one agent when agentID is set), oldest first. The list comes newest
// first and has no way to start at its oldest end, so every page is read
// before the walk begins; an event is small, and 30 days of them fit.
func (c *cli) settledEvents(agentID string, limit int) ([]settledEvent, error) {
	filters := url.Values{"type": {"spend.settled"}}
	if agentID != "" {
		filters.Set("agent_id", agentID)
	}
	_, raw, err := c.listAll("/v1/events", "event", limit, filters)
	if err != nil {
		return nil, err
	}
	var all []settledEvent
	seen := map[string]bool{}
	for _, r := range raw {
		var ev settledEvent
		if err := json.Unmarshal(r, &ev); err != nil {
			return nil, fmt.Errorf("the server's event list is not the JSON expected: %w", err)
		}
		if ev.Type != "spend.settled" || ev.ID == "" {
			return nil, fmt.Errorf("the server listed event %q of type %q when asked for spend.settled only", ev.ID, ev.Type)
		}
		// Events are delivered at least once: one listed twice counts once.
		if !seen[ev.ID] {
			seen[ev.ID] = true
			all = append(all, ev)
		}
	}
	// The chain's order is the order the spends settled: the events'
	// sequence, not the order a page happened to hold.
	slices.SortStableFunc(all, func(a, b settledEvent) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return all, nil
}

// listedReceipts reads every page of GET /v1/receipts (of one agent when
// agentID is set), by id. The walk checks each one as it checks a receipt
// read on its own: nothing in the list is trusted more.
func (c *cli) listedReceipts(agentID string, limit int) (map[string]receiptView, error) {
	var filters url.Values
	if agentID != "" {
		filters = url.Values{"agent_id": {agentID}}
	}
	_, raw, err := c.listAll("/v1/receipts", "receipt", limit, filters)
	if err != nil {
		return nil, err
	}
	out := make(map[string]receiptView, len(raw))
	for _, r := range raw {
		var rc receiptView
		if err := json.Unmarshal(r, &rc); err != nil {
			return nil, fmt.Errorf("the server's receipt list is not the JSON expected: %w", err)
		}
		out[rc.ID] = rc
	}
	return out, nil
}

// step checks the receipt of one event and its link to the one before.
// It returns an error only when the walk cannot go on (the server cannot
// be reached); what is wrong with a receipt is a problem of the report.
func (w *chainWalk) step(ev *settledEvent) error {
	entry := chainEntry{SpendID: ev.Data.Object.ID, EventID: ev.ID, Sequence: ev.Sequence}
	rid := ev.receiptID()
	if rid == "" {
		w.rep.WithoutReceipt = append(w.rep.WithoutReceipt, entry)
		return nil
	}
	if w.seen[rid] {
		w.fail(rid, entry, "listed again, by another spend.settled event: each receipt belongs to one settled spend")
		return nil
	}
	w.seen[rid] = true
	w.rep.Receipts++
	if !w.started {
		w.rep.FirstReceipt, w.rep.anchor = &rid, ev
	}
	w.rep.LastReceipt = &rid

	rc, ok := w.listed[rid]
	var err error
	if !ok {
		// Not in the list read before the walk (settled meanwhile, or
		// left out by the server): read on its own.
		rc, _, err = w.c.fetchReceipt(rid)
	}
	var se *serverError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		w.fail(rid, entry, "the server has no such receipt (404), though its spend settled with it")
		w.moveOn(rid, "", true)
		return nil
	}
	if err != nil {
		return err
	}
	claims, kid, err := w.c.checkReceipt(w.keys, rid, rc)
	if err != nil {
		w.fail(rid, entry, err.Error())
		w.moveOn(rid, rc.JWS, true)
		return nil
	}
	w.countKey(kid)
	for _, d := range []struct {
		what           string
		signed, listed any
	}{
		{"spend", claims.SpendID, ev.Data.Object.ID},
		{"agent", claims.AgentID, ev.AgentID},
		{"livemode", claims.Livemode, w.rep.Livemode},
	} {
		if d.signed != d.listed {
			w.fail(rid, entry, fmt.Sprintf("signed for %s %v, but its spend.settled event names %v", d.what, d.signed, d.listed))
		}
	}
	if w.owner == "" {
		w.owner = claims.OwnerID
	} else if claims.OwnerID != w.owner {
		w.fail(rid, entry, fmt.Sprintf("signed for owner %s, but the receipts before it are of owner %s", claims.OwnerID, w.owner))
	}
	if !w.started {
		prev := claims.PrevHash
		w.rep.AnchorPrev = &prev
	} else if w.checkLinks {
		w.checkLink(rid, entry, claims.PrevHash)
	}
	w.moveOn(rid, rc.JWS, false)
	return nil
}

// checkLink compares a receipt's prev claim with the hash of the token
// served as the receipt before it.
func (w *chainWalk) checkLink(rid string, entry chainEntry, prev string) {
	if w.prevToken == "" {
		w.fail(rid, entry, fmt.Sprintf("chain not checkable: the receipt before it, %s, could not be read", w.prevID))
		return
	}
	want := receipt.ChainHash(w.prevToken)
	if prev == want {
		return
	}
	shown := prev
	if shown == "" {
		shown = `empty (as if it started the chain)`
	}
	msg := fmt.Sprintf("chain broken: its prev is %s, but the receipt before it, %s, hashes to %s: "+
		"a receipt between them is missing, or one of them was altered or reordered", shown, w.prevID, want)
	if w.prevFailed {
		msg += " (" + w.prevID + " failed its own check)"
	}
	w.fail(rid, entry, msg)
}

// moveOn makes rid, served as token, the receipt before the next one.
func (w *chainWalk) moveOn(rid, token string, failed bool) {
	w.prevID, w.prevToken, w.prevFailed, w.started = rid, token, failed, true
}

func (w *chainWalk) fail(rid string, entry chainEntry, problem string) {
	w.rep.Problems = append(w.rep.Problems, chainProblem{ReceiptID: rid, chainEntry: entry, Problem: problem})
	w.rep.failed[rid] = true
}

func (w *chainWalk) countKey(kid string) {
	for i := range w.rep.Keys {
		if w.rep.Keys[i].KeyID == kid {
			w.rep.Keys[i].Receipts++
			return
		}
	}
	w.rep.Keys = append(w.rep.Keys, keyCount{KeyID: kid, Receipts: 1})
}
