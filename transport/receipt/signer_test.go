package receipt

import (
	"bytes"
	"crypto/ed25519"
	"math/rand/v2"
	"testing"
)

// The faster signer must change no byte of any receipt: for many keys and
// messages of every length up to a few receipts' size, its signature equals
// the standard library's, which also verifies it.
func TestFastSignMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	seed := make([]byte, ed25519.SeedSize)
	for i := range 300 {
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed)
		msg := make([]byte, rng.IntN(3000))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		got, want := fastSign(priv, msg), ed25519.Sign(priv, msg)
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (message of %d bytes): signature %x, crypto/ed25519 gives %x", i, len(msg), got, want)
		}
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), msg, got) {
			t.Fatalf("case %d: signature does not verify", i)
		}
	}
}
