package receipt

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/agentpay/guard/policy"
)

// ErrNoKey is returned by a Keyring that holds no current key (only the zero
// value can be in that state).
var ErrNoKey = errors.New("receipt: keyring has no current key")

// Keyring holds the current signing key and every retired key. It is safe for
// concurrent use.
type Keyring struct {
	mu      sync.RWMutex
	keys    []Key  // sorted: current first, then newest to oldest
	current int    // index of the non-retired key in keys; -1 when empty
	header  string // encodedHeader of the current key
}

// NewKeyring builds a keyring from stored keys. Exactly one key must be
// non-retired: it is the current key and the only one that signs. Keys are
// copied; ids must be unique and match their key material.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("receipt: NewKeyring needs at least one key")
	}
	seen := make(map[string]bool, len(keys))
	live := 0
	kr := &Keyring{keys: make([]Key, 0, len(keys))}
	for _, k := range keys {
		if err := k.validate(); err != nil {
			return nil, err
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("receipt: duplicate key id %q", k.ID)
		}
		seen[k.ID] = true
		if !k.Retired() {
			live++
		}
		kr.keys = append(kr.keys, k.clone())
	}
	if live != 1 {
		return nil, fmt.Errorf("receipt: keyring needs exactly one non-retired key, got %d", live)
	}
	kr.sortLocked()
	return kr, nil
}

// sortLocked orders keys deterministically: the current key first, then the
// retired keys from newest to oldest, ties broken by id.
func (kr *Keyring) sortLocked() {
	sort.SliceStable(kr.keys, func(i, j int) bool {
		a, b := kr.keys[i], kr.keys[j]
		if a.Retired() != b.Retired() {
			return !a.Retired()
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	kr.current, kr.header = -1, ""
	if len(kr.keys) > 0 && !kr.keys[0].Retired() {
		kr.current = 0
		kr.header = encodedHeader(kr.keys[0])
	}
}

// Current returns a copy of the signing key. It is the zero Key only for a
// zero Keyring.
func (kr *Keyring) Current() Key {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	if kr.current < 0 || len(kr.keys) == 0 {
		return Key{}
	}
	return kr.keys[kr.current].clone()
}

// Keys returns copies of every key, current first, in the JWKS order.
func (kr *Keyring) Keys() []Key {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	out := make([]Key, len(kr.keys))
	for i, k := range kr.keys {
		out[i] = k.clone()
	}
	return out
}

// Sign issues a receipt: a compact JWS of the claims signed by the current
// key.
func (kr *Keyring) Sign(c policy.ReceiptClaims) (string, error) {
	token, _, err := kr.SignWithKeyID(c)
	return token, err
}

// SignWithKeyID is Sign that also names the key that signed. Asking
// Current for the id separately could name another key, should a rotation
// come in between.
func (kr *Keyring) SignWithKeyID(c policy.ReceiptClaims) (token, kid string, err error) {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	if kr.current < 0 || len(kr.keys) == 0 {
		return "", "", ErrNoKey
	}
	k := kr.keys[kr.current]
	return sign(k, kr.header, c), k.ID, nil
}

// Rotate retires the current key at now and makes a freshly generated key
// current. Receipts signed before keep verifying: the retired public key stays
// in the JWKS. The caller persists the returned key and the retired one
// (Keys) before issuing receipts with the new key.
func (kr *Keyring) Rotate(rand io.Reader, now time.Time) (Key, error) {
	k, err := GenerateKey(rand, now)
	if err != nil {
		return Key{}, err
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if kr.current < 0 || len(kr.keys) == 0 {
		return Key{}, ErrNoKey
	}
	for _, old := range kr.keys {
		if old.ID == k.ID {
			return Key{}, fmt.Errorf("receipt: rotate: new key id %q already in the keyring", k.ID)
		}
	}
	retiredAt := now.UTC()
	kr.keys[kr.current].RetiredAt = &retiredAt
	kr.keys = append(kr.keys, k.clone())
	kr.sortLocked()
	return k, nil
}

// jwk is one public key of the JWKS. There is deliberately no field for the
// private part.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

type jwks struct {
	Keys []jwk `json:"keys"`
}

// JWKS returns the public keys, current and retired, as a JSON Web Key Set
// (RFC 7517, OKP keys of RFC 8037), in the deterministic order of Keys.
func (kr *Keyring) JWKS() []byte {
	kr.mu.RLock()
	set := jwks{Keys: make([]jwk, 0, len(kr.keys))}
	for _, k := range kr.keys {
		set.Keys = append(set.Keys, publicJWK(k.ID, k.Public()))
	}
	kr.mu.RUnlock()
	out, err := json.Marshal(set)
	if err != nil {
		// Only strings are marshalled; this cannot happen.
		panic(fmt.Sprintf("receipt: marshal JWKS: %v", err))
	}
	return out
}

func publicJWK(kid string, pub ed25519.PublicKey) jwk {
	return jwk{
		Kty: "OKP",
		Crv: "Ed25519",
		X:   base64.RawURLEncoding.EncodeToString(pub),
		Kid: kid,
		Alg: Algorithm,
		Use: "sig",
	}
}
