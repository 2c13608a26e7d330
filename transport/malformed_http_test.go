package transport_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// A request that is not well-formed HTTP gets a 400 invalid_request whose
// message names the fault in general terms, and is logged like any other. The server's parser quotes the
// raw request in its error, so an answer built from it would hand the
// caller's API key back in an error body, where clients and proxies log it.
func TestMalformedRequestIsNotEchoed(t *testing.T) {
	s := guardtest.Start(t)
	const secret = "svc_test_agent_SECRETSECRETSECRETSECRET"
	for name, raw := range map[string]string{
		"header without a colon": "GET /v1/me HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + secret + "\r\nNoColonHere\r\n\r\n",
		"Content-Length not a number": "POST /v1/spends HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + secret +
			"\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}",
		"broken chunk": "POST /v1/spends HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + secret +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := rawExchange(t, s.URL, raw)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
			}
			if strings.Contains(string(body), "SECRET") || strings.Contains(string(body), "Authorization") {
				t.Fatalf("the answer echoes the request: %s", body)
			}
			var e struct {
				Error struct{ Type, Code, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("not an error body: %s", body)
			}
			if e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_request" ||
				!strings.Contains(e.Error.Message, "well-formed") {
				t.Errorf("error %+v, want invalid_request_error/invalid_request saying what to fix", e.Error)
			}
			if resp.Header.Get("Request-Id") == "" || resp.Header.Get("Service-Version") == "" {
				t.Fatalf("headers %v lack Request-Id or Service-Version", resp.Header)
			}
			// Logged like any answer, without the request's secrets.
			line := logLine(t, s, "request_id="+resp.Header.Get("Request-Id"))
			if !strings.Contains(line, "status=400") || !strings.Contains(line, "code=invalid_request") || strings.Contains(line, "SECRET") {
				t.Errorf("the answer's log line: %s", line)
			}
		})
	}
}

// rawExchange sends raw, written by hand, on a connection of its own, and
// reads the one answer: for requests an HTTP client would refuse to send.
func rawExchange(t *testing.T, base, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no HTTP answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}
