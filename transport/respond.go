package transport

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/internal/fastjson"
)

// requestIDs are "req_" + a per-process random prefix + a counter: unique,
// cheap, and never a secret.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return &requestIDs{prefix: "req_" + hex.EncodeToString(b[:])}
}

func (r *requestIDs) next() string {
	var b [40]byte
	return string(strconv.AppendUint(append(b[:0], r.prefix...), r.n.Add(1)+1<<40, 36))
}

// writeJSON encodes v with the per-response fields added.
func writeJSON(ctx *fasthttp.RequestCtx, status int, reqID string, v any) {
	b, err := fastjson.Marshal(v)
	if err != nil {
		writeError(ctx, reqID, &apiError{code: "internal_error", message: "The response could not be encoded."})
		return
	}
	writeObject(ctx, status, reqID, b, nil)
}

// writeObject writes a stored JSON object, splicing in request_id and any
// extra fields before its closing brace, so stored spends are served without
// decoding them again.
func writeObject(ctx *fasthttp.RequestCtx, status int, reqID string, obj []byte, extra []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	// Straight into the response's own (pooled) body buffer: no copy of
	// the object of our own.
	ctx.SetBody(obj[:len(obj)-1])
	if len(obj) > 2 {
		ctx.Response.AppendBodyString(",")
	}
	ctx.Response.AppendBody(extra)
	var tail [80]byte
	t := append(tail[:0], `"request_id":`...)
	t = appendJSONString(t, reqID)
	ctx.Response.AppendBody(append(t, '}'))
}

// jsonPlain marks the bytes appendJSONString copies as they are: ASCII
// other than controls, quote, backslash and the HTML-sensitive <, > and &.
// One table load per byte instead of six comparisons: the answers of the
// hot reads are mostly such bytes.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s as a JSON string literal, escaped exactly as
// encoding/json escapes it (HTML-safe, U+2028 and U+2029 escaped, invalid
// UTF-8 replaced), so hand-written answers read the same as encoded ones.
func appendJSONString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonPlain[c] {
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

// appendJSONStrings appends list as a JSON array of strings.
func appendJSONStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}
