package transport_test

import (
	"net/http"
	"strings"
	"testing"
)

// An owner asking with a key of the wrong environment for one of its own
// objects is told where the object is and which key reaches it; another
// owner asking for the same object learns nothing beyond "no such object".
func TestNotFoundNamesTheOtherEnvironment(t *testing.T) {
	e := start(t)
	paid := spend(t, e.srv, e.agentKey, newKey(), spendBody("2.00", "api.vendor.com", "/a"))
	mustStatus(t, paid, http.StatusCreated)
	spendID := paid.Body["id"].(string)
	receiptID := obj(t, paid.Body, "settlement")["receipt_id"].(string)
	agentKeyID := keyIDOf(t, e.srv, e.agentKey)
	liveAgent, _ := e.srv.NewAgent(t, e.owner.LiveKey, testPolicy)
	pol := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID+"/policy", e.owner.TestKey, nil, nil)
	mustStatus(t, pol, http.StatusOK)

	practiceHint := []string{"in live mode", "it is a practice", "svc_test_owner_"}
	for _, c := range []struct {
		name, method, path, key string
		hint                    []string
	}{
		{"agent", http.MethodGet, "/v1/agents/" + e.agentID, e.owner.LiveKey, practiceHint},
		{"policy", http.MethodGet, "/v1/agents/" + e.agentID + "/policy", e.owner.LiveKey, practiceHint},
		{"spend", http.MethodGet, "/v1/spends/" + spendID, e.owner.LiveKey, practiceHint},
		{"receipt", http.MethodGet, "/v1/receipts/" + receiptID, e.owner.LiveKey, practiceHint},
		{"policy change", http.MethodGet, "/v1/policy_changes/" + pol.Body["id"].(string), e.owner.LiveKey, practiceHint},
		{"key", http.MethodPost, "/v1/keys/" + agentKeyID + "/revoke", e.owner.LiveKey, practiceHint},
		{"live agent", http.MethodGet, "/v1/agents/" + liveAgent, e.owner.TestKey,
			[]string{"in practice mode", "it is a live agent", "svc_live_owner_"}},
	} {
		r := call(t, e.srv, c.method, c.path, c.key, nil, nil)
		msg, _ := wantError(t, r, http.StatusNotFound, "not_found_error", "resource_missing", "")["message"].(string)
		for _, want := range c.hint {
			if !strings.Contains(msg, want) {
				t.Errorf("%s with the other environment's key: message %q lacks %q", c.name, msg, want)
			}
		}
	}

	// The practice key still reaches the agent, and its key was not revoked.
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, nil), http.StatusOK)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK)

	stranger := e.srv.NewOwner(t)
	for _, key := range []string{stranger.LiveKey, stranger.TestKey} {
		r := call(t, e.srv, http.MethodGet, "/v1/agents/"+e.agentID, key, nil, nil)
		msg, _ := wantError(t, r, http.StatusNotFound, "not_found_error", "resource_missing", "")["message"].(string)
		if msg != "No agent "+e.agentID+" exists." {
			t.Errorf("another owner is told %q about the agent", msg)
		}
	}
}
