package guardtest

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// MailServer is a real SMTP server (github.com/emersion/go-smtp) on a
// loopback port, started by the test, that keeps every message it
// accepts. The service under test reaches it through wire.Config.SMTPAddr.
type MailServer struct {
	// Addr is host:port, for wire.Config.SMTPAddr.
	Addr string
	// Mail receives every accepted message, in order.
	Mail chan Mail

	srv  *smtp.Server
	opts MailOptions
}

// Mail is one message as the server received it.
type Mail struct {
	From string
	To   []string
	// Data is the message exactly as sent after DATA (CRLF line endings).
	Data []byte
	// TLS is whether the session used STARTTLS; User is who authenticated.
	TLS  bool
	User string
}

// MailOptions adjust a MailServer.
type MailOptions struct {
	// Addr listens there instead of on a new port (a server that comes
	// back at an address that refused connections before).
	Addr string
	// TLS offers STARTTLS with this configuration.
	TLS *tls.Config
	// User and Password require AUTH PLAIN with these credentials.
	User, Password string
	// Refuse, when set, is asked at "rcpt" (with the recipient) and at
	// "data"; an error it returns is the server's answer (an
	// *smtp.SMTPError chooses the reply code).
	Refuse func(stage, value string) error
}

// StartMailServer serves SMTP until the test ends.
func StartMailServer(t testing.TB, o MailOptions) *MailServer {
	t.Helper()
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("guardtest: mail server: %v", err)
	}
	m := &MailServer{Addr: ln.Addr().String(), Mail: make(chan Mail, 100), opts: o}
	m.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &mailSession{m: m, mail: Mail{TLS: isTLS}}, nil
	}))
	m.srv.Domain = "mail.test"
	m.srv.TLSConfig = o.TLS
	m.srv.ReadTimeout = 10 * time.Second
	m.srv.WriteTimeout = 10 * time.Second
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = m.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = m.srv.Close()
		<-served
	})
	return m
}

// Next waits up to d for the next message; it fails the test when none
// comes.
func (m *MailServer) Next(t testing.TB, d time.Duration) Mail {
	t.Helper()
	select {
	case msg := <-m.Mail:
		return msg
	case <-time.After(d):
		t.Fatalf("guardtest: no e-mail arrived at %s within %v", m.Addr, d)
		return Mail{}
	}
}

type mailSession struct {
	m    *MailServer
	mail Mail
	auth bool
}

var _ smtp.AuthSession = (*mailSession)(nil)

func (s *mailSession) AuthMechanisms() []string {
	if s.m.opts.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *mailSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.m.opts.User || pass != s.m.opts.Password {
			return errors.New("invalid credentials")
		}
		s.auth, s.mail.User = true, user
		return nil
	}), nil
}

func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.m.opts.User != "" && !s.auth {
		return smtp.ErrAuthRequired
	}
	s.mail.From = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if f := s.m.opts.Refuse; f != nil {
		if err := f("rcpt", to); err != nil {
			return err
		}
	}
	s.mail.To = append(s.mail.To, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if f := s.m.opts.Refuse; f != nil {
		if err := f("data", ""); err != nil {
			return err
		}
	}
	msg := s.mail
	msg.Data = b
	s.m.Mail <- msg
	return nil
}

func (s *mailSession) Reset()        { s.mail = Mail{TLS: s.mail.TLS, User: s.mail.User} }
func (s *mailSession) Logout() error { return nil }

// ChatServer is an HTTP server on a loopback port standing in for a
// chat's incoming webhook: it keeps every request and answers with the
// status Answer chooses (200 when nil).
type ChatServer struct {
	// URL is the webhook URL, for a chat channel's target.
	URL string
	// Requests receives every request, in order.
	Requests chan ChatRequest

	srv    *httptest.Server
	mu     sync.Mutex
	n      int
	answer func(n int) int
}

// ChatRequest is one request the chat server received.
type ChatRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// StartChatServer serves until the test ends. answer gets the 1-based
// number of each request and returns the status to answer it with.
func StartChatServer(t testing.TB, answer func(n int) int) *ChatServer {
	t.Helper()
	c := &ChatServer{Requests: make(chan ChatRequest, 100), answer: answer}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.n++
		n := c.n
		c.mu.Unlock()
		status := http.StatusOK
		if c.answer != nil {
			status = c.answer(n)
		}
		c.Requests <- ChatRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	}))
	c.URL = c.srv.URL + "/services/T000/B000/webhook-secret-token"
	t.Cleanup(c.srv.Close)
	return c
}

// Count is how many requests arrived so far.
func (c *ChatServer) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Next waits up to d for the next request; it fails the test when none
// comes.
func (c *ChatServer) Next(t testing.TB, d time.Duration) ChatRequest {
	t.Helper()
	select {
	case r := <-c.Requests:
		return r
	case <-time.After(d):
		t.Fatalf("guardtest: no chat message arrived at %s within %v", c.URL, d)
		return ChatRequest{}
	}
}

// Quiesce waits until nothing moves in the service (System().Quiesce),
// failing the test after d: deliveries in flight have finished and retries
// wait on the clock.
func (s *Server) Quiesce(t testing.TB, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.System().Quiesce(ctx); err != nil {
		t.Fatalf("guardtest: quiesce: %v", err)
	}
}
