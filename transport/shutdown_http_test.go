package transport_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// TestShutdownWithIdleConnections: a graceful stop does not wait for
// clients that hold a connection open without a request in flight, whether
// the connection already carried a request (keep-alive) or never did (a
// client's pool dials ahead of need). Either kind must not hold the stop
// until the server's read timeout.
func TestShutdownWithIdleConnections(t *testing.T) {
	for _, used := range []bool{true, false} {
		name := "never used"
		if used {
			name = "after a request"
		}
		t.Run(name, func(t *testing.T) {
			s := guardtest.Start(t)
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if used {
				req, _ := http.NewRequest(http.MethodGet, s.URL+"/healthz", nil)
				if err := req.Write(conn); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 4096)
				if n, err := conn.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
					t.Fatalf("healthz over a raw connection: %q %v", buf[:n], err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			begin := time.Now()
			if err := s.Service().Shutdown(ctx); err != nil {
				t.Errorf("Shutdown with an idle connection (%s): %v after %v", name, err, time.Since(begin))
			}
		})
	}
}
