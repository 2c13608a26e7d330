package main

// The report of guard receipts verify: what the walk found, as JSON for
// -json and as lines for people.

import (
	"fmt"
	"strings"
)

// chainReport is what verify found; -json prints it.
type chainReport struct {
	Object   string  `json:"object"`
	Livemode bool    `json:"livemode"`
	AgentID  *string `json:"agent_id"`
	Receipts int     `json:"receipts"`
	Valid    bool    `json:"valid"`
	// ChainChecked is false with -agent: the links were not checked.
	ChainChecked bool    `json:"chain_checked"`
	FirstReceipt *string `json:"first_receipt"`
	LastReceipt  *string `json:"last_receipt"`
	// AnchorPrev is the first receipt's prev claim: "" when it starts the
	// chain, null when it could not be read.
	AnchorPrev     *string         `json:"anchor_prev"`
	Keys           []keyCount      `json:"keys"`
	WithoutReceipt []chainEntry    `json:"without_receipt"`
	Problems       []chainProblem  `json:"problems"`
	anchor         *settledEvent   // the first receipt's event
	failed         map[string]bool // receipts with a problem
}

// keyCount is how many receipts one key signed.
type keyCount struct {
	KeyID    string `json:"kid"`
	Receipts int    `json:"receipts"`
}

// chainEntry names a settled spend in the walk.
type chainEntry struct {
	SpendID  string `json:"spend_id"`
	EventID  string `json:"event_id"`
	Sequence uint64 `json:"sequence"`
}

// chainProblem is one reason a receipt cannot be trusted.
type chainProblem struct {
	ReceiptID string `json:"receipt_id"`
	chainEntry
	Problem string `json:"problem"`
}

// printChainReport writes the report for people: what the walk started
// from, what it skipped, each problem, then one summary line.
func (c *cli) printChainReport(rep *chainReport) error {
	out := c.stdout
	if rep.Receipts == 0 {
		who := ""
		if rep.AgentID != nil {
			who = " of agent " + *rep.AgentID
		}
		c.printWithoutReceipt(rep)
		_, err := fmt.Fprintf(out, "no receipts to check: no spend%s settled with a receipt in the last 30 days (%s)\n", who, environment(rep.Livemode))
		return err
	}
	first, last := *rep.FirstReceipt, *rep.LastReceipt
	if rep.ChainChecked {
		switch {
		case rep.AnchorPrev == nil:
			fmt.Fprintf(out, "anchor %s (event sequence %d): its claims could not be read, so neither could the link before it\n", first, rep.anchor.Sequence)
		case *rep.AnchorPrev == "":
			fmt.Fprintf(out, "anchor %s (event sequence %d) starts the chain: its prev is empty, so it is the environment's first receipt, or the first since a practice reset\n",
				first, rep.anchor.Sequence)
		default:
			fmt.Fprintf(out, "anchor %s (event sequence %d): the receipt before it (prev %s) is not listed: events are kept 30 days, "+
				"and a practice reset removes them, so the chain is checked from %s on\n", first, rep.anchor.Sequence, *rep.AnchorPrev, first)
		}
	}
	if len(rep.Keys) > 0 {
		parts := make([]string, len(rep.Keys))
		for i, k := range rep.Keys {
			parts[i] = fmt.Sprintf("%s (%d)", k.KeyID, k.Receipts)
		}
		fmt.Fprintf(out, "signed by %s\n", strings.Join(parts, ", "))
	}
	c.printWithoutReceipt(rep)
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "FAIL %s (spend %s, event %s, sequence %d): %s\n", p.ReceiptID, p.SpendID, p.EventID, p.Sequence, p.Problem)
	}
	n := fmt.Sprintf("%d %s", rep.Receipts, plural(rep.Receipts, "receipt"))
	var err error
	switch {
	case !rep.Valid:
		_, err = fmt.Fprintf(out, "%s checked from %s to %s: %d failed\n", n, first, last, len(rep.failed))
	case rep.ChainChecked:
		_, err = fmt.Fprintf(out, "%s, signatures valid, chain unbroken from %s to %s\n", n, first, last)
	default:
		_, err = fmt.Fprintf(out, "%s of agent %s, signatures valid; chain links not checked: the chain runs through "+
			"the other agents' receipts too (verify without -agent checks it)\n", n, *rep.AgentID)
	}
	return err
}

// printWithoutReceipt reports the settled spends that have no receipt.
func (c *cli) printWithoutReceipt(rep *chainReport) {
	for _, e := range rep.WithoutReceipt {
		fmt.Fprintf(c.stdout, "spend %s settled without a receipt (event %s, sequence %d): none was issued, and the chain does not include it\n",
			e.SpendID, e.EventID, e.Sequence)
	}
}

// plural is word for n of them.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
