package policy

import "time"

// Spend is a payment request and everything that happened to it. Its JSON
// form is the stored form and, with the per-response fields added by the
// transport (request_id, idempotent_replay), the wire form of spec 2.1.
type Spend struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	AgentID          string            `json:"agent_id"`
	OwnerID          string            `json:"-"`
	Livemode         bool              `json:"livemode"`
	Status           Status            `json:"status"`
	Amount           Amount            `json:"amount"`
	AmountSettled    *Amount           `json:"amount_settled"`
	Currency         string            `json:"currency"`
	Destination      string            `json:"destination"`
	DestinationRule  *string           `json:"destination_rule"`
	Resource         Resource          `json:"resource"`
	Memo             string            `json:"memo"`
	ClientReference  *string           `json:"client_reference"`
	PolicyVersion    int               `json:"policy_version"`
	DeclineReason    *string           `json:"decline_reason"`
	DeclinedAtGate   *string           `json:"declined_at_gate"`
	PauseDetail      *PauseDetail      `json:"pause_detail"`
	ApprovalReason   *string           `json:"approval_reason"`
	Approval         *ApprovalSummary  `json:"approval"`
	Hold             *Hold             `json:"hold"`
	Settlement       *Settlement       `json:"settlement"`
	FailureReason    *string           `json:"failure_reason"`
	RailError        *RailError        `json:"rail_error"`
	ProcessingDetail *ProcessingDetail `json:"processing_detail"`
	Rule             *RuleDetail       `json:"rule"`
	Sandbox          *Sandbox          `json:"sandbox"`
	Message          string            `json:"message"`
	NextAction       NextAction        `json:"next_action"`
	Retryable        bool              `json:"retryable"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`

	// Fields the service needs but the wire does not show.
	PolicyHash string `json:"-"`
	Nonce      string `json:"-"` // payment authorization, journaled before the vendor is called
	// IdempotencyKey and Fingerprint identify the request that created it.
	IdempotencyKey string `json:"-"`
	Fingerprint    string `json:"-"`
	// Warning stays on the message and the suggestions while the payment
	// goes ahead (approved, processing, settled). It is not part of the
	// spend's stored form, which is its wire form: the service keeps it
	// with the spend's active entry, so a spend reloaded after a restart
	// still carries it.
	Warning *Warning `json:"-"`
}

// Warning is advice that does not stop a payment: a duplicate purchase.
type Warning struct {
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

// Warn adds w to the spend's message and suggestions, now and after each
// step of the payment that follows.
func (s *Spend) Warn(w Warning) {
	s.Warning = &w
	s.applyWarning()
}

func (s *Spend) applyWarning() {
	if w := s.Warning; w != nil {
		s.Message += " " + w.Message
		s.NextAction.Suggestions = append(s.NextAction.Suggestions, w.Suggestion)
	}
}

// PauseDetail says how a pause affected the spend.
type PauseDetail struct {
	Scope    string    `json:"scope"` // "agent" or "owner"
	PausedAt time.Time `json:"paused_at"`
	Message  string    `json:"message"`
}

// ApprovalSummary is spec 2.2.
type ApprovalSummary struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	ExpiresAt time.Time `json:"expires_at"`
	ItemsHash string    `json:"items_hash"`
	ShortCode string    `json:"short_code"`
	OwnerURL  string    `json:"owner_url"`
}

// Hold is the reserved allowance of a spend that may still pay.
type Hold struct {
	Amount    Amount     `json:"amount"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// Settlement is spec 2.3.
type Settlement struct {
	Mode      string        `json:"mode"`
	Status    string        `json:"status"`
	Network   *string       `json:"network"`
	Reference *string       `json:"reference"`
	ReceiptID *string       `json:"receipt_id"`
	Result    *VendorResult `json:"result"`
}

// SettlementMode is the only mode: the service pays the vendor itself.
const SettlementMode = "service_executes_x402"

// RailError is why a rail refused.
type RailError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ProcessingDetail explains a spend whose outcome is not known yet.
type ProcessingDetail struct {
	Code    string    `json:"code"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// RuleDetail is spec 2.4: the rule that declined.
type RuleDetail struct {
	Name      string     `json:"name"`
	Scope     string     `json:"scope"`
	Limit     string     `json:"limit"`
	Spent     string     `json:"spent"`
	Requested string     `json:"requested"`
	Remaining string     `json:"remaining"`
	ResetsAt  *time.Time `json:"resets_at"`
}

// Sandbox marks practice spends.
type Sandbox struct {
	SimulatedVendor bool   `json:"simulated_vendor"`
	Forced          string `json:"forced,omitempty"`
}

// NextAction is spec 2.5.
type NextAction struct {
	Code              string   `json:"code"`
	Suggestions       []string `json:"suggestions,omitempty"`
	CheckWith         string   `json:"check_with,omitempty"`
	RetryAfterSeconds int      `json:"retry_after_seconds,omitempty"`
	OwnerURL          string   `json:"owner_url,omitempty"`
	Detail            string   `json:"detail,omitempty"`
}

// next_action codes.
const (
	NextNone             = "none"
	NextDoNotRetry       = "do_not_retry"
	NextWaitForOwner     = "wait_for_owner"
	NextCheckLater       = "check_status_later"
	NextNewAttemptNewKey = "new_attempt_needs_new_key"
	CheckWithGetSpend    = "service_get_spend"
)

// Decline reasons (spec 7.2 and api-decisions).
const (
	ReasonDailyCap                = "daily_cap"
	ReasonMonthlyCap              = "monthly_cap"
	ReasonLifetimeCap             = "lifetime_cap"
	ReasonPerSpendLimit           = "per_spend_limit"
	ReasonDestinationNotAllowed   = "destination_not_allowed"
	ReasonUnknownDestination      = "unknown_destination"
	ReasonUnknownDestinationLimit = "unknown_destination_limit"
	ReasonInsufficientFunds       = "insufficient_funds"
	ReasonMaxPending              = "max_pending"
	ReasonAgentPaused             = "agent_paused"
	ReasonPolicyExpired           = "policy_expired"
	ReasonOwnerRejected           = "owner_rejected"
	ReasonPolicyChanged           = "policy_changed"
	ApprovalOverReason            = "approval_over"
	DestinationWindowReason       = "destination_window_over"
)

// Gate is where a decline happened.
const (
	GateCreate   = "create"
	GateApproval = "approval"
	GateSettle   = "settlement"
)

// move changes the status, panicking on an impossible transition.
func (s *Spend) move(to Status, now time.Time) {
	mustMove(s.Status, to)
	s.Status = to
	s.UpdatedAt = now.UTC()
}

// Move is the exported form of move, for the actors that drive settlement.
func (s *Spend) Move(to Status, now time.Time) { s.move(to, now) }

func strPtr(s string) *string { return &s }
