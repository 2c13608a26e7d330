package transport_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// hit is one request a receiver got.
type hit struct {
	header http.Header
	body   []byte
	event  map[string]any
}

func (h hit) id() string     { s, _ := h.event["id"].(string); return s }
func (h hit) typ() string    { s, _ := h.event["type"].(string); return s }
func (h hit) seq() float64   { n, _ := h.event["sequence"].(float64); return n }
func (h hit) sig() string    { return h.header.Get("Service-Signature") }
func (h hit) String() string { return string(h.body) }

// receiver is an owner's webhook server on 127.0.0.1: it records every
// request and answers with the status it is told to.
type receiver struct {
	url    string
	hits   chan hit
	status atomic.Int32
	hold   chan struct{}
	held   atomic.Bool
}

func newReceiver(t *testing.T, status int) *receiver {
	t.Helper()
	return startReceiver(t, status, nil)
}

// startReceiver starts a receiver; a non-nil hold makes it answer its
// first request only once the test sends on hold (or closes it).
func startReceiver(t *testing.T, status int, hold chan struct{}) *receiver {
	t.Helper()
	rc := &receiver{hits: make(chan hit, 1024), hold: hold}
	rc.status.Store(int32(status))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := hit{header: r.Header.Clone(), body: b}
		_ = json.Unmarshal(b, &h.event)
		rc.hits <- h
		if rc.hold != nil && !rc.held.Swap(true) {
			<-rc.hold
		}
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hooks"
	return rc
}

// next waits for the next request.
func (rc *receiver) next(t *testing.T) hit {
	t.Helper()
	select {
	case h := <-rc.hits:
		return h
	case <-time.After(15 * time.Second):
		t.Fatal("the receiver got no delivery within 15 s")
		return hit{}
	}
}

// none checks, once the service is at rest, that nothing more arrived.
func (rc *receiver) none(t *testing.T, s *guardtest.Server) {
	t.Helper()
	quiesce(t, s)
	select {
	case h := <-rc.hits:
		t.Fatalf("unexpected delivery: %s", h)
	default:
	}
}

// signedBy checks a Service-Signature header the way a receiver does,
// without the service's code: t=<seconds> then v1 values, each the hex
// HMAC-SHA256 of "<t>.<body>" keyed with the secret. It reports how many
// v1 values there are and whether one matches.
func signedBy(t *testing.T, header string, body []byte, secret string) (values int, ok bool) {
	t.Helper()
	parts := strings.Split(header, ",")
	ts, found := strings.CutPrefix(parts[0], "t=")
	if !found || ts == "" {
		t.Fatalf("Service-Signature %q does not start with t=", header)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	for _, p := range parts[1:] {
		v, found := strings.CutPrefix(p, "v1=")
		if !found {
			t.Fatalf("Service-Signature %q has %q, want v1=<hex>", header, p)
		}
		values++
		ok = ok || hmac.Equal([]byte(v), []byte(want))
	}
	return values, ok
}

// createEndpoint creates an endpoint and returns its answer (with secret).
func createEndpoint(t *testing.T, s *guardtest.Server, ownerKey, url string, events ...string) map[string]any {
	t.Helper()
	r := call(t, s, http.MethodPost, "/v1/webhook_endpoints", ownerKey, nil, map[string]any{"url": url, "enabled_events": events})
	mustStatus(t, r, http.StatusCreated)
	return r.Body
}

// sendTest asks for a webhook.test delivery to an endpoint.
func sendTest(t *testing.T, s *guardtest.Server, ownerKey, id string) map[string]any {
	t.Helper()
	r := call(t, s, http.MethodPost, "/v1/webhook_endpoints/"+id+"/test", ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	return r.Body
}

func getEndpoint(t *testing.T, s *guardtest.Server, ownerKey, id string) map[string]any {
	t.Helper()
	r := call(t, s, http.MethodGet, "/v1/webhook_endpoints/"+id, ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	return r.Body
}

// listedEvents are the raw envelopes GET /v1/events lists for path,
// oldest first.
func listedEvents(t *testing.T, s *guardtest.Server, key, path string) []json.RawMessage {
	t.Helper()
	r := call(t, s, http.MethodGet, path, key, nil, nil)
	mustStatus(t, r, http.StatusOK)
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Raw, &page); err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(page.Data)-1; i < j; i, j = i+1, j-1 {
		page.Data[i], page.Data[j] = page.Data[j], page.Data[i]
	}
	return page.Data
}

func mustJSONString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
