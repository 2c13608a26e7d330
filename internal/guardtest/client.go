package guardtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
)

// Response is one HTTP answer.
type Response struct {
	Status int
	Header http.Header
	// Raw is the body as received.
	Raw []byte
	// Body is Raw decoded, when it is a JSON object; nil otherwise.
	Body map[string]any
}

// Do sends one request and reads the whole answer, failing the test when
// no answer comes. key, when not empty, is sent as "Authorization: Bearer
// <key>". body is sent as is when it is a []byte or a string, JSON-encoded
// otherwise, and omitted when nil. A body goes with "Content-Type:
// application/json" unless headers name a Content-Type; an empty header
// value means "do not send this header".
func (s *Server) Do(t testing.TB, method, path, key string, headers map[string]string, body any) Response {
	t.Helper()
	r, err := s.Send(method, path, key, headers, body)
	if err != nil {
		t.Fatalf("guardtest: %v", err)
	}
	return r
}

// Send is Do for goroutines other than the test's: it returns the error
// instead of failing the test.
func (s *Server) Send(method, path, key string, headers map[string]string, body any) (Response, error) {
	var rd io.Reader
	var sent []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		sent = b
	case string:
		sent = []byte(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return Response{}, fmt.Errorf("encoding the body of %s %s: %w", method, path, err)
		}
		sent = enc
	}
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		return Response{}, fmt.Errorf("building %s %s: %w", method, path, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("reading the answer to %s %s: %w", method, path, err)
	}
	r := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) == nil {
		r.Body = obj
	}
	// The contract: every exchange a test makes is held to the OpenAPI
	// document, so a field missing, misnamed or of the wrong type fails
	// whichever test saw it.
	if s.contract == nil {
		return r, nil
	}
	if err := s.contract.Check(req, sent, resp.StatusCode, resp.Header, raw); err != nil {
		return r, fmt.Errorf("the answer breaks the API contract: %w\nbody: %s", err, clipBody(raw))
	}
	return r, nil
}

// From returns s sending its requests from the loopback address ip
// (127.0.0.2, 127.0.0.3, ...) instead of 127.0.0.1: a client the limits
// per client IP count apart from the others, as they count one on another
// network. Its connections are closed when the test ends, before the
// service stops, so that none holds the graceful stop.
func (s *Server) From(t testing.TB, ip string) *Server {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	from := *s
	from.client = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: s.client.Timeout}
	t.Cleanup(from.client.CloseIdleConnections)
	return &from
}

func clipBody(b []byte) []byte {
	if len(b) > 600 {
		return append(b[:600:600], "..."...)
	}
	return b
}

// Owner is an owner and its two owner keys.
type Owner struct {
	ID string
	// TestKey is the practice owner key, LiveKey the live one.
	TestKey string
	LiveKey string
}

var owners atomic.Uint64

// NewOwner creates an owner (there is no HTTP endpoint for it) with a
// funded practice environment and an empty live one.
func (s *Server) NewOwner(t testing.TB) Owner {
	t.Helper()
	n := owners.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	oc, err := s.System().CreateOwner(ctx, fmt.Sprintf("Owner %d", n), fmt.Sprintf("owner%d@guardtest.invalid", n), "")
	if err != nil {
		t.Fatalf("guardtest: creating an owner: %v", err)
	}
	return Owner{ID: oc.Owner.ID, TestKey: oc.Keys[actors.EnvTest], LiveKey: oc.Keys[actors.EnvLive]}
}

var agents atomic.Uint64

// NewAgent creates an agent with the owner key (practice or live) and one
// key for it, through the owner endpoints. policyJSON is the agent's policy
// body, or "" for the default rules.
func (s *Server) NewAgent(t testing.TB, ownerKey, policyJSON string) (agentID, agentKey string) {
	t.Helper()
	body := fmt.Sprintf(`{"name":"agent %d"}`, agents.Add(1))
	if policyJSON != "" {
		body = body[:len(body)-1] + `,"policy":` + policyJSON + `}`
	}
	r := s.Do(t, http.MethodPost, "/v1/agents", ownerKey, nil, body)
	id, _ := r.Body["id"].(string)
	if r.Status != http.StatusCreated || id == "" {
		t.Fatalf("guardtest: POST /v1/agents answered %d: %s", r.Status, r.Raw)
	}
	r = s.Do(t, http.MethodPost, "/v1/agents/"+id+"/keys", ownerKey, nil, nil)
	secret, _ := r.Body["secret"].(string)
	if r.Status != http.StatusCreated || secret == "" {
		t.Fatalf("guardtest: POST /v1/agents/%s/keys answered %d: %s", id, r.Status, r.Raw)
	}
	return id, secret
}

// AddChannel adds a notification channel with the owner key and confirms
// it as the owner does in the console, signed in: a channel added through
// the API sends nothing before. It returns the channel's id.
func (s *Server) AddChannel(t testing.TB, ownerKey, typ, target string) string {
	t.Helper()
	r := s.Do(t, http.MethodPost, "/v1/notification_channels", ownerKey, nil, map[string]string{"type": typ, "target": target})
	id, _ := r.Body["id"].(string)
	if r.Status != http.StatusCreated || id == "" {
		t.Fatalf("guardtest: POST /v1/notification_channels answered %d: %s", r.Status, r.Raw)
	}
	s.ConfirmChannel(t, ownerKey, id)
	return id
}

// ConfirmChannel confirms a pending notification channel of the owner
// key's environment, as the owner does in the console.
func (s *Server) ConfirmChannel(t testing.TB, ownerKey, channelID string) {
	t.Helper()
	p, err := s.System().Authenticate(ownerKey)
	if err != nil {
		t.Fatalf("guardtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.System().ConfirmNotificationChannel(ctx, actors.OwnerPrincipal(p.OwnerID, p.Env()), channelID); err != nil {
		t.Fatalf("guardtest: confirming channel %s: %v", channelID, err)
	}
}
