package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/mail"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/ratelimit"
)

// Config is every setting of `guard serve`. Each field can come from the
// config file (JSON, keys as in the json tags), from a GUARD_<NAME>
// environment variable (NAME is the json key in upper case), or from a
// flag -<json key with dashes>; later sources win: defaults, file,
// environment, flags.
type Config struct {
	// Addr is the HTTP listen address.
	Addr string `json:"addr"`
	// Data is the directory holding the journal file.
	Data string `json:"data"`
	// JournalDir is the directory of the journal's segment files; empty
	// keeps them beside the data file (<data>/guard.db.journal). Every
	// acknowledged change waits for the journal's fdatasync, and each
	// checkpoint writes and syncs its pages into the data file: on one
	// disk the journal waits behind those pages, which makes most of the
	// spends' slow tail. A disk of its own for the journal avoids that.
	// The service refuses to start on a directory that cannot be the data
	// file's journal while the last one holds records not yet folded (stop
	// the service cleanly before moving it, or move its files along).
	JournalDir string `json:"journal_dir"`
	// MetricsAddr is host:port of the operator listener: GET /metrics
	// (counters in the Prometheus text format) and /debug/pprof/ (the
	// runtime's profiles). Empty, the default, serves neither. It asks
	// for no key: bind it to an address only operators reach (loopback,
	// or a private network a scraper sits on), never the public one.
	MetricsAddr string `json:"metrics_addr"`
	// Dev bootstraps a practice owner, agent, key and funded pool on first
	// start and prints how to use them.
	Dev bool `json:"dev"`
	// ConsoleURL is the owner console base address used in approval links.
	// Empty means the console this process serves: http://<addr>/console
	// (a wildcard listen host becomes 127.0.0.1). Set it when the service
	// is reached through another name, a proxy or TLS.
	ConsoleURL string `json:"console_url"`
	// PracticePool is the practice money a new owner starts with.
	PracticePool string `json:"practice_pool"`
	// LoosenDelay is how long a loosening policy change waits.
	LoosenDelay time.Duration `json:"loosen_delay"`
	// IdleTimeout passivates agents idle this long.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// SettleTimeout bounds one vendor payment call.
	SettleTimeout time.Duration `json:"settle_timeout"`
	// ProcessingAfter is how long a request that pays waits for its
	// vendor: past it the spend reads processing, the request is answered
	// with it, and the vendor's later answer settles or fails it. At most
	// SettleTimeout.
	ProcessingAfter time.Duration `json:"processing_after"`
	// ShutdownTimeout bounds the graceful stop on SIGTERM.
	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	// SimulatedLatency delays each simulated vendor answer (practice).
	SimulatedLatency time.Duration `json:"simulated_latency"`
	// CheckpointInterval is how often the journal folds into the snapshot.
	CheckpointInterval time.Duration `json:"checkpoint_interval"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `json:"log_level"`
	// AccessLog logs one line per answered request at info level, with
	// its request_id, route, status, duration and caller's key, so that a
	// request_id a caller reports can be found. Answers of 5xx are logged
	// at error level either way. A load test turns it off: a line per
	// request costs a write per request.
	AccessLog bool `json:"access_log"`
	// GCPercent is the garbage collector's target (GOGC) when the GOGC
	// environment variable is not set. The service allocates short-lived
	// request objects at a high rate and the machine has memory to spare:
	// collecting less often buys throughput.
	GCPercent int `json:"gc_percent"`
	// SpareProcs is how many Go processors the service runs beyond the
	// runtime's default (the CPUs it may use) when the GOMAXPROCS
	// environment variable is not set. The journal's fdatasync and the
	// checkpoint's page writes block in the kernel while their goroutine
	// still holds a processor, until the runtime notices and hands it on;
	// coming back, the goroutine waits for a processor behind the request
	// work, and every spend waits for it in turn. A spare processor keeps
	// the cores busy meanwhile: on 2 cores, one gave 10 % more settled
	// spends per second on average over 14 alternated runs of the bench
	// (more in 10, as many in 2, fewer in 2), and a second nothing more.
	// The price is in the reads' tail (p99 about 3 ms higher), as the
	// operating system now time-slices one thread more than it has cores.
	// 0 leaves GOMAXPROCS alone.
	SpareProcs int `json:"spare_procs"`
	// RateLimits enforces the rate limits of spec 8.1; false turns
	// limiting off entirely (no 429, no RateLimit-* headers).
	RateLimits bool `json:"rate_limits"`
	// RateLimitScale multiplies every rate and burst of spec 8.1 (windows
	// stay). Load benchmarks raise it, GUARD_RATE_LIMIT_SCALE=1000, so
	// that the load measures the service rather than its limits.
	RateLimitScale float64 `json:"rate_limit_scale"`
	// PrivateWebhookTargets lets webhook endpoints and chat channels of
	// live environments reach loopback, private, link-local and reserved
	// addresses. Off by
	// default: an owner's URL must not reach what only the service can
	// (a cloud metadata endpoint, an internal database, the service's own
	// ports), checked on the address each delivery connects to. Turn it
	// on for a deployment whose receivers sit on its private network.
	// Practice endpoints may always reach them (local receivers, tests).
	PrivateWebhookTargets bool `json:"private_webhook_targets"`
	// SMTPAddr is host:port of the mail server that sends approval
	// notices to e-mail channels; empty means no e-mail channels.
	SMTPAddr string `json:"smtp_addr"`
	// SMTPFrom is the sender of those e-mails, "guard@example.com" or
	// "Guard <guard@example.com>"; required with smtp_addr.
	SMTPFrom string `json:"smtp_from"`
	// SMTPUsername and SMTPPassword authenticate to the mail server
	// (AUTH PLAIN, only over TLS or to a server on this machine).
	SMTPUsername string `json:"smtp_username"`
	SMTPPassword string `json:"smtp_password"`
	// SMTPRequireTLS refuses to send mail when the server does not offer
	// STARTTLS; without it STARTTLS is used whenever offered.
	SMTPRequireTLS bool `json:"smtp_require_tls"`
}

// maxSpareProcs bounds spare_procs: more processors than the disk can keep
// blocked only add threads competing for the cores.
const maxSpareProcs = 64

// Defaults are the settings with no file, environment or flag.
func Defaults() Config {
	return Config{
		Addr: "127.0.0.1:8080", Data: "./data",
		PracticePool: "1000.00", LoosenDelay: time.Hour, IdleTimeout: 2 * time.Minute,
		SettleTimeout: 20 * time.Second, ProcessingAfter: actors.DefaultProcessingAfter, ShutdownTimeout: 15 * time.Second,
		CheckpointInterval: 500 * time.Millisecond, LogLevel: "info", AccessLog: true, GCPercent: 400,
		SpareProcs: 1, RateLimits: true, RateLimitScale: 1,
	}
}

// Validate reports the first bad field by its name.
func (c Config) Validate() error {
	if host, port, err := net.SplitHostPort(c.Addr); err != nil || strings.ContainsAny(host, " \t") || !validPort(port) {
		return fmt.Errorf("config: addr %q must be host:port, like 127.0.0.1:8080", c.Addr)
	}
	if strings.TrimSpace(c.Data) == "" {
		return errors.New("config: data must name a directory for the journal")
	}
	if err := c.validateMetricsAddr(); err != nil {
		return err
	}
	if c.ConsoleURL != "" {
		u, err := url.Parse(c.ConsoleURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(c.ConsoleURL, " \t") {
			return fmt.Errorf("config: console_url %q must be the console's absolute http(s) address, like https://guard.example.com/console (no query, fragment or user)", c.ConsoleURL)
		}
	}
	if _, err := policy.ParseAmount(c.PracticePool); err != nil {
		return fmt.Errorf("config: practice_pool: %v", err)
	}
	// Below these the setting defeats its purpose: a checkpoint loop that
	// never rests, a vendor call that cannot finish, a loosening of the
	// rules that does not wait for the owner to notice it.
	def := Defaults()
	for _, d := range []struct {
		name         string
		v, least, eg time.Duration
	}{
		{"loosen_delay", c.LoosenDelay, time.Minute, def.LoosenDelay},
		{"idle_timeout", c.IdleTimeout, 100 * time.Millisecond, def.IdleTimeout},
		{"settle_timeout", c.SettleTimeout, time.Second, def.SettleTimeout},
		{"processing_after", c.ProcessingAfter, 100 * time.Millisecond, def.ProcessingAfter},
		{"shutdown_timeout", c.ShutdownTimeout, time.Second, def.ShutdownTimeout},
		{"checkpoint_interval", c.CheckpointInterval, 10 * time.Millisecond, def.CheckpointInterval},
	} {
		if d.v < d.least {
			return fmt.Errorf("config: %s %s is too short: give a duration of at least %s, like %q (the default)", d.name, d.v, d.least, d.eg.String())
		}
	}
	if c.ProcessingAfter > c.SettleTimeout {
		return fmt.Errorf("config: processing_after %s is longer than settle_timeout %s: a payment is given up on before it would read processing; give at most the settle timeout", c.ProcessingAfter, c.SettleTimeout)
	}
	if c.SimulatedLatency < 0 {
		return errors.New("config: simulated_latency must not be negative")
	}
	if c.GCPercent < 50 || c.GCPercent > 10000 {
		return fmt.Errorf("config: gc_percent %d must be from 50 to 10000", c.GCPercent)
	}
	if c.SpareProcs < 0 || c.SpareProcs > maxSpareProcs {
		return fmt.Errorf("config: spare_procs %d must be from 0 to %d", c.SpareProcs, maxSpareProcs)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log_level %q must be debug, info, warn or error", c.LogLevel)
	}
	if !(c.RateLimitScale > 0) || math.IsInf(c.RateLimitScale, 0) {
		return fmt.Errorf("config: rate_limit_scale %v must be a positive number, like 1 (the limits of spec 8.1) or 1000", c.RateLimitScale)
	}
	if err := ratelimit.DefaultTable().Scaled(c.RateLimitScale).Validate(); err != nil {
		return fmt.Errorf("config: rate_limit_scale %v is too large for the limiter: %v", c.RateLimitScale, err)
	}
	return c.validateSMTP()
}

// validateMetricsAddr checks the operator listener's address: host:port,
// and not the API's own (one port cannot serve both).
func (c Config) validateMetricsAddr() error {
	if c.MetricsAddr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.MetricsAddr)
	if err != nil || strings.ContainsAny(host, " \t") || !validPort(port) {
		return fmt.Errorf("config: metrics_addr %q must be host:port, like 127.0.0.1:9464, or empty for no operator listener", c.MetricsAddr)
	}
	if apiHost, apiPort, err := net.SplitHostPort(c.Addr); err == nil && port != "0" && port == apiPort &&
		(host == apiHost || host == "" || apiHost == "" || isWildcard(host) || isWildcard(apiHost) ||
			isLocalhost(host) && isLocalhost(apiHost)) {
		return fmt.Errorf("config: metrics_addr %q is the API's address (addr %q); give the operator listener a port of its own, like 127.0.0.1:9464", c.MetricsAddr, c.Addr)
	}
	return nil
}

// isLocalhost reports localhost or the loopback address it names: a port
// of one of them taken is taken for the other.
func isLocalhost(host string) bool {
	return strings.EqualFold(host, "localhost") || host == "127.0.0.1" || host == "::1"
}

// isWildcard reports a listen host that means every address.
func isWildcard(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// validateSMTP checks the mail settings: all of them need smtp_addr.
func (c Config) validateSMTP() error {
	if c.SMTPAddr == "" {
		for name, v := range map[string]bool{"smtp_from": c.SMTPFrom != "", "smtp_username": c.SMTPUsername != "",
			"smtp_password": c.SMTPPassword != "", "smtp_require_tls": c.SMTPRequireTLS} {
			if v {
				return fmt.Errorf("config: %s is set but smtp_addr is not; set smtp_addr (host:port of the mail server) or remove %s", name, name)
			}
		}
		return nil
	}
	if host, port, err := net.SplitHostPort(c.SMTPAddr); err != nil || host == "" || port == "" {
		return fmt.Errorf("config: smtp_addr %q must be host:port, like mail.example.com:587", c.SMTPAddr)
	}
	if c.SMTPFrom == "" {
		return errors.New("config: smtp_from is required with smtp_addr: the sender address of approval e-mails, like guard@example.com")
	}
	if _, err := mail.ParseAddress(c.SMTPFrom); err != nil {
		return fmt.Errorf("config: smtp_from %q must be an e-mail address like guard@example.com or \"Guard <guard@example.com>\"", c.SMTPFrom)
	}
	if (c.SMTPUsername == "") != (c.SMTPPassword == "") {
		return errors.New("config: smtp_username and smtp_password go together: set both or neither")
	}
	return nil
}

// UnmarshalJSON reads a config file. A setting that is text (an address,
// a directory) must be a JSON string: anything else is refused rather
// than turned into its JSON text, which would make a directory named
// {"dir":"x"}. Durations are strings ("30s"); numbers and booleans may be
// JSON numbers and booleans or strings.
func (c *Config) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if k := repeatedKey(b); k != "" {
		// The decoder would keep the last one silently: an operator who
		// added a setting at the end of the file without seeing it higher
		// up would not know which value the server runs with.
		return fmt.Errorf("config: %s is set twice; keep one", k)
	}
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			if f, ok := fieldOf(k); ok && (f.Type.Kind() == reflect.String || f.Type == reflect.TypeOf(time.Duration(0))) {
				return fmt.Errorf("config: %s must be a JSON string, not %s", k, clipJSON(v))
			}
			s = string(v) // numbers and booleans
		}
		if err := c.set(k, s); err != nil {
			return err
		}
	}
	return nil
}

// repeatedKey is the first key that appears twice in the JSON object b,
// or "" when none does (or b is not an object, which the decoder reports).
func repeatedKey(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return ""
		}
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// fieldOf finds the field of a json key.
func fieldOf(key string) (reflect.StructField, bool) {
	rt := reflect.TypeOf(Config{})
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Tag.Get("json") == key {
			return rt.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func clipJSON(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// text is the setting's value as a flag or variable would give it.
func (c *Config) text(key string) string {
	rv := reflect.ValueOf(c).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Tag.Get("json") != key {
			continue
		}
		switch v := rv.Field(i).Interface().(type) {
		case time.Duration:
			return v.String()
		default:
			return fmt.Sprint(v)
		}
	}
	return ""
}

// set assigns one field by its json key from text.
func (c *Config) set(key, value string) error {
	rv := reflect.ValueOf(c).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Tag.Get("json") != key {
			continue
		}
		f := rv.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(value)
		case bool:
			b, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("config: %s must be true or false, not %q", key, value)
			}
			f.SetBool(b)
		case int:
			n, err := strconv.Atoi(value)
			if err != nil {
				return fmt.Errorf("config: %s must be a whole number, not %q", key, value)
			}
			f.SetInt(int64(n))
		case float64:
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return fmt.Errorf("config: %s must be a number like 1000, not %q", key, value)
			}
			f.SetFloat(v)
		case time.Duration:
			d, err := time.ParseDuration(value)
			if err != nil {
				return fmt.Errorf("config: %s must be a duration like \"30s\", not %q", key, value)
			}
			f.SetInt(int64(d))
		}
		return nil
	}
	return fmt.Errorf("config: unknown setting %q", key)
}

// keys lists the json keys of Config.
func keys() []string {
	rt := reflect.TypeOf(Config{})
	out := make([]string, rt.NumField())
	for i := range out {
		out[i] = rt.Field(i).Tag.Get("json")
	}
	return out
}

// settingHelp is the one-line meaning of each setting, for -h; the
// fields' comments above say more. The word in backquotes names the value
// in the list (-addr host:port), where the flag package would say "value".
var settingHelp = map[string]string{
	"addr":                    "HTTP listen address, `host:port`",
	"data":                    "`directory` of the data file (and of the journal, unless journal_dir)",
	"journal_dir":             "`directory` of the journal's segment files, ideally on a disk of its own",
	"metrics_addr":            "operator listener `host:port` for /metrics (Prometheus) and /debug/pprof/; empty: none",
	"dev":                     "make a practice owner, agent, key and pool on first start, and print them",
	"console_url":             "owner console `URL` used in approval links (default: this server's /console)",
	"practice_pool":           "practice money (an `amount`) a new owner starts with",
	"loosen_delay":            "how long (a `duration`) a loosening policy change waits before it applies",
	"idle_timeout":            "an agent idle this long (a `duration`) is passivated (its memory freed)",
	"settle_timeout":          "longest wait (a `duration`) for one vendor payment call",
	"processing_after":        "wait (a `duration`) for a vendor before a payment reads processing and its request is answered",
	"shutdown_timeout":        "longest graceful stop (a `duration`) on SIGTERM/SIGINT",
	"simulated_latency":       "delay (a `duration`) of each simulated vendor answer (practice)",
	"checkpoint_interval":     "how often (a `duration`) the journal is folded into the data file",
	"log_level":               "`level` of the log: debug, info, warn or error",
	"access_log":              "a log line per request (5xx answers are logged either way)",
	"gc_percent":              "garbage collector target (GOGC) in `percent` when GOGC is not set",
	"spare_procs":             "`number` of Go processors beyond the CPUs when GOMAXPROCS is not set",
	"rate_limits":             "enforce the rate limits of spec 8.1 (false: none at all)",
	"rate_limit_scale":        "`factor` that multiplies every rate and burst (load benchmarks raise it)",
	"private_webhook_targets": "let live webhooks and chat channels reach private addresses",
	"smtp_addr":               "mail server `host:port` for e-mail approval notices",
	"smtp_from":               "sender `address` of approval e-mails (required with smtp_addr)",
	"smtp_username":           "mail server `user` (with smtp_password)",
	"smtp_password":           "mail server `password` (with smtp_username)",
	"smtp_require_tls":        "refuse to send mail without STARTTLS",
}

// settingFlag is one setting's flag: the text given, and whether it was
// given at all, so that an explicit empty value (-console-url "") still
// overrides the file and the environment.
type settingFlag struct {
	value, def string
	given      bool
	isBool     bool
}

func (f *settingFlag) String() string {
	if f == nil {
		return ""
	}
	return f.def
}
func (f *settingFlag) Set(s string) error { f.value, f.given = s, true; return nil }

// IsBoolFlag lets a boolean setting stand alone (-dev, -rate-limits=false),
// as with the flag package's own booleans: without it, "-dev -addr X"
// would take "-addr" for dev's value.
func (f *settingFlag) IsBoolFlag() bool { return f.isBool }

// CommandLineError is a command line that cannot be read: an unknown flag,
// a flag without its value, a stray argument. The command prints Usage
// (the flag package's message and the list of settings) to standard error
// and exits as for any usage error, apart from a setting refused for its
// value.
type CommandLineError struct {
	Err   error
	Usage string
}

func (e CommandLineError) Error() string { return e.Err.Error() }
func (e CommandLineError) Unwrap() error { return e.Err }

// Help is the answer to -h: the list of settings, which the command
// prints to standard output, since it was asked for (guard serve -h | less
// works). It matches flag.ErrHelp.
type Help struct{ Usage string }

func (h Help) Error() string { return flag.ErrHelp.Error() }
func (h Help) Unwrap() error { return flag.ErrHelp }

// LoadConfig builds the configuration from defaults, an optional file
// (-config or GUARD_CONFIG), the environment and the flags in args, each
// later source winning. A GUARD_ variable set to the empty string counts
// as unset; a flag given empty counts.
func LoadConfig(args []string, getenv func(string) string) (Config, error) {
	def := Defaults()
	fs := flag.NewFlagSet("guard serve", flag.ContinueOnError)
	var usage strings.Builder
	fs.SetOutput(&usage)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: guard serve [-config FILE] [-SETTING VALUE ...]\n\n"+
			"Each setting is a flag, a key of the config file and a GUARD_ variable; a flag\n"+
			"wins over the variable, the variable over the file.\n\n")
		fs.PrintDefaults()
	}
	file := fs.String("config", getenv("GUARD_CONFIG"), "JSON config `file` (keys as below, in snake_case; env GUARD_CONFIG)")
	flags := map[string]*settingFlag{}
	for _, k := range keys() {
		f, _ := fieldOf(k)
		sf := &settingFlag{def: def.text(k), isBool: f.Type.Kind() == reflect.Bool}
		if k == "console_url" || k == "smtp_password" || sf.def == "false" {
			sf.def = "" // derived from addr; a secret; off
		}
		flags[k] = sf
		fs.Var(sf, strings.ReplaceAll(k, "_", "-"), fmt.Sprintf("%s (config %s, env GUARD_%s)", settingHelp[k], k, strings.ToUpper(k)))
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return def, Help{usage.String()}
		}
		return def, CommandLineError{err, usage.String()}
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return def, CommandLineError{fmt.Errorf("unexpected argument %q (settings are flags: -name value, or -name=value)", fs.Arg(0)), usage.String()}
	}
	c, err := loadFileAndEnv(*file, getenv)
	if err != nil {
		return c, err
	}
	for _, k := range keys() {
		if f := flags[k]; f.given {
			if err := c.set(k, f.value); err != nil {
				return c, from("flag -"+strings.ReplaceAll(k, "_", "-"), err)
			}
		}
	}
	c.ConsoleURL = c.consoleURL()
	return c, c.Validate()
}

// LoadConfigFile builds the configuration from defaults, the file (when
// named) and the environment: what LoadConfig does without flags. The
// administration commands that open the data directory themselves
// (guard owner create) read the server's settings this way.
func LoadConfigFile(file string, getenv func(string) string) (Config, error) {
	c, err := loadFileAndEnv(file, getenv)
	if err != nil {
		return c, err
	}
	c.ConsoleURL = c.consoleURL()
	return c, c.Validate()
}

// loadFileAndEnv applies the file and the environment to the defaults.
func loadFileAndEnv(file string, getenv func(string) string) (Config, error) {
	c := Defaults()
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return c, fmt.Errorf("config: reading %s: %w", file, err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return c, from("file "+file, err)
		}
	}
	for _, k := range keys() {
		if v := getenv("GUARD_" + strings.ToUpper(k)); v != "" {
			if err := c.set(k, v); err != nil {
				return c, from("GUARD_"+strings.ToUpper(k), err)
			}
		}
	}
	return c, nil
}

// from names where a refused setting came from (the file, a variable, a
// flag), so the operator knows which of the three to fix, in front of the
// setting's own message.
func from(source string, err error) error {
	return fmt.Errorf("config: %s: %s", source, strings.TrimPrefix(err.Error(), "config: "))
}

// validPort reports whether p is a TCP port number (0 picks a free one).
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535 && p == strconv.Itoa(n)
}

// Bound is the configuration of a server whose listener got addr. Only
// the port is taken from it, and only when Addr asked the system to pick
// one (port 0): the default console address must then name the real port,
// or every approval link would point at port 0. The host stays as
// configured (localhost stays localhost, for the console's cookies).
func (c Config) Bound(addr string) Config {
	host, port, err := net.SplitHostPort(c.Addr)
	_, got, gerr := net.SplitHostPort(addr)
	if err != nil || gerr != nil || port != "0" {
		return c
	}
	derived := c.ConsoleURL == (Config{Addr: c.Addr}).consoleURL()
	c.Addr = net.JoinHostPort(host, got)
	if derived {
		c.ConsoleURL = ""
		c.ConsoleURL = c.consoleURL()
	}
	return c
}

// consoleURL is ConsoleURL, or the default that follows Addr, without a
// trailing slash: links are built as consoleURL + "/approvals/...".
func (c Config) consoleURL() string {
	if c.ConsoleURL != "" {
		return strings.TrimRight(c.ConsoleURL, "/")
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return "http://" + c.Addr + "/console"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/console"
}

// otherVariables are the GUARD_ variables read elsewhere than the serve
// settings: the config file's name, and the command line's server and
// owner key.
var otherVariables = []string{"GUARD_CONFIG", "GUARD_SERVER", "GUARD_OWNER_KEY", "GUARD_TEST_ARTIFACTS"}

// UnknownVariables lists the GUARD_ variables among names that nothing
// reads, each with the closest name that would be read ("" when none is
// close): GUARD_DATA_DIR, say, where GUARD_DATA was meant. The service
// ignores them, which is why it says so.
func UnknownVariables(names []string) (unknown, closest []string) {
	known := slices.Clone(otherVariables)
	for _, k := range keys() {
		known = append(known, "GUARD_"+strings.ToUpper(k))
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "GUARD_") || slices.Contains(known, n) {
			continue
		}
		best, bestD := "", 5 // farther than this is no suggestion
		for _, k := range known {
			if d := editDistance(n, k); d < bestD {
				best, bestD = k, d
			}
		}
		unknown, closest = append(unknown, n), append(closest, best)
	}
	return unknown, closest
}

// editDistance is the Levenshtein distance of a and b (ASCII names).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
