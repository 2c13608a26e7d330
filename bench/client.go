package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// newClient is a keep-alive client with one connection per worker.
func newClient(addr string, conns int) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                addr,
		Name:                "guard-bench",
		MaxConns:            conns,
		MaxIdleConnDuration: time.Minute,
		ReadTimeout:         time.Minute,
		WriteTimeout:        time.Minute,
		MaxConnWaitTimeout:  time.Minute,
	}
}

// apiCallError is a non-2xx answer of a setup call.
type apiCallError struct {
	method, path string
	status       int
	code         string
	message      string
	retryAfter   time.Duration // of a 429; 0 when the answer gave none
}

func (e *apiCallError) Error() string {
	s := fmt.Sprintf("%s %s: HTTP %d %s: %s", e.method, e.path, e.status, e.code, e.message)
	if e.status == fasthttp.StatusTooManyRequests {
		s += " (a server started for a load test with -rate-limits=false, or GUARD_RATE_LIMITS=false, does not refuse the bench's setup)"
	}
	return s
}

// isCode reports whether err is an answer of the service with that error
// code.
func isCode(err error, code string) bool {
	var ae *apiCallError
	return errors.As(err, &ae) && ae.code == code
}

// Setup calls wait out a 429 whose Retry-After is at most maxSetupWait,
// up to maxSetupRetries times: a burst of administration writes clears in
// seconds, while the daily limit on new keys would hold the run for most
// of an hour, and is better reported at once.
const (
	maxSetupWait    = 30 * time.Second
	maxSetupRetries = 5
	setupCallLimit  = 30 * time.Second
)

// callJSON sends one setup request and decodes a 2xx answer into out. It
// gives up when ctx ends, and each attempt after setupCallLimit.
func callJSON(ctx context.Context, c *fasthttp.HostClient, method, path, key string, body any, out any) error {
	for attempt := 0; ; attempt++ {
		err := callOnce(ctx, c, method, path, key, body, out)
		var ae *apiCallError
		if !errors.As(err, &ae) || ae.status != fasthttp.StatusTooManyRequests ||
			ae.retryAfter <= 0 || ae.retryAfter > maxSetupWait || attempt == maxSetupRetries {
			return err
		}
		wait := time.NewTimer(ae.retryAfter)
		select {
		case <-ctx.Done():
			wait.Stop()
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		case <-wait.C:
		}
	}
}

func callOnce(ctx context.Context, c *fasthttp.HostClient, method, path, key string, body any, out any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	// Not from the pools: a call abandoned when ctx ends leaves them to
	// the goroutine still sending, which must not find them reused.
	req, resp := &fasthttp.Request{}, &fasthttp.Response{}
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + c.Addr + path)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req.Header.SetContentType("application/json")
		req.SetBody(b)
	}
	deadline := time.Now().Add(setupCallLimit)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := doUntilDone(ctx, c, req, resp, deadline); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if sc := resp.StatusCode(); sc < 200 || sc > 299 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(resp.Body(), &e)
		ae := &apiCallError{method: method, path: path, status: sc, code: e.Error.Code, message: e.Error.Message}
		if secs, err := strconv.Atoi(string(resp.Header.Peek("Retry-After"))); err == nil && secs > 0 {
			ae.retryAfter = time.Duration(secs) * time.Second
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body(), out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// doUntilDone sends req and waits for its answer until the deadline, or
// until ctx ends: an interrupt must not wait out a frozen server's
// deadline. The abandoned request ends on its own at the deadline.
func doUntilDone(ctx context.Context, c *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	done := make(chan error, 1)
	go func() { done <- c.DoDeadline(req, resp, deadline) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
