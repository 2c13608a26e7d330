package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type seen struct {
	header http.Header
	body   []byte
}

func TestSenderSignsAndClassifiesAnswers(t *testing.T) {
	got := make(chan seen, 8)
	status := make(chan int, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Clone(), b}
		code := <-status
		if code == http.StatusFound {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	s := webhook.NewSender(webhook.Options{})
	defer s.Close()
	body := []byte(vectorBody)
	for _, tc := range []struct {
		answer int
		ok     bool
	}{{200, true}, {204, true}, {299, true}, {302, false}, {400, false}, {500, false}} {
		status <- tc.answer
		res := s.Send(context.Background(), actors.WebhookRequest{URL: srv.URL + "/hook", Body: body,
			Secrets: []string{"whsec_test_secret", "whsec_old_secret"}, Timestamp: time.Unix(vectorT, 0)})
		if res.Status != tc.answer || res.OK() != tc.ok {
			t.Fatalf("answer %d: result %+v, OK %v", tc.answer, res, res.OK())
		}
		r := <-got
		if string(r.body) != vectorBody {
			t.Fatalf("body %q", r.body)
		}
		if h := r.header.Get("Service-Signature"); h != "t=1790000000,v1="+vectorNew+",v1="+vectorOld {
			t.Fatalf("Service-Signature %q", h)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
	}
}

// An endpoint that does not answer within the timeout fails the attempt.
func TestSenderTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s := webhook.NewSender(webhook.Options{Timeout: 50 * time.Millisecond})
	defer s.Close()
	res := s.Send(context.Background(), actors.WebhookRequest{URL: srv.URL, Body: []byte(`{}`), Secrets: []string{"whsec_x"}, Timestamp: time.Now()})
	if res.OK() || res.Status != 0 || res.Err == "" {
		t.Fatalf("a silent endpoint gave %+v", res)
	}
}

func TestSenderUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s := webhook.NewSender(webhook.Options{})
	defer s.Close()
	if res := s.Send(context.Background(), actors.WebhookRequest{URL: url, Body: []byte(`{}`), Secrets: []string{"whsec_x"}}); res.OK() || res.Err == "" {
		t.Fatalf("a closed port gave %+v", res)
	}
}

// A live delivery connects only to public addresses: a receiver on
// loopback is refused before any byte is sent, with an error that says
// why. Practice deliveries reach it, and so do live ones when the
// operator allows private targets.
func TestLiveDeliveriesGoOnlyToPublicAddresses(t *testing.T) {
	hits := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	send := func(s *webhook.Sender, live bool) actors.WebhookResult {
		return s.Send(context.Background(), actors.WebhookRequest{URL: srv.URL + "/hook", Body: []byte(`{}`),
			Secrets: []string{"whsec_x"}, Timestamp: time.Now(), Livemode: live})
	}
	guarded := webhook.NewSender(webhook.Options{})
	defer guarded.Close()
	if res := send(guarded, true); res.OK() || !strings.Contains(res.Err, "not public") {
		t.Fatalf("live delivery to loopback: %+v, want a refusal naming the address as not public", res)
	}
	select {
	case <-hits:
		t.Fatal("the refused live delivery reached the receiver")
	default:
	}
	if res := send(guarded, false); res.Status != http.StatusNoContent {
		t.Fatalf("practice delivery to loopback: %+v, want 204", res)
	}
	open := webhook.NewSender(webhook.Options{PrivateLiveTargets: true})
	defer open.Close()
	if res := send(open, true); res.Status != http.StatusNoContent {
		t.Fatalf("live delivery with private targets allowed: %+v, want 204", res)
	}
	if len(hits) != 2 {
		t.Fatalf("%d deliveries reached the receiver, want 2", len(hits))
	}
}
