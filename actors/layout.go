package actors

import (
	"encoding/binary"
)

// Buckets of the store. Keys are built so that prefix scans answer the
// questions the service asks: an agent's spends newest first, its active
// spends at activation, an environment's events in sequence order.
const (
	bOwners        = "owners"         // owner id -> Owner
	bOwnerEmails   = "owner_emails"   // lower-case e-mail -> owner id
	bEnvs          = "envs"           // owner id|env -> EnvState
	bAgents        = "agents"         // agent id -> Agent
	bOwnerAgents   = "owner_agents"   // owner id|env|agent id -> ""
	bPolicies      = "policies"       // agent id|version(8) -> Policy
	bPolicyIDs     = "policy_ids"     // policy id -> agent id|version(8)
	bPolicyCancels = "policy_cancels" // policy id -> cancelled at (a loosening that never applies)
	bKeys          = "keys"           // key id -> APIKey
	bKeyDigests    = "key_digests"    // sha256(secret) hex -> key id
	bOwnerKeys     = "owner_keys"     // owner id|env|key id -> agent id ("" for an owner key); see keys_index.go
	bLedgers       = "ledgers"        // agent id -> Ledger counters
	bSpends        = "spends"         // spend id -> Spend
	bAgentSpends   = "agent_spends"   // agent id|spend id -> Idempotency-Key, 0, idemRecord (ids sort by time; see idempotency.go)
	bEnvSpends     = "env_spends"     // owner id|env|spend id -> agent id
	bSpendHours    = "spend_hours"    // 'a' agent id| or 'e' owner id|env|, hour(4) -> hourSummary; see spend_hours.go
	bActive        = "active"         // agent id|spend id -> activeRecord, while a spend holds allowance
	bIdem          = "idempotency"    // agent id|key -> idemRecord, of spends made before agent_spends held them
	bEvents        = "events"         // owner id|env|sequence(8) -> StoredEvent
	bEventIDs      = "event_ids"      // event id -> sequence(8), for list cursors
	bEventBlocks   = "event_blocks"   // owner id|env|block(8) -> eventSummary; see event_blocks.go
	bReceipts      = "receipts"       // receipt id -> Receipt
	bApprovals     = "approvals"      // approval id -> spend id
	bMeta          = "service_meta"   // misc singletons
	// owner id|env|channel id -> NotificationChannel
	bNotifyChannels = "notification_channels"
	// approval id|channel id -> notificationSent: the approval's message
	// went out through the channel
	bNotifySent = "notification_sent"

	bWebhookEndpoints  = "webhook_endpoints"  // endpoint id -> webhookEndpoint
	bWebhookDeliveries = "webhook_deliveries" // delivery id -> webhookDelivery, while pending
	bWebhookCursors    = "webhook_cursors"    // owner id|env -> sequence(8) fanned out to webhooks
)

func join(parts ...string) []byte {
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, '|')
		}
		b = append(b, p...)
	}
	return b
}

func prefixOf(parts ...string) []byte { return append(join(parts...), '|') }

func seqKey(prefix []byte, seq uint64) []byte {
	b := make([]byte, len(prefix)+8)
	copy(b, prefix)
	binary.BigEndian.PutUint64(b[len(prefix):], seq)
	return b
}

func versionKey(agentID string, version int) []byte {
	return seqKey(prefixOf(agentID), uint64(version))
}
