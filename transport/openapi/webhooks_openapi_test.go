package openapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentpay/guard/actors"
)

// exerciseWebhooks calls every webhook operation with a success and a
// failure, for TestServerMatchesDocument. It works for an owner of its
// own, whose keys have their whole allowance of administration writes and
// practice controls left (the service runs with the limits of spec 8.1).
func exerciseWebhooks(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	oc, err := h.sys.CreateOwner(ctx, "Webhook Owner", "webhooks@guard.test", "")
	if err != nil {
		t.Fatal(err)
	}
	owner, liveOwner := oc.Keys[actors.EnvTest], oc.Keys[actors.EnvLive]
	ag := h.want(h.do("POST", "/v1/agents", owner, nil, `{"name":"hooked"}`), 201, "")
	agent := h.want(h.do("POST", "/v1/agents/"+ag.str("id")+"/keys", owner, nil, ""), 201, "").str("secret")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(receiver.Close)
	const path = "/v1/webhook_endpoints"
	ep := h.want(h.do("POST", path, owner, nil, `{"url":"`+receiver.URL+`","enabled_events":["spend.*","webhook_endpoint.paused"]}`), 201, "")
	id := ep.str("id")
	h.want(h.do("POST", path, liveOwner, nil, `{"url":"https://hooks.example.com/live","enabled_events":["*"]}`), 201, "")
	h.want(h.do("POST", path, owner, nil, `{"url":"http://hooks.example.com","enabled_events":["*"]}`), 400, "parameter_invalid")
	h.want(h.do("POST", path, owner, nil, `{"url":"https://hooks.example.com","enabled_events":["spend.nothing"]}`), 400, "parameter_invalid")
	h.want(h.do("POST", path, owner, nil, `{"url":"https://hooks.example.com"}`), 400, "parameter_missing")
	h.want(h.do("POST", path, agent, nil, `{"url":"https://hooks.example.com","enabled_events":["*"]}`), 403, "key_kind_not_allowed")
	for range 8 { // with the live one, the owner's ten
		h.want(h.do("POST", path, owner, nil, `{"url":"https://hooks.example.com/more","enabled_events":["*"]}`), 201, "")
	}
	h.want(h.do("POST", path, owner, nil, `{"url":"https://hooks.example.com/one-too-many","enabled_events":["*"]}`), 409, "quota_exceeded")

	h.want(h.do("GET", path, owner, nil, ""), 200, "")
	h.want(h.do("GET", path+"?limit=5", owner, nil, ""), 400, "parameter_unknown")
	h.want(h.do("GET", path, agent, nil, ""), 403, "key_kind_not_allowed")
	h.want(h.do("GET", path+"/"+id, owner, nil, ""), 200, "")
	h.want(h.do("GET", path+"/we_00000000000000000000000000000000", owner, nil, ""), 404, "resource_missing")
	h.want(h.do("GET", path+"/"+id, liveOwner, nil, ""), 404, "resource_missing")

	h.want(h.do("POST", path+"/"+id, owner, nil, `{"enabled_events":["*"],"url":"`+receiver.URL+`/v2"}`), 200, "")
	h.want(h.do("POST", path+"/"+id, owner, nil, `{"status":"off"}`), 400, "parameter_invalid")
	h.want(h.do("POST", path+"/"+id, owner, nil, `{}`), 400, "parameter_missing")
	h.want(h.do("POST", path+"/"+id, agent, nil, `{"status":"paused"}`), 403, "key_kind_not_allowed")

	rot := h.want(h.do("POST", path+"/"+id+"/rotate_secret", owner, nil, ""), 200, "")
	if rot.str("secret") == ep.str("secret") || rot.str("secret") == "" {
		t.Errorf("rotation kept the secret")
	}
	h.want(h.do("POST", path+"/"+id+"/rotate_secret", owner, nil, `{"grace_period_hours":2}`), 409, "state_conflict")
	h.want(h.do("POST", path+"/"+id+"/rotate_secret", owner, nil, `{"grace_period_hours":0}`), 200, "")
	h.want(h.do("POST", path+"/"+id+"/rotate_secret", owner, nil, `{"grace_period_hours":2}`), 200, "")
	h.want(h.do("POST", path+"/"+id+"/rotate_secret", owner, nil, `{"grace_period_hours":-1}`), 400, "parameter_invalid")
	h.want(h.do("POST", path+"/we_00000000000000000000000000000000/rotate_secret", owner, nil, ""), 404, "resource_missing")

	test := h.want(h.do("POST", path+"/"+id+"/test", owner, nil, ""), 200, "")
	h.want(h.do("POST", path+"/"+id+"/test", owner, nil, `{}`), 200, "")
	h.want(h.do("POST", path+"/"+id+"/test", owner, nil, `{"type":"spend.settled"}`), 400, "parameter_unknown")
	h.want(h.do("POST", path+"/we_00000000000000000000000000000000/test", owner, nil, ""), 404, "resource_missing")

	redeliver := "/v1/test/events/" + test.str("event_id") + "/redeliver"
	h.want(h.do("POST", redeliver, owner, nil, ""), 200, "")
	h.want(h.do("POST", redeliver, liveOwner, nil, ""), 404, "resource_missing")
	h.want(h.do("POST", "/v1/test/events/evt_00000000000000000000000000000000/redeliver", owner, nil, ""), 404, "resource_missing")
	h.want(h.do("POST", redeliver, agent, nil, ""), 403, "key_kind_not_allowed")

	h.want(h.do("POST", path+"/"+id, owner, nil, `{"status":"paused"}`), 200, "")
	h.want(h.do("POST", path+"/"+id+"/test", owner, nil, ""), 409, "state_conflict")
	h.want(h.do("GET", "/v1/events?type=webhook*", owner, nil, ""), 200, "")
	h.want(h.do("DELETE", path+"/"+id, owner, nil, ""), 200, "")
	h.want(h.do("DELETE", path+"/"+id, owner, nil, ""), 404, "resource_missing")
}
