package transport

import (
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/fastjson"
)

// Error codes of the transport itself (the actors define the rest).
const (
	codeInvalidJSON         = "invalid_json"
	codeParameterMissing    = "parameter_missing"
	codeParameterInvalid    = "parameter_invalid"
	codeParameterUnknown    = "parameter_unknown"
	codeAmountInvalid       = "amount_invalid"
	codeCurrency            = "currency_not_supported"
	codeIdemMissing         = "idempotency_key_missing"
	codeIdemInvalid         = "idempotency_key_invalid"
	codeHostMismatch        = "resource_host_mismatch"
	codeContentType         = "unsupported_content_type"
	codeUnknownVersion      = "unknown_version"
	codeBodyTooLarge        = "body_too_large"
	codeKeyKindNotAllowed   = "key_kind_not_allowed"
	codeRouteNotFound       = "route_not_found"
	codeHeaderInvalid       = "header_invalid"
	codeInvalidAPIKey       = "invalid_api_key"
	codeRateLimited         = "rate_limited"
	codeResourceMissingBody = "resource_required"
	codeRequestTimeout      = "request_timeout"
)

// errorClass is the HTTP status and error type of a code: the one table
// that maps codes to the wire.
type errorClass struct {
	status int
	typ    string
}

var errorTable = map[string]errorClass{
	codeInvalidJSON:                          {400, "invalid_request_error"},
	codeParameterMissing:                     {400, "invalid_request_error"},
	codeParameterInvalid:                     {400, "invalid_request_error"},
	codeParameterUnknown:                     {400, "invalid_request_error"},
	codeAmountInvalid:                        {400, "invalid_request_error"},
	codeCurrency:                             {400, "invalid_request_error"},
	codeIdemMissing:                          {400, "invalid_request_error"},
	codeIdemInvalid:                          {400, "invalid_request_error"},
	codeHostMismatch:                         {400, "invalid_request_error"},
	codeContentType:                          {400, "invalid_request_error"},
	codeUnknownVersion:                       {400, "invalid_request_error"},
	codeHeaderInvalid:                        {400, "invalid_request_error"},
	codeResourceMissingBody:                  {400, "invalid_request_error"},
	string(actors.CodeInvalidRequest):        {400, "invalid_request_error"},
	codeInvalidAPIKey:                        {401, "authentication_error"},
	codeKeyKindNotAllowed:                    {403, "permission_error"},
	string(actors.CodeNotFound):              {404, "not_found_error"},
	codeRouteNotFound:                        {404, "not_found_error"},
	string(actors.CodeIdempotencyConflict):   {409, "idempotency_error"},
	string(actors.CodeIdempotencyInProgress): {409, "idempotency_error"},
	string(actors.CodeCancelTooLate):         {409, "invalid_request_error"},
	string(actors.CodeConflict):              {409, "invalid_request_error"},
	string(actors.CodeDepositFailed):         {409, "invalid_request_error"},
	string(actors.CodeQuotaExceeded):         {409, "invalid_request_error"},
	codeRequestTimeout:                       {408, "invalid_request_error"},
	codeBodyTooLarge:                         {413, "invalid_request_error"},
	codeRateLimited:                          {429, "rate_limit_error"},
	string(actors.CodeInternal):              {500, "api_error"},
	string(actors.CodeUnavailable):           {503, "api_error"},
	string(actors.CodeTimeout):               {503, "api_error"},
}

// apiError is an error on its way to the wire.
type apiError struct {
	code          string
	message       string
	param         string
	changedFields []string
	retryAfter    int
	// cause is the error behind an internal one, for the log only: the
	// caller is told no more than that it happened.
	cause error
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// status is the HTTP status e is answered with.
func (e *apiError) status() int {
	if cls, ok := errorTable[e.code]; ok {
		return cls.status
	}
	return 500
}

func badParam(code, param, msg string) *apiError {
	return &apiError{code: code, param: param, message: msg}
}

func fromActors(err error) *apiError {
	e := actors.AsError(err)
	out := &apiError{code: string(e.Code), message: e.Message, param: e.Param, changedFields: e.ChangedFields, retryAfter: e.RetryAfter}
	if !errors.As(err, new(*actors.Error)) {
		out.cause = err
	}
	return out
}

// writeError writes the error body of api-decisions.md.
func writeError(ctx *fasthttp.RequestCtx, reqID string, e *apiError) {
	cls, ok := errorTable[e.code]
	if !ok {
		cls = errorClass{500, "api_error"}
	}
	ctx.SetStatusCode(cls.status)
	ctx.SetContentType("application/json")
	if e.retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"error":{"type":`...)
	b = fastjson.AppendString(b, cls.typ)
	b = append(b, `,"code":`...)
	b = fastjson.AppendString(b, e.code)
	b = append(b, `,"message":`...)
	b = fastjson.AppendString(b, e.message)
	b = append(b, `,"param":`...)
	if e.param == "" {
		b = append(b, "null"...)
	} else {
		b = fastjson.AppendString(b, e.param)
	}
	if e.changedFields != nil {
		b = append(b, `,"changed_fields":`...)
		b = fastjson.AppendStrings(b, e.changedFields)
	}
	b = append(b, `},"request_id":`...)
	b = fastjson.AppendString(b, reqID)
	b = append(b, '}')
	ctx.SetBody(b)
}
