package policy

import "time"

// Resource is what the agent buys: the vendor URL split into host and path,
// and the HTTP method used to fetch it.
type Resource struct {
	Host   string `json:"host"`
	Path   string `json:"path"` // path plus "?query" when the URL had one
	Method string `json:"method"`
}

// Payment is everything a rail needs to pay a vendor once. Nonce identifies
// the payment authorization: it is journaled before the first attempt, and a
// retry or a verification after a crash reuses it, so a vendor can never be
// paid twice for one spend.
type Payment struct {
	SpendID     string
	AgentID     string
	OwnerID     string
	Livemode    bool
	Amount      Amount // the maximum the agent accepts
	Currency    string
	Destination string
	Resource    Resource
	Nonce       string // 32 hex characters, unique per spend
	At          time.Time
}

// RailStatus is what a rail knows about a payment after an attempt.
type RailStatus int

const (
	// RailSettled: the vendor was paid and delivered; Result is set.
	RailSettled RailStatus = iota + 1
	// RailRejected: the rail refused before any money moved.
	RailRejected
	// RailUnknown: the request may have reached the vendor and nobody knows
	// whether money moved (timeout, reset, 5xx after sending). Never treated
	// as failed: the service verifies later with the same nonce.
	RailUnknown
)

// VendorResult is the vendor's answer to the paid request, as the spend's
// settlement.result shows it.
type VendorResult struct {
	HTTPStatus    int    `json:"http_status"`
	ContentType   string `json:"content_type"`
	Body          string `json:"body"`
	BodyTruncated bool   `json:"body_truncated"`
	BodySHA256    string `json:"body_sha256"` // "sha256:<hex>" of the full body
}

// RailOutcome is the result of Pay or Verify.
type RailOutcome struct {
	Status    RailStatus
	Price     Amount // amount actually paid; set when settled; never above Payment.Amount
	Network   string // payment network name, e.g. "base-sepolia"
	Reference string // transaction reference on that network
	Result    *VendorResult
	// ErrorCode and ErrorMessage describe a rejection (for example
	// "insufficient_funds") or why the outcome is unknown.
	ErrorCode    string
	ErrorMessage string
	// Simulated is true when no real vendor was called (practice).
	Simulated bool
	// Forced names the practice trigger that forced this outcome
	// ("magic_amount"), empty otherwise.
	Forced string
}

// ReceiptClaims is the payload of a signed receipt. PrevHash chains the
// receipts of one owner: it is "sha256:<hex>" of the previous receipt's
// compact JWS (empty for the first), so removing or editing a receipt breaks
// every later link.
type ReceiptClaims struct {
	ReceiptID     string   `json:"rid"`
	SpendID       string   `json:"spend_id"`
	AgentID       string   `json:"agent_id"`
	OwnerID       string   `json:"owner_id"`
	Livemode      bool     `json:"livemode"`
	Amount        string   `json:"amount"`
	AmountSettled string   `json:"amount_settled"`
	Currency      string   `json:"currency"`
	Destination   string   `json:"destination"`
	Resource      Resource `json:"resource"`
	Network       string   `json:"network"`
	Reference     string   `json:"reference"`
	PolicyVersion int      `json:"policy_version"`
	PolicyHash    string   `json:"policy_hash"`
	BodySHA256    string   `json:"body_sha256"`
	IssuedAt      int64    `json:"iat"` // unix seconds
	PrevHash      string   `json:"prev"`
}
