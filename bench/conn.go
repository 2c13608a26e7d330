package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// loadConn is one keep-alive HTTP/1.1 connection of the load generator.
// It sends a request it is handed as bytes and reads one answer whose body
// has a Content-Length, which is all the service ever sends. A general
// client parses and builds far more per request, and the load generator
// shares its two cores with the service it measures: every microsecond it
// spends is one the service does not get.
type loadConn struct {
	addr    string
	timeout time.Duration
	// deadline is the read/write deadline in force on conn. It is moved
	// only when less than half the timeout is left, not per request:
	// setting it costs a clock read and a timer update each time.
	deadline time.Time
	conn     net.Conn
	r        *bufio.Reader
	body     []byte
	// mu guards conn's replacement and aborted: abort, called from
	// another goroutine, must close whichever connection is current, and
	// keep a dial that is under way from installing a new one.
	mu      sync.Mutex
	aborted bool
	// dialing ends a dial under way when the connection is aborted.
	dialing context.Context
	endDial context.CancelFunc
}

// errChunked: the service answers with Content-Length; anything else is a
// bug there, reported rather than guessed at.
var errChunked = errors.New("answer without Content-Length (chunked or close-delimited)")

// errAborted is the failure of a request on an aborted connection.
var errAborted = errors.New("request abandoned: the measured window closed or the run was interrupted")

func newLoadConn(addr string, timeout time.Duration) *loadConn {
	dialing, endDial := context.WithCancel(context.Background())
	return &loadConn{addr: addr, timeout: timeout, dialing: dialing, endDial: endDial}
}

// abort ends the request in flight at once, and every later one: the
// caller stops waiting for answers (the window closed, or the run was
// interrupted) and must not wait out the timeout of a server that no
// longer answers. Safe to call from any goroutine, more than once.
func (c *loadConn) abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aborted = true
	c.endDial()
	if c.conn != nil {
		// Closing, not a deadline in the past: do may move the deadline
		// forward right after, but cannot reopen a closed connection.
		_ = c.conn.Close()
	}
}

// dial opens the connection, unless the connection was aborted.
func (c *loadConn) dial() error {
	d := net.Dialer{Timeout: c.timeout}
	conn, err := d.DialContext(c.dialing, "tcp", c.addr)
	if err != nil {
		if c.dialing.Err() != nil {
			return errAborted
		}
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted {
		_ = conn.Close()
		return errAborted
	}
	c.conn = conn
	return nil
}

// do sends req (a whole HTTP/1.1 request) and returns the status and the
// body, which stays valid until the next call. now is the caller's clock
// reading for this request; the request gets at least half the timeout.
// Any failure closes the connection; the next call dials again.
func (c *loadConn) do(req []byte, now time.Time) (status int, body []byte, err error) {
	if c.conn == nil {
		if err := c.dial(); err != nil {
			return 0, nil, err
		}
		c.deadline = time.Time{}
		if c.r == nil {
			c.r = bufio.NewReaderSize(c.conn, 16<<10)
		} else {
			c.r.Reset(c.conn)
		}
	}
	if c.deadline.Sub(now) < c.timeout/2 {
		c.deadline = now.Add(c.timeout)
		if err := c.conn.SetDeadline(c.deadline); err != nil {
			return 0, nil, c.fail(err)
		}
	}
	if _, err := c.conn.Write(req); err != nil {
		return 0, nil, c.fail(err)
	}
	status, length, keep, err := c.readHead()
	if err != nil {
		return 0, nil, c.fail(err)
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		return 0, nil, c.fail(err)
	}
	if !keep {
		c.close()
	}
	return status, c.body, nil
}

// readHead reads the status line and the headers of an answer.
func (c *loadConn) readHead() (status, length int, keep bool, err error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, 0, false, fmt.Errorf("malformed status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, 0, false, fmt.Errorf("malformed status line %q", line)
	}
	length, keep = -1, true
	for {
		line, err = c.r.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, 0, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, 0, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, 0, false, errChunked
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	if length < 0 {
		return 0, 0, false, errChunked
	}
	return status, length, keep, nil
}

// fail closes the connection after a failed request. A failure caused by
// abort is reported as errAborted, not as what the closed socket said.
func (c *loadConn) fail(err error) error {
	c.mu.Lock()
	aborted := c.aborted
	c.mu.Unlock()
	c.close()
	if aborted {
		return errAborted
	}
	return err
}

func (c *loadConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// requestBuilder writes the HTTP/1.1 requests of a phase.
type requestBuilder struct {
	buf []byte
}

// start begins a request: request line, Host and Authorization.
func (b *requestBuilder) start(method, path, host, key string) {
	b.buf = append(b.buf[:0], method...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, path...)
	b.buf = append(b.buf, " HTTP/1.1\r\nHost: "...)
	b.buf = append(b.buf, host...)
	b.buf = append(b.buf, "\r\nUser-Agent: guard-bench\r\nAuthorization: Bearer "...)
	b.buf = append(b.buf, key...)
	b.buf = append(b.buf, "\r\n"...)
}

// header adds one header.
func (b *requestBuilder) header(name string, value []byte) {
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, ": "...)
	b.buf = append(b.buf, value...)
	b.buf = append(b.buf, "\r\n"...)
}

// finish ends the headers and appends the body, if any.
func (b *requestBuilder) finish(body []byte) []byte {
	if body != nil {
		b.buf = append(b.buf, "Content-Type: application/json\r\nContent-Length: "...)
		b.buf = strconv.AppendInt(b.buf, int64(len(body)), 10)
		b.buf = append(b.buf, "\r\n"...)
	}
	b.buf = append(b.buf, "\r\n"...)
	return append(b.buf, body...)
}
