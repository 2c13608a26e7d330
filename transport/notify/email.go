package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/agentpay/guard/actors"
)

// SMTPConfig is the operator's mail server.
type SMTPConfig struct {
	// Addr is host:port of the server (a submission port, 587, usually).
	Addr string
	// From is the sender, "guard@example.com" or "Guard <guard@example.com>".
	From string
	// Username and Password authenticate (AUTH PLAIN) when Username is set;
	// they are sent only over TLS or to a server on this machine.
	Username string
	Password string
	// RequireTLS refuses to send when the server does not offer STARTTLS.
	// Without it STARTTLS is used whenever offered.
	RequireTLS bool
	// TLSConfig is the TLS client configuration for STARTTLS; nil verifies
	// the server against the system's roots. ServerName defaults to the
	// host of Addr.
	TLSConfig *tls.Config
	// HelloName is the name given in EHLO; "localhost" when empty.
	HelloName string
}

// Validate reports the first bad field.
func (c *SMTPConfig) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("smtp address %q must be host:port, like mail.example.com:587", c.Addr)
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("smtp sender %q must be an e-mail address like guard@example.com: %v", c.From, err)
	}
	if (c.Username == "") != (c.Password == "") {
		return errors.New("smtp username and password go together: set both or neither")
	}
	return nil
}

// dialTimeout bounds the TCP connection to the mail server; the whole
// exchange is bounded by the context of Deliver.
const dialTimeout = 10 * time.Second

// mailMessage renders the notice as an RFC 5322 message: CRLF line
// endings, a quoted-printable UTF-8 body, and the headers a mail server
// and a mail client expect.
func mailMessage(m message, from *mail.Address, to string, now time.Time, messageID string) []byte {
	var b bytes.Buffer
	h := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	h("From", from.String())
	h("To", to)
	h("Subject", mime.QEncoding.Encode("utf-8", m.subject))
	h("Date", now.Format(time.RFC1123Z))
	h("Message-ID", "<"+messageID+">")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	// An automatic message: no out-of-office replies to it (RFC 3834).
	h("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(m.text())) // "\n" becomes CRLF
	_ = qp.Close()
	return b.Bytes()
}

// sendMail runs one SMTP exchange. Replies in the 5xx range are permanent
// (*actors.PermanentError); anything else may pass on a retry.
func (s *Sender) sendMail(ctx context.Context, to string, msg []byte) error {
	err := s.smtpExchange(ctx, to, msg)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("smtp %s: %w", s.smtp.Addr, err)
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return &actors.PermanentError{Err: err}
	}
	return err
}

func (s *Sender) smtpExchange(ctx context.Context, to string, msg []byte) error {
	cfg := s.smtp
	host, _, _ := net.SplitHostPort(cfg.Addr)
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// net/smtp knows no context: closing the connection ends a stalled
	// exchange when the service stops.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	defer c.Close()
	hello := cfg.HelloName
	if hello == "" {
		hello = "localhost"
	}
	if err := c.Hello(hello); err != nil {
		return err
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		tc := &tls.Config{}
		if cfg.TLSConfig != nil {
			tc = cfg.TLSConfig.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = host
		}
		if tc.MinVersion == 0 {
			tc.MinVersion = tls.VersionTLS12
		}
		if err := c.StartTLS(tc); err != nil {
			return fmt.Errorf("STARTTLS: %w", err)
		}
	} else if cfg.RequireTLS {
		return errors.New("the server does not offer STARTTLS and TLS is required (smtp_require_tls); nothing was sent")
	}
	if cfg.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("the server offers no AUTH but a username is configured; nothing was sent")
		}
		if err := c.Auth(smtp.PlainAuth("", cfg.Username, cfg.Password, host)); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	// The message is accepted once DATA is answered; a failing QUIT does
	// not unsend it.
	_ = c.Quit()
	return nil
}

// messageID is a unique Message-ID for one notice through one channel.
func messageID(n actors.ApprovalNotice, linkID string, from *mail.Address) string {
	return n.ApprovalID + "." + n.Channel.ID + "." + linkID + "@" + mailDomain(from)
}

// mailDomain is the domain of the sender's address, for Message-IDs.
func mailDomain(from *mail.Address) string {
	if i := strings.LastIndexByte(from.Address, '@'); i >= 0 && i < len(from.Address)-1 {
		return from.Address[i+1:]
	}
	return "guard.invalid"
}
