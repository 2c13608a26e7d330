package transport_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

// A spend's events reach the owner's endpoint in sequence, each body
// exactly as GET /v1/events lists it, signed with the endpoint's secret;
// retries that fall due together go in sequence too. An endpoint gets only
// the types it subscribes to, and only events of its own environment.
func TestWebhookDeliversSpendEventsInSequence(t *testing.T) {
	// The live receiver is on loopback, which live endpoints may name only
	// when the operator allows private targets.
	e := start(t, guardtest.WithConfig(func(c *wire.Config) { c.PrivateWebhookTargets = true }))
	spends := newReceiver(t, 200)
	flaky := newReceiver(t, 503)
	pauses := newReceiver(t, 204)
	liveAll := newReceiver(t, 200)
	ep := createEndpoint(t, e.srv, e.owner.TestKey, spends.url, "spend.*")
	flakyEP := createEndpoint(t, e.srv, e.owner.TestKey, flaky.url, "spend.*")
	createEndpoint(t, e.srv, e.owner.TestKey, pauses.url, "agent.paused", "agent.resumed")
	createEndpoint(t, e.srv, e.owner.LiveKey, liveAll.url, "*")

	created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/a"))   // settled
	created(t, e.srv, e.agentKey, spendBody("99.00", "api.vendor.com", "/b"))  // failed (practice magic amount)
	created(t, e.srv, e.agentKey, spendBody("2.00", "api.vendor.com", "/c"))   // settled
	created(t, e.srv, e.agentKey, spendBody("150.00", "api.vendor.com", "/d")) // declined (over per_spend_limit)
	quiesce(t, e.srv)

	want := listedEvents(t, e.srv, e.owner.TestKey, "/v1/events?type=spend.*&limit=50")
	if len(want) != 4 {
		t.Fatalf("%d spend events listed, want 4", len(want))
	}
	inSequence := func(rc *receiver, secret string) {
		t.Helper()
		last := 0.0
		for i, w := range want {
			h := rc.next(t)
			if !bytes.Equal(h.body, w) {
				t.Fatalf("delivery %d body\n%s\nGET /v1/events lists\n%s", i, h.body, w)
			}
			if h.seq() <= last {
				t.Fatalf("delivery %d has sequence %v after %v", i, h.seq(), last)
			}
			last = h.seq()
			if n, ok := signedBy(t, h.sig(), h.body, secret); n != 1 || !ok {
				t.Fatalf("delivery %d: Service-Signature %q (%d values) does not verify with the secret", i, h.sig(), n)
			}
			if ct := h.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		}
		rc.none(t, e.srv)
	}
	inSequence(spends, ep["secret"].(string))
	// The failing endpoint gets the first event only: the later ones wait
	// behind it, so that none arrives before an older one (a receiver
	// drops an event whose sequence is lower than one it applied, spec
	// 6.3), and an outage costs one failure per retry, not one per event.
	if h := flaky.next(t); !bytes.Equal(h.body, want[0]) {
		t.Fatalf("the failing endpoint's first attempt carried\n%s\nwant the first event", h.body)
	}
	flaky.none(t, e.srv)
	if got := getEndpoint(t, e.srv, e.owner.TestKey, flakyEP["id"].(string))["consecutive_failures"]; got != 1.0 {
		t.Fatalf("after its first refusal the endpoint counts %v failures, want 1", got)
	}
	flaky.status.Store(200)
	advanceClock(t, e, 60) // the first event's retry falls due; the others follow it
	inSequence(flaky, flakyEP["secret"].(string))
	pauses.none(t, e.srv)

	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/agents/"+e.agentID+"/pause", e.owner.TestKey, nil, nil), http.StatusOK)
	if h := pauses.next(t); h.typ() != "agent.paused" {
		t.Fatalf("the agent endpoint got %s", h.typ())
	}
	pauses.none(t, e.srv)
	spends.none(t, e.srv)
	liveAll.none(t, e.srv)
}

// An endpoint that does not answer holds up only itself: the others get
// their deliveries meanwhile. (Were the slow one holding them up, they
// would wait for its 5-second limit, and its attempt would fail.)
func TestWebhookSlowEndpointHoldsUpOnlyItself(t *testing.T) {
	e := start(t)
	release := make(chan struct{})
	defer close(release)
	slow := startReceiver(t, 200, release)
	fast := newReceiver(t, 200)
	createEndpoint(t, e.srv, e.owner.TestKey, slow.url, "spend.*")
	createEndpoint(t, e.srv, e.owner.TestKey, fast.url, "spend.*")
	created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/a"))
	created(t, e.srv, e.agentKey, spendBody("99.00", "api.vendor.com", "/b")) // failed (magic amount)
	if h := slow.next(t); h.typ() != "spend.settled" {
		t.Fatalf("slow endpoint first got %s", h.typ())
	}
	// The slow endpoint sits on its first delivery; the fast one gets both.
	if a, b := fast.next(t), fast.next(t); a.typ() != "spend.settled" || b.typ() != "spend.failed" {
		t.Fatalf("fast endpoint got %s, %s", a.typ(), b.typ())
	}
	release <- struct{}{}
	if h := slow.next(t); h.typ() != "spend.failed" {
		t.Fatalf("slow endpoint then got %s", h.typ())
	}
	// Its held attempt succeeded: nothing is retried.
	advanceClock(t, e, 3600)
	slow.none(t, e.srv)
	fast.none(t, e.srv)
}

// A failing endpoint is retried on the practice clock, on the documented
// schedule; a delivery is given up after 8 attempts; 20 consecutive
// failures pause the endpoint with webhook_endpoint.paused; an update
// re-enables it.
func TestWebhookRetriesOnPracticeClockAndPauses(t *testing.T) {
	e := start(t)
	chat := guardtest.StartChatServer(t, nil)
	addChannel(t, e.srv, e.owner.TestKey, "chat", chat.URL)
	rc := newReceiver(t, 500)
	ep := createEndpoint(t, e.srv, e.owner.TestKey, rc.url, "spend.settled")
	id := ep["id"].(string)

	d := sendTest(t, e.srv, e.owner.TestKey, id)
	if d["object"] != "webhook_delivery" || d["status"] != "pending" || d["attempts"] != 0.0 || d["webhook_endpoint_id"] != id {
		t.Fatalf("test delivery %s", mustJSONString(d))
	}
	first := rc.next(t)
	if first.typ() != "webhook.test" || first.id() != d["event_id"] {
		t.Fatalf("first attempt: %s", first)
	}
	if o := obj(t, obj(t, first.event, "data"), "object"); o["object"] != "webhook_test" || o["webhook_endpoint_id"] != id {
		t.Fatalf("test event object %v", o)
	}
	rc.none(t, e.srv)

	schedule := []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 8 * time.Hour, 8 * time.Hour}
	for i, wait := range schedule {
		advanceClock(t, e, int(wait/time.Second)-1)
		rc.none(t, e.srv) // not yet due
		advanceClock(t, e, 1)
		if h := rc.next(t); h.id() != first.id() || !bytes.Equal(h.body, first.body) {
			t.Fatalf("attempt %d carried %s", i+2, h)
		}
		rc.none(t, e.srv)
		if got := getEndpoint(t, e.srv, e.owner.TestKey, id)["consecutive_failures"]; got != float64(i+2) {
			t.Fatalf("after attempt %d consecutive_failures = %v", i+2, got)
		}
	}
	advanceClock(t, e, 48*3600) // 8 attempts: given up
	rc.none(t, e.srv)
	if g := getEndpoint(t, e.srv, e.owner.TestKey, id); g["status"] != "enabled" || g["consecutive_failures"] != 8.0 {
		t.Fatalf("after one delivery given up: %v %v", g["status"], g["consecutive_failures"])
	}

	// Twelve more failures make twenty in a row: a second delivery fails
	// its 8 attempts, then a third, which waited behind it, its first 4.
	second := sendTest(t, e.srv, e.owner.TestKey, id)
	third := sendTest(t, e.srv, e.owner.TestKey, id)
	attempt := func(n int, ev any) {
		t.Helper()
		if h := rc.next(t); h.typ() != "webhook.test" || h.id() != ev {
			t.Fatalf("failure %d: %s, want event %v", n, h, ev)
		}
	}
	attempt(9, second["event_id"])
	rc.none(t, e.srv)
	for i, wait := range schedule {
		advanceClock(t, e, int(wait/time.Second))
		attempt(10+i, second["event_id"])
		if i < len(schedule)-1 {
			rc.none(t, e.srv)
		}
	}
	// The second given up, the third is due since it was made.
	attempt(17, third["event_id"])
	rc.none(t, e.srv)
	for i, wait := range schedule[:3] {
		advanceClock(t, e, int(wait/time.Second))
		attempt(18+i, third["event_id"])
		rc.none(t, e.srv)
	}
	quiesce(t, e.srv)
	g := getEndpoint(t, e.srv, e.owner.TestKey, id)
	if g["status"] != "paused" || g["consecutive_failures"] != 20.0 || g["paused_at"] == nil {
		t.Fatalf("after 20 failures: %s", mustJSONString(g))
	}
	// The owner is told through the notification channel, once, with
	// what to do: the paused endpoint itself hears nothing more.
	alert := string(chat.Next(t, deliveryWait).Body)
	for _, want := range []string{"[practice] Webhook endpoint paused: " + id, "last 20 deliveries failed", rc.url, "GET /v1/events",
		`POST /v1/webhook_endpoints/` + id + ` with {\"status\":\"enabled\"}`} {
		if !strings.Contains(alert, want) {
			t.Errorf("the alert lacks %q:\n%s", want, alert)
		}
	}
	if n := chat.Count(); n != 1 {
		t.Errorf("the chat got %d messages, want the one alert", n)
	}
	paused := listedEvents(t, e.srv, e.owner.TestKey, "/v1/events?type=webhook_endpoint.paused")
	if len(paused) != 1 || !strings.Contains(string(paused[0]), `"id":"`+id+`"`) || !strings.Contains(string(paused[0]), `"status":"paused"`) ||
		strings.Contains(string(paused[0]), "whsec_") {
		t.Fatalf("webhook_endpoint.paused events: %s", paused)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id+"/test", e.owner.TestKey, nil, nil),
		409, "invalid_request_error", "state_conflict", "")
	advanceClock(t, e, 24*3600) // the pending retries were dropped with the pause
	rc.none(t, e.srv)

	rc.status.Store(200)
	up := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id, e.owner.TestKey, nil, `{"status":"enabled"}`)
	mustStatus(t, up, http.StatusOK)
	if up.Body["status"] != "enabled" || up.Body["consecutive_failures"] != 0.0 || up.Body["paused_at"] != nil {
		t.Fatalf("re-enabled: %s", up.Raw)
	}
	sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); h.typ() != "webhook.test" {
		t.Fatalf("after re-enabling: %s", h)
	}
	rc.none(t, e.srv)
}

// During a rotation deliveries carry two v1 values, the new secret's
// first; a receiver that knows only the new secret accepts them. The old
// secret stops signing at the end of the grace period.
func TestWebhookSecretRotation(t *testing.T) {
	e := start(t)
	rc := newReceiver(t, 200)
	ep := createEndpoint(t, e.srv, e.owner.TestKey, rc.url, "spend.settled")
	id, oldSecret := ep["id"].(string), ep["secret"].(string)

	sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); !oneSignature(t, h, oldSecret) {
		t.Fatalf("before rotation: %q", h.sig())
	}
	rot := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", e.owner.TestKey, nil, nil)
	mustStatus(t, rot, http.StatusOK)
	newSecret, _ := rot.Body["secret"].(string)
	if !whsecPattern.MatchString(newSecret) || newSecret == oldSecret || rot.Body["previous_secret_expires_at"] != "2026-10-02T12:00:00Z" {
		t.Fatalf("rotation answered %s", rot.Raw)
	}
	if strings.Contains(string(call(t, e.srv, http.MethodGet, "/v1/webhook_endpoints/"+id, e.owner.TestKey, nil, nil).Raw), "whsec_") {
		t.Fatal("GET shows a secret after rotation")
	}
	sendTest(t, e.srv, e.owner.TestKey, id)
	h := rc.next(t)
	if n, ok := signedBy(t, h.sig(), h.body, newSecret); n != 2 || !ok {
		t.Fatalf("during the overlap: %q does not carry two values one of which is the new secret's", h.sig())
	}
	if _, ok := signedBy(t, h.sig(), h.body, oldSecret); !ok {
		t.Fatalf("during the overlap the old secret does not verify %q", h.sig())
	}
	if v1 := strings.Split(h.sig(), ",")[1]; !strings.HasPrefix(v1, "v1=") || !oneSignature(t, hit{header: http.Header{"Service-Signature": {strings.Split(h.sig(), ",")[0] + "," + v1}}, body: h.body}, newSecret) {
		t.Fatalf("the first v1 value is not the new secret's: %q", h.sig())
	}

	// One overlap at a time: a second rotation with a grace would end the
	// first one's early, without a word. It is refused and changes
	// nothing.
	again := wantError(t, call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", e.owner.TestKey, nil, `{"grace_period_hours":24}`),
		409, "invalid_request_error", "state_conflict", "")
	if msg, _ := again["message"].(string); !strings.Contains(msg, "2026-10-02T12:00:00Z") || !strings.Contains(msg, "grace_period_hours 0") {
		t.Fatalf("the refused second rotation says %q", msg)
	}
	sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); func() bool { _, ok := signedBy(t, h.sig(), h.body, oldSecret); return !ok }() {
		t.Fatalf("after the refused rotation the old secret no longer signs: %q", h.sig())
	}

	advanceClock(t, e, 24*3600) // the overlap ends
	if g := getEndpoint(t, e.srv, e.owner.TestKey, id); g["previous_secret_expires_at"] != nil {
		t.Fatalf("after the overlap previous_secret_expires_at = %v", g["previous_secret_expires_at"])
	}
	sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); !oneSignature(t, h, newSecret) {
		t.Fatalf("after the overlap: %q", h.sig())
	}
	rot = call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", e.owner.TestKey, nil, `{"grace_period_hours":0}`)
	mustStatus(t, rot, http.StatusOK)
	sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); !oneSignature(t, h, rot.Body["secret"].(string)) {
		t.Fatalf("rotation without grace: %q", h.sig())
	}
}

// oneSignature reports a header with exactly one v1 value, made with secret.
func oneSignature(t *testing.T, h hit, secret string) bool {
	t.Helper()
	n, ok := signedBy(t, h.sig(), h.body, secret)
	return n == 1 && ok
}

// Re-delivery sends the same event again to the endpoints that subscribe
// to it; it is a practice control.
func TestWebhookRedeliver(t *testing.T) {
	e := start(t)
	rc := newReceiver(t, 200)
	other := newReceiver(t, 200)
	createEndpoint(t, e.srv, e.owner.TestKey, rc.url, "spend.settled")
	createEndpoint(t, e.srv, e.owner.TestKey, other.url, "agent.*")
	created(t, e.srv, e.agentKey, spendBody("1.00", "api.vendor.com", "/a"))
	h := rc.next(t)
	rc.none(t, e.srv)

	r := call(t, e.srv, http.MethodPost, "/v1/test/events/"+h.id()+"/redeliver", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	data := r.Body["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["event_id"] != h.id() {
		t.Fatalf("redeliver answered %s", r.Raw)
	}
	again := rc.next(t)
	if again.id() != h.id() || !bytes.Equal(again.body, h.body) {
		t.Fatalf("redelivered %s, first %s", again, h)
	}
	rc.none(t, e.srv)
	other.none(t, e.srv)

	// An event no endpoint takes: nothing queued.
	created(t, e.srv, e.agentKey, spendBody("99.00", "api.vendor.com", "/b")) // failed (magic amount)
	failed := listedEvents(t, e.srv, e.owner.TestKey, "/v1/events?type=spend.failed")
	if len(failed) != 1 {
		t.Fatalf("%d spend.failed events", len(failed))
	}
	r = call(t, e.srv, http.MethodPost, "/v1/test/events/"+idOf(t, failed[0])+"/redeliver", e.owner.TestKey, nil, `{}`)
	mustStatus(t, r, http.StatusOK)
	if data := r.Body["data"].([]any); len(data) != 0 {
		t.Fatalf("redeliver of an unsubscribed event queued %s", r.Raw)
	}
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/events/"+h.id()+"/redeliver", e.owner.LiveKey, nil, nil), 404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/events/evt_00000000000000000000000000000000/redeliver", e.owner.TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/events/"+h.id()+"/redeliver", e.srv.NewOwner(t).TestKey, nil, nil),
		404, "not_found_error", "resource_missing", "")
	wantError(t, call(t, e.srv, http.MethodPost, "/v1/test/events/"+h.id()+"/redeliver", e.agentKey, nil, nil), 403, "permission_error", "key_kind_not_allowed", "")
	rc.none(t, e.srv)

	// Past the 30 days GET /v1/events keeps, on the practice clock, the
	// event is gone for redelivery too.
	advanceClock(t, e, 30*24*3600+60)
	r = call(t, e.srv, http.MethodPost, "/v1/test/events/"+h.id()+"/redeliver", e.owner.TestKey, nil, nil)
	wantError(t, r, 404, "not_found_error", "resource_missing", "")
	if msg, _ := errorOf(t, r)["message"].(string); !strings.Contains(msg, "kept 30 days") {
		t.Errorf("redelivering an event past retention: %q", msg)
	}
	rc.none(t, e.srv)
}

func idOf(t *testing.T, raw []byte) string {
	t.Helper()
	i := bytes.Index(raw, []byte(`"id":"`))
	if i < 0 {
		t.Fatalf("no id in %s", raw)
	}
	rest := raw[i+6:]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// Pending deliveries survive a restart: the new process loads them and
// sends them when due, and events delivered before the stop are not sent
// again.
func TestWebhookDeliveriesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := guardtest.NewFakeClock(epoch)
	opts := func(c *guardtest.FakeClock) []guardtest.Option {
		return []guardtest.Option{guardtest.WithClock(c), guardtest.WithConfig(func(cfg *wire.Config) {
			cfg.Data = dir
			cfg.ConsoleURL = consoleURL
		})}
	}
	first := guardtest.Start(t, opts(clock)...)
	owner := first.NewOwner(t)
	_, agentKey := first.NewAgent(t, owner.TestKey, testPolicy)
	rc := newReceiver(t, 200)
	id := createEndpoint(t, first, owner.TestKey, rc.url, "spend.*", "webhook.test")["id"].(string)
	created(t, first, agentKey, spendBody("1.00", "api.vendor.com", "/a"))
	if h := rc.next(t); h.typ() != "spend.settled" {
		t.Fatalf("delivered %s", h.typ())
	}
	rc.none(t, first)

	rc.status.Store(503)
	d := sendTest(t, first, owner.TestKey, id)
	if h := rc.next(t); h.id() != d["event_id"] {
		t.Fatalf("first attempt %s", h)
	}
	rc.none(t, first)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := first.Service().Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	rc.status.Store(200)
	second := guardtest.Start(t, opts(guardtest.NewFakeClock(clock.Now()))...)
	e := &env{srv: second, owner: owner}
	rc.none(t, second) // the retry is due in a minute
	advanceClock(t, e, 60)
	if h := rc.next(t); h.id() != d["event_id"] {
		t.Fatalf("after the restart: %s", h)
	}
	rc.none(t, second)
	if g := getEndpoint(t, second, owner.TestKey, id); g["consecutive_failures"] != 0.0 {
		t.Fatalf("after the delivery: consecutive_failures %v", g["consecutive_failures"])
	}
}

// A practice reset sets the clock back. A delivery still pending for an
// event the reset removed is dropped, not left to wait on the old clock
// (where its retry could be days ahead) in front of the endpoint's new
// events; and a rotated secret's grace keeps only the time it had left.
func TestWebhookDeliveriesAfterPracticeReset(t *testing.T) {
	e := start(t)
	rc := newReceiver(t, 500)
	ep := createEndpoint(t, e.srv, e.owner.TestKey, rc.url, "spend.settled")
	id := ep["id"].(string)
	advanceClock(t, e, 2*24*3600)
	rot := call(t, e.srv, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", e.owner.TestKey, nil, `{"grace_period_hours":1}`)
	mustStatus(t, rot, http.StatusOK)
	secret := rot.Body["secret"].(string)
	old := sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); h.id() != old["event_id"] {
		t.Fatalf("first attempt carried %s", h)
	}
	rc.none(t, e.srv) // refused: its retry is a minute ahead on the advanced clock
	rc.status.Store(200)
	mustStatus(t, call(t, e.srv, http.MethodPost, "/v1/test/reset", e.owner.TestKey, nil, nil), http.StatusOK)

	fresh := sendTest(t, e.srv, e.owner.TestKey, id)
	h := rc.next(t)
	if h.id() != fresh["event_id"] {
		t.Fatalf("after the reset the endpoint got %s, want the new event %v", h, fresh["event_id"])
	}
	rc.none(t, e.srv) // the removed event is not sent again
	if n, ok := signedBy(t, h.sig(), h.body, secret); n != 2 || !ok {
		t.Fatalf("within the hour of grace: %q, want two values", h.sig())
	}
	if g := getEndpoint(t, e.srv, e.owner.TestKey, id); g["consecutive_failures"] != 0.0 {
		t.Fatalf("after a delivery went through: consecutive_failures %v", g["consecutive_failures"])
	}
	advanceClock(t, e, 3600) // the hour of grace is over on the reset clock
	sendTest(t, e.srv, e.owner.TestKey, id)
	if h := rc.next(t); !oneSignature(t, h, secret) {
		t.Fatalf("after the grace: %q, want the new secret's alone", h.sig())
	}
}
