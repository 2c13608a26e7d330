package transport

import "strings"

// This file is compiled into the package under test so that both the fuzz
// target (which calls decodeStrict) and the HTTP tests in transport_test
// share one table of bad requests.

// ValidSpendBody is a POST /v1/spends body every test agent may pay: its
// destination is on the trusted list of the agents the tests create.
const ValidSpendBody = `{"amount":"1.00","destination":"api.vendor.com",` +
	`"resource":{"url":"https://api.vendor.com/v1/data?q=1","method":"GET"},"memo":"weather data"}`

// BadSpendCase is a POST /v1/spends the service must answer with 400
// without creating or reserving anything.
type BadSpendCase struct {
	Name string
	Body string
	// Headers are sent on top of the defaults (JSON content type, a fresh
	// Idempotency-Key); an empty value removes the header.
	Headers map[string]string
	// Live sends the request with a live agent key.
	Live bool
	// Code and Param are the error's code and param ("" for null).
	Code  string
	Param string
	// Hint is a phrase the message must contain: what to fix.
	Hint string
}

// ReusesKey reports whether the case sends a usable Idempotency-Key of its
// own choosing, which a later valid request can reuse.
func (c BadSpendCase) ReusesKey() bool {
	_, set := c.Headers["Idempotency-Key"]
	return !set
}

func spendWith(field, value string) string {
	return `{"amount":"1.00","destination":"api.vendor.com",` + field + `:` + value +
		`,"resource":{"url":"https://api.vendor.com/v1/data","method":"GET"}}`
}

func spendAmount(raw string) string {
	return `{"amount":` + raw + `,"destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/v1/data"}}`
}

func spendURL(url string) string {
	return `{"amount":"1.00","destination":"api.vendor.com","resource":{"url":"` + url + `"}}`
}

// BadSpendCases is the table of api-decisions.md "Spends" and "Wire basics"
// rules for POST /v1/spends.
var BadSpendCases = []BadSpendCase{
	{Name: "malformed JSON", Body: `{"amount":"1.00","destination":"api.vendor.com"`,
		Code: "invalid_json", Hint: "JSON"},
	{Name: "empty body", Body: ``, Code: "invalid_json", Hint: "JSON object"},
	{Name: "not an object", Body: `["amount","1.00"]`, Code: "invalid_json", Hint: "JSON object"},
	{Name: "trailing data", Body: ValidSpendBody + `{}`, Code: "invalid_json", Hint: "exactly one object"},
	{Name: "duplicate key", Body: `{"amount":"1.00","amount":"2.00","destination":"api.vendor.com",` +
		`"resource":{"url":"https://api.vendor.com/v1/data"}}`,
		Code: "invalid_json", Param: "amount", Hint: "twice"},
	{Name: "duplicate nested key", Body: `{"amount":"1.00","destination":"api.vendor.com",` +
		`"resource":{"url":"https://api.vendor.com/a","url":"https://api.vendor.com/b"}}`,
		Code: "invalid_json", Param: "resource.url", Hint: "twice"},
	{Name: "unknown field", Body: spendWith(`"tip"`, `"1.00"`), Code: "parameter_unknown", Param: "tip", Hint: "remove it"},
	{Name: "unknown nested field", Body: `{"amount":"1.00","destination":"api.vendor.com",` +
		`"resource":{"url":"https://api.vendor.com/v1/data","verb":"GET"}}`,
		Code: "parameter_unknown", Param: "resource.verb", Hint: "remove it"},
	{Name: "missing amount", Body: `{"destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/v1/data"}}`,
		Code: "parameter_missing", Param: "amount", Hint: "decimal string"},
	{Name: "amount with exponent", Body: spendAmount(`"1e3"`), Code: "amount_invalid", Param: "amount", Hint: "exponents"},
	{Name: "negative amount", Body: spendAmount(`"-1"`), Code: "amount_invalid", Param: "amount", Hint: "negative"},
	{Name: "zero amount", Body: spendAmount(`"0"`), Code: "amount_invalid", Param: "amount", Hint: "greater than 0"},
	{Name: "seven decimals", Body: spendAmount(`"0.0000001"`), Code: "amount_invalid", Param: "amount", Hint: "6 decimals"},
	{Name: "NaN", Body: spendAmount(`"NaN"`), Code: "amount_invalid", Param: "amount", Hint: "finite"},
	{Name: "decimal comma", Body: spendAmount(`"1,00"`), Code: "amount_invalid", Param: "amount", Hint: `"." as the decimal point`},
	{Name: "amount as JSON number", Body: spendAmount(`5`), Code: "parameter_invalid", Param: "amount", Hint: "decimal strings"},
	{Name: "memo that is not UTF-8", Body: spendWith(`"memo"`, "\"caf\xe9 \xff\xfe\""), Code: "invalid_json", Hint: "UTF-8"},
	{Name: "destination as JSON number", Body: `{"amount":"1.00","destination":5,"resource":{"url":"https://api.vendor.com/v1/data"}}`,
		Code: "parameter_invalid", Param: "destination", Hint: "must be a JSON string, not a number"},
	{Name: "memo of 281 characters", Body: spendWith(`"memo"`, `"`+strings.Repeat("m", 281)+`"`),
		Code: "parameter_invalid", Param: "memo", Hint: "280"},
	{Name: "client_reference of 65 characters", Body: spendWith(`"client_reference"`, `"`+strings.Repeat("r", 65)+`"`),
		Code: "parameter_invalid", Param: "client_reference", Hint: "64"},
	{Name: "destination of 254 characters", Body: `{"amount":"1.00","destination":"` + strings.Repeat("d", 254) + `"}`,
		Code: "parameter_invalid", Param: "destination", Hint: "253"},
	{Name: "URL of 2049 characters",
		Body: spendURL("https://api.vendor.com/" + strings.Repeat("p", 2049-len("https://api.vendor.com/"))),
		Code: "parameter_invalid", Param: "resource.url", Hint: "2048"},
	{Name: "http URL with a live key", Body: spendURL("http://api.vendor.com/v1/data"), Live: true,
		Code: "parameter_invalid", Param: "resource.url", Hint: "https"},
	{Name: "ftp URL with a practice key", Body: spendURL("ftp://api.vendor.com/v1/data"),
		Code: "parameter_invalid", Param: "resource.url", Hint: "https"},
	{Name: "relative URL", Body: spendURL("/v1/data"), Code: "parameter_invalid", Param: "resource.url", Hint: "absolute URL"},
	{Name: "URL with userinfo", Body: spendURL("https://user:secret@api.vendor.com/v1/data"),
		Code: "parameter_invalid", Param: "resource.url", Hint: "user name or password"},
	{Name: "URL with fragment", Body: spendURL("https://api.vendor.com/v1/data#part"),
		Code: "parameter_invalid", Param: "resource.url", Hint: "fragment"},
	{Name: "URL with a port", Body: spendURL("https://api.vendor.com:8443/v1/data"),
		Code: "parameter_invalid", Param: "resource.url", Hint: "port"},
	{Name: "resource host differs from destination", Body: spendURL("https://api.other-vendor.com/v1/data"),
		Code: "resource_host_mismatch", Param: "resource.url", Hint: "must equal destination"},
	{Name: "resource host is a subdomain of destination", Body: spendURL("https://x.api.vendor.com/v1/data"),
		Code: "resource_host_mismatch", Param: "resource.url", Hint: "must equal destination"},
	{Name: "lower-case method", Body: `{"amount":"1.00","destination":"api.vendor.com",` +
		`"resource":{"url":"https://api.vendor.com/v1/data","method":"get"}}`,
		Code: "parameter_invalid", Param: "resource.method", Hint: "upper case"},
	{Name: "missing resource for a domain destination", Body: `{"amount":"1.00","destination":"api.vendor.com"}`,
		Code: "resource_required", Param: "resource", Hint: "https://api.vendor.com/"},
	{Name: "currency eur", Body: spendWith(`"currency"`, `"eur"`), Code: "currency_not_supported", Param: "currency", Hint: `"usdc"`},
	{Name: "currency upper case", Body: spendWith(`"currency"`, `"USDC"`), Code: "currency_not_supported", Param: "currency", Hint: `"usdc"`},
	{Name: "missing Idempotency-Key", Body: ValidSpendBody, Headers: map[string]string{"Idempotency-Key": ""},
		Code: "idempotency_key_missing", Param: "Idempotency-Key", Hint: "Send an Idempotency-Key header"},
	{Name: "Idempotency-Key of 10 KB", Body: ValidSpendBody,
		Headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 10<<10)},
		Code:    "idempotency_key_invalid", Param: "Idempotency-Key", Hint: "shorter"},
	{Name: "Idempotency-Key of 256 characters", Body: ValidSpendBody,
		Headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)},
		Code:    "idempotency_key_invalid", Param: "Idempotency-Key", Hint: "255"},
	{Name: "non-ASCII Idempotency-Key", Body: ValidSpendBody, Headers: map[string]string{"Idempotency-Key": "clé-1"},
		Code: "idempotency_key_invalid", Param: "Idempotency-Key", Hint: "printable ASCII"},
	{Name: "text/plain content type", Body: ValidSpendBody, Headers: map[string]string{"Content-Type": "text/plain"},
		Code: "unsupported_content_type", Param: "Content-Type", Hint: "application/json"},
	{Name: "no content type", Body: ValidSpendBody, Headers: map[string]string{"Content-Type": ""},
		Code: "unsupported_content_type", Param: "Content-Type", Hint: "application/json"},
	{Name: "unknown Service-Version", Body: ValidSpendBody, Headers: map[string]string{"Service-Version": "2020-01-01"},
		Code: "unknown_version", Param: "Service-Version", Hint: "2026-10-01"},
}
