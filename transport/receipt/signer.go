package receipt

import (
	"crypto/ed25519"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// fastSign signs with curve25519-voi rather than crypto/ed25519. Every
// settled spend signs a receipt while its owner's receipt chain is locked,
// so the signature sits on the spend's critical path; the standard
// library's fixed-base multiplication makes a signature cost about twice as
// much. Ed25519 signatures are a deterministic function of the key and the
// message (RFC 8032 5.1.6), so the bytes are exactly those crypto/ed25519
// would produce (TestFastSignMatchesStandardLibrary), and verification
// stays with the standard library.
func fastSign(priv ed25519.PrivateKey, message []byte) []byte {
	return voi.Sign(voi.PrivateKey(priv), message)
}
