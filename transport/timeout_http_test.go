package transport_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/transport"
)

// A connection whose request does not arrive within the read timeout is
// closed with 408, not 400: a client's spare connection that never sent a
// byte, and a request cut short, are no fault of a request's form, and a
// client may send the request again on a new connection.
func TestReadTimeoutAnswers408(t *testing.T) {
	s := transport.NewServer(transport.Config{ReadTimeout: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown(t.Context()) })

	for name, sent := range map[string]string{
		"nothing sent":   "",
		"body cut short": "POST /v1/spends HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"amount\":",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, sent); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(string(body), `"code":"request_timeout"`) ||
				!strings.Contains(string(body), "nothing was done") {
				t.Fatalf("%d (close %v): %s", resp.StatusCode, resp.Close, body)
			}
		})
	}
}
