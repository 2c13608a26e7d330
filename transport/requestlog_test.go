package transport

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// A handler's panic answers 500 with the error body and the request's id,
// logs the panic with its stack under that id, and leaves the server
// serving: the process does not end with every request in flight.
func TestAPanicAnswers500AndIsLogged(t *testing.T) {
	var logs bytes.Buffer
	s := NewServer(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h := s.wrap(func(*call) *apiError { panic("the encoder met a value it cannot write") })
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	ctx.Request.SetRequestURI("/v1/balance")
	h(&ctx)

	if got := ctx.Response.StatusCode(); got != fasthttp.StatusInternalServerError {
		t.Fatalf("status %d, want 500", got)
	}
	reqID := string(ctx.Response.Header.Peek("Request-Id"))
	if reqID == "" || string(ctx.Response.Header.Peek("Service-Version")) != APIVersion {
		t.Errorf("the 500 lacks Request-Id (%q) or Service-Version", reqID)
	}
	body := string(ctx.Response.Body())
	if !strings.Contains(body, `"code":"internal_error"`) || !strings.Contains(body, `"request_id":"`+reqID+`"`) {
		t.Errorf("body %s, want internal_error with request_id %s", body, reqID)
	}
	if strings.Contains(body, "encoder") {
		t.Errorf("the body tells the caller the panic's text: %s", body)
	}
	log := logs.String()
	for _, w := range []string{`msg="handler panicked"`, "request_id=" + reqID, "the encoder met a value", "stack=", `msg="request failed"`, "status=500"} {
		if !strings.Contains(log, w) {
			t.Errorf("the log lacks %q:\n%s", w, log)
		}
	}
}
