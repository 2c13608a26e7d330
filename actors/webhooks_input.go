package actors

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentpay/guard/internal/egress"
)

// knownEventType reports the event types an endpoint may name exactly
// (spec 6.2, and policy.change_cancelled). A subscription to a family
// ("spend.*") or to everything ("*") also receives types added later.
func knownEventType(t string) bool {
	switch t {
	case "spend.pending_approval", "spend.approved", "spend.declined", "spend.processing", "spend.settled",
		"spend.failed", "spend.expired", "spend.cancelled", "spend.refunded", "spend.disputed",
		"approval.requested", "approval.decided",
		"funding.awaiting_deposit", "funding.deposit_received", "funding.converted", "funding.failed",
		"wallet.low_balance",
		"policy.updated", "policy.change_requested", "policy.change_cancelled",
		"agent.paused", "agent.resumed", "agent.created", "agent.archived",
		"api_key.created", "api_key.rotated", "api_key.revoked",
		"destination.added", "destination.removed",
		"webhook_endpoint.created", "webhook_endpoint.paused",
		"notification_channel.added", "notification_channel.updated",
		"webhook.test":
		return true
	}
	return false
}

// knownEventFamily reports the first part of the known event types.
func knownEventFamily(f string) bool {
	switch f {
	case "spend", "approval", "funding", "wallet", "policy", "agent", "api_key", "destination",
		"webhook_endpoint", "notification_channel", "webhook":
		return true
	}
	return false
}

// maxWebhookURL is the longest endpoint URL, as for resource URLs.
const maxWebhookURL = 2048

// maxEnabledEvents bounds one subscription list.
const maxEnabledEvents = 64

// CheckWebhookURL validates an endpoint URL: absolute https without user
// name or password; plain http only for a loopback host (a receiver on
// the same machine, tests).
func CheckWebhookURL(raw string) *Error {
	bad := func(why string) *Error {
		return &Error{Code: CodeParameterInvalid, Param: "url", Message: why +
			" Send an absolute https URL without user name or password, like https://example.com/webhooks;" +
			" plain http is accepted only for loopback hosts (127.0.0.1, [::1], localhost), for local receivers and tests."}
	}
	if raw == "" || len(raw) > maxWebhookURL {
		return bad(fmt.Sprintf("url must be 1 to %d characters.", maxWebhookURL))
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return bad("url must not contain spaces or line breaks.")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return bad("url is not an absolute URL.")
	}
	if u.User != nil {
		return bad("url must not carry a user name or password; authenticate deliveries by their Service-Signature.")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return bad("url must not carry a #fragment.")
	}
	if u.Hostname() == "" {
		return bad("url has no host.")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("url port %s is not a port (1 to 65535).", clipText(p, 10)))
		}
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return bad("url uses plain http with a host that is not loopback.")
		}
	default:
		return bad(fmt.Sprintf("url scheme %q is not https.", clipText(u.Scheme, 20)))
	}
	return nil
}

// checkWebhookURL is CheckWebhookURL, and for a live endpoint also
// refuses a host that is not public (localhost, a loopback, private,
// link-local or reserved address) unless the operator allowed private
// targets: an owner's URL must not reach what only the service can reach.
// A name is checked again where it matters, at each delivery, on the
// address it resolves to then (see the webhook sender).
func (s *System) checkWebhookURL(raw string, env Env) *Error {
	if err := CheckWebhookURL(raw); err != nil {
		return err
	}
	if env == EnvLive && !s.cfg.PrivateWebhookTargets {
		if u, err := url.Parse(raw); err == nil && !egress.PublicHost(u.Hostname()) {
			return &Error{Code: CodeParameterInvalid, Param: "url", Message: fmt.Sprintf(
				"url host %s is not a public address (loopback, private, link-local or reserved); live endpoints receive deliveries only at public addresses. Use the endpoint's public https URL (an operator can allow private targets with private_webhook_targets).",
				clipText(u.Hostname(), 60))}
		}
	}
	if u, err := url.Parse(raw); err == nil && egress.NoReceiverHost(u.Hostname()) {
		return &Error{Code: CodeParameterInvalid, Param: "url", Message: fmt.Sprintf(
			"url host %s is a link-local, multicast or unspecified address (the cloud metadata endpoint is one), which no receiver has. Use the receiver's own address: a loopback or private one is fine in practice.",
			clipText(u.Hostname(), 60))}
	}
	return nil
}

// CheckEnabledEvents validates a subscription list and returns it without
// duplicates, in the order given. Each entry is an exact event type, a
// family of types ("spend.*"), or "*" for every event.
func CheckEnabledEvents(list []string) ([]string, *Error) {
	bad := func(msg string) ([]string, *Error) {
		return nil, &Error{Code: CodeParameterInvalid, Param: "enabled_events", Message: msg}
	}
	if len(list) == 0 {
		return bad(`enabled_events must list at least one event type, like ["spend.*"], or ["*"] for every event.`)
	}
	if len(list) > maxEnabledEvents {
		return bad(fmt.Sprintf("enabled_events lists %d entries; at most %d are allowed (use a family like \"spend.*\").", len(list), maxEnabledEvents))
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(list))
	for i, e := range list {
		ok := e == "*" || knownEventType(e)
		if f, found := strings.CutSuffix(e, ".*"); found && knownEventFamily(f) {
			ok = true
		}
		if e == "" {
			// A JSON null decodes to "" as well: the message names both.
			return bad(fmt.Sprintf("enabled_events[%d] is empty or null; name an exact type like \"spend.settled\", a family like \"spend.*\", or \"*\" for every event.", i))
		}
		if !ok {
			return bad(fmt.Sprintf("enabled_events[%d]: %q is not an event type; name an exact type like \"spend.settled\", a family like \"spend.*\", or \"*\" for every event.", i, clipText(e, 60)))
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out, nil
}

// subscribes reports whether an endpoint's list takes an event type; the
// same matching as GET /v1/events?type=.
func subscribes(enabled []string, typ string) bool {
	for _, f := range enabled {
		if matchType(f, typ) {
			return true
		}
	}
	return false
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
