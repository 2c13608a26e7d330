package transport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/guardtest"
)

// ownerEvents lists the owner's events of one type (exact or prefix with
// "*"), newest first.
func ownerEvents(t *testing.T, s *guardtest.Server, ownerKey, typ string) []map[string]any {
	t.Helper()
	r := call(t, s, http.MethodGet, "/v1/events?limit=50&type="+typ, ownerKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	data, ok := r.Body["data"].([]any)
	if !ok {
		t.Fatalf("GET /v1/events is not a list: %s", r.Raw)
	}
	out := make([]map[string]any, 0, len(data))
	for _, d := range data {
		out = append(out, d.(map[string]any))
	}
	return out
}

// keyIDOf is the id of the key a secret belongs to, from GET /v1/me.
func keyIDOf(t *testing.T, s *guardtest.Server, secret string) string {
	t.Helper()
	me := call(t, s, http.MethodGet, "/v1/me", secret, nil, nil)
	mustStatus(t, me, http.StatusOK)
	return obj(t, me.Body, "key")["id"].(string)
}

// Rotating an agent key: a new key of the same agent at once, the old one
// working until its grace period ends and refused afterwards, with
// api_key.created and api_key.rotated in one go.
func TestRotateAgentKey(t *testing.T) {
	e := start(t)
	oldID := keyIDOf(t, e.srv, e.agentKey) // also caches the old key
	r := call(t, e.srv, http.MethodPost, "/v1/keys/"+oldID+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":2}`)
	mustStatus(t, r, http.StatusCreated)
	newSecret, _ := r.Body["secret"].(string)
	if r.Body["kind"] != "agent" || r.Body["agent_id"] != e.agentID || r.Body["id"] == oldID || newSecret == "" ||
		newSecret == e.agentKey || r.Body["grace_period_ends_at"] != nil || r.Body["revoked_at"] != nil || r.Body["status"] != "active" {
		t.Fatalf("rotation answered %s", r.Raw)
	}
	graceEnd := epoch.Add(2 * time.Hour)
	// The answer names the key it replaced and when that one stops.
	old := obj(t, r.Body, "rotated_key")
	if ends, _ := time.Parse(time.RFC3339, fmt.Sprint(old["grace_period_ends_at"])); old["id"] != oldID || !ends.Equal(graceEnd) ||
		old["status"] != "rotated" {
		t.Fatalf("rotated_key %v, want %s rotated, ending at %v", old, oldID, graceEnd)
	}
	if _, leaked := old["secret"]; leaked {
		t.Fatal("rotated_key carries a secret")
	}

	// Both keys work during the overlap; the old one shows when it ends.
	if got := keyIDOf(t, e.srv, newSecret); got != r.Body["id"] {
		t.Fatalf("the new secret is key %s, want %v", got, r.Body["id"])
	}
	me := call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil)
	mustStatus(t, me, http.StatusOK)
	if exp, _ := time.Parse(time.RFC3339, obj(t, me.Body, "key")["expires_at"].(string)); !exp.Equal(graceEnd) {
		t.Fatalf("the old key expires at %v, want the end of the grace period %v", exp, graceEnd)
	}
	keys := call(t, e.srv, http.MethodGet, "/v1/keys", e.owner.TestKey, nil, nil)
	mustStatus(t, keys, http.StatusOK)
	seen := 0
	for _, k := range keys.Body["data"].([]any) {
		km := k.(map[string]any)
		switch km["id"] {
		case oldID:
			seen++
			if ends, _ := time.Parse(time.RFC3339, km["grace_period_ends_at"].(string)); !ends.Equal(graceEnd) || km["status"] != "rotated" {
				t.Errorf("listed grace_period_ends_at %v status %v, want %v and rotated", km["grace_period_ends_at"], km["status"], graceEnd)
			}
		case r.Body["id"]:
			seen++
			if km["grace_period_ends_at"] != nil || km["status"] != "active" {
				t.Errorf("the new key has a grace period or is not active: %v", km)
			}
		}
		if _, leaked := km["secret"]; leaked {
			t.Fatal("a key listing shows a secret")
		}
	}
	if seen != 2 {
		t.Fatalf("GET /v1/keys shows %d of the two keys", seen)
	}

	// The events: the new key's creation, then the rotation of the old.
	rot := ownerEvents(t, e.srv, e.owner.TestKey, "api_key.rotated")
	if len(rot) != 1 {
		t.Fatalf("%d api_key.rotated events, want 1", len(rot))
	}
	ro := obj(t, obj(t, rot[0], "data"), "object")
	if ro["id"] != oldID || ro["grace_period_ends_at"] == nil || rot[0]["agent_id"] != e.agentID {
		t.Fatalf("api_key.rotated carries %v", rot[0])
	}
	if _, leaked := ro["secret"]; leaked {
		t.Fatal("api_key.rotated carries a secret")
	}
	cre := ownerEvents(t, e.srv, e.owner.TestKey, "api_key.created")
	if len(cre) == 0 || obj(t, obj(t, cre[0], "data"), "object")["id"] != r.Body["id"] {
		t.Fatalf("the newest api_key.created is not the new key: %v", cre)
	}
	if cre[0]["sequence"].(float64) >= rot[0]["sequence"].(float64) {
		t.Errorf("api_key.created (sequence %v) does not come before api_key.rotated (%v)", cre[0]["sequence"], rot[0]["sequence"])
	}

	// A rotated key is not rotated again.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+oldID+"/rotate", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "state_conflict", "")

	// One second before the end it still works; past it, the same 401 as
	// any bad key, while the new key goes on.
	e.srv.Clock.Advance(2*time.Hour - time.Second)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), http.StatusOK)
	e.srv.Clock.Advance(2 * time.Second)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	if sp := created(t, e.srv, newSecret, spendBody("1.00", "api.vendor.com", "/after-rotation")); sp["status"] != "settled" {
		t.Fatalf("a spend with the new key: %v", sp["status"])
	}
	// The ended key cannot be rotated either.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+oldID+"/rotate", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "state_conflict", "")
	// The list says so, by the practice clock that aged it: the old key
	// expired (never revoked), the new one active.
	if st := listedKeyStatus(t, e, oldID); st != "expired" {
		t.Errorf("a rotated key past its grace lists status %q, want expired", st)
	}
	if st := listedKeyStatus(t, e, r.Body["id"].(string)); st != "active" {
		t.Errorf("its successor lists status %q, want active", st)
	}
	// A revoked key says revoked, in the answer and in the list.
	rv := call(t, e.srv, http.MethodPost, "/v1/keys/"+r.Body["id"].(string)+"/revoke", e.owner.TestKey, nil, nil)
	mustStatus(t, rv, http.StatusOK)
	if rv.Body["status"] != "revoked" || listedKeyStatus(t, e, r.Body["id"].(string)) != "revoked" {
		t.Errorf("a revoked key: %s", rv.Raw)
	}
}

// listedKeyStatus is the status GET /v1/keys lists for the key id.
func listedKeyStatus(t *testing.T, e *env, id string) string {
	t.Helper()
	keys := call(t, e.srv, http.MethodGet, "/v1/keys", e.owner.TestKey, nil, nil)
	mustStatus(t, keys, http.StatusOK)
	for _, k := range keys.Body["data"].([]any) {
		if km := k.(map[string]any); km["id"] == id {
			st, _ := km["status"].(string)
			return st
		}
	}
	t.Fatalf("GET /v1/keys does not list %s", id)
	return ""
}

// grace_period_hours is a whole number from 0 to 168; anything else is a
// 400 naming it, and nothing is rotated.
func TestRotateKeyValidation(t *testing.T) {
	e := start(t)
	id := keyIDOf(t, e.srv, e.agentKey)
	path := "/v1/keys/" + id + "/rotate"
	for _, body := range []string{`{"grace_period_hours":169}`, `{"grace_period_hours":-1}`, `{"grace_period_hours":1.5}`,
		`{"grace_period_hours":"24"}`, `{"grace_period_hours":null}`} {
		r := call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, body)
		if body == `{"grace_period_hours":null}` {
			// null is an omitted field: the default overlap. Only this
			// one may rotate, so it goes last.
			continue
		}
		wantError(t, r, 400, "invalid_request_error", "parameter_invalid", "grace_period_hours")
	}
	wantError(t, call(t, e.srv, http.MethodPost, path, e.owner.TestKey, nil, `{"grace":1}`),
		400, "invalid_request_error", "parameter_unknown", "grace")
	wantError(t, call(t, e.srv, http.MethodPost, path, e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/key_00000000000000000000000000000000/rotate", e.owner.TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
	other := e.srv.NewOwner(t)
	wantError(t, call(t, e.srv, http.MethodPost, path, other.TestKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	// Only the null body rotated: one api_key.rotated, with the default
	// overlap of 24 hours.
	rot := ownerEvents(t, e.srv, e.owner.TestKey, "api_key.rotated")
	if len(rot) != 1 {
		t.Fatalf("%d rotations, want 1", len(rot))
	}
	ends, _ := time.Parse(time.RFC3339, obj(t, obj(t, rot[0], "data"), "object")["grace_period_ends_at"].(string))
	if !ends.Equal(epoch.Add(24 * time.Hour)) {
		t.Fatalf("default grace period ends at %v, want %v", ends, epoch.Add(24*time.Hour))
	}
	// A revoked key cannot be rotated.
	_, k2 := e.srv.NewAgent(t, e.owner.TestKey, "")
	id2 := keyIDOf(t, e.srv, k2)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+id2+"/revoke", e.owner.TestKey, nil, nil), http.StatusOK)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+id2+"/rotate", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "state_conflict", "")
}

// An owner key can rotate itself with no overlap: it stops at once, even
// though it authenticated the rotation, and its successor administers.
func TestRotateOwnKeyWithoutGrace(t *testing.T) {
	e := start(t)
	id := keyIDOf(t, e.srv, e.owner.TestKey)
	r := call(t, e.srv, http.MethodPost, "/v1/keys/"+id+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":0}`)
	mustStatus(t, r, http.StatusCreated)
	if r.Body["kind"] != "owner" || r.Body["agent_id"] != nil || r.Body["prefix"] != "svc_test_owner" {
		t.Fatalf("rotation of an owner key answered %s", r.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/funding", e.owner.TestKey, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	successor := r.Body["secret"].(string)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/funding", successor, nil, nil), http.StatusOK)
	rot := ownerEvents(t, e.srv, successor, "api_key.rotated")
	if len(rot) != 1 || rot[0]["agent_id"] != "" {
		t.Fatalf("api_key.rotated of an owner key: %v", rot)
	}
}

// Three active owner keys per owner, practice and live together (spec
// 8.3, 5.5): an owner starts with one of each, so one more can be made in
// either environment; a revoked one frees its place.
func TestOwnerKeysQuota(t *testing.T) {
	e := start(t)
	r := call(t, e.srv, http.MethodPost, "/v1/owner_keys", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusCreated)
	if r.Body["kind"] != "owner" || r.Body["agent_id"] != nil || r.Body["livemode"] != false || r.Body["secret"] == nil {
		t.Fatalf("POST /v1/owner_keys answered %s", r.Raw)
	}
	made := r.Body
	for _, key := range []string{e.owner.TestKey, e.owner.LiveKey} {
		refused := wantError(t, call(t, e.srv, http.MethodPost, "/v1/owner_keys", key, nil, nil),
			409, "invalid_request_error", "quota_exceeded", "")
		if msg, _ := refused["message"].(string); !strings.Contains(msg, "3 active owner keys, practice and live together (2 practice, 1 live)") {
			t.Errorf("the quota message does not say what counts: %q", msg)
		}
	}
	// The new key administers.
	fresh := made["secret"].(string)
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/funding", fresh, nil, nil), http.StatusOK)
	// api_key.created for it, without the secret and without an agent.
	cre := ownerEvents(t, e.srv, fresh, "api_key.created")
	owned := 0
	for _, ev := range cre {
		o := obj(t, obj(t, ev, "data"), "object")
		if o["kind"] == "owner" {
			owned++
			if ev["agent_id"] != "" {
				t.Errorf("an owner key event names agent %v", ev["agent_id"])
			}
		}
		if _, leaked := o["secret"]; leaked {
			t.Fatal("api_key.created carries the secret")
		}
	}
	if owned != 1 {
		t.Fatalf("%d api_key.created events for owner keys, want 1", owned)
	}
	// Revoking one frees a place, in the other environment too.
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+made["id"].(string)+"/revoke", e.owner.TestKey, nil, nil), http.StatusOK)
	live := call(t, e.srv, http.MethodPost, "/v1/owner_keys", e.owner.LiveKey, nil, `{}`)
	mustStatus(t, live, http.StatusCreated)
	if live.Body["livemode"] != true || live.Body["prefix"] != "svc_live_owner" {
		t.Fatalf("a live owner key: %s", live.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/owner_keys", e.owner.TestKey, nil, nil), 409, "invalid_request_error", "quota_exceeded", "")
	// A rotation's overlap may add one working key, counted the same way.
	me := call(t, e.srv, http.MethodGet, "/v1/me", e.owner.TestKey, nil, nil)
	rot := call(t, e.srv, http.MethodPost, "/v1/keys/"+obj(t, me.Body, "key")["id"].(string)+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":1}`)
	mustStatus(t, rot, http.StatusCreated)
	liveMe := call(t, e.srv, http.MethodGet, "/v1/me", e.owner.LiveKey, nil, nil)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+obj(t, liveMe.Body, "key")["id"].(string)+"/rotate", e.owner.LiveKey, nil, `{"grace_period_hours":1}`),
		409, "invalid_request_error", "quota_exceeded", "")
	// Bad bodies and agent keys create nothing.
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/owner_keys", e.owner.LiveKey, nil, `{"scope":"full"}`),
		400, "invalid_request_error", "parameter_unknown", "scope")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/owner_keys", e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
}

// A rotation's overlap lets one key more than the quota work, never two:
// a chain of rotations, each of the key the last one made, would keep
// every secret working. With that many keys working, a rotation with a
// grace is refused and one without passes.
func TestRotationChainStaysWithinOneOverQuota(t *testing.T) {
	e := start(t)
	secret := e.agentKey
	for range 3 { // 1 key, then 2, 3 and 4 working
		r := call(t, e.srv, http.MethodPost, "/v1/keys/"+keyIDOf(t, e.srv, secret)+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":168}`)
		mustStatus(t, r, http.StatusCreated)
		secret = r.Body["secret"].(string)
	}
	last := keyIDOf(t, e.srv, secret)
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+last+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":1}`),
		409, "invalid_request_error", "quota_exceeded", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/keys", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "quota_exceeded", "")
	r := call(t, e.srv, http.MethodPost, "/v1/keys/"+last+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":0}`)
	mustStatus(t, r, http.StatusCreated)
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/me", secret, nil, nil), 401, "authentication_error", "invalid_api_key", "")
	mustStatus(t, call(t, e.srv, http.MethodGet, "/v1/me", r.Body["secret"].(string), nil, nil), http.StatusOK)
}

// A grace never outlives the key: rotated a day before it expires, with a
// week's grace, the key shows (and gets) the day it has left.
func TestRotationGraceEndsWithTheKey(t *testing.T) {
	e := start(t)
	id := keyIDOf(t, e.srv, e.agentKey)
	expires, _ := time.Parse(time.RFC3339, obj(t, call(t, e.srv, http.MethodGet, "/v1/me", e.agentKey, nil, nil).Body, "key")["expires_at"].(string))
	e.srv.Clock.Advance(expires.Sub(epoch) - 24*time.Hour)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/keys/"+id+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":168}`), http.StatusCreated)
	rot := ownerEvents(t, e.srv, e.owner.TestKey, "api_key.rotated")
	if len(rot) != 1 {
		t.Fatalf("%d api_key.rotated events, want 1", len(rot))
	}
	ro := obj(t, obj(t, rot[0], "data"), "object")
	if ends, _ := time.Parse(time.RFC3339, ro["grace_period_ends_at"].(string)); !ends.Equal(expires) || ro["expires_at"] != ro["grace_period_ends_at"] {
		t.Fatalf("rotated a day before expiry with a week's grace: grace_period_ends_at %v, expires_at %v, want both %v",
			ro["grace_period_ends_at"], ro["expires_at"], expires)
	}
}

// The key list grows with every rotation and revocation, so it is paged
// like the others: 10 by default, newest first, every key once, a cursor
// that must come from the list, and agent_id for one agent's keys.
func TestKeyListPages(t *testing.T) {
	e := start(t)
	secret := e.agentKey
	for range 11 { // each rotation without grace leaves the old key listed
		r := call(t, e.srv, http.MethodPost, "/v1/keys/"+keyIDOf(t, e.srv, secret)+"/rotate", e.owner.TestKey, nil, `{"grace_period_hours":0}`)
		mustStatus(t, r, http.StatusCreated)
		secret = r.Body["secret"].(string)
	}
	// 12 agent keys, the owner's practice key and the agent made by start.
	first, more := listIDs(t, e.srv, e.owner.TestKey, "/v1/keys")
	if len(first) != 10 || !more {
		t.Fatalf("the first page has %d keys (has_more %v), want 10 and more", len(first), more)
	}
	var all []string
	cursor := ""
	for {
		ids, more := listIDs(t, e.srv, e.owner.TestKey, "/v1/keys?limit=4"+cursor)
		all = append(all, ids...)
		if !more {
			break
		}
		cursor = "&starting_after=" + ids[len(ids)-1]
	}
	seen := map[string]bool{}
	for i, id := range all {
		if seen[id] || i > 0 && id >= all[i-1] {
			t.Fatalf("keys not each once, newest first: %v", all)
		}
		seen[id] = true
	}
	if len(all) < 13 || all[0] != keyIDOf(t, e.srv, secret) {
		t.Fatalf("paged through %d keys starting with %v; want at least 13, the newest first", len(all), all)
	}
	if back, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/keys?limit=3&ending_before="+all[4]); strings.Join(back, ",") != strings.Join(all[1:4], ",") {
		t.Fatalf("ending_before %s gave %v, want %v", all[4], back, all[1:4])
	}
	if ids, _ := listIDs(t, e.srv, e.owner.TestKey, "/v1/keys?limit=50&agent_id="+e.agentID); len(ids) != 12 {
		t.Fatalf("agent_id lists %d keys, want the agent's 12", len(ids))
	}
	other := e.srv.NewOwner(t).TestKey
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/keys?starting_after="+all[0], other, nil, nil), 400, "invalid_request_error", "parameter_invalid", "starting_after")
	wantError(t, call(t, e.srv, http.MethodGet, "/v1/keys?limit=51", e.owner.TestKey, nil, nil), 400, "invalid_request_error", "parameter_invalid", "limit")
}
