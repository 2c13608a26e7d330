package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// KeyIDPrefix starts every receipt key id.
const KeyIDPrefix = "rk_"

// Key is one Ed25519 receipt signing key. A key with RetiredAt set no longer
// signs, but its public half stays published so that the receipts it signed
// keep verifying.
type Key struct {
	ID        string
	Private   ed25519.PrivateKey
	CreatedAt time.Time
	RetiredAt *time.Time
}

// GenerateKey draws a new Ed25519 key from rand and stamps it with now. A nil
// rand uses the system's secure source; tests pass a fixed stream to get
// reproducible keys.
func GenerateKey(rand io.Reader, now time.Time) (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return Key{}, fmt.Errorf("receipt: generate key: %w", err)
	}
	return Key{ID: KeyID(pub), Private: priv, CreatedAt: now.UTC()}, nil
}

// KeyID is the id of a public key: "rk_" followed by the first 16 hex digits
// of the SHA-256 of the raw 32-byte key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return KeyIDPrefix + hex.EncodeToString(sum[:8])
}

// Public returns the public half of the key.
func (k Key) Public() ed25519.PublicKey {
	if len(k.Private) != ed25519.PrivateKeySize {
		return nil
	}
	return k.Private.Public().(ed25519.PublicKey)
}

// Retired reports whether the key no longer signs.
func (k Key) Retired() bool { return k.RetiredAt != nil }

// validate checks that the private key is well formed, internally consistent
// and carries the id derived from its public half.
func (k Key) validate() error {
	if len(k.Private) != ed25519.PrivateKeySize {
		return fmt.Errorf("receipt: key %q: private key has %d bytes, want %d", k.ID, len(k.Private), ed25519.PrivateKeySize)
	}
	again := ed25519.NewKeyFromSeed(k.Private.Seed())
	if !bytes.Equal(again, k.Private) {
		return fmt.Errorf("receipt: key %q: public half does not match the seed", k.ID)
	}
	if want := KeyID(k.Public()); k.ID != want {
		return fmt.Errorf("receipt: key id %q does not match its public key (want %q)", k.ID, want)
	}
	if k.CreatedAt.IsZero() {
		return fmt.Errorf("receipt: key %q has no creation time", k.ID)
	}
	return nil
}

// clone returns a deep copy, so that callers never share the keyring's
// private bytes or retirement time.
func (k Key) clone() Key {
	c := Key{ID: k.ID, CreatedAt: k.CreatedAt}
	if k.Private != nil {
		c.Private = append(ed25519.PrivateKey(nil), k.Private...)
	}
	if k.RetiredAt != nil {
		t := *k.RetiredAt
		c.RetiredAt = &t
	}
	return c
}

// storedKey is the serialized form of a Key. Only the 32-byte seed is kept;
// the public half and the id are derived from it again on load and checked
// against the stored id.
type storedKey struct {
	ID        string     `json:"kid"`
	Seed      []byte     `json:"seed"`
	CreatedAt time.Time  `json:"created_at"`
	RetiredAt *time.Time `json:"retired_at,omitempty"`
}

// MarshalBinary encodes the key, private part included, as JSON. The result
// is secret material: store it only where the service's own data lives.
func (k Key) MarshalBinary() ([]byte, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	s := storedKey{ID: k.ID, Seed: k.Private.Seed(), CreatedAt: k.CreatedAt.UTC()}
	if k.RetiredAt != nil {
		t := k.RetiredAt.UTC()
		s.RetiredAt = &t
	}
	return json.Marshal(s)
}

// UnmarshalKey decodes what MarshalBinary produced and checks that the id
// still matches the key.
func UnmarshalKey(data []byte) (Key, error) {
	var s storedKey
	if err := decodeStrict(data, &s); err != nil {
		return Key{}, fmt.Errorf("receipt: decode key: %w", err)
	}
	if len(s.Seed) != ed25519.SeedSize {
		return Key{}, fmt.Errorf("receipt: decode key %q: seed has %d bytes, want %d", s.ID, len(s.Seed), ed25519.SeedSize)
	}
	k := Key{ID: s.ID, Private: ed25519.NewKeyFromSeed(s.Seed), CreatedAt: s.CreatedAt}
	if s.RetiredAt != nil {
		t := *s.RetiredAt
		k.RetiredAt = &t
	}
	if err := k.validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// fields and anything after the object.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
