package bench

import (
	"encoding/json"
	"fmt"
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
}

func (e *apiCallError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.method, e.path, e.status, e.code, e.message)
}

// callJSON sends one setup request and decodes a 2xx answer into out.
func callJSON(c *fasthttp.HostClient, method, path, key string, body any, out any) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
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
	if err := c.DoTimeout(req, resp, 30*time.Second); err != nil {
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
		return &apiCallError{method: method, path: path, status: sc, code: e.Error.Code, message: e.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body(), out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}
