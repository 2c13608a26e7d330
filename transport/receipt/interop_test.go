package receipt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// TestInteropGoJOSE proves that a standard JOSE library, given nothing but
// the token and the published JWKS, verifies receipts, including one signed
// by a key that has since been retired.
func TestInteropGoJOSE(t *testing.T) {
	kr := testKeyring(t)
	old := mustSign(t, kr, sampleClaims(20))
	if _, err := kr.Rotate(newSeedStream("interop"), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	fresh := mustSign(t, kr, sampleClaims(21))

	var set jose.JSONWebKeySet
	if err := json.Unmarshal(kr.JWKS(), &set); err != nil {
		t.Fatalf("go-jose cannot read the JWKS: %v", err)
	}
	if len(set.Keys) != 2 {
		t.Fatalf("go-jose read %d keys", len(set.Keys))
	}
	for _, k := range set.Keys {
		if !k.IsPublic() || !k.Valid() {
			t.Fatalf("key %q: public=%v valid=%v", k.KeyID, k.IsPublic(), k.Valid())
		}
	}

	for i, tok := range []string{old, fresh} {
		obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			t.Fatalf("receipt %d: parse: %v", i, err)
		}
		if len(obj.Signatures) != 1 {
			t.Fatalf("receipt %d: %d signatures", i, len(obj.Signatures))
		}
		h := obj.Signatures[0].Header
		keys := set.Key(h.KeyID)
		if len(keys) != 1 {
			t.Fatalf("receipt %d: kid %q found %d times", i, h.KeyID, len(keys))
		}
		payload, err := obj.Verify(keys[0])
		if err != nil {
			t.Fatalf("receipt %d: go-jose verify: %v", i, err)
		}
		ours, err := Verify(tok, kr.JWKS())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(ours)
		if string(payload) != string(want) {
			t.Fatalf("receipt %d: payload %s, want %s", i, payload, want)
		}
		if h.Algorithm != "EdDSA" || h.ExtraHeaders["typ"] != "JWT" {
			t.Fatalf("receipt %d: header %+v", i, h)
		}
	}

	// And go-jose refuses a tampered receipt, like Verify does.
	tampered := replacePart(fresh, 1, flipChar(strings.Split(fresh, ".")[1], 7))
	obj, err := jose.ParseSignedCompact(tampered, []jose.SignatureAlgorithm{jose.EdDSA})
	if err == nil {
		keys := set.Key(obj.Signatures[0].Header.KeyID)
		if len(keys) == 1 {
			if _, err := obj.Verify(keys[0]); err == nil {
				t.Fatal("go-jose verified a tampered receipt")
			}
		}
	}
}
