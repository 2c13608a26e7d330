package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCanonicalHostAccepts(t *testing.T) {
	tests := []struct{ in, want string }{
		{"vendor.com", "vendor.com"},
		{"VENDOR.Com", "vendor.com"},
		{"api.vendor.com", "api.vendor.com"},
		{"a.b.c.d.vendor.co.uk", "a.b.c.d.vendor.co.uk"},
		{"x-1.vendor.io", "x-1.vendor.io"},
		{"1.2.3.com", "1.2.3.com"},
		{"123.com", "123.com"},
		{"bücher.de", "xn--bcher-kva.de"},
		{"BÜCHER.de", "xn--bcher-kva.de"},
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"XN--BCHER-KVA.DE", "xn--bcher-kva.de"},
		{"straße.de", "xn--strae-oqa.de"},
		{"例え.jp", "xn--r8jz45g.jp"},
		{"ｖｅｎｄｏｒ.com", "vendor.com"}, // full-width letters map to ASCII
		{"vendor。com", "vendor.com"}, // ideographic full stop is a dot
		{"vendor.xn--p1ai", "vendor.xn--p1ai"},
		{"a.co", "a.co"},
		{strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com"},
		{maxLenHost(), maxLenHost()},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := CanonicalHost(tt.in)
			if err != nil {
				t.Fatalf("CanonicalHost(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("CanonicalHost(%q) = %q, want %q", tt.in, got, tt.want)
			}
			again, err := CanonicalHost(got)
			if err != nil || again != got {
				t.Fatalf("not idempotent: %q -> %q, %v", got, again, err)
			}
		})
	}
}

// maxLenHost is a 253-character host: three 62-character labels, one of 60
// and "com".
func maxLenHost() string {
	l := strings.Repeat("a", 62)
	h := l + "." + l + "." + l + "." + strings.Repeat("b", 60) + ".com"
	if len(h) != maxHostLen {
		panic("maxLenHost has the wrong length")
	}
	return h
}

func TestCanonicalHostRejects(t *testing.T) {
	tests := []struct{ name, in, problem string }{
		{"empty", "", "empty"},
		{"too long", "a" + maxLenHost(), "longer than 253"},
		{"too long raw", strings.Repeat("a.", 600) + "com", "longer than 253"},
		{"ipv4", "1.2.3.4", "IP addresses"},
		{"ipv4 loopback", "127.0.0.1", "IP addresses"},
		{"ipv4 with port", "1.2.3.4:443", "port"},
		{"ipv4 short form", "127.1", "numeric"},
		{"ipv4 hex", "0x7f.0x1", "numeric"},
		{"numeric tld hex", "a.0x1F", "numeric"},
		{"fullwidth ipv4", "１２７.０.０.１", "numeric"},
		{"ipv6", "::1", "IP addresses"},
		{"ipv6 full", "2001:db8::1", "IP addresses"},
		{"ipv6 bracketed", "[::1]", "IP addresses"},
		{"ipv6 bracketed port", "[::1]:443", "IP addresses"},
		{"ipv6 zone", "fe80::1%eth0", "IP addresses"},
		{"port", "a.com:443", "port"},
		{"empty port", "a.com:", "port"},
		{"localhost", "localhost", "local machine"},
		{"LOCALHOST", "LocalHost", "local machine"},
		{"sub localhost", "api.localhost", "local machine"},
		{"single label", "intranet", "single-label"},
		{"single label com", "com", "single-label"},
		{"empty label", "a..com", "empty label"},
		{"leading dot", ".a.com", "empty label"},
		{"only dot", ".", "empty label"},
		{"trailing dot", "a.com.", "trailing dot"},
		{"unicode trailing dot", "bücher.de。", "trailing dot"},
		{"unicode empty label", "bücher。。de", "empty label"},
		{"long label", strings.Repeat("a", 64) + ".com", "longer than 63"},
		{"leading hyphen", "-a.com", "starts or ends with '-'"},
		{"trailing hyphen", "a-.com", "starts or ends with '-'"},
		{"hyphen tld", "a.com-", "starts or ends with '-'"},
		{"underscore", "_dmarc.a.com", `'_'`},
		{"percent", "a%41.com", `'%'`},
		{"star", "*.a.com", `'*'`},
		{"bad punycode", "xn--zz.com", "not a valid host name"},
		{"hyphens at 3-4", "ab--c.com", "not a valid host name"},
		{"idna disallowed", "a\u2488.com", "not a valid host name"},
		{"emoji", "\U0001F4A9\u200d.la", "not a valid host name"},
		{"invalid utf8", "a\xff.com", "UTF-8"},
		{"all numeric tld", "a.123", "numeric"},
		{"scheme", "https://a.com", "scheme"},
		{"scheme no slash", "https:a.com", "port"},
		{"path", "a.com/x", "path"},
		{"backslash path", `a.com\x`, "path"},
		{"query", "a.com?x=1", "query"},
		{"fragment", "a.com#x", "fragment"},
		{"userinfo", "user@a.com", "user info"},
		{"userinfo password", "u:p@a.com", "user info"},
		{"space", "a .com", "whitespace"},
		{"leading space", " a.com", "whitespace"},
		{"trailing newline", "a.com\n", "whitespace"},
		{"nbsp", "a\u00a0.com", "whitespace"},
		{"local", "printer.local", "multicast DNS"},
		{"internal", "db.internal", "private"},
		{"test", "shop.test", "testing"},
		{"invalid", "x.invalid", "always-invalid"},
		{"example", "example.example", "documentation"},
		{"example unicode", "bücher.example", "documentation"},
		{"onion", "abc.onion", "Tor"},
		{"ONION upper", "ABC.ONION", "Tor"},
		{"alt", "a.alt", "non-DNS"},
		{"home.arpa", "router.home.arpa", "infrastructure"},
		{"reverse zone", "1.0.0.127.in-addr.arpa", "infrastructure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalHost(tt.in)
			if err == nil {
				t.Fatalf("CanonicalHost(%q) = %q, want error", tt.in, got)
			}
			var he *HostError
			if !errors.As(err, &he) {
				t.Fatalf("error %T is not *HostError", err)
			}
			if he.Input != tt.in {
				t.Errorf("Input = %q, want %q", he.Input, tt.in)
			}
			if !strings.Contains(he.Problem, tt.problem) {
				t.Errorf("Problem = %q, want it to mention %q", he.Problem, tt.problem)
			}
			if !strings.Contains(err.Error(), he.Problem) || !errors.Is(err, ErrHost) {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestHostErrorTruncatesHugeInput(t *testing.T) {
	_, err := CanonicalHost(strings.Repeat("a", 10_000))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("error for a 10 kB host is %d bytes", len(err.Error()))
	}
}

func TestParsePattern(t *testing.T) {
	tests := []struct {
		in, want string
		wildcard bool
	}{
		{"vendor.com", "vendor.com", false},
		{"*.vendor.com", "*.vendor.com", true},
		{"*.VENDOR.com", "*.vendor.com", true},
		{"*.bücher.de", "*.xn--bcher-kva.de", true},
		{"API.Bücher.de", "api.xn--bcher-kva.de", false},
		{"*.co.uk", "*.co.uk", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.in, err)
			}
			if p.String() != tt.want || p.IsWildcard() != tt.wildcard {
				t.Fatalf("ParsePattern(%q) = %q (wildcard %v), want %q (%v)",
					tt.in, p.String(), p.IsWildcard(), tt.want, tt.wildcard)
			}
			if MustPattern(tt.want) != p {
				t.Fatalf("canonical form does not parse to the same pattern")
			}
		})
	}
}

func TestParsePatternRejects(t *testing.T) {
	tests := []struct{ in, problem string }{
		{"", "empty"},
		{"*", `bare "*"`},
		{"*.", `bare "*"`},
		{"a.*.com", `leading "*."`},
		{"*vendor.com", `leading "*."`},
		{"**.a.com", `leading "*."`},
		{"*.*.a.com", `leading "*."`},
		{"vendor.*", `leading "*."`},
		{"*.com", "single-label"},
		{"*.localhost", "local machine"},
		{"*.vendor.test", "testing"},
		{"*.1.2.3.4", "IP addresses"},
		{"*.a..com", "empty label"},
		{"*.vendor.com.", "trailing dot"},
		{"https://*.vendor.com", "scheme"},
		{" *.vendor.com", "whitespace"},
		{"*.vendor.com:443", "port"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			if err == nil {
				t.Fatalf("ParsePattern(%q) = %q, want error", tt.in, p)
			}
			var he *HostError
			if !errors.As(err, &he) || he.Input != tt.in || !strings.Contains(he.Problem, tt.problem) {
				t.Fatalf("ParsePattern(%q) error = %v, want a *HostError mentioning %q", tt.in, err, tt.problem)
			}
		})
	}
}

func TestMustPatternPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MustPattern(\"*\") did not panic")
		}
	}()
	MustPattern("*")
}

func TestPatternMatches(t *testing.T) {
	wild := MustPattern("*.vendor.com")
	exact := MustPattern("vendor.com")
	tests := []struct {
		p     Pattern
		host  string
		match bool
	}{
		{wild, "a.vendor.com", true},
		{wild, "x.y.vendor.com", true},
		{wild, "a-b.c.d.vendor.com", true},
		{wild, "vendor.com", false},
		{wild, "vendor.com.evil.net", false},
		{wild, "evilvendor.com", false},
		{wild, "a.evilvendor.com", false},
		{wild, "vendor.co", false},
		{wild, ".vendor.com", false},
		{wild, "", false},
		{exact, "vendor.com", true},
		{exact, "a.vendor.com", false},
		{exact, "evilvendor.com", false},
		{exact, "vendor.com.evil.net", false},
		{exact, "", false},
		{MustPattern("*.bücher.de"), "shop.xn--bcher-kva.de", true},
		{MustPattern("*.bücher.de"), "xn--bcher-kva.de", false},
		{Pattern{}, "", false},
		{Pattern{}, "vendor.com", false},
	}
	for _, tt := range tests {
		if got := tt.p.Matches(tt.host); got != tt.match {
			t.Errorf("%q.Matches(%q) = %v, want %v", tt.p.String(), tt.host, got, tt.match)
		}
	}
}

func TestFirstMatch(t *testing.T) {
	ps := []Pattern{
		MustPattern("api.vendor.com"),
		MustPattern("*.vendor.com"),
		MustPattern("vendor.com"),
	}
	tests := []struct{ host, want string }{
		{"api.vendor.com", "api.vendor.com"},
		{"cdn.vendor.com", "*.vendor.com"},
		{"vendor.com", "vendor.com"},
		{"evilvendor.com", ""},
	}
	for _, tt := range tests {
		p, ok := FirstMatch(ps, tt.host)
		if ok != (tt.want != "") || p.String() != tt.want {
			t.Errorf("FirstMatch(%q) = %q, %v; want %q", tt.host, p.String(), ok, tt.want)
		}
	}
	if _, ok := FirstMatch(nil, "vendor.com"); ok {
		t.Error("FirstMatch(nil) matched")
	}
}

func TestPatternTextRoundTrip(t *testing.T) {
	type rule struct {
		Hosts []Pattern `json:"hosts"`
	}
	in := rule{Hosts: []Pattern{MustPattern("*.Bücher.de"), MustPattern("vendor.com")}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"hosts":["*.xn--bcher-kva.de","vendor.com"]}` {
		t.Fatalf("json = %s", b)
	}
	var out rule
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i := range in.Hosts {
		if out.Hosts[i] != in.Hosts[i] {
			t.Errorf("round trip %v -> %v", in.Hosts[i], out.Hosts[i])
		}
	}
	// Stored patterns are re-validated on load.
	var p Pattern
	if err := json.Unmarshal([]byte(`"*"`), &p); err == nil {
		t.Error(`UnmarshalText("*") succeeded`)
	}
	if err := p.UnmarshalText([]byte("*.EXAMPLE.org")); err != nil || p.String() != "*.example.org" {
		t.Errorf("UnmarshalText canonicalizes: %q, %v", p.String(), err)
	}
}

func TestMatchesDoesNotAllocate(t *testing.T) {
	ps := []Pattern{MustPattern("api.vendor.com"), MustPattern("*.vendor.com")}
	allocs := testing.AllocsPerRun(1000, func() {
		_, _ = FirstMatch(ps, "x.y.vendor.com")
		_ = ps[1].Matches("evilvendor.com")
	})
	if allocs != 0 {
		t.Fatalf("Matches allocates %.1f times per call", allocs)
	}
}

func BenchmarkPatternMatches(b *testing.B) {
	wild := MustPattern("*.vendor.com")
	exact := MustPattern("api.vendor.com")
	b.ReportAllocs()
	for b.Loop() {
		_ = exact.Matches("x.y.vendor.com")
		_ = wild.Matches("x.y.vendor.com")
		_ = wild.Matches("vendor.com.evil.net")
	}
}

func FuzzHostPattern(f *testing.F) {
	for _, s := range []string{
		"vendor.com", "VENDOR.com", "a.b.vendor.com", "bücher.de", "xn--bcher-kva.de",
		"1.2.3.4", "[::1]", "a.com:443", "localhost", "a.localhost", "intranet", "a..com",
		"a.com.", "-a.com", "a.123", "https://a.com", "a.com/x", "u@a.com", "a .com",
		"x.local", "x.onion", "例え.jp", "vendor。com", "*.vendor.com", "0x7f.0x1",
		strings.Repeat("a", 63) + ".com", maxLenHost(),
		"ab--cd.com", "XN--BCHER-KVA.DE", "1.2.3.4a", "-.com", "a-.com", "a.b-", "9.9.9.9.9", "xn--a.com", "a-b.Vendor.COM", "api.vendor.com", "A.B.C.D.example",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if plainHost(s) && (shapeProblem(s) != "" || labelsProblem(s) != "" || hyphenPair(s) || strings.ToLower(s) != s) {
			t.Fatalf("plainHost(%q) is true for a name the full path would change or refuse", s)
		}
		if shapeProblem(s) == "" {
			fh, fp := canonicalHost(s)
			ih, ip := canonicalHostIDNA(s)
			if fh != ih || (fp == "") != (ip == "") {
				t.Fatalf("fast path %q (%q) and IDNA path %q (%q) disagree on %q", fh, fp, ih, ip, s)
			}
		}
		h, err := CanonicalHost(s)
		var he *HostError
		if err != nil {
			if !errors.As(err, &he) || he.Problem == "" {
				t.Fatalf("CanonicalHost(%q) error %v is not a helpful *HostError", s, err)
			}
			// Patterns must never panic either, valid host or not.
			if p, err := ParsePattern(s); err == nil && !p.Matches(p.String()) && !p.IsWildcard() {
				t.Fatalf("exact pattern %q does not match itself", p)
			}
			return
		}
		if len(h) > maxHostLen || h != strings.ToLower(h) || !isASCII(h) {
			t.Fatalf("CanonicalHost(%q) = %q is not canonical", s, h)
		}
		again, err := CanonicalHost(h)
		if err != nil || again != h {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, h, again, err)
		}
		exact, err := ParsePattern(h)
		if err != nil || !exact.Matches(h) || exact.IsWildcard() {
			t.Fatalf("ParsePattern(%q) = %v, %v; want an exact pattern matching it", h, exact, err)
		}
		wild, err := ParsePattern("*." + h)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", "*."+h, err)
		}
		if wild.Matches(h) {
			t.Fatalf("%q matches the bare domain %q", wild, h)
		}
		if sub, err := CanonicalHost("a." + h); err == nil {
			if !wild.Matches(sub) {
				t.Fatalf("%q does not match subdomain %q", wild, sub)
			}
			if exact.Matches(sub) {
				t.Fatalf("exact %q matches subdomain %q", exact, sub)
			}
		}
		if wild.Matches("a" + h) {
			t.Fatalf("%q matches %q without a dot boundary", wild, "a"+h)
		}
	})
}
