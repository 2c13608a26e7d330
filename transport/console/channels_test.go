package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentpay/guard/internal/guardtest"
)

// A channel an owner key adds waits on the channels page, and only the
// signed-in owner confirms or removes it, with the form's token.
func TestChannelsAreConfirmedInTheConsole(t *testing.T) {
	srv := guardtest.Start(t)
	o := newOwner(t, srv)
	chat := guardtest.StartChatServer(t, nil)
	r := srv.Do(t, http.MethodPost, "/v1/notification_channels", o.testKey, nil, map[string]string{"type": "chat", "target": chat.URL})
	if r.Status != http.StatusCreated || r.Body["status"] != "pending_confirmation" {
		t.Fatalf("adding a channel: %d %s", r.Status, r.Raw)
	}
	id := r.Body["id"].(string)
	read := func() map[string]any {
		t.Helper()
		return srv.Do(t, http.MethodGet, "/v1/notification_channels/"+id, o.testKey, nil, nil).Body
	}

	// Not signed in: the page sends to sign-in, and a confirmation is refused.
	anon := newClient(t, srv)
	if p := anon.get("/console/channels"); p.status != http.StatusSeeOther || !strings.Contains(p.location(), "/console/signin") {
		t.Fatalf("channels page signed out: %d %q", p.status, p.location())
	}
	if p := anon.post("/console/channels/"+id+"/confirm", url.Values{}, ""); p.status != http.StatusForbidden {
		t.Fatalf("confirmation signed out: %d", p.status)
	}

	c := newClient(t, srv)
	token := c.mustSignIn(o)
	p := c.get("/console/channels")
	for _, want := range []string{id, "waits for your confirmation", "1 channel waits", "/console/channels/" + id + "/confirm"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the channels page lacks %q:\n%s", want, p.body)
		}
	}
	if strings.Contains(p.body, "webhook-secret-token") {
		t.Fatal("the channels page shows the webhook's secret part")
	}
	if p := c.post("/console/channels/"+id+"/confirm", url.Values{}, ""); p.status != http.StatusForbidden || read()["status"] != "pending_confirmation" {
		t.Fatalf("confirmation without the form token: %d, channel %v", p.status, read()["status"])
	}
	if p := c.post("/console/channels/"+id+"/confirm", url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther ||
		!strings.HasSuffix(p.location(), "/channels?done=confirm") {
		t.Fatalf("confirmation: %d %q\n%s", p.status, p.location(), p.body)
	}
	if ch := read(); ch["status"] != "active" || ch["confirmed_at"] == nil {
		t.Fatalf("after the confirmation the channel reads %v", ch)
	}
	if p := c.get("/console/channels?done=confirm"); !strings.Contains(p.body, "The channel is confirmed") || strings.Contains(p.body, "waits for your confirmation") {
		t.Fatalf("the page after the confirmation:\n%s", p.body)
	}

	// Another owner's channel is not found; this owner's is removed.
	other := newOwner(t, srv)
	otherCh := srv.Do(t, http.MethodPost, "/v1/notification_channels", other.testKey, nil, map[string]string{"type": "chat", "target": chat.URL + "2"})
	if p := c.post("/console/channels/"+otherCh.Body["id"].(string)+"/confirm", url.Values{"csrf": {token}}, ""); p.status != http.StatusNotFound {
		t.Fatalf("confirming another owner's channel: %d", p.status)
	}
	if p := c.post("/console/channels/"+id+"/remove", url.Values{"csrf": {token}}, ""); p.status != http.StatusSeeOther {
		t.Fatalf("removal: %d\n%s", p.status, p.body)
	}
	if r := srv.Do(t, http.MethodGet, "/v1/notification_channels/"+id, o.testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("a removed channel reads %d", r.Status)
	}
}
