package policy

import "fmt"

// Status is the state of a spend (spec part 3).
type Status string

const (
	StatusPendingApproval Status = "pending_approval"
	StatusApproved        Status = "approved"
	StatusDeclined        Status = "declined"
	StatusProcessing      Status = "processing"
	StatusSettled         Status = "settled"
	StatusFailed          Status = "failed"
	StatusExpired         Status = "expired"
	StatusCancelled       Status = "cancelled"
	// Reserved: events exist for them, no operation produces them yet.
	StatusRefunded Status = "refunded"
	StatusDisputed Status = "disputed"
)

// statusNew is the state of a spend that does not exist yet; only the
// transition table uses it.
const statusNew Status = ""

// transitions lists every legal move. Anything else is a bug in the caller
// and panics: bad input is rejected long before a state changes.
var transitions = map[Status][]Status{
	statusNew:             {StatusDeclined, StatusPendingApproval, StatusApproved},
	StatusPendingApproval: {StatusApproved, StatusDeclined, StatusExpired, StatusCancelled},
	StatusApproved:        {StatusProcessing, StatusSettled, StatusFailed, StatusDeclined, StatusCancelled},
	StatusProcessing:      {StatusSettled, StatusFailed},
	StatusSettled:         {StatusRefunded, StatusDisputed},
}

// CanMove reports whether a spend may move from one status to another.
func CanMove(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// mustMove panics on an impossible transition.
func mustMove(from, to Status) {
	if !CanMove(from, to) {
		panic(fmt.Sprintf("policy: impossible spend transition %q -> %q", from, to))
	}
}

// Terminal reports whether no further move can change what was paid.
func (s Status) Terminal() bool {
	switch s {
	case StatusDeclined, StatusSettled, StatusFailed, StatusExpired, StatusCancelled, StatusRefunded, StatusDisputed:
		return true
	}
	return false
}

// Holds reports whether a spend in this status reserves allowance.
func (s Status) Holds() bool {
	return s == StatusPendingApproval || s == StatusApproved || s == StatusProcessing
}

// Valid reports whether s is a known status (for list filters).
func (s Status) Valid() bool {
	switch s {
	case StatusPendingApproval, StatusApproved, StatusDeclined, StatusProcessing, StatusSettled,
		StatusFailed, StatusExpired, StatusCancelled, StatusRefunded, StatusDisputed:
		return true
	}
	return false
}

// EventType is the spec 6.2 event announcing entry into this status.
func (s Status) EventType() string { return "spend." + string(s) }
