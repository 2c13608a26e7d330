// Package receipt issues and checks the signed receipts the guard hands back
// for every settled spend.
//
// # Model
//
// A receipt is a compact JWS (RFC 7515) signed with Ed25519 (RFC 8037):
//
//	base64url(header) "." base64url(claims) "." base64url(signature)
//
// The header is always {"alg":"EdDSA","kid":"rk_…","typ":"JWT"} and the
// claims are the JSON of policy.ReceiptClaims. Anyone holding the service's
// JWKS (Keyring.JWKS, served publicly) can check a receipt with any standard
// JOSE library; Verify is this package's own checker.
//
// Receipts of one owner form a hash chain: each carries in PrevHash the
// ChainHash ("sha256:" + hex SHA-256) of the previous compact token, so
// editing, reordering or dropping a receipt breaks every later link even when
// each token still verifies on its own.
//
// # Keys
//
// A Key is an Ed25519 private key with an id derived from its public half
// ("rk_" + the first 16 hex digits of SHA-256 of the public key), a creation
// time and, once rotated out, a retirement time. A Keyring holds exactly one
// current (non-retired) key, which signs, plus any number of retired keys,
// which never sign again but stay in the JWKS forever so that old receipts
// keep verifying. Rotate retires the current key and generates a new one.
//
// Key.MarshalBinary writes the private seed: it is secret and belongs only in
// the service's own data file. UnmarshalKey re-derives the key and refuses it
// when the stored id no longer matches. The JWKS never contains a private
// part.
//
// # Invariants
//
//   - Verify accepts alg "EdDSA" only ("none", HMAC and every other value are
//     refused before any key is looked up), an Ed25519 key found by kid in the
//     given set, a header of exactly alg, kid and typ "JWT", strict unpadded
//     base64url, and claims that decode with no unknown field or trailing
//     data. The payload is not decoded until the signature has been checked.
//   - Ed25519 signatures and strict base64url are not malleable: a token that
//     verifies is byte-for-byte the one that was signed, so ChainHash is a
//     stable identity of a receipt.
//   - The JWKS order is deterministic: current key first, then retired keys
//     from newest to oldest.
//
// # Concurrency
//
// Keyring is safe for concurrent use; Sign runs under a read lock and Rotate
// under the write lock, so a receipt is always signed by a key that is
// current at that instant and already present in the JWKS. Verify and
// ChainHash are pure functions.
//
// # Caveats
//
// Key ids are 64-bit truncations: unique by construction for one service's
// keys (NewKeyring and Rotate refuse a duplicate), not a global identifier.
// Persisting a rotation is the caller's job: save the new key and the retired
// one before issuing receipts with the new key, or a restart brings back the
// old key as current. Verify checks the signature and the claim encoding, not
// the chain and not the meaning of the claims; walking an owner's chain
// compares PrevHash with ChainHash of the previous token.
package receipt
