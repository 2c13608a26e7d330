package actors

import (
	"errors"
	"fmt"
)

// Code is a stable error code; the transport maps each to an HTTP status in
// one table.
type Code string

// Error codes the actors produce.
const (
	CodeInvalidRequest        Code = "invalid_request"
	CodeParameterInvalid      Code = "parameter_invalid"
	CodeIdempotencyConflict   Code = "idempotency_conflict"
	CodeIdempotencyInProgress Code = "idempotency_in_progress"
	CodeCancelTooLate         Code = "cancel_too_late"
	CodeNotFound              Code = "resource_missing"
	CodeQuotaExceeded         Code = "quota_exceeded"
	CodeConflict              Code = "state_conflict"
	CodeUnavailable           Code = "service_unavailable"
	CodeTimeout               Code = "timeout"
	CodeInternal              Code = "internal_error"
)

// Error is a failure with a stable code and a message that says what to do.
type Error struct {
	Code          Code
	Message       string
	Param         string
	ChangedFields []string
	RetryAfter    int // seconds; 0 when not applicable

	// agentGone marks "no such agent" (see errAgentGone).
	agentGone bool
	// elsewhere marks "not found here" for an object the asking owner has
	// in the other environment (see otherEnvHint).
	elsewhere bool
}

// errAgentGone says an agent does not exist (any more).
func errAgentGone(agentID string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("No agent %s exists.", agentID), agentGone: true}
}

// otherEnvHint finishes a "no such object" message for an owner whose
// object lives in the other environment: the usual cause is a key (or a
// console view) of the wrong one, and saying so spares a search. Objects
// of other owners get no hint, so nothing is learnt about them.
func otherEnvHint(p Principal, what string) string {
	here, there, key := "practice", "live", "svc_live_owner_…"
	if p.Livemode {
		here, there, key = "live", "practice", "svc_test_owner_…"
	}
	remedy := "use a " + there + " owner key (" + key + ") for it"
	if p.KeyID == "" {
		remedy = "switch the console to " + there + " to see it"
	}
	return fmt.Sprintf(" in %s mode; it is a %s %s, so %s.", here, there, what, remedy)
}

// isElsewhere reports whether err is a not-found for an object the asking
// owner has in the other environment.
func isElsewhere(err error) bool {
	e, ok := err.(*Error)
	return ok && e.elsewhere
}

// forKey answers "no such agent" to an agent key as the 401 of any dead
// key: the key's own agent went (a practice reset removed it) after the
// key was checked, so the key is dead as well, and an agent learns no
// more from a dead key than from any other.
func forKey(p Principal, err error) error {
	if e, ok := err.(*Error); ok && e.agentGone && p.Kind == KindAgent {
		return ErrInvalidKey
	}
	return err
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrUnavailable is returned when the journal could not make a change
// durable: the change did not happen.
var ErrUnavailable = &Error{Code: CodeUnavailable, RetryAfter: 1,
	Message: "The service could not record the change durably; nothing was changed. Retry with the same Idempotency-Key."}

// AsError extracts an *Error, wrapping anything else as internal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "An internal error occurred; nothing was changed."}
}
