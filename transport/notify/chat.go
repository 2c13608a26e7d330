package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/egress"
)

// ChatTimeout bounds one webhook POST: a chat answers its webhooks at
// once, and a slow one must not hold a delivery slot.
const ChatTimeout = 5 * time.Second

// newChatClient is the webhook client: no redirects (a webhook that
// redirects is misconfigured, and following it would send the message
// somewhere the owner did not name), no kept-alive connections. It dials
// with d.
func newChatClient(d *net.Dialer) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true, TLSHandshakeTimeout: ChatTimeout}
	if d != nil {
		tr.DialContext = d.DialContext
	}
	return &http.Client{
		Timeout:   ChatTimeout,
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// chatEscape escapes the three characters Slack's message text treats as
// markup, so that text from outside shows as it is.
var chatEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// chatBody is the JSON of an incoming-webhook message: {"text": ...}.
func chatBody(m message) []byte {
	b, _ := json.Marshal(struct {
		Text string `json:"text"`
	}{chatEscape.Replace(m.subject + "\n\n" + m.text())})
	return b
}

// postChat sends one webhook message; a 2xx answer is delivered. A 4xx
// other than 408 and 429 is permanent (the webhook was removed or never
// existed), and so is a redirect.
func (s *Sender) postChat(ctx context.Context, client *http.Client, ch actors.NotificationChannel, body []byte) error {
	name := ch.ShownTarget() // never the secret part of the URL
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ch.Target, bytes.NewReader(body))
	if err != nil {
		return &actors.PermanentError{Err: fmt.Errorf("chat webhook %s: the URL cannot be used", name)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentpay-guard/"+actors.APIVersion)
	resp, err := client.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			// Retrying cannot help until the name resolves elsewhere.
			return &actors.PermanentError{Err: fmt.Errorf("chat webhook %s: %w", name, refused)}
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the whole URL
		}
		return fmt.Errorf("chat webhook %s: %w", name, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c >= 300 && c < 400:
		return &actors.PermanentError{Err: fmt.Errorf("chat webhook %s answered %d (a redirect); configure the final URL", name, c)}
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return &actors.PermanentError{Err: fmt.Errorf("chat webhook %s answered %d", name, c)}
	default:
		return fmt.Errorf("chat webhook %s answered %d", name, c)
	}
}
