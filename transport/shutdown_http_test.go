package transport_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
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

// rawCall sends one request with its own client, for use outside the test
// goroutine: it reports instead of failing.
func rawCall(method, url, key, idem, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	err = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, err
}

// A stop does not wait out long polls, nor cut them off: an agent waiting
// on a spend with wait_seconds is answered at once with the spend as it
// is, and the stop ends well within its deadline.
func TestShutdownAnswersLongPolls(t *testing.T) {
	e := start(t)
	sp := created(t, e.srv, e.agentKey, spendBody("1.00", "untrusted.example.org", "/poll"))
	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		st, b, err := rawCall(http.MethodGet, e.srv.URL+"/v1/spends/"+sp["id"].(string)+"?wait_seconds=20", e.agentKey, "", "")
		got <- answer{st, b, err}
	}()
	time.Sleep(300 * time.Millisecond) // the poll is waiting
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Service().Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a long poll waiting: %v", err)
	}
	a := <-got
	if a.err != nil || a.status != http.StatusOK || a.body["status"] != "pending_approval" {
		t.Fatalf("the long poll got %d %v (%v), want 200 with the spend pending", a.status, a.body, a.err)
	}
}

// A payment whose vendor has not answered when the stop's deadline nears
// is answered as recorded, 201 approved (the restart sends it again or
// verifies it), not 503 "nothing was changed", and the stop meets its
// deadline.
func TestShutdownAnswersPaymentsInFlight(t *testing.T) {
	e := start(t, guardtest.WithConfig(func(c *wire.Config) { c.SimulatedLatency = time.Minute }))
	got := make(chan error, 1)
	var status int
	var body map[string]any
	go func() {
		var err error
		status, body, err = rawCall(http.MethodPost, e.srv.URL+"/v1/spends", e.agentKey, "in-flight-1", spendBody("1.00", "api.vendor.com", "/slow"))
		got <- err
	}()
	time.Sleep(500 * time.Millisecond) // the payment is on its way to the vendor
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := e.srv.Service().Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a payment in flight: %v", err)
	}
	if err := <-got; err != nil || status != http.StatusCreated || body["status"] != "approved" {
		t.Fatalf("the payment in flight got %d %v (%v), want 201 approved", status, body, err)
	}
	if na, _ := body["next_action"].(map[string]any); na["code"] != "check_status_later" {
		t.Fatalf("next_action %v, want check_status_later", body["next_action"])
	}
}
