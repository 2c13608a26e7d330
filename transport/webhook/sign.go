package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header is the name of the signature header.
const Header = "Service-Signature"

// Tolerance is how far t may be from a receiver's clock (spec 6.3).
const Tolerance = 300 * time.Second

// Sign is the hex HMAC-SHA256 of "<t>.<body>" keyed with secret.
func Sign(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(strconv.AppendInt(nil, t, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// SignatureHeader is the value of Service-Signature for body at time t,
// one v1 value per secret, in the order given.
func SignatureHeader(t int64, body []byte, secrets ...string) string {
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(t, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(Sign(s, t, body))
	}
	return b.String()
}

// Errors of Verify.
var (
	ErrMalformed = errors.New("webhook: malformed Service-Signature header")
	ErrTooOld    = errors.New("webhook: signature timestamp outside the tolerance")
	ErrNoMatch   = errors.New("webhook: no v1 signature matches the secret")
)

// Verify checks a Service-Signature header against the raw body for one
// secret: t must be within tolerance of now and one v1 value must match.
func Verify(header string, body []byte, secret string, now time.Time, tolerance time.Duration) error {
	var t int64
	haveT := false
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || haveT {
				return ErrMalformed
			}
			t, haveT = n, true
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if !haveT || len(sigs) == 0 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return ErrTooOld
	}
	want := []byte(Sign(secret, t, body))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return ErrNoMatch
}
