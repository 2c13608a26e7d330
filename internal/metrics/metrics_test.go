package metrics

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/persistence"
)

func TestObserveRequestCountsByRouteAndStatus(t *testing.T) {
	m := New()
	m.ObserveRequest([]byte("POST"), "/v1/spends", 201, 2*time.Millisecond)
	m.ObserveRequest([]byte("POST"), "/v1/spends", 201, 3*time.Millisecond)
	m.ObserveRequest([]byte("POST"), "/v1/spends", 400, time.Millisecond)
	m.ObserveRequest([]byte("BREW"), "", 404, time.Millisecond)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"POST", "/v1/spends", "201"}, 2},
		{[]string{"POST", "/v1/spends", "400"}, 1},
		// A method HTTP does not define is "other", and a request no
		// route took is "(none)": neither makes a series of its own.
		{[]string{"other", "(none)", "404"}, 1},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.durations); n != 2 {
		t.Errorf("duration series = %d, want 2 (one per method and route)", n)
	}
	var nilMetrics *Metrics
	nilMetrics.ObserveRequest([]byte("GET"), "/healthz", 200, time.Millisecond) // off: no panic
}

func TestCountEventByTypeAndMode(t *testing.T) {
	m := New()
	m.CountEvent(actors.StoredEvent{Event: actors.Event{Type: "spend.settled"}})
	m.CountEvent(actors.StoredEvent{Event: actors.Event{Type: "spend.settled", Livemode: true}})
	m.CountEvent(actors.StoredEvent{Event: actors.Event{Type: "spend.settled", Livemode: true}})
	if got := testutil.ToFloat64(m.events.WithLabelValues("spend.settled", "false")); got != 1 {
		t.Errorf("practice spend.settled = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues("spend.settled", "true")); got != 2 {
		t.Errorf("live spend.settled = %v, want 2", got)
	}
}

type fixedSender struct{ res actors.WebhookResult }

func (f fixedSender) Send(context.Context, actors.WebhookRequest) actors.WebhookResult { return f.res }

func TestWebhookAttemptsByResult(t *testing.T) {
	m := New()
	for _, res := range []actors.WebhookResult{{Status: 204}, {Status: 200}, {Status: 500}, {Status: 301}, {Err: "no answer within the time limit"}} {
		if got := m.Webhooks(fixedSender{res}).Send(context.Background(), actors.WebhookRequest{}); got != res {
			t.Fatalf("the counting sender changed the result: %+v, want %+v", got, res)
		}
	}
	for result, want := range map[string]float64{"delivered": 2, "rejected": 2, "no_answer": 1} {
		if got := testutil.ToFloat64(m.webhookAttempts.WithLabelValues(result)); got != want {
			t.Errorf("webhook attempts %s = %v, want %v", result, got, want)
		}
	}
	if got := testutil.CollectAndCount(m.webhookDurations); got != 1 {
		t.Errorf("duration histogram series = %d, want 1", got)
	}
}

// TestStoreCollectorReadsTheStore commits records through a real store and
// reads them back through the registry, in the text format a scraper gets.
func TestStoreCollectorReadsTheStore(t *testing.T) {
	store, err := persistence.Open(persistence.Options{Path: filepath.Join(t.TempDir(), "guard.db"), InitialMmapSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m := New()
	m.WatchStore(store)
	for i := range 3 {
		tk := store.Append(store.Gen(), persistence.Record{Ops: []persistence.Op{persistence.Put("b", []byte{byte(i)}, []byte("v"))}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := tk.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	st := store.Stats()
	if st.Records != 3 {
		t.Fatalf("store records = %d, want 3", st.Records)
	}
	want := `
# HELP guard_journal_records_total Records the group commits made durable (one per change of state).
# TYPE guard_journal_records_total counter
guard_journal_records_total 3
# HELP guard_journal_commit_failures_total Group commits that failed: their changes were refused (503) and nothing of them was told to anyone.
# TYPE guard_journal_commit_failures_total counter
guard_journal_commit_failures_total 0
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want),
		"guard_journal_records_total", "guard_journal_commit_failures_total"); err != nil {
		t.Fatal(err)
	}
	mfs, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "guard_journal_commit_duration_seconds" {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != st.Commits || st.Commits == 0 {
			t.Errorf("commit duration count = %d, want the store's %d commits", h.GetSampleCount(), st.Commits)
		}
		last := h.GetBucket()[len(h.GetBucket())-1]
		if last.GetCumulativeCount() > h.GetSampleCount() {
			t.Errorf("the last bucket counts %d of %d commits", last.GetCumulativeCount(), h.GetSampleCount())
		}
	}
	if !found {
		t.Fatal("no guard_journal_commit_duration_seconds")
	}
}

func TestHandlerServesMetricsAndNothingElse(t *testing.T) {
	h := New().Handler()
	for path, want := range map[string]int{"/metrics": 200, "/": 200, "/debug/pprof/": 200, "/v1/spends": 404} {
		if got := serveStatus(h, path); got != want {
			t.Errorf("GET %s = %d, want %d", path, got, want)
		}
	}
	// A path served nowhere is 404 whatever the method; a served one
	// asked with another method is 405. go tool pprof posts to symbol.
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/anything", 404},
		{http.MethodGet, "/anything", 404},
		{http.MethodPost, "/metrics", 405},
		{http.MethodDelete, "/debug/pprof/heap", 405},
		{http.MethodPost, "/debug/pprof/symbol", 200},
		{http.MethodHead, "/metrics", 200},
	} {
		if got := serveMethod(h, c.method, c.path); got != c.want {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, got, c.want)
		}
	}
}

// BenchmarkObserveRequest is the cost the operator's metrics add to every
// answer: go test -bench ObserveRequest ./internal/metrics/
func BenchmarkObserveRequest(b *testing.B) {
	m := New()
	method := []byte("POST")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveRequest(method, "/v1/spends", 201, 3*time.Millisecond)
		}
	})
}
