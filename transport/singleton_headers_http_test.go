package transport_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpay/guard/transport"
)

// Authorization and Idempotency-Key are single headers. Sent twice, a
// proxy and the service could each act on a different one, so the request
// is refused by name, and nothing is paid.
func TestRepeatedSingleHeadersAreRefused(t *testing.T) {
	e := start(t)
	other := e.srv.NewOwner(t).TestKey
	body := `{"amount":"1.00","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/twice"}}`
	for name, tc := range map[string]struct {
		raw, code, param string
	}{
		"two Authorization headers": {
			raw: "GET /v1/me HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + e.agentKey +
				"\r\nAuthorization: Bearer " + other + "\r\n\r\n",
			code: "header_invalid", param: "Authorization",
		},
		"two Idempotency-Keys": {
			raw: "POST /v1/spends HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + e.agentKey +
				"\r\nIdempotency-Key: first\r\nIdempotency-Key: second\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(body)) + "\r\n\r\n" + body,
			code: "idempotency_key_invalid", param: "Idempotency-Key",
		},
		// Which one counts must not depend on their order.
		"two Service-Versions": {
			raw: "POST /v1/spends HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + e.agentKey +
				"\r\nService-Version: 1999-01-01\r\nService-Version: " + transport.APIVersion + "\r\nIdempotency-Key: versions\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(body)) + "\r\n\r\n" + body,
			code: "header_invalid", param: "Service-Version",
		},
		"an empty Service-Version, then another": {
			raw: "GET /v1/me HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + e.agentKey +
				"\r\nService-Version: \r\nService-Version: 1999-01-01\r\n\r\n",
			code: "header_invalid", param: "Service-Version",
		},
	} {
		t.Run(name, func(t *testing.T) {
			resp, raw := rawExchange(t, e.srv.URL, tc.raw)
			var got struct {
				Error struct{ Code, Param, Message string }
			}
			if err := json.Unmarshal(raw, &got); err != nil || resp.StatusCode != http.StatusBadRequest ||
				got.Error.Code != tc.code || got.Error.Param != tc.param || !strings.Contains(got.Error.Message, "Send one") {
				t.Fatalf("status %d %s, want 400 %s naming %s", resp.StatusCode, raw, tc.code, tc.param)
			}
		})
	}
	if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends"); len(ids) != 0 {
		t.Fatalf("%d spends after the refused requests, want none", len(ids))
	}
}
