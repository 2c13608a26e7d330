package transport_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport"
)

// The two fasthttp goroutines are not the service's: one refreshes the Date
// header for the whole process and never ends, the other is the worker
// pool's cleaner, which notices Shutdown only after its 10 s nap. Nothing of
// the actors, the journal or the settlement workers may outlive Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// epoch is where fake clocks start: midday UTC, far from a daily reset.
var epoch = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

const consoleURL = "https://owner.console.example.com"

// testPolicy trusts the tests' vendors and has room for the magic amounts.
const testPolicy = `{"per_spend_limit":"100.00","daily_cap":"400.00","monthly_cap":"500.00",` +
	`"approval_over":"100.00","trusted_destinations":["api.vendor.com","*.shop.io"]}`

// env is one running service with a practice owner and one agent.
type env struct {
	srv      *guardtest.Server
	owner    guardtest.Owner
	agentID  string
	agentKey string
}

// start runs a service on a fake clock (time moves only when the test says)
// with an owner and one agent under testPolicy.
func start(t *testing.T, opts ...guardtest.Option) *env {
	t.Helper()
	opts = append([]guardtest.Option{
		guardtest.WithClock(guardtest.NewFakeClock(epoch)),
		guardtest.WithConfig(func(c *wire.Config) { c.ConsoleURL = consoleURL }),
	}, opts...)
	s := guardtest.Start(t, opts...)
	e := &env{srv: s, owner: s.NewOwner(t)}
	e.agentID, e.agentKey = s.NewAgent(t, e.owner.TestKey, testPolicy)
	return e
}

// call sends a request and checks what every answer must carry: the
// Request-Id and Service-Version headers, and for errors exactly the error
// body of api-decisions.md with request_id equal to the header.
func call(t *testing.T, s *guardtest.Server, method, path, key string, headers map[string]string, body any) guardtest.Response {
	t.Helper()
	r := s.Do(t, method, path, key, headers, body)
	checkEnvelope(t, method+" "+path, r)
	return r
}

var requestIDPattern = regexp.MustCompile(`^req_[0-9A-Za-z]+$`)

func checkEnvelope(t *testing.T, what string, r guardtest.Response) {
	t.Helper()
	reqID := r.Header.Get("Request-Id")
	if !requestIDPattern.MatchString(reqID) {
		t.Errorf("%s: Request-Id header %q, want req_<token>", what, reqID)
	}
	if v := r.Header.Get("Service-Version"); v != transport.APIVersion {
		t.Errorf("%s: Service-Version header %q, want %q", what, v, transport.APIVersion)
	}
	if r.Status >= 400 {
		checkErrorBody(t, what, r)
		return
	}
	if r.Body != nil && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Errorf("%s: a JSON body with Content-Type %q", what, r.Header.Get("Content-Type"))
	}
	if id, ok := r.Body["request_id"]; ok && id != reqID {
		t.Errorf("%s: body request_id %v, header Request-Id %q", what, id, reqID)
	}
}

var errorTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "permission_error": true,
	"not_found_error": true, "idempotency_error": true, "rate_limit_error": true, "api_error": true,
}

func checkErrorBody(t *testing.T, what string, r guardtest.Response) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: error Content-Type %q", what, ct)
	}
	if r.Body == nil {
		t.Errorf("%s: error body is not a JSON object: %s", what, r.Raw)
		return
	}
	if got := keysOf(r.Body); strings.Join(got, ",") != "error,request_id" {
		t.Errorf("%s: error body has members %v, want exactly error and request_id: %s", what, got, r.Raw)
	}
	if id := r.Body["request_id"]; id != r.Header.Get("Request-Id") {
		t.Errorf("%s: error request_id %v, header Request-Id %q", what, id, r.Header.Get("Request-Id"))
	}
	e, ok := r.Body["error"].(map[string]any)
	if !ok {
		t.Errorf("%s: error member is not an object: %s", what, r.Raw)
		return
	}
	for _, k := range keysOf(e) {
		switch k {
		case "type", "code", "message", "param", "changed_fields":
		default:
			t.Errorf("%s: unexpected error member %q: %s", what, k, r.Raw)
		}
	}
	for _, k := range []string{"type", "code", "message", "param"} {
		if _, ok := e[k]; !ok {
			t.Errorf("%s: error lacks %q: %s", what, k, r.Raw)
		}
	}
	if typ, _ := e["type"].(string); !errorTypes[typ] {
		t.Errorf("%s: error type %v is not one of api-decisions.md's", what, e["type"])
	}
	if code, _ := e["code"].(string); code == "" {
		t.Errorf("%s: error code %v", what, e["code"])
	}
	if msg, _ := e["message"].(string); len(msg) < 10 {
		t.Errorf("%s: error message %q says nothing", what, msg)
	}
	if p := e["param"]; p != nil {
		if s, ok := p.(string); !ok || s == "" {
			t.Errorf("%s: error param %v is neither null nor a name", what, p)
		}
	}
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errorOf returns the error member of an error answer.
func errorOf(t *testing.T, r guardtest.Response) map[string]any {
	t.Helper()
	e, ok := r.Body["error"].(map[string]any)
	if !ok {
		t.Fatalf("answer %d has no error object: %s", r.Status, r.Raw)
	}
	return e
}

// wantError checks status, type, code and param (param "" means null).
func wantError(t *testing.T, r guardtest.Response, status int, typ, code, param string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	e := errorOf(t, r)
	if e["type"] != typ || e["code"] != code {
		t.Errorf("error type/code %v/%v, want %s/%s: %s", e["type"], e["code"], typ, code, r.Raw)
	}
	var wantParam any
	if param != "" {
		wantParam = param
	}
	if e["param"] != wantParam {
		t.Errorf("error param %v, want %v: %s", e["param"], wantParam, r.Raw)
	}
	return e
}

// newKey is a fresh Idempotency-Key.
func newKey() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "idem-" + hex.EncodeToString(b[:])
}

// spend posts a spend body with the Idempotency-Key given.
func spend(t *testing.T, s *guardtest.Server, agentKey, idemKey string, body any) guardtest.Response {
	t.Helper()
	return call(t, s, http.MethodPost, "/v1/spends", agentKey, map[string]string{"Idempotency-Key": idemKey}, body)
}

// spendBody builds a POST /v1/spends body to a destination and path.
func spendBody(amount, destination, path string) string {
	return fmt.Sprintf(`{"amount":%q,"destination":%q,"resource":{"url":"https://%s%s"}}`, amount, destination, destination, path)
}

// mustStatus fails unless r has the status.
func mustStatus(t *testing.T, r guardtest.Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
}

// created posts a spend that must answer 201 and returns the spend.
func created(t *testing.T, s *guardtest.Server, agentKey string, body any) map[string]any {
	t.Helper()
	r := spend(t, s, agentKey, newKey(), body)
	mustStatus(t, r, http.StatusCreated)
	checkSpend(t, r)
	return r.Body
}

var (
	spendIDPattern   = regexp.MustCompile(`^spd_[0-9a-f]{32}$`)
	receiptIDPattern = regexp.MustCompile(`^rcp_[0-9a-f]{32}$`)
	approvalPattern  = regexp.MustCompile(`^apr_[0-9a-f]{32}$`)
	sha256Pattern    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	shortCodePattern = regexp.MustCompile(`^#[A-Za-z0-9]{4}$`)
)

// spendFields are the members of spec 2.1.
var spendFields = []string{"id", "object", "agent_id", "livemode", "status", "amount", "amount_settled", "currency",
	"destination", "destination_rule", "resource", "memo", "client_reference", "policy_version", "decline_reason",
	"declined_at_gate", "pause_detail", "approval_reason", "approval", "hold", "settlement", "failure_reason",
	"rail_error", "processing_detail", "rule", "sandbox", "message", "next_action", "retryable",
	"idempotent_replay", "created_at", "updated_at", "request_id"}

// checkSpend checks the shape every spend answer has.
func checkSpend(t *testing.T, r guardtest.Response) {
	t.Helper()
	sp := r.Body
	for _, f := range spendFields {
		if _, ok := sp[f]; !ok {
			t.Errorf("spend lacks %q: %s", f, r.Raw)
		}
	}
	if id, _ := sp["id"].(string); !spendIDPattern.MatchString(id) {
		t.Errorf("spend id %q", id)
	}
	if sp["object"] != "spend" {
		t.Errorf("object %v", sp["object"])
	}
	if sp["request_id"] != r.Header.Get("Request-Id") {
		t.Errorf("spend request_id %v, header %q", sp["request_id"], r.Header.Get("Request-Id"))
	}
	if msg, _ := sp["message"].(string); msg == "" {
		t.Errorf("spend has no message: %s", r.Raw)
	}
	if na, ok := sp["next_action"].(map[string]any); !ok || na["code"] == nil {
		t.Errorf("spend next_action %v", sp["next_action"])
	}
}

// obj returns member k of m as an object, failing when it is not one.
func obj(t *testing.T, m map[string]any, k string) map[string]any {
	t.Helper()
	o, ok := m[k].(map[string]any)
	if !ok {
		t.Fatalf("%q is %v, want an object", k, m[k])
	}
	return o
}

// dec parses a decimal string exactly.
func dec(t *testing.T, v any) *big.Rat {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("amount %v (%T) is not a decimal string", v, v)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("amount %q does not parse", s)
	}
	return r
}

// sub is a - b.
func sub(a, b *big.Rat) *big.Rat { return new(big.Rat).Sub(a, b) }

// balance reads GET /v1/balance without the members that change on every
// call, so two readings compare equal when nothing happened in between.
func balance(t *testing.T, s *guardtest.Server, agentKey string) map[string]any {
	t.Helper()
	r := call(t, s, http.MethodGet, "/v1/balance", agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	b := r.Body
	delete(b, "as_of")
	delete(b, "request_id")
	return b
}

// getSpend reads a spend, optionally waiting.
func getSpend(t *testing.T, s *guardtest.Server, key, id, query string) guardtest.Response {
	t.Helper()
	return call(t, s, http.MethodGet, "/v1/spends/"+id+query, key, nil, nil)
}

// waitStatus polls a spend the way an agent does, with wait_seconds, until
// it reaches status or 20 s pass, and returns the last answer.
func waitStatus(t *testing.T, s *guardtest.Server, key, id, status string) guardtest.Response {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := getSpend(t, s, key, id, "?wait_seconds=5")
		mustStatus(t, r, http.StatusOK)
		if r.Body["status"] == status || time.Now().After(deadline) {
			return r
		}
	}
}

// newest is the id of the first item of a list (GET /v1/spends or
// /v1/events, newest first), or "" for an empty list.
func newest(t *testing.T, s *guardtest.Server, key, path string) string {
	t.Helper()
	r := call(t, s, http.MethodGet, path+"?limit=1", key, nil, nil)
	mustStatus(t, r, http.StatusOK)
	data, ok := r.Body["data"].([]any)
	if r.Body["object"] != "list" || !ok {
		t.Fatalf("GET %s is not a list: %s", path, r.Raw)
	}
	if len(data) == 0 {
		return ""
	}
	id, _ := data[0].(map[string]any)["id"].(string)
	return id
}

// spendCount is how many spends the journal lists for an agent. It reads
// the store's agent index; tests that use it also check that it grows when
// a spend is created, so a renamed index cannot make them pass vacuously.
func spendCount(t *testing.T, s *guardtest.Server, agentID string) int {
	t.Helper()
	n := 0
	err := s.Service().Store().Scan("agent_spends", []byte(agentID+"|"), nil, false, func(_, _ []byte) bool {
		n++
		return true
	})
	if err != nil {
		t.Fatalf("scanning the agent's spends: %v", err)
	}
	return n
}

// payingSlowly starts a payment of amount through a vendor slow enough
// (the service's SimulatedLatency) to act while it is being sent, and
// returns its id once it reads approved, with the answer to come.
func payingSlowly(t *testing.T, e *env, amount string) (string, <-chan guardtest.Response) {
	t.Helper()
	done := make(chan guardtest.Response, 1)
	go func() {
		r, _ := e.srv.Send(http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": newKey()},
			spendBody(amount, "api.vendor.com", "/slow"))
		done <- r
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if ids, _ := listIDs(t, e.srv, e.agentKey, "/v1/spends?status=approved"); len(ids) == 1 {
			return ids[0], done
		}
	}
	t.Fatal("the spend never read approved while it was being sent")
	return "", nil
}
