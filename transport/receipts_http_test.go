package transport_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
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

// GET /v1/receipts lists the receipts of settled spends, newest spend
// first, paged both ways; spends without a receipt (declined, failed,
// waiting) are not in it. An agent key sees its own agent's; an owner
// key the environment's, or one agent's with agent_id. Each item is the
// receipt as GET /v1/receipts/{id} shows it. A cursor must be a receipt
// of the list.
func TestListReceipts(t *testing.T) {
	e := start(t)
	s := e.srv
	agentB, keyB := s.NewAgent(t, e.owner.TestKey, testPolicy)
	var all, mine []string // receipt ids, oldest first
	for i, c := range []struct{ key, amount string }{
		{e.agentKey, "1.00"}, {keyB, "1.00"}, {e.agentKey, "99.00"}, {e.agentKey, "2.00"},
		{keyB, "150.00"}, {e.agentKey, "3.00"}, {keyB, "4.00"},
	} {
		sp := created(t, s, c.key, spendBody(c.amount, "api.vendor.com", fmt.Sprintf("/r%d", i)))
		if sp["status"] != "settled" {
			continue // failed (99.00) or declined (over the limit): no receipt
		}
		rid := obj(t, sp, "settlement")["receipt_id"].(string)
		all = append(all, rid)
		if c.key == e.agentKey {
			mine = append(mine, rid)
		}
	}
	newestFirst := func(ids []string) []string {
		out := slices.Clone(ids)
		slices.Reverse(out)
		return out
	}
	if ids, more := listIDs(t, s, e.owner.TestKey, "/v1/receipts"); !slices.Equal(ids, newestFirst(all)) || more {
		t.Fatalf("owner: %v (has_more %v), want %v", ids, more, newestFirst(all))
	}
	if ids, _ := listIDs(t, s, e.agentKey, "/v1/receipts"); !slices.Equal(ids, newestFirst(mine)) {
		t.Fatalf("agent: %v, want its own %v", ids, newestFirst(mine))
	}
	if ids, _ := listIDs(t, s, e.owner.TestKey, "/v1/receipts?agent_id="+e.agentID); !slices.Equal(ids, newestFirst(mine)) {
		t.Fatalf("owner, agent_id: %v, want %v", ids, newestFirst(mine))
	}

	// The items are the receipts as read one by one.
	r := call(t, s, http.MethodGet, "/v1/receipts?limit=1", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	item := r.Body["data"].([]any)[0].(map[string]any)
	one := call(t, s, http.MethodGet, "/v1/receipts/"+all[len(all)-1], e.owner.TestKey, nil, nil)
	mustStatus(t, one, http.StatusOK)
	delete(one.Body, "request_id")
	if item["request_id"] != r.Body["request_id"] {
		t.Errorf("item request_id %v, want the list's %v", item["request_id"], r.Body["request_id"])
	}
	delete(item, "request_id")
	if !reflect.DeepEqual(item, one.Body) || r.Body["has_more"] != true || r.Body["url"] != "/v1/receipts" {
		t.Errorf("listed %v (has_more %v, url %v), read %v", item, r.Body["has_more"], r.Body["url"], one.Body)
	}

	// Two at a time, back and forth, each receipt once.
	var paged []string
	for cursor := ""; ; {
		path := "/v1/receipts?limit=2"
		if cursor != "" {
			path += "&starting_after=" + cursor
		}
		ids, more := listIDs(t, s, e.owner.TestKey, path)
		paged = append(paged, ids...)
		if !more {
			break
		}
		cursor = ids[len(ids)-1]
	}
	if !slices.Equal(paged, newestFirst(all)) {
		t.Fatalf("paged: %v, want %v", paged, newestFirst(all))
	}
	if ids, _ := listIDs(t, s, e.owner.TestKey, "/v1/receipts?limit=2&ending_before="+all[0]); !slices.Equal(ids, newestFirst(all)[len(all)-3:len(all)-1]) {
		t.Fatalf("ending_before the oldest: %v, want %v", ids, newestFirst(all)[len(all)-3:len(all)-1])
	}

	// Cursors the list does not hold.
	for _, c := range []struct{ key, cursor string }{
		{e.agentKey, neverIssued(mine[0])},
		{e.agentKey, all[1]},      // agent B's receipt, read with agent A's key
		{e.owner.LiveKey, all[0]}, // a practice receipt in the live list
	} {
		wantError(t, call(t, s, http.MethodGet, "/v1/receipts?starting_after="+c.cursor, c.key, nil, nil),
			400, "invalid_request_error", "parameter_invalid", "starting_after")
	}
	wantError(t, call(t, s, http.MethodGet, "/v1/receipts?starting_after=spd_00000000000000000000000000000000", e.owner.TestKey, nil, nil),
		400, "invalid_request_error", "parameter_invalid", "starting_after")
	wantError(t, call(t, s, http.MethodGet, "/v1/receipts?agent_id="+agentB, keyB+"x", nil, nil),
		401, "authentication_error", "invalid_api_key", "")
	wantError(t, call(t, s, http.MethodGet, "/v1/receipts?status=settled", e.owner.TestKey, nil, nil),
		400, "invalid_request_error", "parameter_unknown", "status")
}

// neverIssued is an id of the same kind as id that differs in its last
// character.
func neverIssued(id string) string {
	last := byte('0')
	if id[len(id)-1] == '0' {
		last = '1'
	}
	return id[:len(id)-1] + string(last)
}
