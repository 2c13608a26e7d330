package policy

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DNS limits (RFC 1035 section 2.3.4): 63 octets per label and 253
// characters for a name written without its trailing dot.
const (
	maxHostLen  = 253
	maxLabelLen = 63
	// maxHostInput bounds the raw input before IDNA runs. A Unicode name can
	// be longer in UTF-8 than its A-label form, but not by a factor of four,
	// so anything longer could never become a valid host and is rejected
	// before doing any work on it.
	maxHostInput = 4 * maxHostLen
)

// reservedTLDs are top-level labels that can never name a public host on the
// Internet, so a payment to them is either a mistake or an attempt to reach
// something private:
//   - localhost: loopback (RFC 6761 section 6.3); "*.localhost" resolves
//     to the local machine in many resolvers and browsers;
//   - local: multicast DNS on the local link (RFC 6762);
//   - internal: reserved by ICANN for private use inside organisations (2024);
//   - test, invalid, example: reserved for testing and documentation
//     (RFC 2606, RFC 6761);
//   - onion: Tor hidden services (RFC 7686), not reachable over DNS;
//   - alt: reserved for non-DNS name systems (RFC 9476);
//   - arpa: infrastructure domain (RFC 3172), including reverse-lookup zones
//     and home.arpa for home networks (RFC 8375).
var reservedTLDs = map[string]string{
	"localhost": "localhost names the local machine",
	"local":     `".local" is multicast DNS on the local network (RFC 6762)`,
	"internal":  `".internal" is reserved for private networks`,
	"test":      `".test" is reserved for testing (RFC 6761)`,
	"invalid":   `".invalid" is reserved as an always-invalid name (RFC 6761)`,
	"example":   `".example" is reserved for documentation (RFC 6761)`,
	"onion":     `".onion" names Tor services, not public DNS hosts (RFC 7686)`,
	"alt":       `".alt" is reserved for non-DNS name systems (RFC 9476)`,
	"arpa":      `".arpa" is DNS infrastructure, not a public host`,
}

// ErrHost matches every host or pattern error with errors.Is.
var ErrHost = errors.New("invalid host")

// HostError reports a destination host or host pattern that is not allowed.
// Problem says what is wrong in a sentence that can be shown to the owner.
type HostError struct {
	Input   string
	Problem string
}

func (e *HostError) Error() string {
	return "invalid host " + quoteForError(e.Input) + ": " + e.Problem
}

// Is makes errors.Is(err, ErrHost) true for every *HostError.
func (e *HostError) Is(target error) bool { return target == ErrHost }

// CanonicalHost checks that s is a public DNS host name and returns its
// canonical form: lower case, IDNA A-labels ("Bücher.de" -> "xn--bcher-kva.de").
// Policies and requests are only ever compared in this form, so two spellings
// of the same host can never get different decisions.
//
// It uses idna.Lookup, the profile Go's HTTP client applies to request hosts,
// so the name checked here is the name the transport will resolve.
func CanonicalHost(s string) (string, error) {
	h, problem := canonicalHost(s)
	if problem != "" {
		return "", &HostError{Input: s, Problem: problem}
	}
	return h, nil
}

func canonicalHost(s string) (string, string) {
	if plainHost(s) {
		return finishHost(s)
	}
	if p := shapeProblem(s); p != "" {
		return "", p
	}
	if isASCII(s) {
		lower := strings.ToLower(s)
		// Checking the structure first gives precise messages ("label starts
		// with '-'") instead of IDNA's terse ones for ordinary mistakes.
		if p := labelsProblem(lower); p != "" {
			return "", p
		}
		// Letters, digits and hyphens with no "??--" label (which covers
		// every xn-- A-label) are already what IDNA would make of them:
		// skip the conversion, the costliest step of a check request. A
		// test and the host fuzz target compare this with the full path.
		if !hyphenPair(lower) {
			return finishHost(lower)
		}
	}
	return canonicalHostIDNA(s)
}

// plainHost reports a name that is already canonical in form: lower-case
// letters, digits, hyphens and dots making well-formed DNS labels, none of
// them reserved for IDNA, and at least one letter or hyphen so it cannot be
// an IPv4 literal. Such a name passes every shape, label and IDNA step
// unchanged, so one pass over it replaces them; it is the name agents send
// on every spend and check. The host fuzz target holds it to the full path.
func plainHost(s string) bool {
	if len(s) == 0 || len(s) > maxHostLen {
		return false
	}
	start := 0     // first byte of the current label
	named := false // a letter or hyphen was seen
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			n := i - start
			if n == 0 || n > maxLabelLen || s[start] == '-' || s[i-1] == '-' ||
				n >= 4 && s[start+2] == '-' && s[start+3] == '-' {
				return false
			}
			start = i + 1
			continue
		}
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', c == '-':
			named = true
		case '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return named
}

// hyphenPair reports a label with hyphens in its third and fourth place,
// the form IDNA reserves (xn-- and future prefixes).
func hyphenPair(h string) bool {
	for label := range strings.SplitSeq(h, ".") {
		if len(label) >= 4 && label[2] == '-' && label[3] == '-' {
			return true
		}
	}
	return false
}

// finishHost applies the checks every canonical name passes last.
func finishHost(h string) (string, string) {
	if len(h) > maxHostLen {
		return "", "the host name is longer than 253 characters"
	}
	if p := publicProblem(h); p != "" {
		return "", p
	}
	return h, ""
}

// canonicalHostIDNA is the full path: IDNA mapping and validation, then
// the structural checks again on its output.
func canonicalHostIDNA(s string) (string, string) {
	if isASCII(s) {
		if p := labelsProblem(strings.ToLower(s)); p != "" {
			return "", p
		}
	}
	h, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return "", "not a valid host name (" + err.Error() + "); use letters, digits and hyphens, or a valid internationalized name"
	}
	h = strings.ToLower(h)
	// Checked again on the output because mapping can change the structure:
	// Unicode dots such as U+3002 become '.', so empty labels and trailing
	// dots in a Unicode name only show up after conversion.
	if p := labelsProblem(h); p != "" {
		return "", p
	}
	if len(h) > maxHostLen {
		return "", "the host name is longer than 253 characters"
	}
	if p := roundTripProblem(h); p != "" {
		return "", p
	}
	return finishHost(h)
}

// shapeProblem catches inputs that are not a bare host at all: URLs, IP
// literals, host:port and the like. These get a message saying what to
// remove rather than a complaint about some character.
func shapeProblem(s string) string {
	switch {
	case s == "":
		return "the host is empty; give a host name like vendor.com"
	case len(s) > maxHostInput:
		return "the host name is longer than 253 characters"
	case !utf8.ValidString(s):
		return "the host is not valid UTF-8"
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return "remove the whitespace; give a bare host name like vendor.com"
	case strings.Contains(s, "://"):
		return "remove the scheme (like https://); give only the host name, like vendor.com"
	case strings.Contains(s, "@"):
		return "remove the user info before '@'; give only the host name"
	case strings.ContainsAny(s, `/\`):
		return "remove the path; give only the host name, like vendor.com"
	case strings.ContainsAny(s, "?#"):
		return "remove the query or fragment; give only the host name"
	}
	if strings.HasPrefix(s, "[") || strings.HasSuffix(s, "]") {
		return "IP addresses are not allowed; use the vendor's DNS host name"
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return "IP addresses are not allowed; use the vendor's DNS host name"
	}
	switch strings.Count(s, ":") {
	case 0:
	case 1:
		return "remove the port; a destination is a host name only, like vendor.com"
	default:
		return "IP addresses are not allowed; use the vendor's DNS host name"
	}
	return ""
}

// labelsProblem checks the DNS structure of a lower-case name: no trailing
// dot, no empty label, at most 63 octets per label, only letters, digits and
// hyphens (LDH), and no hyphen at either end of a label.
func labelsProblem(h string) string {
	if strings.HasSuffix(h, ".") && len(h) > 1 {
		return "remove the trailing dot"
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" {
			return "the host has an empty label (like a..com or a leading dot)"
		}
		if len(label) > maxLabelLen {
			return "a label is longer than 63 characters"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "a label starts or ends with '-'"
		}
		for _, r := range label {
			if !isLDH(r) {
				return "the character " + strconv.QuoteRune(r) + " is not allowed; use letters, digits and hyphens"
			}
		}
	}
	return ""
}

// roundTripProblem decodes the A-labels back to Unicode and encodes them
// again. A name whose punycode does not survive this (a label that IDNA
// would spell differently) has two spellings and is therefore refused.
func roundTripProblem(h string) string {
	u, err := idna.Lookup.ToUnicode(h)
	if err != nil {
		return "not a valid internationalized host name (" + err.Error() + ")"
	}
	back, err := idna.Lookup.ToASCII(u)
	if err != nil || back != h {
		return "the punycode labels are not in canonical IDNA form"
	}
	return ""
}

// publicProblem rejects well-formed names that still cannot be public hosts.
func publicProblem(h string) string {
	dot := strings.LastIndexByte(h, '.')
	if dot < 0 {
		if h == "localhost" {
			return reservedTLDs["localhost"]
		}
		return "a single-label name is not a public host; use a full domain like vendor.com"
	}
	tld := h[dot+1:]
	if why, ok := reservedTLDs[tld]; ok {
		return why
	}
	if numericLabel(tld) {
		return "the last label is numeric, so URL parsers read the name as an IP address; use the vendor's DNS host name"
	}
	return ""
}

// numericLabel reports whether a top-level label would make URL parsers
// treat the whole name as an IPv4 address: all decimal digits, or a 0x/0X
// hexadecimal number (WHATWG URL "ends in a number"). Real TLDs are never
// numeric, so refusing these closes an IP-literal bypass ("127.0.0.0x1").
func numericLabel(l string) bool {
	if allDigits(l) {
		return true
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			c := l[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return true
	}
	return false
}

func isLDH(r rune) bool {
	return 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Pattern is an allowed destination: an exact canonical host, or "*.domain"
// which matches every proper subdomain of domain at any depth. The zero
// Pattern matches nothing.
type Pattern struct {
	// text is the canonical pattern, "vendor.com" or "*.vendor.com". For a
	// wildcard, text[1:] is ".vendor.com": the dot-bounded suffix a match
	// must end with, kept as a slice of text so Matches never allocates.
	text     string
	wildcard bool
}

// ParsePattern parses and canonicalizes a host pattern: "*.VENDOR.com"
// becomes "*.vendor.com" and Unicode labels become punycode. The only
// wildcard form is a leading "*." before a valid host; a public suffix such
// as "*.com" is rejected because "com" is a single label, but multi-label
// public suffixes ("*.co.uk") cannot be told apart from ordinary domains
// without a suffix list, so owners must not write them.
func ParsePattern(s string) (Pattern, error) {
	// URL-shaped input ("https://*.vendor.com") is told to drop the URL
	// parts before being told anything about the wildcard.
	if p := shapeProblem(s); p != "" {
		return Pattern{}, &HostError{Input: s, Problem: p}
	}
	domain, wild := strings.CutPrefix(s, "*.")
	if strings.Contains(domain, "*") || (wild && domain == "") {
		return Pattern{}, &HostError{Input: s, Problem: wildcardProblem(s)}
	}
	h, problem := canonicalHost(domain)
	if problem != "" {
		return Pattern{}, &HostError{Input: s, Problem: problem}
	}
	if wild {
		return Pattern{text: "*." + h, wildcard: true}, nil
	}
	return Pattern{text: h}, nil
}

func wildcardProblem(s string) string {
	if s == "*" || s == "*." {
		return `a bare "*" would allow every host; name a domain, like *.vendor.com`
	}
	return `the only wildcard allowed is a leading "*." before a domain, like *.vendor.com`
}

// MustPattern is ParsePattern for constants and tests; it panics on bad input.
func MustPattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the canonical pattern text.
func (p Pattern) String() string { return p.text }

// IsWildcard reports whether p is a "*.domain" pattern.
func (p Pattern) IsWildcard() bool { return p.wildcard }

// Matches reports whether canonicalHost (the output of CanonicalHost) is
// allowed by p. An exact pattern matches only that host. "*.vendor.com"
// matches hosts ending in ".vendor.com" with at least one more label in
// front: the leading dot of the suffix is what keeps "evilvendor.com" out,
// and requiring a longer host keeps "vendor.com" itself out.
// It does not allocate: it runs for every pattern on every payment check.
func (p Pattern) Matches(canonicalHost string) bool {
	if p.text == "" {
		return false
	}
	if !p.wildcard {
		return canonicalHost == p.text
	}
	suffix := p.text[1:]
	return len(canonicalHost) > len(suffix) && canonicalHost[len(canonicalHost)-len(suffix):] == suffix
}

// FirstMatch returns the first pattern in ps matching host (host already
// canonical). Order matters to callers that attach rules to patterns, so this
// is a plain scan, not a lookup structure.
func FirstMatch(ps []Pattern, host string) (Pattern, bool) {
	for _, p := range ps {
		if p.Matches(host) {
			return p, true
		}
	}
	return Pattern{}, false
}

// MarshalText returns the canonical pattern text ("" for the zero Pattern).
func (p Pattern) MarshalText() ([]byte, error) {
	return []byte(p.text), nil
}

// UnmarshalText parses with ParsePattern, so stored patterns are re-validated
// and re-canonicalized when loaded.
func (p *Pattern) UnmarshalText(b []byte) error {
	v, err := ParsePattern(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
