package main

// The operator commands (agents, keys, policy, receipts) talk to a running server
// over its REST API with an owner key. This file holds what they share:
// the group dispatch, the common flags, the HTTP client and the output
// helpers. Each group lives in its own cli_*.go file.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

const (
	defaultServer = "http://127.0.0.1:8080"
	// requestTimeout bounds each request, from dial to the last byte read.
	requestTimeout = 30 * time.Second
	// maxResponse bounds the body read from the server.
	maxResponse = 16 << 20
	// maxInputFile bounds a JSON file given with -file or -policy.
	maxInputFile = 1 << 20
	// maxRateLimitWaits bounds the 429s one read waits out in a row.
	maxRateLimitWaits = 10
	// maxRetryAfter is the longest Retry-After a read waits for.
	maxRetryAfter = 2 * time.Minute
)

// commonUsage closes the usage text of every group that talks to a server.
const commonUsage = `Every command takes:
  -server URL   server address (default $GUARD_SERVER, else ` + defaultServer + `)
  -key KEY      owner key (default $GUARD_OWNER_KEY; required)
  -json         print the server's JSON response (pretty-printed)`

// cliIO is what a command gets from Run.
type cliIO struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// subcommand is one verb of a group.
type subcommand struct {
	name     string
	synopsis string // arguments and flags after "guard GROUP NAME"
	summary  string
	run      func(c *cli, args []string) error
}

// cmdGroup is a noun with its verbs, like "agents".
type cmdGroup struct {
	name    string
	summary string
	footer  string // closes the usage: the flags every command takes
	cmds    []subcommand
}

func (g cmdGroup) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: guard %s COMMAND [flags]\n\n%s\n\nCommands:\n", g.name, g.summary)
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	for _, sc := range g.cmds {
		fmt.Fprintf(tw, "  guard %s %s %s\t%s\n", g.name, sc.name, sc.synopsis, sc.summary)
	}
	_ = tw.Flush()
	if g.footer != "" {
		b.WriteString("\n" + g.footer)
	}
	return strings.TrimRight(b.String(), "\n")
}

// names lists the group's commands for an error line: "list, create".
func (g cmdGroup) names() string {
	names := make([]string, len(g.cmds))
	for i, sc := range g.cmds {
		names[i] = sc.name
	}
	return strings.Join(names, ", ")
}

// runGroup dispatches "guard GROUP ...". A missing or unknown command
// prints the group's usage and is a usage error that names the commands
// the group takes; -h prints the usage and succeeds.
func runGroup(cio cliIO, g cmdGroup, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(cio.stderr, g.usage())
		return usageErrorf("%s: missing command; guard %s takes %s", g.name, g.name, g.names())
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(cio.stdout, g.usage())
		return nil
	}
	for _, sc := range g.cmds {
		if sc.name != args[0] {
			continue
		}
		c := &cli{cliIO: cio, name: g.name + " " + sc.name, synopsis: sc.synopsis, summary: sc.summary}
		defer c.close()
		err := sc.run(c, args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	fmt.Fprintln(cio.stderr, g.usage())
	return usageErrorf("%s: unknown command %q; guard %s takes %s", g.name, args[0], g.name, g.names())
}

// cli is one command being run.
type cli struct {
	cliIO
	name     string // "agents create"
	synopsis string
	summary  string
	help     string // more on the command, for its -h; set before parsing

	server  string
	key     string
	jsonOut bool

	base      *url.URL
	transport *http.Transport
	client    *http.Client
	// rateNoted is set once the command said it waits on a rate limit.
	rateNoted bool
}

// flags returns the command's flag set with the common flags on it.
func (c *cli) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("guard "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are returned; usage is ours
	fs.Usage = func() {}
	fs.StringVar(&c.server, "server", "", "server `URL` (default $GUARD_SERVER, else "+defaultServer+")")
	fs.StringVar(&c.key, "key", "", "owner `KEY` (default $GUARD_OWNER_KEY)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the server's JSON response")
	return fs
}

func (c *cli) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: guard %s %s\n\n%s\n\n", c.name, c.synopsis, c.summary)
	if c.help != "" {
		fmt.Fprintf(w, "%s\n\n", c.help)
	}
	fmt.Fprintln(w, "Flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parse reads flags and positional arguments in any order ("pause ID
// -json" and "pause -json ID" both work) and wants exactly the named
// positional arguments. It then resolves the server and the owner key.
func (c *cli) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	pos, err := c.parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, c.want(fs, pos, positional...)
}

// parseArgs reads flags and positional arguments in any order and returns
// the positional ones, for a command whose arguments depend on its flags;
// it must be followed by want.
func (c *cli) parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printUsage(c.stdout, fs)
				return nil, err
			}
			c.printUsage(c.stderr, fs)
			return nil, usageError{fmt.Errorf("%s: %w", c.name, err)}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, nil
}

// want checks that pos are exactly the named positional arguments, then
// resolves the server and the owner key.
func (c *cli) want(fs *flag.FlagSet, pos []string, positional ...string) error {
	if len(pos) != len(positional) {
		if len(pos) < len(positional) {
			return c.usageErr(fs, "missing %s", strings.Join(positional[len(pos):], " "))
		}
		return c.usageErr(fs, "unexpected argument %q", pos[len(positional)])
	}
	for i, p := range pos {
		if strings.TrimSpace(p) == "" {
			return c.usageErr(fs, "%s must not be empty", positional[i])
		}
	}
	return c.connect()
}

// usageErr prints the command's usage and returns a usage error that
// names the command.
func (c *cli) usageErr(fs *flag.FlagSet, format string, args ...any) error {
	c.printUsage(c.stderr, fs)
	return usageErrorf("%s: %s", c.name, fmt.Sprintf(format, args...))
}

// connect resolves the server address and the owner key from the flags,
// then the environment.
func (c *cli) connect() error {
	server := strings.TrimSpace(c.server)
	if server == "" {
		server = strings.TrimSpace(c.getenv("GUARD_SERVER"))
	}
	if server == "" {
		server = defaultServer
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("the server address %q is not an http:// or https:// URL (-server or GUARD_SERVER)", server)
	}
	c.base = u
	key := strings.TrimSpace(c.key)
	if key == "" {
		key = strings.TrimSpace(c.getenv("GUARD_OWNER_KEY"))
	}
	if key == "" {
		return errors.New("an owner key is required: pass -key KEY or set GUARD_OWNER_KEY")
	}
	c.key = key
	c.transport = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
		TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 30 * time.Second}
	c.client = &http.Client{Transport: c.transport, Timeout: requestTimeout}
	return nil
}

// close lets go of pooled connections so the server need not wait on them.
func (c *cli) close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// serverError is an error answer of the server. Its message and code were
// already printed; Error names the status and request for the exit line.
type serverError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *serverError) Error() string {
	s := fmt.Sprintf("the server answered %d %s", e.Status, http.StatusText(e.Status))
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// call sends one request and returns the body of a 2xx answer. Any other
// answer prints "error: CODE: MESSAGE" and returns a *serverError. A read
// refused by the rate limit (429) waits as Retry-After says and goes again:
// reads are safe to repeat, and a command that walks many pages or
// receipts would otherwise stop halfway at a limit it is meant to respect.
func (c *cli) call(method, path string, query url.Values, body []byte) ([]byte, error) {
	target := strings.TrimRight(c.base.String(), "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	for waits := 0; ; waits++ {
		resp, raw, err := c.exchange(method, path, target, body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			return raw, nil
		}
		if d, ok := retryAfter(resp); ok && method == http.MethodGet && waits < maxRateLimitWaits {
			if !c.rateNoted {
				c.rateNoted = true
				fmt.Fprintf(c.stderr, "note: the server's rate limit was reached; waiting %s as its Retry-After asks (and again whenever it asks)\n", d)
			}
			if err := sleepCtx(c.ctx, d); err != nil {
				return nil, err
			}
			continue
		}
		se := decodeServerError(resp, raw)
		fmt.Fprintf(c.stderr, "error: %s: %s\n", se.Code, se.Message)
		return nil, se
	}
}

// exchange sends one request and reads its whole answer, whatever its
// status.
func (c *cli) exchange(method, path, target string, body []byte) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "guard-cli")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, nil, fmt.Errorf("%s %s: no answer from %s within %s", method, path, c.base.Host, requestTimeout)
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil, fmt.Errorf("%s %s: no server listens at %s (is it running? start it with guard serve, or name another with -server URL or GUARD_SERVER): %w",
				method, path, c.base.Host, syscall.ECONNREFUSED)
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return nil, nil, fmt.Errorf("%s %s: the server's host %q is not known (check -server or GUARD_SERVER): %w", method, path, c.base.Hostname(), dnsErr)
		}
		return nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(raw) > maxResponse {
		return nil, nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, maxResponse)
	}
	return resp, raw, nil
}

// retryAfter is how long a 429 asks to wait: Retry-After in seconds or as
// an HTTP date, 1 s when it is missing or unreadable. A wait longer than
// maxRetryAfter (a daily limit) is not waited for: ok is false.
func retryAfter(resp *http.Response) (d time.Duration, ok bool) {
	if resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	d = time.Second
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = max(time.Until(at), 0)
	}
	return d, d <= maxRetryAfter
}

// sleepCtx waits d, or less when ctx ends first (an interrupt).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func decodeServerError(resp *http.Response, raw []byte) *serverError {
	se := &serverError{Status: resp.StatusCode, RequestID: resp.Header.Get("Request-Id")}
	var body struct {
		Error struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		se.Code, se.Message = body.Error.Code, body.Error.Message
		if body.Error.Param != nil && *body.Error.Param != "" && !strings.Contains(se.Message, *body.Error.Param) {
			se.Message += " (param " + *body.Error.Param + ")"
		}
		if se.RequestID == "" {
			se.RequestID = body.RequestID
		}
		return se
	}
	se.Code = fmt.Sprintf("http_%d", resp.StatusCode)
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	se.Message = msg
	return se
}

// getJSON and postJSON call and decode into v (which may be nil), and
// return the raw body for -json.
func (c *cli) getJSON(path string, query url.Values, v any) ([]byte, error) {
	raw, err := c.call(http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	return raw, decodeAnswer(raw, v)
}

func (c *cli) postJSON(path string, body []byte, v any) ([]byte, error) {
	raw, err := c.call(http.MethodPost, path, nil, body)
	if err != nil {
		return nil, err
	}
	return raw, decodeAnswer(raw, v)
}

func decodeAnswer(raw []byte, v any) error {
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("the server's answer is not the JSON expected: %w", err)
	}
	return nil
}

// printJSON writes raw JSON indented, keeping the server's field order.
func (c *cli) printJSON(raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := c.stdout.Write(b.Bytes())
	return err
}

// readJSONObject reads a file ("-" is standard input) that must hold one
// JSON object, and returns it compacted.
func (c *cli) readJSONObject(flagName, path string) ([]byte, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(c.stdin, maxInputFile+1))
	} else {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			data, err = io.ReadAll(io.LimitReader(f, maxInputFile+1))
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("-%s: %w", flagName, err)
	}
	if len(data) > maxInputFile {
		return nil, fmt.Errorf("-%s %s: larger than %d bytes", flagName, path, maxInputFile)
	}
	data = bytes.TrimSpace(data)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || len(data) == 0 || data[0] != '{' {
		msg := "not a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, fmt.Errorf("-%s %s: %s", flagName, path, msg)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, fmt.Errorf("-%s %s: %w", flagName, path, err)
	}
	return b.Bytes(), nil
}

// table writes aligned columns to stdout.
func (c *cli) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// when formats a timestamp of the API for people; "-" for none.
func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// pathID escapes an id given on the command line for a URL path.
func pathID(id string) string { return url.PathEscape(strings.TrimSpace(id)) }
