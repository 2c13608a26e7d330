package bench

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// answerer is a loopback server that reads one request per answer and
// writes the answers given, in order, each on the connection it is on
// ("" closes the connection instead of answering).
func answerer(t *testing.T, answers ...string) (addr string, requests chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	requests = make(chan string, len(answers))
	go func() {
		next := 0
		for next < len(answers) {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(conn)
			for next < len(answers) {
				var head strings.Builder
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						_ = conn.Close()
						return
					}
					head.WriteString(line)
					if line == "\r\n" {
						break
					}
				}
				requests <- head.String()
				a := answers[next]
				next++
				if a == "" {
					break
				}
				if _, err := conn.Write([]byte(a)); err != nil {
					break
				}
				if strings.Contains(a, "Connection: close") {
					break
				}
			}
			_ = conn.Close()
		}
	}()
	return ln.Addr().String(), requests
}

func TestLoadConnReadsAnswersAndKeepsTheConnection(t *testing.T) {
	addr, requests := answerer(t,
		"HTTP/1.1 201 Created\r\ncontent-length: 11\r\nRequest-Id: req_1\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 2\r\nRetry-After: 1\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext",
	)
	c := newLoadConn(addr, 5*time.Second)
	defer c.close()
	var b requestBuilder
	b.start("GET", "/v1/balance", addr, "svc_test_agent_x")
	req := b.finish(nil)
	want := []struct {
		status int
		body   string
	}{{201, `{"ok":true}`}, {429, `{}`}, {200, ``}, {200, `next`}}
	for i, w := range want {
		status, body, err := c.do(req, time.Now())
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if status != w.status || string(body) != w.body {
			t.Fatalf("answer %d: %d %q, want %d %q", i, status, body, w.status, w.body)
		}
	}
	first := <-requests
	if !strings.HasPrefix(first, "GET /v1/balance HTTP/1.1\r\nHost: "+addr+"\r\n") ||
		!strings.Contains(first, "\r\nAuthorization: Bearer svc_test_agent_x\r\n") {
		t.Fatalf("request as sent:\n%s", first)
	}
}

func TestLoadConnRefusesAnswersWithoutLength(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"SPDY/3 200 OK\r\n\r\n",
		"", // the server hangs up without answering
	} {
		addr, _ := answerer(t, answer)
		c := newLoadConn(addr, 5*time.Second)
		var b requestBuilder
		b.start("POST", "/v1/spends/check", addr, "k")
		if status, body, err := c.do(b.finish([]byte(`{}`)), time.Now()); err == nil {
			t.Errorf("answer %q: read as %d %q, want an error", answer, status, body)
		}
		if c.conn != nil {
			t.Errorf("answer %q: the connection stays open after a failure", answer)
		}
	}
}

func TestRequestBuilderSetsLengthOfBody(t *testing.T) {
	var b requestBuilder
	b.start("POST", "/v1/spends", "h:1", "key")
	b.header("Idempotency-Key", []byte("run-1-2"))
	got := string(b.finish([]byte(`{"amount":"0.50"}`)))
	want := "POST /v1/spends HTTP/1.1\r\nHost: h:1\r\nUser-Agent: guard-bench\r\nAuthorization: Bearer key\r\n" +
		"Idempotency-Key: run-1-2\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"amount\":\"0.50\"}"
	if got != want {
		t.Fatalf("request:\n%q\nwant\n%q", got, want)
	}
}

func TestLoadConnMovesItsDeadlineOnlyWhenHalfIsLeft(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
	addr, _ := answerer(t, ok, ok, ok)
	const timeout = 10 * time.Second
	c := newLoadConn(addr, timeout)
	defer c.close()
	var b requestBuilder
	b.start("GET", "/v1/balance", addr, "k")
	req := b.finish(nil)
	t0 := time.Now()
	for i, step := range []struct {
		now  time.Time
		want time.Time
	}{
		{t0, t0.Add(timeout)},                              // a new connection gets one
		{t0.Add(timeout / 4), t0.Add(timeout)},             // three quarters left: kept
		{t0.Add(timeout * 3 / 4), t0.Add(timeout * 7 / 4)}, // a quarter left: moved
	} {
		if _, _, err := c.do(req, step.now); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !c.deadline.Equal(step.want) {
			t.Fatalf("request %d: deadline %v after start, want %v", i, c.deadline.Sub(t0), step.want.Sub(t0))
		}
	}
}

func TestLoadConnGivesUpOnASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			accepted <- conn // held open, never answered
		}
	}()
	c := newLoadConn(ln.Addr().String(), 200*time.Millisecond)
	var b requestBuilder
	b.start("GET", "/v1/balance", ln.Addr().String(), "k")
	_, _, err = c.do(b.finish(nil), time.Now())
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("silent server: %v, want a timeout", err)
	}
	if c.conn != nil {
		t.Fatal("the connection stays open after a timeout")
	}
	_ = (<-accepted).Close()
}
