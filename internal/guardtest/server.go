package guardtest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/openapi"
)

// Server is a running service and a client for it.
type Server struct {
	// URL is the base address, like "http://127.0.0.1:41234".
	URL string
	// Clock is the fake clock given with WithClock, or nil on the wall clock.
	Clock *FakeClock

	svc      *wire.Service
	client   *http.Client
	contract *openapi.Validator
	logs     *SyncBuffer
}

// Logs is what the service logged so far, as text lines (debug and up).
func (s *Server) Logs() string { return s.logs.String() }

// contract is built once: loading and checking the document is slow.
var contract = sync.OnceValues(openapi.NewValidator)

// Option adjusts how Start builds the service.
type Option func(*options)

type options struct {
	clock       *FakeClock
	configs     []func(*wire.Config)
	commitFault func(records int) error
	noContract  bool
}

// WithClock runs the service on c instead of the wall clock.
func WithClock(c *FakeClock) Option { return func(o *options) { o.clock = c } }

// WithConfig lets f change the configuration after the defaults and the
// temporary data directory are set.
func WithConfig(f func(*wire.Config)) Option {
	return func(o *options) { o.configs = append(o.configs, f) }
}

// WithCommitFault makes every journal commit call f first; a non-nil
// result fails that commit as a failing disk would (wire.Options).
func WithCommitFault(f func(records int) error) Option {
	return func(o *options) { o.commitFault = f }
}

// WithoutContract stops checking exchanges against the OpenAPI document,
// for a service deliberately configured outside what the document
// describes (rate limiting switched off sends no RateLimit headers).
func WithoutContract() Option { return func(o *options) { o.noContract = true } }

// TestRateLimitScale is the rate limit scale Start sets before the
// test's WithConfig functions run: tests send requests far faster than
// any client spec 8.1 was written for. A test of the limits themselves
// sets RateLimitScale back to 1.
const TestRateLimitScale = 1e6

// readyTimeout bounds the wait for the first 200 from /healthz.
const readyTimeout = 10 * time.Second

// Start runs the service for the rest of the test; see the package doc.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg := wire.Defaults()
	cfg.Data = t.TempDir()
	cfg.Addr = "127.0.0.1:0"
	cfg.RateLimitScale = TestRateLimitScale
	// Tests and benchmarks run at the processors go test gives them
	// (-cpu): the service does not add its spare ones.
	cfg.SpareProcs = 0
	for _, f := range o.configs {
		f(&cfg)
	}
	logs := &SyncBuffer{}
	wopts := wire.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		CommitFault: o.commitFault}
	if o.clock != nil {
		wopts.Clock = o.clock
	}
	svc, err := wire.Open(cfg, wopts)
	if err != nil {
		t.Fatalf("guardtest: opening the service: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = svc.Shutdown(context.Background())
		t.Fatalf("guardtest: listening: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ln) }()

	var v *openapi.Validator
	if !o.noContract {
		if v, err = contract(); err != nil {
			t.Fatalf("guardtest: loading the OpenAPI document: %v", err)
		}
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Clock: o.clock, svc: svc, contract: v, logs: logs,
		client: &http.Client{Transport: &http.Transport{}, Timeout: 60 * time.Second}}
	t.Cleanup(func() {
		// The client leaves first, as clients do: a pooled connection that
		// never carried a request would otherwise hold the server's
		// graceful stop until its read timeout.
		s.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Errorf("guardtest: shutdown: %v; goroutines:\n%s", err, stacks.String())
		}
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("guardtest: Serve returned %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("guardtest: Serve did not return after Shutdown")
		}
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	s.waitReady(t)
	return s
}

// waitReady polls /healthz until it answers 200. The listener is open
// before Serve starts, so the first request normally succeeds; the loop
// covers a service that answers something else while it starts.
func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := s.client.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("guardtest: /healthz did not answer 200 within %v (last error %v)", readyTimeout, err)
		}
		retry := time.NewTimer(10 * time.Millisecond)
		<-retry.C
	}
}

// Service is the assembled service.
func (s *Server) Service() *wire.Service { return s.svc }

// System is the actor system, for what has no HTTP endpoint.
func (s *Server) System() *actors.System { return s.svc.System() }

// JWKS is the public receipt key set the service signs with.
func (s *Server) JWKS() []byte { return s.svc.JWKS() }

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a logger's
// goroutines, a running server) and a reader.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
