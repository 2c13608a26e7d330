package actors

import (
	"time"

	"github.com/agentpay/guard/policy"
)

// APIVersion is the current version identifier (spec part 9).
const APIVersion = "2026-10-01"

// Env names a practice or live environment of an owner.
type Env string

const (
	EnvTest Env = "test"
	EnvLive Env = "live"
)

// Livemode reports whether the environment is live.
func (e Env) Livemode() bool { return e == EnvLive }

// EnvOf maps livemode to an environment.
func EnvOf(livemode bool) Env {
	if livemode {
		return EnvLive
	}
	return EnvTest
}

// Owner is the person or company that funds agents and sets their rules.
type Owner struct {
	ID           string    `json:"id"` // UUID
	Name         string    `json:"name"`
	Email        string    `json:"email"`
	PasswordHash string    `json:"password_hash"`
	CreatedAt    time.Time `json:"created_at"`
}

// EnvState is one owner's environment: the money pool and the event
// sequence. It is stored with every change that touches money, in the same
// journal record, so the pool can never drift from the spends.
type EnvState struct {
	OwnerID string `json:"owner_id"`
	Env     Env    `json:"env"`
	// Balance is deposited minus settled; Held is the sum of active holds of
	// every agent. pool_available = Balance - Held.
	Balance      policy.Amount `json:"balance"`
	Held         policy.Amount `json:"held"`
	ReserveFloor policy.Amount `json:"reserve_floor"`
	Sequence     uint64        `json:"sequence"`
	// ReceiptChain is the hash of the newest receipt, the link the next one
	// carries.
	ReceiptChain string `json:"receipt_chain"`
	// ClockOffset is how far a practice environment's clock was advanced.
	ClockOffset  time.Duration `json:"clock_offset,omitempty"`
	ActiveAgents int           `json:"active_agents"`
	// ArchivedAgents counts the environment's archived agents, for the
	// quota of spec 8.3.
	ArchivedAgents int `json:"archived_agents,omitempty"`
	// EventFloor is the last sequence before the newest practice reset:
	// events at or below it belong to the removed environment and are
	// never listed (a reset hides them at once and removes them after).
	EventFloor uint64 `json:"event_floor,omitempty"`
	// LowBalanceThreshold is the pool_available below which the owner is
	// warned with wallet.low_balance; zero warns never.
	LowBalanceThreshold policy.Amount `json:"low_balance_threshold"`
	// BelowLowBalance records that pool_available was below the threshold
	// when last checked and the owner was warned, so the warning is sent
	// once per crossing (see noteLowBalance).
	BelowLowBalance bool `json:"below_low_balance,omitempty"`
}

// Agent statuses.
const (
	AgentActive   = "active"
	AgentPaused   = "paused"
	AgentArchived = "archived"
)

// Agent is an AI agent that spends under one policy.
type Agent struct {
	ID            string     `json:"id"`
	Object        string     `json:"object"`
	OwnerID       string     `json:"owner_id"`
	Name          string     `json:"name"`
	Status        string     `json:"status"`
	Livemode      bool       `json:"livemode"`
	PolicyVersion int        `json:"policy_version"`
	CreatedAt     time.Time  `json:"created_at"`
	PausedAt      *time.Time `json:"paused_at"`
	ArchivedAt    *time.Time `json:"archived_at"`
	// PauseDetail says how a paused agent was paused; null otherwise.
	PauseDetail *AgentPause `json:"pause_detail"`
}

// AgentPause is how an agent was paused: by its own pause, or by the
// owner's emergency pause of every agent, with the owner's reason.
type AgentPause struct {
	Emergency bool    `json:"emergency"`
	Reason    *string `json:"reason"`
}

// Key kinds.
const (
	KindAgent = "agent"
	KindOwner = "owner"
)

// APIKey is a stored key: never the secret, only its SHA-256 digest.
type APIKey struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	Kind      string     `json:"kind"`
	OwnerID   string     `json:"owner_id"`
	AgentID   string     `json:"agent_id,omitempty"`
	Livemode  bool       `json:"livemode"`
	Prefix    string     `json:"prefix"`
	Last4     string     `json:"last4"`
	Scope     string     `json:"scope"`
	Digest    string     `json:"digest"`
	ExpiresAt time.Time  `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// GracePeriodEndsAt is set on a rotated key: it works until then.
	GracePeriodEndsAt *time.Time `json:"grace_period_ends_at,omitempty"`
}

// KeyView is a key as the API shows it: never the secret, never its
// digest, never who owns it beyond the agent.
type KeyView struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	Kind      string     `json:"kind"`
	AgentID   *string    `json:"agent_id"`
	Livemode  bool       `json:"livemode"`
	Prefix    string     `json:"prefix"`
	Last4     string     `json:"last4"`
	Scope     string     `json:"scope"`
	ExpiresAt time.Time  `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// GracePeriodEndsAt is when a rotated key stops working; null for a
	// key never rotated.
	GracePeriodEndsAt *time.Time `json:"grace_period_ends_at"`
	// Status is what the key can do at the time of the answer (or of
	// the event): one of the Key* statuses.
	Status string `json:"status"`
}

// Key statuses. Only active and rotated keys work.
const (
	KeyActive  = "active"  // works
	KeyRotated = "rotated" // replaced by a rotation; works until grace_period_ends_at
	KeyExpired = "expired" // past expires_at, which a rotation sets to the grace's end
	KeyRevoked = "revoked" // revoked_at says since when
)

// statusAt is the key's status at now, the time that ages it (see
// System.keyNow), by the rules authentication applies.
func (k APIKey) statusAt(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case !now.Before(k.ExpiresAt):
		return KeyExpired
	case k.GracePeriodEndsAt != nil:
		return KeyRotated
	}
	return KeyActive
}

// ViewAt is the key's public form at now, the time that ages it.
func (k APIKey) ViewAt(now time.Time) KeyView {
	v := KeyView{ID: k.ID, Object: "api_key", Kind: k.Kind, Livemode: k.Livemode, Prefix: k.Prefix, Last4: k.Last4,
		Scope: k.Scope, ExpiresAt: k.ExpiresAt, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, Status: k.statusAt(now)}
	v.GracePeriodEndsAt = k.GracePeriodEndsAt
	if k.AgentID != "" {
		id := k.AgentID
		v.AgentID = &id
	}
	return v
}

// Event is spec 6.1.
type Event struct {
	ID         string    `json:"id"`
	Object     string    `json:"object"`
	Type       string    `json:"type"`
	APIVersion string    `json:"api_version"`
	Created    time.Time `json:"created"`
	Livemode   bool      `json:"livemode"`
	Sequence   uint64    `json:"sequence"`
	AgentID    string    `json:"agent_id"`
	Data       EventData `json:"data"`
	// Audience lists who may read it: "agent", "owner".
	Audience []string `json:"-"`
}

// EventData wraps the affected resource.
type EventData struct {
	Object any `json:"object"`
}

// SpendRef is the spend as an event shows it.
type SpendRef struct {
	ID            string         `json:"id"`
	Object        string         `json:"object"`
	Status        policy.Status  `json:"status"`
	Amount        policy.Amount  `json:"amount"`
	AmountSettled *policy.Amount `json:"amount_settled"`
	Destination   string         `json:"destination"`
	Settlement    *struct {
		ReceiptID *string `json:"receipt_id"`
	} `json:"settlement,omitempty"`
}

// StoredEvent is an event with its audience, as journaled.
type StoredEvent struct {
	Event
	AudienceList []string `json:"audience"`
	// OwnerID names the owner of the event's environment for subscribers
	// of the hub; it is not stored (the event's key names the owner).
	OwnerID string `json:"-"`
}

// Receipt is a signed receipt as stored and served.
type Receipt struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	SpendID   string    `json:"spend_id"`
	AgentID   string    `json:"agent_id"`
	OwnerID   string    `json:"-"`
	Livemode  bool      `json:"livemode"`
	JWS       string    `json:"jws"`
	KeyID     string    `json:"kid"`
	CreatedAt time.Time `json:"created_at"`
}

// idemRecord remembers which spend an idempotency key created, with the
// fingerprint fields so a conflict can name what changed.
type idemRecord struct {
	SpendID     string      `json:"spend_id"`
	Fingerprint Fingerprint `json:"fp"`
	CreatedAt   time.Time   `json:"created_at"`
}

// Fingerprint is what makes two requests "the same" (spec 4.2): amount,
// currency, destination and resource. memo and client_reference are outside.
type Fingerprint struct {
	Amount      string `json:"amount"` // display form: "5" and "5.00" are the same amount
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
	URL         string `json:"url"`
	Method      string `json:"method"`
}

// Diff lists the fingerprint fields that differ, by request field name.
func (f Fingerprint) Diff(g Fingerprint) []string {
	var out []string
	if f.Amount != g.Amount {
		out = append(out, "amount")
	}
	if f.Currency != g.Currency {
		out = append(out, "currency")
	}
	if f.Destination != g.Destination {
		out = append(out, "destination")
	}
	if f.URL != g.URL || f.Method != g.Method {
		out = append(out, "resource")
	}
	return out
}
