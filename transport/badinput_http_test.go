package transport_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentpay/guard/transport"
)

// TestBadSpendInputLosesNothing sends every bad request of the table and
// checks the 400 (param, code, a message that says what to fix), that the
// balance did not move, that no spend was recorded, and that the
// Idempotency-Key was not consumed: the same key with a valid body then
// creates a new spend.
func TestBadSpendInputLosesNothing(t *testing.T) {
	e := start(t)
	s := e.srv
	_, liveKey := s.NewAgent(t, e.owner.LiveKey, testPolicy)
	liveID := agentIDOf(t, e, liveKey)

	// A pending spend first, so that "nothing changed" covers a hold.
	pending := created(t, s, e.agentKey, spendBody("7.00", "unknown.vendor.net", "/x"))
	if pending["status"] != "pending_approval" {
		t.Fatalf("setup spend is %v, want pending_approval", pending["status"])
	}

	for _, c := range transport.BadSpendCases {
		t.Run(c.Name, func(t *testing.T) {
			key, agentID := e.agentKey, e.agentID
			valid := transport.ValidSpendBody
			if c.Live {
				key, agentID = liveKey, liveID
			}
			before := balance(t, s, key)
			count := spendCount(t, s, agentID)
			lastSpend := newest(t, s, key, "/v1/spends")
			lastEvent := newest(t, s, key, "/v1/events")

			idem := newKey()
			headers := map[string]string{"Idempotency-Key": idem}
			for k, v := range c.Headers {
				headers[k] = v
			}
			r := call(t, s, http.MethodPost, "/v1/spends", key, headers, c.Body)
			e := wantError(t, r, http.StatusBadRequest, "invalid_request_error", c.Code, c.Param)
			if msg, _ := e["message"].(string); !strings.Contains(msg, c.Hint) {
				t.Errorf("message %q does not say %q", msg, c.Hint)
			}

			if after := balance(t, s, key); !reflect.DeepEqual(before, after) {
				t.Errorf("balance changed:\nbefore %v\nafter  %v", before, after)
			}
			if n := spendCount(t, s, agentID); n != count {
				t.Errorf("the agent has %d spends after a 400, had %d", n, count)
			}
			if id := newest(t, s, key, "/v1/spends"); id != lastSpend {
				t.Errorf("GET /v1/spends lists %s first after a 400, %s before", id, lastSpend)
			}
			if id := newest(t, s, key, "/v1/events"); id != lastEvent {
				t.Errorf("GET /v1/events lists %s first after a 400, %s before", id, lastEvent)
			}

			if !c.ReusesKey() {
				idem = newKey() // the case sent no usable key: any key will do
			}
			r = spend(t, s, key, idem, valid)
			if r.Status != http.StatusCreated || r.Body["idempotent_replay"] != false {
				t.Fatalf("a valid request with the key of the refused one: %d (want 201, not a replay): %s", r.Status, r.Raw)
			}
			if n := spendCount(t, s, agentID); n != count+1 {
				t.Errorf("the agent has %d spends after a 201, want %d", n, count+1)
			}
			if id := newest(t, s, key, "/v1/spends"); id != r.Body["id"] {
				t.Errorf("GET /v1/spends lists %s first, want the new spend %v", id, r.Body["id"])
			}
			if id := newest(t, s, key, "/v1/events"); id == lastEvent {
				t.Errorf("the new spend emitted no event the agent can read")
			}
		})
	}
}

// agentIDOf reads the agent id of a key from GET /v1/me.
func agentIDOf(t *testing.T, e *env, key string) string {
	t.Helper()
	r := call(t, e.srv, http.MethodGet, "/v1/me", key, nil, nil)
	mustStatus(t, r, http.StatusOK)
	id, _ := obj(t, r.Body, "agent")["id"].(string)
	return id
}

// TestCaseVariantKeysAreRefused: encoding/json matches field names without
// regard to case, so {"amount":"1.00","AMOUNT":"99.00"} would pay 99.00
// while any case-sensitive reader of the same bytes sees 1.00. The strict
// decoder must refuse both a case variant of a field (an unknown field) and
// the pair (a duplicate), and nothing may be created.
func TestCaseVariantKeysAreRefused(t *testing.T) {
	e := start(t)
	for _, body := range []string{
		`{"amount":"1.00","AMOUNT":"2.00","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/v1/data"}}`,
		`{"Amount":"1.00","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/v1/data"}}`,
		`{"amount":"1.00","destination":"api.vendor.com","resource":{"URL":"https://api.vendor.com/v1/data"}}`,
	} {
		count := spendCount(t, e.srv, e.agentID)
		r := spend(t, e.srv, e.agentKey, newKey(), body)
		if r.Status != http.StatusBadRequest {
			t.Errorf("body %s: status %d, want 400: %s", body, r.Status, r.Raw)
		}
		if n := spendCount(t, e.srv, e.agentID); n != count {
			t.Errorf("body %s created a spend", body)
		}
	}
}
