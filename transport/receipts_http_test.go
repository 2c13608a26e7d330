package transport_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestReceiptsVerifyAndChain verifies every receipt with a standard JOSE
// library against the published key set, checks that its claims describe
// the spend, and that each receipt of an owner names the hash of the one
// before it, across the owner's agents.
func TestReceiptsVerifyAndChain(t *testing.T) {
	e := start(t)
	s := e.srv
	_, keyB := s.NewAgent(t, e.owner.TestKey, testPolicy)

	jr := call(t, s, http.MethodGet, "/.well-known/jwks.json", "", nil, nil)
	mustStatus(t, jr, http.StatusOK)
	if a, c := jr.Header.Get("Access-Control-Allow-Origin"), jr.Header.Get("Cache-Control"); a != "*" || c != "public, max-age=300" {
		t.Errorf("JWKS headers: Access-Control-Allow-Origin %q, Cache-Control %q", a, c)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jr.Raw, &set); err != nil {
		t.Fatalf("the JWKS does not parse as a JWK set: %v: %s", err, jr.Raw)
	}
	if len(set.Keys) == 0 {
		t.Fatalf("the JWKS has no keys: %s", jr.Raw)
	}

	type paid struct {
		spend, receipt map[string]any
		claims         map[string]any
		jws            string
	}
	var chain []paid
	for i, c := range []struct{ key, dest, path string }{
		{e.agentKey, "api.vendor.com", "/v1/a"},
		{e.agentKey, "data.shop.io", "/v1/b?x=1"},
		{keyB, "api.vendor.com", "/v1/c"},
	} {
		sp := created(t, s, c.key, spendBody("2.50", c.dest, c.path))
		if sp["status"] != "settled" {
			t.Fatalf("spend %d is %v, want settled", i, sp["status"])
		}
		settlement := obj(t, sp, "settlement")
		rid := settlement["receipt_id"].(string)

		r := call(t, s, http.MethodGet, "/v1/receipts/"+rid, c.key, nil, nil)
		mustStatus(t, r, http.StatusOK)
		rc := r.Body
		if rc["id"] != rid || rc["object"] != "receipt" || rc["spend_id"] != sp["id"] || rc["agent_id"] != sp["agent_id"] || rc["livemode"] != false {
			t.Errorf("receipt %d: %s", i, r.Raw)
		}
		token, _ := rc["jws"].(string)
		claims := verifyJWS(t, &set, token, rc["kid"])

		for k, want := range map[string]any{
			"rid": rid, "spend_id": sp["id"], "agent_id": sp["agent_id"], "amount": "2.50",
			"amount_settled": sp["amount_settled"], "currency": "usdc", "destination": c.dest,
			"resource": sp["resource"], "network": settlement["network"], "reference": settlement["reference"],
			"policy_version": sp["policy_version"], "body_sha256": obj(t, settlement, "result")["body_sha256"],
			"livemode": false,
		} {
			if !reflect.DeepEqual(claims[k], want) {
				t.Errorf("receipt %d claim %s = %v, want %v", i, k, claims[k], want)
			}
		}
		if h, _ := claims["policy_hash"].(string); !sha256Pattern.MatchString(h) {
			t.Errorf("receipt %d policy_hash %v", i, claims["policy_hash"])
		}
		if iat, _ := claims["iat"].(float64); int64(iat) != epoch.Unix() {
			t.Errorf("receipt %d iat %v, want %d", i, claims["iat"], epoch.Unix())
		}
		chain = append(chain, paid{spend: sp, receipt: rc, claims: claims, jws: token})
	}

	for i := 1; i < len(chain); i++ {
		sum := sha256.Sum256([]byte(chain[i-1].jws))
		if want := "sha256:" + hex.EncodeToString(sum[:]); chain[i].claims["prev"] != want {
			t.Errorf("receipt %d prev %v, want %s (the hash of receipt %d)", i, chain[i].claims["prev"], want, i-1)
		}
	}

	// The owner reads the receipts of its agents; nobody else does.
	rid := chain[0].receipt["id"].(string)
	if r := call(t, s, http.MethodGet, "/v1/receipts/"+rid, e.owner.TestKey, nil, nil); r.Status != http.StatusOK || r.Body["jws"] != chain[0].jws {
		t.Errorf("owner reading a receipt: %d %s", r.Status, r.Raw)
	}
	for name, key := range map[string]string{"another agent": keyB, "another owner": s.NewOwner(t).TestKey, "the live key": e.owner.LiveKey} {
		if r := call(t, s, http.MethodGet, "/v1/receipts/"+rid, key, nil, nil); r.Status != http.StatusNotFound {
			t.Errorf("%s reads the receipt: %d %s", name, r.Status, r.Raw)
		}
	}
	wantError(t, call(t, s, http.MethodGet, "/v1/receipts/rcp_"+strings.Repeat("0", 32), e.agentKey, nil, nil),
		http.StatusNotFound, "not_found_error", "resource_missing", "")
	q := call(t, s, http.MethodGet, "/v1/receipts/"+rid+"?x=1", e.agentKey, nil, nil)
	wantError(t, q, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "x")
	if msg, _ := errorOf(t, q)["message"].(string); !strings.Contains(msg, "named by the path") {
		t.Errorf("a query parameter on a GET: %q", msg)
	}

	// A receipt altered in any part no longer verifies.
	parts := strings.Split(chain[0].jws, ".")
	payload := []byte(`{"amount_settled":"0.01"}`)
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
	if sig, err := jose.ParseSignedCompact(forged, []jose.SignatureAlgorithm{jose.EdDSA}); err == nil {
		if _, err := sig.Verify(set.Keys[0]); err == nil {
			t.Error("a receipt with a replaced payload verifies")
		}
	}
	if s.JWKS() == nil || !json.Valid(s.JWKS()) {
		t.Error("the service's JWKS is not JSON")
	}
}

// verifyJWS checks a compact EdDSA JWS against the key set and returns its
// claims.
func verifyJWS(t *testing.T, set *jose.JSONWebKeySet, token string, kid any) map[string]any {
	t.Helper()
	sig, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatalf("the receipt is not a compact EdDSA JWS: %v", err)
	}
	if len(sig.Signatures) != 1 {
		t.Fatalf("the receipt has %d signatures", len(sig.Signatures))
	}
	h := sig.Signatures[0].Header
	if h.KeyID == "" || h.KeyID != kid {
		t.Fatalf("JWS kid %q, receipt kid %v", h.KeyID, kid)
	}
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		t.Fatalf("the JWKS has %d keys with kid %q", len(keys), h.KeyID)
	}
	payload, err := sig.Verify(keys[0])
	if err != nil {
		t.Fatalf("the receipt does not verify against the JWKS: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("receipt claims: %v", err)
	}
	return claims
}

// A receipt's iat is when the service signed it, on the service's clock:
// a practice clock moved ahead does not put it in the future, where JWT
// libraries would refuse it. The spend keeps the practice time.
func TestReceiptIssuedAtIsTheServiceClock(t *testing.T) {
	e := start(t)
	s := e.srv
	advanceClock(t, e, 2*24*3600)
	sp := created(t, s, e.agentKey, spendBody("2.50", "api.vendor.com", "/later"))
	if sp["created_at"] != epoch.Add(48*time.Hour).Format(time.RFC3339) {
		t.Fatalf("the spend's created_at %v, want the practice clock's %s", sp["created_at"], epoch.Add(48*time.Hour).Format(time.RFC3339))
	}
	r := call(t, s, http.MethodGet, "/v1/receipts/"+obj(t, sp, "settlement")["receipt_id"].(string), e.agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	jr := call(t, s, http.MethodGet, "/.well-known/jwks.json", "", nil, nil)
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jr.Raw, &set); err != nil {
		t.Fatal(err)
	}
	claims := verifyJWS(t, &set, r.Body["jws"].(string), r.Body["kid"])
	if iat, _ := claims["iat"].(float64); int64(iat) != s.Clock.Now().Unix() {
		t.Errorf("iat %v, want the service clock's %d", claims["iat"], s.Clock.Now().Unix())
	}
}
