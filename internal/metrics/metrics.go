package metrics

import (
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentpay/guard/actors"
)

// Metrics holds the service's counters and the registry that serves them.
type Metrics struct {
	registry *prometheus.Registry

	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	events    *prometheus.CounterVec

	webhookAttempts  *prometheus.CounterVec
	webhookDurations prometheus.Histogram

	// The children of the vectors, by label values: a lookup in a
	// vector hashes every label on every request, a sync.Map of a small
	// comparable key is cheaper on the hot path.
	requestSeries sync.Map // requestKey -> requestSeries
	eventSeries   sync.Map // eventKey -> prometheus.Counter
}

type requestKey struct {
	method, route string
	status        int
}

type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

type eventKey struct {
	typ      string
	livemode bool
}

// requestBuckets cover a fast answer (under a millisecond), a journal
// commit's wait (milliseconds) and a long poll's twenty seconds.
var requestBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 20, 30}

// webhookBuckets cover an attempt up to the sender's time limit.
var webhookBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New returns the counters, registered with the runtime's and the
// process's collectors.
func New() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "guard_http_requests_total",
		Help: "Requests answered on the API listener (the API and the owner console), by method, route pattern and HTTP status.",
	}, []string{"method", "route", "status"})
	m.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "guard_http_request_duration_seconds",
		Help:    "Time from a request's arrival at its handler to its answer, by method and route pattern (long polls included).",
		Buckets: requestBuckets,
	}, []string{"method", "route"})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "guard_events_total",
		Help: "Events made durable, by type and mode (livemode true or false).",
	}, []string{"type", "livemode"})
	m.webhookAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "guard_webhook_attempts_total",
		Help: "Webhook delivery attempts, by result: delivered (2xx), rejected (another status) or no_answer (no answer in time, or refused before connecting).",
	}, []string{"result"})
	m.webhookDurations = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "guard_webhook_attempt_duration_seconds",
		Help:    "Duration of each webhook delivery attempt, answered or not.",
		Buckets: webhookBuckets,
	})
	m.registry.MustRegister(m.requests, m.durations, m.events, m.webhookAttempts, m.webhookDurations,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveRequest counts one answered request. route is the pattern of
// the route that answered, "" for a request no route took.
func (m *Metrics) ObserveRequest(method []byte, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "(none)"
	}
	k := requestKey{method: methodLabel(method), route: route, status: status}
	v, ok := m.requestSeries.Load(k)
	if !ok {
		v, _ = m.requestSeries.LoadOrStore(k, requestSeries{
			count:    m.requests.WithLabelValues(k.method, k.route, strconv.Itoa(status)),
			duration: m.durations.WithLabelValues(k.method, k.route),
		})
	}
	s := v.(requestSeries)
	s.count.Inc()
	s.duration.Observe(d.Seconds())
}

// methodLabel keeps the method label to the methods HTTP defines: any
// other word a client sends is "other", not a series of its own.
func methodLabel(m []byte) string {
	// A switch on string(m) compares without copying m.
	switch string(m) {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "PATCH":
		return "PATCH"
	case "DELETE":
		return "DELETE"
	case "OPTIONS":
		return "OPTIONS"
	}
	return "other"
}

// CountEvent counts one durable event. The system calls it once per
// event, after the journal holds it (actors.System.Subscribe).
func (m *Metrics) CountEvent(ev actors.StoredEvent) {
	k := eventKey{typ: ev.Type, livemode: ev.Livemode}
	v, ok := m.eventSeries.Load(k)
	if !ok {
		v, _ = m.eventSeries.LoadOrStore(k, m.events.WithLabelValues(k.typ, strconv.FormatBool(k.livemode)))
	}
	v.(prometheus.Counter).Inc()
}

// WatchSystem counts the system's events and reports its active agents
// and the events its retention sweep deleted.
func (m *Metrics) WatchSystem(sys *actors.System) {
	sys.Subscribe(m.CountEvent)
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "guard_agents_active",
		Help: "Agents activated now (an agent idle for idle_timeout is passivated and no longer counted).",
	}, func() float64 { return float64(sys.ActiveAgents()) }))
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "guard_events_deleted_total",
		Help: "Events deleted from the data file past their retention (30 days and a day).",
	}, func() float64 { return float64(sys.EventsDeleted()) }))
}

// Handler serves the operator listener: GET /metrics in the Prometheus
// text format, and the runtime's profiles under /debug/pprof/ (go tool
// pprof http://HOST:PORT/debug/pprof/profile).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	// go tool pprof posts the addresses it wants named.
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	// Every method reaches this one, so a path served nowhere is 404
	// whatever the method, and a served one asked with another method 405.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		served := r.URL.Path == "/" || r.URL.Path == "/metrics" || strings.HasPrefix(r.URL.Path, "/debug/pprof/")
		switch {
		case !served:
			http.NotFound(w, r)
			return
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: the operator listener answers GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("guard operator listener\n  /metrics        counters in the Prometheus text format\n  /debug/pprof/   runtime profiles\n"))
	})
	return mux
}
