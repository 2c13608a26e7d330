package transport_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport"
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

// TestShutdownBeforeServe: a stop that comes before Serve, or while Serve
// is starting (a SIGTERM right after start), still ends Serve, with its
// listener closed. fasthttp alone would return from Shutdown at once and
// leave a late Serve accepting for ever.
func TestShutdownBeforeServe(t *testing.T) {
	serve := func(s *transport.Server, ln net.Listener) <-chan error {
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		return served
	}
	ended := func(t *testing.T, served <-chan error, ln net.Listener) {
		t.Helper()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve after Shutdown: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve still accepting 10 s after Shutdown returned")
		}
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Error("the listener still accepts connections after Shutdown and Serve returned")
		}
	}
	listen := func(t *testing.T) net.Listener {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}

	t.Run("before", func(t *testing.T) {
		s := transport.NewServer(transport.Config{})
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		ln := listen(t)
		ended(t, serve(s, ln), ln)
	})
	t.Run("while starting", func(t *testing.T) {
		// The race is narrow; enough rounds to land in it on most runs.
		for range 200 {
			s := transport.NewServer(transport.Config{})
			ln := listen(t)
			served := serve(s, ln)
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			ended(t, served, ln)
		}
	})
}
