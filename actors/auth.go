package actors

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"math/big"
	"strings"
	"time"
)

// Principal is who a request acts as, established from its key.
type Principal struct {
	KeyID    string
	Kind     string // KindAgent or KindOwner
	OwnerID  string
	AgentID  string // agent keys only
	Livemode bool
	Key      APIKey
}

// Env is the environment the principal acts in.
func (p Principal) Env() Env { return EnvOf(p.Livemode) }

// ErrInvalidKey is the one answer for every key that does not work, so a
// caller cannot tell a revoked key from a made-up one.
var ErrInvalidKey = &Error{Code: "invalid_api_key",
	Message: "The API key is missing, malformed, unknown, revoked or expired. Send a valid key as 'Authorization: Bearer svc_...'."}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newSecret builds svc_<env>_<kind>_<32 random bytes in base62>.
func newSecret(env Env, kind string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	n := new(big.Int).SetBytes(b[:])
	var sb strings.Builder
	base := big.NewInt(62)
	mod := new(big.Int)
	for i := 0; i < 43; i++ { // 62^43 > 2^256: fixed length
		n.DivMod(n, base, mod)
		sb.WriteByte(base62[mod.Int64()])
	}
	return "svc_" + string(env) + "_" + kind + "_" + sb.String()
}

func digestOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// parseSecret checks the key's shape before any lookup.
func parseSecret(secret string) (env Env, kind string, ok bool) {
	parts := strings.Split(secret, "_")
	if len(parts) != 4 || parts[0] != "svc" || len(parts[3]) != 43 {
		return "", "", false
	}
	switch Env(parts[1]) {
	case EnvTest, EnvLive:
	default:
		return "", "", false
	}
	if parts[2] != KindAgent && parts[2] != KindOwner {
		return "", "", false
	}
	for _, c := range parts[3] {
		if !strings.ContainsRune(base62, c) {
			return "", "", false
		}
	}
	return Env(parts[1]), parts[2], true
}

// Authenticate resolves a bearer secret to a principal.
func (s *System) Authenticate(secret string) (Principal, error) {
	env, kind, ok := parseSecret(secret)
	if !ok {
		return Principal{}, ErrInvalidKey
	}
	digest := digestOf(secret)
	k, err := s.lookupKey(digest)
	if err != nil {
		return Principal{}, err
	}
	now := s.nowFor(k.OwnerID, EnvOf(k.Livemode)) // a practice key ages with the practice clock
	if subtle.ConstantTimeCompare([]byte(k.Digest), []byte(digest)) != 1 || k.RevokedAt != nil && !k.RevokedAt.After(now) ||
		!now.Before(k.ExpiresAt) || k.Kind != kind || EnvOf(k.Livemode) != env {
		return Principal{}, ErrInvalidKey
	}
	return Principal{KeyID: k.ID, Kind: k.Kind, OwnerID: k.OwnerID, AgentID: k.AgentID, Livemode: k.Livemode, Key: k}, nil
}

// lookupKey finds a stored key by the digest of its secret. Keys found are
// cached: every request authenticates, and decoding the stored key each
// time was a fifth of a read request's cost. Whatever changes a stored key
// (revocation, rotation, archiving its agent) must call forgetKey, which
// is why the cache holds only keys and never a negative answer.
func (s *System) lookupKey(digest string) (APIKey, error) {
	if k, ok := s.keyCache.Load(digest); ok {
		return *k.(*APIKey), nil
	}
	// A revocation that lands while this lookup reads the store must win:
	// only cache what was read with no forgetKey in between.
	epoch := s.keyEpoch.Load()
	idb, err := s.store.Get(bKeyDigests, []byte(digest))
	if err != nil {
		return APIKey{}, ErrUnavailable
	}
	if idb == nil {
		return APIKey{}, ErrInvalidKey
	}
	var k APIKey
	if found, err := s.getJSON(bKeys, idb, &k); err != nil {
		return APIKey{}, ErrUnavailable
	} else if !found {
		return APIKey{}, ErrInvalidKey
	}
	s.keyMu.Lock()
	if s.keyEpoch.Load() == epoch {
		s.keyCache.Store(digest, &k)
	}
	s.keyMu.Unlock()
	return k, nil
}

// forgetKey drops a key from the authentication cache after its change is
// durable.
func (s *System) forgetKey(digest string) {
	s.keyMu.Lock()
	s.keyEpoch.Add(1)
	s.keyCache.Delete(digest)
	s.keyMu.Unlock()
}

// Key lifetimes (spec 5.4).
const (
	PracticeKeyLifetime = 90 * 24 * time.Hour
	LiveKeyLifetime     = 30 * 24 * time.Hour
	MaxKeysPerAgent     = 3
	MaxOwnerKeys        = 3
)

// newKey builds a key record and its secret; the secret is returned once.
func newKey(kind, ownerID, agentID string, env Env, now time.Time) (APIKey, string) {
	secret := newSecret(env, kind)
	life := PracticeKeyLifetime
	if env == EnvLive {
		life = LiveKeyLifetime
	}
	k := APIKey{ID: NewID("key", now), Object: "api_key", Kind: kind, OwnerID: ownerID, AgentID: agentID,
		Livemode: env.Livemode(), Prefix: "svc_" + string(env) + "_" + kind, Last4: secret[len(secret)-4:],
		Scope: "full", Digest: digestOf(secret), ExpiresAt: now.Add(life).UTC(), CreatedAt: now.UTC()}
	return k, secret
}
