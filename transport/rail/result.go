package rail

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"github.com/agentpay/guard/policy"
)

// MaxResultBody is the most bytes of a vendor body a VendorResult carries.
// Longer bodies are cut at a UTF-8 boundary and flagged BodyTruncated; the
// hash always covers the full body.
const MaxResultBody = 4096

// NewVendorResult builds the result a spend shows for a vendor answer: the
// body capped at MaxResultBody bytes without splitting a UTF-8 sequence, and
// "sha256:<hex>" of the complete body.
func NewVendorResult(status int, contentType string, body []byte) *policy.VendorResult {
	sum := sha256.Sum256(body)
	shown, truncated := capBody(body, MaxResultBody)
	return &policy.VendorResult{
		HTTPStatus:    status,
		ContentType:   contentType,
		Body:          string(shown),
		BodyTruncated: truncated,
		BodySHA256:    "sha256:" + hex.EncodeToString(sum[:]),
	}
}

// capBody returns at most limit bytes of body. When it has to cut, it cuts
// before the first byte of the character that would straddle the limit, so a
// valid UTF-8 body stays valid.
func capBody(body []byte, limit int) ([]byte, bool) {
	if len(body) <= limit {
		return body, false
	}
	cut := limit
	// A UTF-8 character is at most 4 bytes: look back at most 3 bytes for the
	// start of the character that owns body[cut].
	for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(body[cut]); back++ {
		cut--
	}
	return body[:cut], true
}
