package guardtest

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentpay/guard/cmd/wire"
)

// The two fasthttp goroutines are not the service's: one refreshes the Date
// header for the whole process and never ends, the other is the worker
// pool's cleaner, which notices Shutdown only after its 10 s nap.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

var epoch = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

func TestFakeClockRunsDueTimersInOrder(t *testing.T) {
	c := NewFakeClock(epoch)
	var mu sync.Mutex
	var got []string
	var seen []time.Time
	record := func(name string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, name)
			seen = append(seen, c.Now())
		}
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(time.Second, record("a"))
	c.AfterFunc(2*time.Second, record("b1"))
	c.AfterFunc(2*time.Second, record("b2")) // same deadline: scheduling order
	stopped := c.AfterFunc(2*time.Second, record("stopped"))
	c.AfterFunc(10*time.Second, record("later"))
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop reported true")
	}
	c.Advance(3 * time.Second)

	if want := []string{"a", "b1", "b2", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	wantAt := []time.Time{epoch.Add(time.Second), epoch.Add(2 * time.Second), epoch.Add(2 * time.Second), epoch.Add(3 * time.Second)}
	if !reflect.DeepEqual(seen, wantAt) {
		t.Fatalf("Now inside the timers was %v, want %v", seen, wantAt)
	}
	if now := c.Now(); !now.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("Now after Advance = %v", now)
	}
	if n := c.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1 (the later timer)", n)
	}
}

func TestFakeClockFiresTimersScheduledDuringAdvance(t *testing.T) {
	c := NewFakeClock(epoch)
	fired := make(chan time.Time, 2)
	c.AfterFunc(time.Second, func() {
		fired <- c.Now()
		c.AfterFunc(time.Second, func() { fired <- c.Now() })
	})
	c.Advance(5 * time.Second)
	if a, b := <-fired, <-fired; !a.Equal(epoch.Add(time.Second)) || !b.Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("fired at %v and %v", a, b)
	}
}

func TestFakeClockWaitForTimers(t *testing.T) {
	c := NewFakeClock(epoch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go c.AfterFunc(time.Minute, func() {})
	if err := c.WaitForTimers(ctx, 1); err != nil {
		t.Fatalf("WaitForTimers: %v", err)
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := c.WaitForTimers(short, 2); err == nil {
		t.Fatal("WaitForTimers returned nil with a cancelled context and too few timers")
	}
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) }) // non-positive: runs at once
	<-done
}

func TestStartServesAndCreatesAgents(t *testing.T) {
	s := Start(t, WithClock(NewFakeClock(epoch)))
	r := s.Do(t, http.MethodGet, "/healthz", "", nil, nil)
	if r.Status != http.StatusOK || r.Body["status"] != "ok" {
		t.Fatalf("/healthz: %d %s", r.Status, r.Raw)
	}
	o := s.NewOwner(t)
	if o.ID == "" || o.TestKey == o.LiveKey {
		t.Fatalf("owner %+v", o)
	}
	id, key := s.NewAgent(t, o.TestKey, `{"per_spend_limit":"20.00"}`)
	r = s.Do(t, http.MethodGet, "/v1/me", key, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/v1/me: %d %s", r.Status, r.Raw)
	}
	agent, _ := r.Body["agent"].(map[string]any)
	if agent["id"] != id || r.Body["livemode"] != false {
		t.Fatalf("/v1/me names agent %v livemode %v, want %s in practice", agent["id"], r.Body["livemode"], id)
	}
	r = s.Do(t, http.MethodGet, "/v1/policy", key, nil, nil)
	if r.Body["per_spend_limit"] != "20.00" {
		t.Fatalf("policy per_spend_limit = %v, want 20.00: %s", r.Body["per_spend_limit"], r.Raw)
	}
	if got := s.System().Now(); !got.Equal(epoch) {
		t.Fatalf("service clock %v, want the fake clock's %v", got, epoch)
	}
}

// Start raises the rate limits: 40 bad keys from one IP stay 401, where
// the limits of spec 8.1 answer the 31st with 429. A test that asks for
// those limits gets them.
func TestStartRaisesRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []Option
		first int // the attempt answered 429, or 0 for none
	}{
		{"default", nil, 0},
		{"spec limits", []Option{WithConfig(func(c *wire.Config) { c.RateLimitScale = 1 })}, 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, tc.opts...)
			for i := 1; i <= 40; i++ {
				r := s.Do(t, http.MethodGet, "/v1/me", "svc_test_agent_nope", nil, nil)
				want := http.StatusUnauthorized
				if tc.first != 0 && i >= tc.first {
					want = http.StatusTooManyRequests
				}
				if r.Status != want {
					t.Fatalf("attempt %d: %d, want %d: %s", i, r.Status, want, r.Raw)
				}
			}
		})
	}
}
