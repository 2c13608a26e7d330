package wire

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.ConsoleURL = "http://127.0.0.1:8080/console" // follows addr
	if c != want {
		t.Fatalf("no file, env or flags should give the defaults:\n got %+v\nwant %+v", c, want)
	}
	if c.Addr != "127.0.0.1:8080" || c.Data != "./data" || c.Dev {
		t.Fatalf("defaults differ from the documented ones: %+v", c)
	}
}

// Flags beat the environment, which beats the file, which beats defaults.
func TestLoadConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"addr":"127.0.0.1:9000","data":"/from-file","idle_timeout":"1m","dev":true,"log_level":"warn"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig([]string{"-config", file, "-data", "/from-flag"},
		env(map[string]string{"GUARD_DATA": "/from-env", "GUARD_ADDR": "127.0.0.1:9100", "GUARD_SETTLE_TIMEOUT": "7s"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Data != "/from-flag" {
		t.Errorf("data = %q, want the flag's value", c.Data)
	}
	if c.Addr != "127.0.0.1:9100" {
		t.Errorf("addr = %q, want the environment's value over the file's", c.Addr)
	}
	if c.IdleTimeout != time.Minute || !c.Dev || c.LogLevel != "warn" {
		t.Errorf("file values not applied: %+v", c)
	}
	if c.SettleTimeout != 7*time.Second {
		t.Errorf("settle_timeout = %v, want 7s from GUARD_SETTLE_TIMEOUT", c.SettleTimeout)
	}
}

func TestLoadConfigDevFlagWithoutValue(t *testing.T) {
	c, err := LoadConfig([]string{"-dev"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Dev {
		t.Fatal("-dev alone should turn dev on")
	}
}

// Every validation error names the field to fix.
func TestConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"addr", func(c *Config) { c.Addr = "8080" }},
		{"addr", func(c *Config) { c.Addr = " 127.0.0.1:8080" }},
		{"addr", func(c *Config) { c.Addr = "127.0.0.1:http" }},
		{"addr", func(c *Config) { c.Addr = "127.0.0.1:70000" }},
		{"data", func(c *Config) { c.Data = " " }},
		{"console_url", func(c *Config) { c.ConsoleURL = "ftp://x" }},
		{"console_url", func(c *Config) { c.ConsoleURL = "http://" }},
		{"console_url", func(c *Config) { c.ConsoleURL = "https://guard.example.com/console?x=1" }},
		{"console_url", func(c *Config) { c.ConsoleURL = "https://user:pw@guard.example.com/console" }},
		{"idle_timeout", func(c *Config) { c.IdleTimeout = time.Nanosecond }},
		{"checkpoint_interval", func(c *Config) { c.CheckpointInterval = time.Nanosecond }},
		{"loosen_delay", func(c *Config) { c.LoosenDelay = time.Second }},
		{"settle_timeout", func(c *Config) { c.SettleTimeout = time.Millisecond }},
		{"practice_pool", func(c *Config) { c.PracticePool = "-5" }},
		{"idle_timeout", func(c *Config) { c.IdleTimeout = 0 }},
		{"settle_timeout", func(c *Config) { c.SettleTimeout = -time.Second }},
		{"shutdown_timeout", func(c *Config) { c.ShutdownTimeout = 0 }},
		{"loosen_delay", func(c *Config) { c.LoosenDelay = 0 }},
		{"checkpoint_interval", func(c *Config) { c.CheckpointInterval = 0 }},
		{"simulated_latency", func(c *Config) { c.SimulatedLatency = -1 }},
		{"processing_after", func(c *Config) { c.ProcessingAfter = time.Millisecond }},
		{"processing_after", func(c *Config) { c.ProcessingAfter = c.SettleTimeout + time.Second }},
		{"log_level", func(c *Config) { c.LogLevel = "loud" }},
		{"rate_limit_scale", func(c *Config) { c.RateLimitScale = 0 }},
		{"rate_limit_scale", func(c *Config) { c.RateLimitScale = -2 }},
		{"rate_limit_scale", func(c *Config) { c.RateLimitScale = math.NaN() }},
		{"rate_limit_scale", func(c *Config) { c.RateLimitScale = math.Inf(1) }},
		{"rate_limit_scale", func(c *Config) { c.RateLimitScale = 1e15 }},
		{"gc_percent", func(c *Config) { c.GCPercent = 10 }},
		{"spare_procs", func(c *Config) { c.SpareProcs = -1 }},
		{"spare_procs", func(c *Config) { c.SpareProcs = 65 }},
		{"metrics_addr", func(c *Config) { c.MetricsAddr = "9464" }},
		{"metrics_addr", func(c *Config) { c.MetricsAddr = "127.0.0.1:99999" }},
		{"metrics_addr", func(c *Config) { c.MetricsAddr = c.Addr }},
		{"metrics_addr", func(c *Config) { c.MetricsAddr = "0.0.0.0:8080" }},
		{"metrics_addr", func(c *Config) { c.MetricsAddr = "localhost:8080" }}, // the API's 127.0.0.1:8080
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			c := Defaults()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.field)
			}
		})
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	for _, ok := range []string{"127.0.0.1:9464", "127.0.0.1:0", "10.0.0.5:8080", ":9464"} {
		c := Defaults()
		c.MetricsAddr = ok
		if err := c.Validate(); err != nil {
			t.Errorf("metrics_addr %q: %v", ok, err)
		}
	}
}

func TestLoadConfigRejectsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"bad duration in env": {nil, map[string]string{"GUARD_IDLE_TIMEOUT": "soon"}, "idle_timeout"},
		"bad bool flag":       {[]string{"-dev=maybe"}, nil, "dev"},
		"unknown flag":        {[]string{"-colour", "red"}, nil, "colour"},
		"stray argument":      {[]string{"extra"}, nil, "extra"},
		"missing file":        {[]string{"-config", "/nonexistent/guard.json"}, nil, "guard.json"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(tc.args, env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadConfig = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestConfigFileUnknownSetting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"adr":"127.0.0.1:1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig([]string{"-config", file}, env(nil))
	if err == nil || !strings.Contains(err.Error(), `"adr"`) {
		t.Fatalf("a misspelt setting must be refused by name, got %v", err)
	}
}

// The rate limit settings: on at the spec's values by default, scaled or
// switched off from the file, the environment or a flag.
func TestLoadConfigRateLimits(t *testing.T) {
	if d := Defaults(); !d.RateLimits || d.RateLimitScale != 1 {
		t.Fatalf("defaults: rate_limits %v, rate_limit_scale %v; want true and 1", d.RateLimits, d.RateLimitScale)
	}
	c, err := LoadConfig(nil, env(map[string]string{"GUARD_RATE_LIMIT_SCALE": "1000", "GUARD_RATE_LIMITS": "false"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitScale != 1000 || c.RateLimits {
		t.Errorf("from the environment: rate_limit_scale %v, rate_limits %v; want 1000 and false", c.RateLimitScale, c.RateLimits)
	}
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"rate_limit_scale":2.5,"rate_limits":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig([]string{"-config", file, "-rate-limit-scale", "1e6", "-rate-limits=true"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitScale != 1e6 || !c.RateLimits {
		t.Errorf("flags over the file: rate_limit_scale %v, rate_limits %v; want 1e6 and true", c.RateLimitScale, c.RateLimits)
	}
	c, err = LoadConfig([]string{"-config", file}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitScale != 2.5 || c.RateLimits {
		t.Errorf("from the file: rate_limit_scale %v, rate_limits %v; want 2.5 and false", c.RateLimitScale, c.RateLimits)
	}
	for _, v := range []string{"lots", "0", "-1", "NaN", "Inf"} {
		if _, err := LoadConfig(nil, env(map[string]string{"GUARD_RATE_LIMIT_SCALE": v})); err == nil || !strings.Contains(err.Error(), "rate_limit_scale") {
			t.Errorf("GUARD_RATE_LIMIT_SCALE=%s: %v, want an error naming rate_limit_scale", v, err)
		}
	}
}

// The console is served by this process, so its default address follows
// the listen address; an explicit console_url wins.
func TestConsoleURLFollowsAddr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "http://127.0.0.1:8080/console"},
		{[]string{"-addr", "127.0.0.1:18080"}, "http://127.0.0.1:18080/console"},
		{[]string{"-addr", ":9090"}, "http://127.0.0.1:9090/console"},
		{[]string{"-addr", "0.0.0.0:9090"}, "http://127.0.0.1:9090/console"},
		{[]string{"-addr", "[::1]:9090"}, "http://[::1]:9090/console"},
		{[]string{"-addr", ":9090", "-console-url", "https://guard.example.com/console"}, "https://guard.example.com/console"},
	} {
		c, err := LoadConfig(tc.args, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.ConsoleURL != tc.want {
			t.Errorf("%v: console_url %q, want %q", tc.args, c.ConsoleURL, tc.want)
		}
	}
}

// A boolean setting stands alone as a flag, like -dev, instead of taking
// the next flag for its value; a flag given empty overrides the file; a
// text setting in the file must be a JSON string.
func TestLoadConfigFlagsAndFileTypes(t *testing.T) {
	c, err := LoadConfig([]string{"-private-webhook-targets", "-addr", "127.0.0.1:9200", "-rate-limits=false"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.PrivateWebhookTargets || c.Addr != "127.0.0.1:9200" || c.RateLimits {
		t.Fatalf("boolean flags alone: %+v", c)
	}
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"console_url":"https://old.example.com/console"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig([]string{"-config", file, "-console-url", ""}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.ConsoleURL != "http://127.0.0.1:8080/console" {
		t.Fatalf("an empty -console-url kept the file's %q", c.ConsoleURL)
	}
	for body, want := range map[string]string{
		`{"data":{"dir":"x"}}`:       "data must be a JSON string",
		`{"data":["a","b"]}`:         "data must be a JSON string",
		`{"idle_timeout":30}`:        "idle_timeout must be a JSON string",
		`{"rate_limit_scale":"abc"}`: "rate_limit_scale",
	} {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadConfig([]string{"-config", file}, env(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", body, err, want)
		}
	}
	// Numbers and booleans may still be JSON numbers and booleans.
	if err := os.WriteFile(file, []byte(`{"rate_limit_scale":1000,"rate_limits":true,"gc_percent":200}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig([]string{"-config", file}, env(nil)); err != nil || c.RateLimitScale != 1000 || c.GCPercent != 200 {
		t.Fatalf("typed numbers: %v %+v", err, c)
	}
}

// The administration commands that open the data directory read the
// server's file and environment the same way.
func TestLoadConfigFileReadsFileAndEnvironment(t *testing.T) {
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"practice_pool":"50.00","data":"/from-file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfigFile(file, env(map[string]string{"GUARD_DATA": "/from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.PracticePool != "50.00" || c.Data != "/from-env" {
		t.Fatalf("LoadConfigFile: %+v", c)
	}
}

// A refused setting says where it came from, the file, a variable or a
// flag, each once: the operator fixes the one that is wrong.
func TestLoadConfigNamesTheSourceOfABadSetting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"addr":5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-config", file}, nil, "config: file " + file + ": addr must be a JSON string, not 5"},
		{nil, map[string]string{"GUARD_IDLE_TIMEOUT": "soon"}, `config: GUARD_IDLE_TIMEOUT: idle_timeout must be a duration like "30s", not "soon"`},
		{[]string{"-idle-timeout", "soon"}, nil, `config: flag -idle-timeout: idle_timeout must be a duration like "30s", not "soon"`},
	} {
		_, err := LoadConfig(tc.args, env(tc.env))
		if err == nil || err.Error() != tc.want {
			t.Errorf("LoadConfig(%q, %v): %v\nwant %s", tc.args, tc.env, err, tc.want)
		}
	}
}

// A console address given with a trailing slash still makes working
// links: they are built as the address + "/approvals/...".
func TestConsoleURLTrailingSlash(t *testing.T) {
	c := Defaults()
	c.ConsoleURL = "https://guard.example.com/console/"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.consoleURL(); got != "https://guard.example.com/console" {
		t.Errorf("consoleURL() = %q", got)
	}
}

// A too-short duration says how short it is and what would do.
func TestTooShortDurationSaysWhatWouldDo(t *testing.T) {
	c := Defaults()
	c.CheckpointInterval = time.Nanosecond
	err := c.Validate()
	if err == nil || err.Error() != `config: checkpoint_interval 1ns is too short: give a duration of at least 10ms, like "500ms" (the default)` {
		t.Errorf("Validate() = %v", err)
	}
}

// A GUARD_ variable nothing reads is named, with the setting it was
// probably meant for; the ones something reads are not.
func TestUnknownVariables(t *testing.T) {
	unknown, closest := UnknownVariables([]string{"GUARD_DATA_DIR", "GUARD_DATA", "GUARD_OWNER_KEY", "HOME",
		"GUARD_JOURNALDIR", "GUARD_SOMETHING_ELSE_ENTIRELY"})
	want := [][2]string{{"GUARD_DATA_DIR", "GUARD_DATA"}, {"GUARD_JOURNALDIR", "GUARD_JOURNAL_DIR"}, {"GUARD_SOMETHING_ELSE_ENTIRELY", ""}}
	if len(unknown) != len(want) {
		t.Fatalf("unknown %v (closest %v)", unknown, closest)
	}
	for i, w := range want {
		if unknown[i] != w[0] || closest[i] != w[1] {
			t.Errorf("%d: %s (did you mean %q), want %s (%q)", i, unknown[i], closest[i], w[0], w[1])
		}
	}
}

// A setting the file gives twice is refused by name: the decoder would
// keep the last one, and the operator who added it at the end would not
// see the first.
func TestConfigFileRepeatedSetting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "guard.json")
	if err := os.WriteFile(file, []byte(`{"addr":"127.0.0.1:1","log_level":"warn","addr":"127.0.0.1:2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig([]string{"-config", file}, env(nil))
	if err == nil || !strings.Contains(err.Error(), "addr is set twice") || !strings.Contains(err.Error(), file) {
		t.Fatalf("a setting given twice must be refused by name and file, got %v", err)
	}
	if err := os.WriteFile(file, []byte(`{"addr":"127.0.0.1:1","log_level":"warn"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig([]string{"-config", file}, env(nil)); err != nil || c.Addr != "127.0.0.1:1" {
		t.Fatalf("distinct settings: %v, addr %q", err, c.Addr)
	}
}

// With port 0 the system picks the port, and the default console address
// must name the one the listener got, or approval links point at port 0.
// A console address the operator gave, and any fixed port, stay as they
// are; the configured host stays too.
func TestBoundNamesThePortTheListenerGot(t *testing.T) {
	for _, tc := range []struct {
		args             []string
		bound            string
		addr, consoleURL string
	}{
		{[]string{"-addr", "127.0.0.1:0"}, "127.0.0.1:43210", "127.0.0.1:43210", "http://127.0.0.1:43210/console"},
		{[]string{"-addr", "localhost:0"}, "127.0.0.1:43210", "localhost:43210", "http://localhost:43210/console"},
		{[]string{"-addr", ":0"}, "[::]:43210", ":43210", "http://127.0.0.1:43210/console"},
		{[]string{"-addr", "127.0.0.1:0", "-console-url", "https://guard.example.com/console"}, "127.0.0.1:43210",
			"127.0.0.1:43210", "https://guard.example.com/console"},
		{[]string{"-addr", "localhost:8080"}, "127.0.0.1:8080", "localhost:8080", "http://localhost:8080/console"},
	} {
		c, err := LoadConfig(tc.args, env(nil))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		b := c.Bound(tc.bound)
		if b.Addr != tc.addr || b.ConsoleURL != tc.consoleURL {
			t.Errorf("%v bound to %s: addr %q console_url %q, want %q and %q", tc.args, tc.bound, b.Addr, b.ConsoleURL, tc.addr, tc.consoleURL)
		}
	}
}

// -h lists every setting with a name for its value, not the flag
// package's "value", and the list says where else a setting may come from.
func TestServeHelpNamesTheValues(t *testing.T) {
	_, err := LoadConfig([]string{"-h"}, env(nil))
	var help Help
	if !errors.As(err, &help) || !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want Help", err)
	}
	for _, want := range []string{"usage: guard serve", "GUARD_ variable", "-addr host:port", "-data directory", "-idle-timeout duration",
		"-practice-pool amount", "-console-url URL", "-log-level level"} {
		if !strings.Contains(help.Usage, want) {
			t.Errorf("-h lacks %q:\n%s", want, help.Usage)
		}
	}
	if strings.Contains(help.Usage, " value\n") {
		t.Errorf("-h still names a value \"value\":\n%s", help.Usage)
	}
	_, err = LoadConfig([]string{"-bogus"}, env(nil))
	var cle CommandLineError
	if !errors.As(err, &cle) || !strings.Contains(cle.Usage, "-bogus") || !strings.Contains(cle.Usage, "-addr host:port") {
		t.Fatalf("-bogus: %v, want a CommandLineError with the message and the list", err)
	}
}
