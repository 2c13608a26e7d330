package actors

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/rail"
	"github.com/agentpay/guard/transport/receipt"
)

// recorder is the owner's server as the actors see it: it takes every
// delivery. The HTTP sender is tested in transport/webhook.
type recorder struct {
	mu  sync.Mutex
	got []WebhookRequest
}

func (r *recorder) Send(_ context.Context, req WebhookRequest) WebhookResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
	return WebhookResult{Status: 200}
}

// seen lists the deliveries as "url type name-of-the-object".
func (r *recorder) seen(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, req := range r.got {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Object struct {
					Name string `json:"name"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(req.Body, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, req.URL+" "+ev.Type+" "+ev.Data.Object.Name)
	}
	return out
}

type keySigner struct{ kr *receipt.Keyring }

func (s keySigner) Sign(c policy.ReceiptClaims) (string, string, error) {
	return s.kr.SignWithKeyID(c)
}

// openSystem starts a System on the journal at path.
func openSystem(t *testing.T, path string, clock Clock, sender WebhookSender) (*System, *persistence.Store) {
	t.Helper()
	store, err := persistence.Open(persistence.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	k, err := receipt.GenerateKey(rand.Reader, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	kr, err := receipt.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := New(Config{Store: store, Clock: clock, Signer: keySigner{kr}, WebhookSender: sender,
		PracticeRail: rail.NewSimulated(rail.SimulatedOptions{}), PracticePool: policy.MustAmount("100.00")})
	if err != nil {
		t.Fatal(err)
	}
	return sys, store
}

func closeSystem(t *testing.T, sys *System, store *persistence.Store) {
	t.Helper()
	sys.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

func rest(t *testing.T, sys *System) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sys.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
}

// Events that became durable but were never fanned out (the process
// died first) are fanned out by the next start, each to the endpoints
// created before it; once fanned out they are not fanned out again.
func TestWebhookCatchUpAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	clock := SystemClock{} // deliveries are due at once: no timer is involved
	ctx := context.Background()

	first := &recorder{}
	sys, store := openSystem(t, path, clock, first)
	oc, err := sys.CreateOwner(ctx, "o", "o@owner.invalid", "")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := sys.Authenticate(oc.Keys[EnvTest])
	if err != nil {
		t.Fatal(err)
	}
	createAgent := func(name string) {
		t.Helper()
		if _, _, err := sys.CreateAgent(ctx, owner, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	createEndpoint := func(url string, events ...string) {
		t.Helper()
		if _, err := sys.CreateWebhookEndpoint(ctx, owner, url, events); err != nil {
			t.Fatal(err)
		}
	}
	createAgent("before")
	createEndpoint("https://one.example.com", "agent.*")
	createAgent("delivered")
	// The second endpoint takes everything, its own creation excepted.
	createEndpoint("https://two.example.com", "*")
	rest(t, sys)
	if got := first.seen(t); len(got) != 1 || got[0] != "https://one.example.com agent.created delivered" {
		t.Fatalf("first run delivered %v, want the one agent created after the endpoint", got)
	}
	// Fan-out dies, writing nothing more, while events keep becoming
	// durable.
	sys.webhooks.halt()
	createAgent("late 1")
	createAgent("late 2")
	closeSystem(t, sys, store)

	second := &recorder{}
	sys, store = openSystem(t, path, clock, second)
	rest(t, sys)
	want := []string{"https://one.example.com agent.created late 1", "https://one.example.com agent.created late 2",
		"https://two.example.com agent.created late 1", "https://two.example.com agent.created late 2"}
	if got := second.seen(t); !equalSorted(got, want) {
		t.Fatalf("the restart delivered %v, want %v", got, want)
	}
	closeSystem(t, sys, store)

	third := &recorder{}
	sys, store = openSystem(t, path, clock, third)
	rest(t, sys)
	if got := third.seen(t); len(got) != 0 {
		t.Fatalf("a third start delivered %v again", got)
	}
	closeSystem(t, sys, store)
}

func equalSorted(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestCheckWebhookURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/guard?x=1", true},
		{"HTTPS://hooks.example.com", true},
		{"https://hooks.example.com:8443/p", true},
		{"http://127.0.0.1:8080/hooks", true},
		{"http://127.9.9.9/hooks", true},
		{"http://localhost/hooks", true},
		{"http://LOCALHOST:1/hooks", true},
		{"http://[::1]:9/hooks", true},
		{"http://hooks.example.com", false},
		{"http://10.0.0.1/hooks", false},
		{"http://localhost.example.com/hooks", false},
		{"https://user@hooks.example.com", false},
		{"https://user:pw@hooks.example.com", false},
		{"https://hooks.example.com/#x", false},
		{"https://", false},
		{"hooks.example.com/x", false},
		{"/relative", false},
		{"mailto:a@example.com", false},
		{"ftp://hooks.example.com", false},
		{"https://hooks.example.com/a b", false},
		{"", false},
	} {
		err := CheckWebhookURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && (err.Param != "url" || err.Code != CodeParameterInvalid) {
			t.Errorf("%q: %+v", tc.url, err)
		}
	}
}

func TestCheckEnabledEventsAndMatching(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want []string // nil: refused
	}{
		{[]string{"*"}, []string{"*"}},
		{[]string{"spend.*", "agent.paused", "spend.*"}, []string{"spend.*", "agent.paused"}},
		{[]string{"webhook_endpoint.paused", "policy.change_cancelled"}, []string{"webhook_endpoint.paused", "policy.change_cancelled"}},
		{[]string{}, nil},
		{[]string{"spend.setled"}, nil},
		{[]string{"spend"}, nil},
		{[]string{"spend*"}, nil},
		{[]string{"nothing.*"}, nil},
		{[]string{"*.settled"}, nil},
		{[]string{""}, nil},
	} {
		got, err := CheckEnabledEvents(tc.list)
		if tc.want == nil {
			if err == nil || err.Param != "enabled_events" {
				t.Errorf("%q accepted as %v", tc.list, got)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.list, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: %v, want %v", tc.list, got, tc.want)
			}
		}
	}
	for _, tc := range []struct {
		list []string
		typ  string
		want bool
	}{
		{[]string{"*"}, "spend.settled", true},
		{[]string{"spend.*"}, "spend.settled", true},
		{[]string{"spend.*"}, "spender.x", false},
		{[]string{"spend.settled"}, "spend.settled", true},
		{[]string{"spend.settled"}, "spend.settled_late", false},
		{[]string{"agent.paused", "spend.failed"}, "spend.failed", true},
		{[]string{"agent.*"}, "spend.failed", false},
	} {
		if got := subscribes(tc.list, tc.typ); got != tc.want {
			t.Errorf("subscribes(%q, %s) = %v", tc.list, tc.typ, got)
		}
	}
}
