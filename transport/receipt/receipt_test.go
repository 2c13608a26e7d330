package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpay/guard/policy"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seedStream is a deterministic byte stream for reproducible keys.
type seedStream struct{ state [32]byte }

func newSeedStream(label string) *seedStream {
	return &seedStream{state: sha256.Sum256([]byte(label))}
}

func (s *seedStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		s.state = sha256.Sum256(s.state[:])
		n += copy(p[n:], s.state[:])
	}
	return n, nil
}

func testKey(t testing.TB, label string, at time.Time) Key {
	t.Helper()
	k, err := GenerateKey(newSeedStream(label), at)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testKeyring(t testing.TB) *Keyring {
	t.Helper()
	kr, err := NewKeyring(testKey(t, "k1", t0))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func sampleClaims(n int) policy.ReceiptClaims {
	return policy.ReceiptClaims{
		ReceiptID:     "rcpt_" + strings.Repeat("a", n%5+1),
		SpendID:       "sp_123",
		AgentID:       "ag_1",
		OwnerID:       "ow_1",
		Livemode:      false,
		Amount:        "1.00",
		AmountSettled: "0.95",
		Currency:      "USDC",
		Destination:   "0x1111111111111111111111111111111111111111",
		Resource:      policy.Resource{Host: "api.example.com", Path: "/v1/data?q=1", Method: "GET"},
		Network:       "base-sepolia",
		Reference:     "0x" + strings.Repeat("ab", 32),
		PolicyVersion: 3,
		PolicyHash:    "sha256:" + strings.Repeat("0", 64),
		BodySHA256:    "sha256:" + strings.Repeat("1", 64),
		IssuedAt:      t0.Unix() + int64(n),
	}
}

func mustSign(t testing.TB, kr *Keyring, c policy.ReceiptClaims) string {
	t.Helper()
	tok, err := kr.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSignVerifyRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	c := sampleClaims(0)
	tok := mustSign(t, kr, c)
	if strings.Count(tok, ".") != 2 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	got, err := Verify(tok, kr.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("claims changed:\n got %+v\nwant %+v", got, c)
	}

	hdr, err := b64.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"alg":"EdDSA","kid":"` + kr.Current().ID + `","typ":"JWT"}`
	if string(hdr) != want {
		t.Fatalf("header = %s, want %s", hdr, want)
	}
	// Signing is deterministic for Ed25519.
	if again := mustSign(t, kr, c); again != tok {
		t.Fatal("signing the same claims twice gave different tokens")
	}
}

func TestKeyID(t *testing.T) {
	k := testKey(t, "kid", t0)
	sum := sha256.Sum256(k.Public())
	want := "rk_" + hex.EncodeToString(sum[:8])
	if k.ID != want || len(k.ID) != 3+16 {
		t.Fatalf("kid = %q, want %q", k.ID, want)
	}
}

// replacePart swaps one of the three parts of a compact token.
func replacePart(tok string, i int, part string) string {
	parts := strings.Split(tok, ".")
	parts[i] = part
	return strings.Join(parts, ".")
}

// flipChar changes one base64url character of s at i to another valid one.
func flipChar(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestTamperedTokensFail(t *testing.T) {
	kr := testKeyring(t)
	set := kr.JWKS()
	tok := mustSign(t, kr, sampleClaims(1))
	parts := strings.Split(tok, ".")

	otherClaims := sampleClaims(1)
	otherClaims.AmountSettled = "0.01"
	otherPayload, _ := json.Marshal(otherClaims)

	otherHeader := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + kr.Current().ID + `","typ":"JWT","x":1}`))
	reorderedHeader := b64.EncodeToString([]byte(`{"kid":"` + kr.Current().ID + `","alg":"EdDSA","typ":"JWT"}`))

	cases := map[string]struct {
		tok  string
		want error
	}{
		"payload replaced":      {replacePart(tok, 1, b64.EncodeToString(otherPayload)), ErrSignature},
		"payload char flipped":  {replacePart(tok, 1, flipChar(parts[1], 10)), ErrSignature},
		"signature flipped":     {replacePart(tok, 2, flipChar(parts[2], 5)), ErrSignature},
		"signature truncated":   {replacePart(tok, 2, parts[2][:40]), ErrSignature},
		"signature of other":    {replacePart(tok, 2, strings.Split(mustSign(t, kr, sampleClaims(2)), ".")[2]), ErrSignature},
		"header extra member":   {replacePart(tok, 0, otherHeader), ErrMalformed},
		"header reordered":      {replacePart(tok, 0, reorderedHeader), ErrSignature},
		"header char flipped":   {replacePart(tok, 0, flipChar(parts[0], 3)), nil},
		"padding added":         {tok + "=", ErrSignature},
		"two parts":             {parts[0] + "." + parts[1], ErrMalformed},
		"four parts":            {tok + ".x", ErrMalformed},
		"empty signature":       {parts[0] + "." + parts[1] + ".", ErrMalformed},
		"empty":                 {"", ErrMalformed},
		"not base64":            {"!!!.!!!.!!!", ErrMalformed},
		"json serialization":    {`{"payload":"` + parts[1] + `"}`, ErrMalformed},
		"trailing space":        {tok + " ", ErrSignature},
		"non canonical base64":  {replacePart(tok, 2, nonCanonical(parts[2])), ErrSignature},
		"header is not object":  {replacePart(tok, 0, b64.EncodeToString([]byte(`"EdDSA"`))), ErrMalformed},
		"header wrong typ":      {replacePart(tok, 0, b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"`+kr.Current().ID+`","typ":"JOSE"}`))), ErrMalformed},
		"header missing kid":    {replacePart(tok, 0, b64.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT"}`))), ErrMalformed},
		"header with embedded":  {replacePart(tok, 0, b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"`+kr.Current().ID+`","typ":"JWT","jwk":{}}`))), ErrMalformed},
		"header upper case alg": {replacePart(tok, 0, b64.EncodeToString([]byte(`{"ALG":"EdDSA","kid":"`+kr.Current().ID+`","typ":"JWT"}`))), ErrMalformed},
		"header crit extension": {replacePart(tok, 0, b64.EncodeToString([]byte(`{"alg":"EdDSA","crit":["x"],"kid":"`+kr.Current().ID+`","typ":"JWT"}`))), ErrMalformed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Verify(tc.tok, set)
			if err == nil {
				t.Fatalf("tampered token verified")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// nonCanonical re-encodes the last character of an unpadded base64url string
// with non-zero padding bits when the length leaves any, which strict
// decoding must refuse.
func nonCanonical(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[last^1])
}

// forge builds a token with an arbitrary header whose signature is computed
// by sign (which may be nil for an empty signature part).
func forge(header, payload []byte, sign func(input []byte) []byte) string {
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	sig := []byte{}
	if sign != nil {
		sig = sign([]byte(input))
	}
	return input + "." + b64.EncodeToString(sig)
}

func TestAlgorithmConfusionRejected(t *testing.T) {
	kr := testKeyring(t)
	set := kr.JWKS()
	kid := kr.Current().ID
	payload, _ := json.Marshal(sampleClaims(3))
	pub := kr.Current().Public()

	hs256 := func(input []byte) []byte {
		// The classic confusion: HMAC keyed with the public key bytes, or
		// with the JWKS text itself.
		m := hmac.New(sha256.New, pub)
		m.Write(input)
		return m.Sum(nil)
	}
	hs256JWKS := func(input []byte) []byte {
		m := hmac.New(sha256.New, set)
		m.Write(input)
		return m.Sum(nil)
	}
	edSign := func(input []byte) []byte { return ed25519.Sign(kr.Current().Private, input) }

	cases := map[string]string{
		"none empty sig":       forge([]byte(`{"alg":"none","kid":"`+kid+`","typ":"JWT"}`), payload, nil),
		"none ed sig":          forge([]byte(`{"alg":"none","kid":"`+kid+`","typ":"JWT"}`), payload, edSign),
		"None ed sig":          forge([]byte(`{"alg":"None","kid":"`+kid+`","typ":"JWT"}`), payload, edSign),
		"HS256 public key":     forge([]byte(`{"alg":"HS256","kid":"`+kid+`","typ":"JWT"}`), payload, hs256),
		"HS256 jwks":           forge([]byte(`{"alg":"HS256","kid":"`+kid+`","typ":"JWT"}`), payload, hs256JWKS),
		"eddsa lower case":     forge([]byte(`{"alg":"eddsa","kid":"`+kid+`","typ":"JWT"}`), payload, edSign),
		"Ed25519 alg name":     forge([]byte(`{"alg":"Ed25519","kid":"`+kid+`","typ":"JWT"}`), payload, edSign),
		"missing alg":          forge([]byte(`{"kid":"`+kid+`","typ":"JWT"}`), payload, edSign),
		"ES256":                forge([]byte(`{"alg":"ES256","kid":"`+kid+`","typ":"JWT"}`), payload, edSign),
		"none without a dot 3": b64.EncodeToString([]byte(`{"alg":"none","kid":"`+kid+`","typ":"JWT"}`)) + "." + b64.EncodeToString(payload) + ".",
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Verify(tok, set); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	// The well-formed variant signed the same way is accepted, so the cases
	// above fail because of their alg and nothing else.
	good := forge([]byte(`{"alg":"EdDSA","kid":"`+kid+`","typ":"JWT"}`), payload, edSign)
	if _, err := Verify(good, set); err != nil {
		t.Fatalf("control token: %v", err)
	}
	for _, name := range []string{"none ed sig", "HS256 public key", "eddsa lower case"} {
		if _, err := Verify(cases[name], set); !errors.Is(err, ErrAlgorithm) {
			t.Errorf("%s: err = %v, want ErrAlgorithm", name, err)
		}
	}
}

func TestUnknownKidRejected(t *testing.T) {
	kr := testKeyring(t)
	other, err := NewKeyring(testKey(t, "other", t0))
	if err != nil {
		t.Fatal(err)
	}
	tok := mustSign(t, other, sampleClaims(4))
	if _, err := Verify(tok, kr.JWKS()); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
	// A JWKS that lists the right kid with another key's x must fail the
	// signature, not be trusted by kid alone.
	var set map[string][]map[string]string
	if err := json.Unmarshal(kr.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	set["keys"][0]["kid"] = other.Current().ID
	swapped, _ := json.Marshal(set)
	if _, err := Verify(tok, swapped); !errors.Is(err, ErrSignature) {
		t.Fatalf("err = %v, want ErrSignature", err)
	}
}

func TestJWKSKeyChecks(t *testing.T) {
	kr := testKeyring(t)
	tok := mustSign(t, kr, sampleClaims(5))
	kid := kr.Current().ID
	x := b64.EncodeToString(kr.Current().Public())
	cases := map[string]struct {
		set  string
		want error
	}{
		"not json":      {`{`, ErrJWKS},
		"empty set":     {`{"keys":[]}`, ErrUnknownKey},
		"rsa under kid": {`{"keys":[{"kty":"RSA","kid":"` + kid + `","n":"AQAB","e":"AQAB"}]}`, ErrAlgorithm},
		"x25519 curve":  {`{"keys":[{"kty":"OKP","crv":"X25519","kid":"` + kid + `","x":"` + x + `"}]}`, ErrAlgorithm},
		"wrong alg":     {`{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"ES256","kid":"` + kid + `","x":"` + x + `"}]}`, ErrAlgorithm},
		"enc use":       {`{"keys":[{"kty":"OKP","crv":"Ed25519","use":"enc","kid":"` + kid + `","x":"` + x + `"}]}`, ErrJWKS},
		"short x":       {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","x":"AAAA"}]}`, ErrJWKS},
		"duplicate kid": {`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","x":"` + x + `"},{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","x":"` + x + `"}]}`, ErrJWKS},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Verify(tok, []byte(tc.set)); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// Other keys in the set, and alg/use omitted, are fine.
	ok := `{"keys":[{"kty":"RSA","kid":"rsa1","n":"AQAB","e":"AQAB"},{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","x":"` + x + `"}]}`
	if _, err := Verify(tok, []byte(ok)); err != nil {
		t.Fatalf("mixed set: %v", err)
	}
}

func TestClaimsDecodedStrictly(t *testing.T) {
	kr := testKeyring(t)
	set := kr.JWKS()
	k := kr.Current()
	hdr := []byte(`{"alg":"EdDSA","kid":"` + k.ID + `","typ":"JWT"}`)
	edSign := func(input []byte) []byte { return ed25519.Sign(k.Private, input) }
	good, _ := json.Marshal(sampleClaims(6))
	cases := map[string][]byte{
		"unknown claim":  append(append([]byte{}, good[:len(good)-1]...), []byte(`,"admin":true}`)...),
		"trailing data":  append(append([]byte{}, good...), []byte(`{}`)...),
		"trailing brace": append(append([]byte{}, good...), '}'),
		"array":          []byte(`[]`),
		"null":           []byte(`null`),
		"wrong type":     []byte(`{"iat":"yesterday"}`),
		"not json":       []byte(`hello`),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			// Validly signed, so only the claim decoding can refuse it.
			if _, err := Verify(forge(hdr, payload, edSign), set); !errors.Is(err, ErrClaims) {
				t.Fatalf("err = %v, want ErrClaims", err)
			}
		})
	}
	// Trailing white space after the object is harmless.
	if _, err := Verify(forge(hdr, append(append([]byte{}, good...), '\n'), edSign), set); err != nil {
		t.Fatalf("trailing newline: %v", err)
	}
}

func TestRotationKeepsOldReceiptsValid(t *testing.T) {
	kr := testKeyring(t)
	first := kr.Current()
	old := mustSign(t, kr, sampleClaims(7))

	next, err := kr.Rotate(newSeedStream("k2"), t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == first.ID || kr.Current().ID != next.ID {
		t.Fatalf("current after rotate = %q, want new key %q", kr.Current().ID, next.ID)
	}
	keys := kr.Keys()
	if len(keys) != 2 || keys[0].ID != next.ID || keys[1].ID != first.ID {
		t.Fatalf("keys order = %v", ids(keys))
	}
	if keys[1].RetiredAt == nil || !keys[1].RetiredAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("old key retired at %v", keys[1].RetiredAt)
	}
	if keys[0].Retired() {
		t.Fatal("new key is retired")
	}

	set := kr.JWKS()
	c, err := Verify(old, set)
	if err != nil {
		t.Fatalf("receipt of retired key: %v", err)
	}
	if c != sampleClaims(7) {
		t.Fatal("claims changed")
	}
	fresh := mustSign(t, kr, sampleClaims(8))
	if !strings.Contains(mustDecodeHeader(t, fresh), next.ID) {
		t.Fatal("new receipts are not signed by the new key")
	}
	if _, err := Verify(fresh, set); err != nil {
		t.Fatal(err)
	}

	// Rotating twice keeps all three keys, current first, then newest to
	// oldest; the keyring reloads from its stored keys.
	third, err := kr.Rotate(newSeedStream("k3"), t0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var stored [][]byte
	for _, k := range kr.Keys() {
		b, err := k.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b)
	}
	var loaded []Key
	for i := len(stored) - 1; i >= 0; i-- { // any order
		k, err := UnmarshalKey(stored[i])
		if err != nil {
			t.Fatal(err)
		}
		loaded = append(loaded, k)
	}
	again, err := NewKeyring(loaded...)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(again.Keys()); strings.Join(got, ",") != strings.Join([]string{third.ID, next.ID, first.ID}, ",") {
		t.Fatalf("reloaded order = %v", got)
	}
	if !bytes.Equal(again.JWKS(), kr.JWKS()) {
		t.Fatal("JWKS differs after reload")
	}
	for _, tok := range []string{old, fresh} {
		if _, err := Verify(tok, again.JWKS()); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(keys []Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.ID)
	}
	return out
}

func mustDecodeHeader(t *testing.T, tok string) string {
	t.Helper()
	h, err := b64.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestJWKSHasNoPrivateParts(t *testing.T) {
	kr := testKeyring(t)
	if _, err := kr.Rotate(newSeedStream("k2"), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	set := kr.JWKS()
	var parsed struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(set, &parsed); err != nil {
		t.Fatal(err)
	}
	if len(parsed.Keys) != 2 {
		t.Fatalf("JWKS lists %d keys, want 2", len(parsed.Keys))
	}
	for _, k := range parsed.Keys {
		if _, ok := k["d"]; ok {
			t.Fatalf("JWKS key has a private part: %v", k)
		}
		for _, m := range []string{"kty", "crv", "x", "kid", "alg", "use"} {
			if _, ok := k[m]; !ok {
				t.Fatalf("JWKS key lacks %q: %v", m, k)
			}
		}
		if len(k) != 6 {
			t.Fatalf("unexpected members: %v", k)
		}
	}
	for _, k := range kr.Keys() {
		for _, secret := range [][]byte{k.Private.Seed(), k.Private} {
			if bytes.Contains(set, []byte(b64.EncodeToString(secret))) {
				t.Fatal("JWKS contains private key bytes")
			}
		}
	}
	// Deterministic: the same keyring always serves the same bytes.
	if !bytes.Equal(set, kr.JWKS()) {
		t.Fatal("JWKS not deterministic")
	}
}

func TestChainOfThree(t *testing.T) {
	kr := testKeyring(t)
	set := kr.JWKS()

	var tokens []string
	prev := ""
	for i := range 3 {
		c := sampleClaims(10 + i)
		c.PrevHash = prev
		tok := mustSign(t, kr, c)
		tokens = append(tokens, tok)
		prev = ChainHash(tok)
	}
	checkChain := func(tokens []string) int {
		prev := ""
		for i, tok := range tokens {
			c, err := Verify(tok, set)
			if err != nil || c.PrevHash != prev {
				return i
			}
			prev = ChainHash(tok)
		}
		return -1
	}
	if broken := checkChain(tokens); broken != -1 {
		t.Fatalf("intact chain broken at %d", broken)
	}
	if h := ChainHash(tokens[0]); !strings.HasPrefix(h, "sha256:") || len(h) != 7+64 {
		t.Fatalf("ChainHash = %q", h)
	}

	// Editing the middle receipt and signing it again with the real key
	// still breaks the link the third receipt holds.
	mid, err := Verify(tokens[1], set)
	if err != nil {
		t.Fatal(err)
	}
	mid.AmountSettled = "0.01"
	edited := append([]string{}, tokens...)
	edited[1] = mustSign(t, kr, mid)
	if broken := checkChain(edited); broken != 2 {
		t.Fatalf("edited chain broken at %d, want 2", broken)
	}
	// Dropping the middle receipt breaks the link as well.
	if broken := checkChain([]string{tokens[0], tokens[2]}); broken != 1 {
		t.Fatalf("chain without the middle broken at %d, want 1", broken)
	}
	// Editing without the key fails the signature itself.
	raw := append([]string{}, tokens...)
	raw[1] = replacePart(tokens[1], 1, flipChar(strings.Split(tokens[1], ".")[1], 20))
	if broken := checkChain(raw); broken != 1 {
		t.Fatalf("forged chain broken at %d, want 1", broken)
	}
}

func TestKeyMarshalRoundTrip(t *testing.T) {
	k := testKey(t, "m", t0)
	retired := t0.Add(time.Hour)
	k.RetiredAt = &retired
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != k.ID || !bytes.Equal(got.Private, k.Private) || !got.CreatedAt.Equal(k.CreatedAt) ||
		got.RetiredAt == nil || !got.RetiredAt.Equal(retired) {
		t.Fatalf("round trip: got %+v, want %+v", got, k)
	}

	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["kid"] = "rk_0000000000000000"
	bad, _ := json.Marshal(m)
	if _, err := UnmarshalKey(bad); err == nil {
		t.Fatal("key with a foreign id accepted")
	}
	for name, data := range map[string]string{
		"empty":    ``,
		"garbage":  `xyz`,
		"no seed":  `{"kid":"` + k.ID + `","created_at":"2026-03-01T12:00:00Z"}`,
		"extra":    strings.TrimSuffix(string(b), "}") + `,"x":1}`,
		"trailing": string(b) + `{}`,
	} {
		if _, err := UnmarshalKey([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// A malformed key cannot be stored.
	if _, err := (Key{ID: "rk_x", Private: ed25519.PrivateKey{1, 2}}).MarshalBinary(); err == nil {
		t.Fatal("short key marshalled")
	}
}

func TestNewKeyringValidation(t *testing.T) {
	a := testKey(t, "a", t0)
	b := testKey(t, "b", t0.Add(time.Hour))
	retired := t0.Add(30 * time.Minute)
	aRetired := a
	aRetired.RetiredAt = &retired
	wrongID := b
	wrongID.ID = a.ID
	tampered := b
	tampered.Private = append(ed25519.PrivateKey{}, b.Private...)
	tampered.Private[40] ^= 1

	cases := map[string][]Key{
		"no keys":       nil,
		"two current":   {a, b},
		"none current":  {aRetired},
		"duplicate id":  {aRetired, aRetired, b},
		"wrong id":      {aRetired, wrongID},
		"mismatch half": {aRetired, tampered},
	}
	for name, keys := range cases {
		if _, err := NewKeyring(keys...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	kr, err := NewKeyring(aRetired, b)
	if err != nil {
		t.Fatal(err)
	}
	if kr.Current().ID != b.ID {
		t.Fatalf("current = %q", kr.Current().ID)
	}

	// The keyring owns copies: changing the caller's key or a returned key
	// does not change the keyring.
	aRetired.Private[0] ^= 0xff
	got := kr.Current()
	got.Private[0] ^= 0xff
	if err := kr.Current().validate(); err != nil {
		t.Fatal(err)
	}
	for _, k := range kr.Keys() {
		if err := k.validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestZeroKeyring(t *testing.T) {
	var kr Keyring
	if _, err := kr.Sign(sampleClaims(0)); !errors.Is(err, ErrNoKey) {
		t.Fatalf("err = %v", err)
	}
	if _, err := kr.Rotate(newSeedStream("z"), t0); !errors.Is(err, ErrNoKey) {
		t.Fatalf("err = %v", err)
	}
	if kr.Current().ID != "" || len(kr.Keys()) != 0 {
		t.Fatal("zero keyring has keys")
	}
	if string(kr.JWKS()) != `{"keys":[]}` {
		t.Fatalf("JWKS = %s", kr.JWKS())
	}
}

// Signing while keys rotate: every token verifies, and the key id
// SignWithKeyID names is the one in the token's header, rotation or not.
func TestConcurrentSignRotate(t *testing.T) {
	kr := testKeyring(t)
	var wg sync.WaitGroup
	tokens := make(chan string, 400)
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tok, kid, err := kr.SignWithKeyID(sampleClaims(w*100 + i))
				if err != nil {
					t.Error(err)
					return
				}
				if got := tokenKeyID(t, tok); got != kid {
					t.Errorf("signed by %q, but the token's header names %q", kid, got)
					return
				}
				tokens <- tok
				_ = kr.JWKS()
				_ = kr.Keys()
			}
		})
	}
	for i := range 5 {
		if _, err := kr.Rotate(nil, t0.Add(time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(tokens)
	set := kr.JWKS()
	for tok := range tokens {
		if _, err := Verify(tok, set); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(kr.Keys()); n != 6 {
		t.Fatalf("keys = %d, want 6", n)
	}
}

func tokenKeyID(t *testing.T, tok string) string {
	t.Helper()
	raw, err := b64.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	h, err := decodeHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	return h.Kid
}

func FuzzVerify(f *testing.F) {
	kr := testKeyring(f)
	set := kr.JWKS()
	good := mustSign(f, kr, sampleClaims(0))
	parts := strings.Split(good, ".")
	f.Add(good)
	f.Add("")
	f.Add("..")
	f.Add("a.b.c")
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(parts[0] + ".." + parts[2])
	f.Add(b64.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".")
	f.Add(b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":null}`)) + "." + parts[1] + "." + parts[2])
	f.Add(strings.Repeat(".", 100))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(tok, set)
		if err != nil {
			return
		}
		// Signatures and encodings are not malleable: only the one signed
		// token can verify.
		if tok != good {
			t.Fatalf("forged token verified: %q -> %+v", tok, c)
		}
	})
}
