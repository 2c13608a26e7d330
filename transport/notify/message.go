package notify

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/agentpay/guard/actors"
)

// message is one notice in words, before it is shaped for a channel.
type message struct {
	subject string
	// lines are the body's lines, without line endings.
	lines []string
	link  string
}

// reasons says in words why a spend waits for the owner.
var reasons = map[string]string{
	"approval_over":           "the amount is above the approval threshold (approval_over)",
	"unknown_destination":     "the destination is not on the trusted list (unknown_destination)",
	"destination_window_over": "payments to this destination in the last 24 hours would exceed the window (destination_window_over)",
}

// compose writes the notice. Everything an owner needs to decide is in
// it, so the decision can be taken from the message alone: who asks, how
// much, to whom, for what, why it waits, how long it can wait, and the
// code the console shows for the same approval.
func compose(n actors.ApprovalNotice, link string) message {
	amount := n.Amount.Display() + " " + strings.ToUpper(clean(n.Currency, 10))
	dest := clean(n.Destination, 253)
	env := "live"
	prefix := ""
	if !n.Livemode {
		env = "practice (test money, no real payment)"
		prefix = "[practice] "
	}
	reason := reasons[n.Reason]
	if reason == "" {
		reason = clean(n.Reason, 60)
	}
	method := clean(n.Resource.Method, 10)
	if method == "" {
		method = "GET"
	}
	resource := method + " " + clean(n.Resource.Host, 253) + clean(n.Resource.Path, 300)
	m := message{
		subject: fmt.Sprintf("%sApproval needed %s: %s to %s", prefix, clean(n.ShortCode, 8), amount, dest),
		link:    link,
	}
	m.lines = []string{
		fmt.Sprintf("Your agent %q (%s) asks to pay up to %s to %s.", clean(n.AgentName, 100), n.AgentID, amount, dest),
		"",
		"Resource:    " + resource,
		"Why:         " + reason,
		"Code:        " + clean(n.ShortCode, 8) + " (the console shows the same code)",
		"Expires:     " + n.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") + " (" + timeLeft(n.ExpiresAt.Sub(n.Now)) + ")",
		"Environment: " + env,
		"Approval:    " + n.ApprovalID,
		"",
		"Approve or reject it here. The link works once and expires with the approval:",
		link,
		"",
		"Nothing is paid unless you approve. If you did not expect this request, reject it and check the agent.",
	}
	return m
}

// text is the body with "\n" line endings.
func (m message) text() string { return strings.Join(m.lines, "\n") + "\n" }

func timeLeft(d time.Duration) string {
	switch m := int(d / time.Minute); {
	case d < time.Minute:
		return "less than a minute left"
	case m == 1:
		return "1 minute left"
	default:
		return fmt.Sprintf("%d minutes left", m)
	}
}

// clean makes text from outside safe to print in a line of a message: no
// control characters (no new lines, so no new headers), no invisible
// formatting, at most max runes.
func clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("...")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
