package transport_test

import (
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

// sendAll sends n requests at once and returns the answers in order.
func sendAll(t *testing.T, s *guardtest.Server, n int, req func(i int) (method, path, key string, headers map[string]string, body any)) []guardtest.Response {
	t.Helper()
	out := make([]guardtest.Response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			out[i], errs[i] = s.Send(req(i))
		}()
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		checkEnvelope(t, "concurrent request", out[i])
	}
	return out
}

// TestConcurrentRetriesPayOnce: many copies of one request with one
// Idempotency-Key, sent at once, create and pay exactly one spend. The
// others answer the replay or ask to retry while the first is in flight.
func TestConcurrentRetriesPayOnce(t *testing.T) {
	e := start(t)
	s := e.srv
	before := balance(t, s, e.agentKey)
	key := newKey()
	body := spendBody("3.00", "api.vendor.com", "/v1/once")
	rs := sendAll(t, s, 16, func(int) (string, string, string, map[string]string, any) {
		return http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": key}, body
	})
	var id any
	createdN := 0
	for _, r := range rs {
		switch r.Status {
		case http.StatusCreated:
			createdN++
			id = r.Body["id"]
		case http.StatusOK:
			if r.Body["idempotent_replay"] != true {
				t.Errorf("200 without idempotent_replay: %s", r.Raw)
			}
		case http.StatusConflict:
			er := errorOf(t, r)
			if er["code"] != "idempotency_in_progress" || r.Header.Get("Retry-After") != "1" {
				t.Errorf("409 %v with Retry-After %q: %s", er["code"], r.Header.Get("Retry-After"), r.Raw)
			}
		default:
			t.Errorf("status %d: %s", r.Status, r.Raw)
		}
	}
	if createdN != 1 {
		t.Fatalf("%d answers were 201, want exactly 1", createdN)
	}
	for _, r := range rs {
		if r.Status == http.StatusOK && r.Body["id"] != id {
			t.Errorf("a replay names spend %v, the 201 named %v", r.Body["id"], id)
		}
	}
	if n := spendCount(t, s, e.agentID); n != 1 {
		t.Fatalf("%d spends recorded, want 1", n)
	}
	g := getSpend(t, s, e.agentKey, id.(string), "")
	paid := dec(t, g.Body["amount_settled"])
	after := balance(t, s, e.agentKey)
	spent := sub(dec(t, obj(t, before, "components")["daily_remaining"]), dec(t, obj(t, after, "components")["daily_remaining"]))
	if spent.Cmp(paid) != 0 {
		t.Errorf("daily_remaining fell by %s for one payment of %s", spent.FloatString(6), paid.FloatString(6))
	}
}

// TestConcurrentSpendsKeepTheDailyCap: spends racing for the last of the
// daily cap never pay more than the cap; the rest are declined by it.
func TestConcurrentSpendsKeepTheDailyCap(t *testing.T) {
	e := start(t)
	s := e.srv
	_, key := s.NewAgent(t, e.owner.TestKey, `{"per_spend_limit":"100.00","daily_cap":"20.00","approval_over":"100.00",`+
		`"trusted_destinations":["api.vendor.com"]}`)
	rs := sendAll(t, s, 12, func(int) (string, string, string, map[string]string, any) {
		return http.MethodPost, "/v1/spends", key, map[string]string{"Idempotency-Key": newKey()},
			spendBody("3.00", "api.vendor.com", "/v1/race")
	})
	total := new(big.Rat)
	settled := 0
	for _, r := range rs {
		mustStatus(t, r, http.StatusCreated)
		switch r.Body["status"] {
		case "settled":
			settled++
			total.Add(total, dec(t, r.Body["amount_settled"]))
		case "declined":
			if r.Body["decline_reason"] != "daily_cap" {
				t.Errorf("declined for %v, want daily_cap", r.Body["decline_reason"])
			}
		default:
			t.Errorf("status %v: %s", r.Body["status"], r.Raw)
		}
	}
	if total.Cmp(dec(t, "20.00")) > 0 {
		t.Errorf("paid %s in total, above the daily cap of 20.00", total.FloatString(6))
	}
	// Holds count against the cap, so at least 20/3 of them fit.
	if settled < 6 {
		t.Errorf("%d spends settled, want at least 6", settled)
	}
	b := balance(t, s, key)
	if got := dec(t, obj(t, b, "components")["daily_remaining"]); got.Cmp(sub(dec(t, "20.00"), total)) != 0 {
		t.Errorf("daily_remaining %s, want 20.00 - %s", got.FloatString(6), total.FloatString(6))
	}
	if b["held"] != "0.00" {
		t.Errorf("held %v after every spend finished", b["held"])
	}
}

// TestWaitSecondsEndsOnChange: a waiting read answers as soon as the spend
// changes.
func TestWaitSecondsEndsOnChange(t *testing.T) {
	e := start(t)
	s := e.srv
	news := make(chan string, 16)
	s.System().Subscribe(func(ev actors.StoredEvent) {
		if ref, ok := ev.Data.Object.(actors.SpendRef); ok {
			select {
			case news <- ref.ID:
			default:
			}
		}
	})
	sp := created(t, s, e.agentKey, spendBody("2.00", "new.vendor.io", "/v1/wait"))
	id := sp["id"].(string)
	// The news of the creation reaches waiting readers before it reaches
	// subscribers; once it is here it can no longer wake the read below
	// (see TestWaitSecondsIgnoresChangesAlreadySeen for when it can).
	for got := <-news; got != id; got = <-news {
	}

	got := waitingRead(s, e.agentKey, "/v1/spends/"+id+"?wait_seconds=20")
	mustStatus(t, call(t, s, http.MethodPost, "/v1/spends/"+id+"/cancel", e.agentKey, nil, nil), http.StatusOK)
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkEnvelope(t, "GET with wait", a.r)
	if a.r.Status != http.StatusOK || a.r.Body["status"] != "cancelled" {
		t.Errorf("the waiting read answered %d %s, want the cancelled spend", a.r.Status, a.r.Raw)
	}
	if a.d > 15*time.Second {
		t.Errorf("the waiting read took %v; it should end when the spend changes", a.d)
	}
}

// TestWaitSecondsIgnoresChangesAlreadySeen: a read that waits must not be
// woken by the news of a change its first reading already showed. The news
// of a change travels after the change is durable, so it can reach a reader
// that started after the change. The test holds the news back (a blocking
// event subscriber stops the delivery queue), creates a spend, starts a
// read that waits 2 s, and lets the news go: the read must still wait,
// since the spend did not change while it waited.
func TestWaitSecondsIgnoresChangesAlreadySeen(t *testing.T) {
	e := start(t)
	s := e.srv
	blockerID, blockerKey := s.NewAgent(t, e.owner.TestKey, testPolicy)
	release := make(chan struct{})
	var blockOnce, releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock() // the service cannot shut down while its queue is held
	s.System().Subscribe(func(ev actors.StoredEvent) {
		if ev.AgentID == blockerID {
			blockOnce.Do(func() { <-release })
		}
	})
	created(t, s, blockerKey, spendBody("1.00", "api.vendor.com", "/v1/block"))
	sp := created(t, s, e.agentKey, spendBody("2.00", "new.vendor.io", "/v1/wait"))

	got := waitingRead(s, e.agentKey, "/v1/spends/"+sp["id"].(string)+"?wait_seconds=2")
	// Let the read reach its wait before the news goes out. Were it slower
	// than this, the test would pass without showing anything; it cannot
	// fail because of it.
	<-time.After(300 * time.Millisecond)
	unblock()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.r.Body["status"] != "pending_approval" {
		t.Fatalf("status %v, want pending_approval", a.r.Body["status"])
	}
	if a.d < 1900*time.Millisecond {
		t.Errorf("wait_seconds=2 on an unchanged spend answered after %v: woken by the news of its own creation", a.d)
	}
}

// timedAnswer is a response and how long it took.
type timedAnswer struct {
	r   guardtest.Response
	err error
	d   time.Duration
}

// waitingRead sends a GET in the background and delivers its answer with
// the time it took, so a test can act while the read waits.
func waitingRead(s *guardtest.Server, key, path string) <-chan timedAnswer {
	got := make(chan timedAnswer, 1)
	go func() {
		begin := time.Now()
		r, err := s.Send(http.MethodGet, path, key, nil, nil)
		got <- timedAnswer{r, err, time.Since(begin)}
	}()
	return got
}

// While the first request under a key is still with the vendor, a second
// one asking for a different payment under the same key is a conflict
// naming what changed, as it is afterwards; only the same payment is
// asked to retry.
func TestDifferentPaymentUnderAKeyInFlightIsAConflict(t *testing.T) {
	e := start(t, guardtest.WithConfig(func(c *wire.Config) { c.SimulatedLatency = 2 * time.Second }))
	key := newKey()
	first := make(chan guardtest.Response, 1)
	go func() {
		r, _ := e.srv.Send(http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": key},
			spendBody("3.00", "api.vendor.com", "/v1/once"))
		first <- r
	}()
	// The first is in flight once its spend is recorded: the vendor
	// takes two seconds to answer.
	deadline := time.Now().Add(10 * time.Second)
	for spendCount(t, e.srv, e.agentID) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request recorded no spend")
		}
		time.Sleep(10 * time.Millisecond)
	}
	same := call(t, e.srv, http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": key},
		spendBody("3.00", "api.vendor.com", "/v1/once"))
	wantError(t, same, http.StatusConflict, "idempotency_error", "idempotency_in_progress", "")
	r := call(t, e.srv, http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": key},
		spendBody("4.00", "api.vendor.com", "/v1/once"))
	er := wantError(t, r, http.StatusConflict, "idempotency_error", "idempotency_conflict", "amount")
	if fmt.Sprint(er["changed_fields"]) != "[amount]" {
		t.Errorf("changed_fields %v, want [amount]", er["changed_fields"])
	}
	if got := <-first; got.Status != http.StatusCreated || got.Body["status"] != "settled" {
		t.Fatalf("the first request: %d %s", got.Status, got.Raw)
	}
	if n := spendCount(t, e.srv, e.agentID); n != 1 {
		t.Fatalf("%d spends recorded, want 1", n)
	}
}
