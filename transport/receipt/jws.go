package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/policy"
)

const (
	// Algorithm is the only JWS "alg" receipts use and Verify accepts.
	Algorithm = "EdDSA"
	// Type is the JWS "typ" of a receipt.
	Type = "JWT"
	// MaxTokenSize bounds the tokens Verify parses; real receipts are far
	// smaller.
	MaxTokenSize = 64 << 10
	// ChainHashPrefix starts every ChainHash value.
	ChainHashPrefix = "sha256:"
)

// Errors returned by Verify, usable with errors.Is.
var (
	ErrMalformed  = errors.New("receipt: malformed token")
	ErrAlgorithm  = errors.New("receipt: algorithm not accepted")
	ErrUnknownKey = errors.New("receipt: unknown key id")
	ErrSignature  = errors.New("receipt: invalid signature")
	ErrClaims     = errors.New("receipt: invalid claims")
	ErrJWKS       = errors.New("receipt: invalid JWKS")
)

// b64 is the unpadded base64url alphabet of JWS (RFC 7515, section 2). Strict
// decoding refuses non-zero padding bits, so one byte string has exactly one
// encoding and a token cannot be altered without breaking its signature.
var b64 = base64.RawURLEncoding.Strict()

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// encodedHeader is the first part of every token k signs: the same for
// all of them, so a keyring encodes it once per key.
func encodedHeader(k Key) string {
	h, err := json.Marshal(header{Alg: Algorithm, Kid: k.ID, Typ: Type})
	if err != nil {
		// Only strings are marshalled; this cannot happen.
		panic(fmt.Sprintf("receipt: marshal header: %v", err))
	}
	return b64.EncodeToString(h)
}

// sign builds the compact serialization header.payload.signature, with
// h the encodedHeader of k.
func sign(k Key, h string, c policy.ReceiptClaims) string {
	// The claims are encoded by hand (byte for byte what encoding/json
	// writes, held by fastjson's tests), into a scratch buffer that stays
	// on the stack unless the claims outgrow it: every settled spend signs.
	var scratch [1024]byte
	p := fastjson.AppendReceiptClaims(scratch[:0], &c)
	// One buffer for the whole token: the signing input is its prefix.
	buf := make([]byte, 0, len(h)+b64.EncodedLen(len(p))+b64.EncodedLen(ed25519.SignatureSize)+2)
	buf = append(buf, h...)
	buf = append(buf, '.')
	buf = b64.AppendEncode(buf, p)
	// Ed25519 is deterministic: this is byte for byte the signature
	// crypto/ed25519 gives, at half the cost (see signer.go).
	sig := fastSign(k.Private, buf)
	buf = append(buf, '.')
	buf = b64.AppendEncode(buf, sig)
	// The token is a receipt's largest part; nothing writes to buf again,
	// so it becomes the string without a copy.
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// Verify checks a receipt against a JWKS (as served by Keyring.JWKS) and
// returns its claims. It accepts only alg "EdDSA" with an Ed25519 key of the
// set named by the header's kid, a header made of alg, kid and typ "JWT"
// only, and a payload that decodes into ReceiptClaims with no unknown or
// trailing data. Nothing is decoded from the payload before the signature is
// checked.
func Verify(token string, jwksJSON []byte) (policy.ReceiptClaims, error) {
	var none policy.ReceiptClaims
	if len(token) > MaxTokenSize {
		return none, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenSize)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return none, fmt.Errorf("%w: want three non-empty dot-separated parts", ErrMalformed)
	}
	rawHeader, err := b64.DecodeString(parts[0])
	if err != nil {
		return none, fmt.Errorf("%w: header encoding: %v", ErrMalformed, err)
	}
	h, err := decodeHeader(rawHeader)
	if err != nil {
		return none, err
	}
	if h.Alg != Algorithm {
		return none, fmt.Errorf("%w: %q", ErrAlgorithm, h.Alg)
	}
	if h.Typ != Type {
		return none, fmt.Errorf("%w: typ %q, want %q", ErrMalformed, h.Typ, Type)
	}
	if h.Kid == "" {
		return none, fmt.Errorf("%w: header has no kid", ErrMalformed)
	}
	pub, err := findKey(jwksJSON, h.Kid)
	if err != nil {
		return none, err
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return none, fmt.Errorf("%w: signature encoding", ErrSignature)
	}
	signed := token[:len(parts[0])+1+len(parts[1])]
	if !ed25519.Verify(pub, []byte(signed), sig) {
		return none, ErrSignature
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return none, fmt.Errorf("%w: payload encoding: %v", ErrClaims, err)
	}
	var c policy.ReceiptClaims
	if err := decodeStrict(payload, &c); err != nil {
		return none, fmt.Errorf("%w: %v", ErrClaims, err)
	}
	return c, nil
}

// decodeHeader accepts a JSON object whose members are exactly named alg,
// kid and typ (JSON decoding alone would also match "ALG" or "Kid"), so that
// extensions such as crit, jku or an embedded jwk are refused rather than
// ignored.
func decodeHeader(raw []byte) (header, error) {
	var members map[string]json.RawMessage
	if err := decodeStrict(raw, &members); err != nil {
		return header{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	for name := range members {
		switch name {
		case "alg", "kid", "typ":
		default:
			return header{}, fmt.Errorf("%w: header member %q not accepted", ErrMalformed, name)
		}
	}
	var h header
	if err := decodeStrict(raw, &h); err != nil {
		return header{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	return h, nil
}

// setKey is a JWK as read from a set: every member is optional so that keys
// of other types in the set do not stop parsing.
type setKey struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// findKey returns the Ed25519 public key with the given kid. Keys of other
// types are ignored unless they carry that kid; a kid present twice is
// refused as ambiguous.
func findKey(jwksJSON []byte, kid string) (ed25519.PublicKey, error) {
	var set struct {
		Keys []setKey `json:"keys"`
	}
	if err := json.Unmarshal(jwksJSON, &set); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	var found *setKey
	for i := range set.Keys {
		if set.Keys[i].Kid != kid {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: kid %q appears twice", ErrJWKS, kid)
		}
		found = &set.Keys[i]
	}
	if found == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, kid)
	}
	if found.Kty != "OKP" || found.Crv != "Ed25519" {
		return nil, fmt.Errorf("%w: key %q is %s/%s, not OKP/Ed25519", ErrAlgorithm, kid, found.Kty, found.Crv)
	}
	if found.Alg != "" && found.Alg != Algorithm {
		return nil, fmt.Errorf("%w: key %q is for %q", ErrAlgorithm, kid, found.Alg)
	}
	if found.Use != "" && found.Use != "sig" {
		return nil, fmt.Errorf("%w: key %q has use %q", ErrJWKS, kid, found.Use)
	}
	x, err := b64.DecodeString(found.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: key %q has a malformed x", ErrJWKS, kid)
	}
	return ed25519.PublicKey(x), nil
}

// ChainHash is the link a receipt leaves for the next one:
// "sha256:" + hex(SHA-256(token)). The next receipt of the same owner puts it
// in ReceiptClaims.PrevHash.
func ChainHash(token string) string {
	// Hashed in place: a token is over a kilobyte, and this runs for every
	// receipt issued.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
	return ChainHashPrefix + hex.EncodeToString(sum[:])
}
