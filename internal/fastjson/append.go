package fastjson

import (
	"time"
	"unicode/utf8"

	"github.com/agentpay/guard/policy"
)

// The Append functions write one JSON value at the end of b and return the
// extended slice, byte for byte as encoding/json writes the same value. They
// are for the forms written on every spend, where walking a struct through
// reflection cost more than the rest of the encoding; this package's tests
// hold each of them to encoding/json over random values.

// plain marks the bytes AppendString copies as they are: ASCII other than
// controls, quote, backslash and the HTML-sensitive <, > and &. One table
// load per byte instead of six comparisons.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string literal, escaped exactly as
// encoding/json escapes it: HTML-safe, U+2028 and U+2029 escaped, invalid
// UTF-8 replaced by U+FFFD.
func AppendString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexd[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendStrings appends list as a JSON array of strings; a nil list is null.
func AppendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// AppendOptString appends *s, or null for a nil s.
func AppendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

// AppendTime appends t as time.Time's MarshalJSON does: RFC 3339 with as
// many fractional digits as it needs, quoted. (MarshalJSON refuses years
// outside 0-9999; the service never stores one.)
func AppendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendOptTime appends *t, or null for a nil t.
func AppendOptTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return AppendTime(b, *t)
}

// AppendAmount appends a as its text form (MarshalText), quoted. The text
// is digits, a point and a sign: nothing to escape.
func AppendAmount(b []byte, a policy.Amount) []byte {
	b = append(b, '"')
	b, _ = a.AppendText(b)
	return append(b, '"')
}

// AppendOptAmount appends *a, or null for a nil a.
func AppendOptAmount(b []byte, a *policy.Amount) []byte {
	if a == nil {
		return append(b, "null"...)
	}
	return AppendAmount(b, *a)
}
