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
	// By names who acts when no key does, for the owner action log:
	// "console" when empty (a signed-in owner), "dev_bootstrap" for the
	// practice setup of guard serve -dev.
	By string
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

// parseSecret checks the key's shape before any lookup:
// svc_<env>_<kind>_<43 base62 characters>. It takes the secret as text or
// as the request header's bytes, so the hot path converts nothing.
func parseSecret[T string | []byte](secret T) (env Env, kind string, ok bool) {
	const secretLen = 43
	if len(secret) < 4 || string(secret[:4]) != "svc_" {
		return "", "", false
	}
	rest := secret[4:]
	// The returned env and kind are the constants, never a slice of the
	// secret: they outlive the request.
	switch {
	case len(rest) > 5 && string(rest[:5]) == string(EnvTest)+"_":
		env, rest = EnvTest, rest[5:]
	case len(rest) > 5 && string(rest[:5]) == string(EnvLive)+"_":
		env, rest = EnvLive, rest[5:]
	default:
		return "", "", false
	}
	switch {
	case len(rest) > len(KindAgent) && string(rest[:len(KindAgent)+1]) == KindAgent+"_":
		kind, rest = KindAgent, rest[len(KindAgent)+1:]
	case len(rest) > len(KindOwner) && string(rest[:len(KindOwner)+1]) == KindOwner+"_":
		kind, rest = KindOwner, rest[len(KindOwner)+1:]
	default:
		return "", "", false
	}
	if len(rest) != secretLen {
		return "", "", false
	}
	for j := 0; j < len(rest); j++ {
		if !isBase62[rest[j]] {
			return "", "", false
		}
	}
	return env, kind, true
}

// isBase62 marks the bytes of the base62 alphabet.
var isBase62 = func() (t [256]bool) {
	for i := 0; i < len(base62); i++ {
		t[base62[i]] = true
	}
	return t
}()

// Authenticate resolves a bearer secret to a principal.
func (s *System) Authenticate(secret string) (Principal, error) {
	env, kind, ok := parseSecret(secret)
	if !ok {
		return Principal{}, ErrInvalidKey
	}
	return s.authenticate(env, kind, sha256.Sum256([]byte(secret)))
}

// AuthenticateBytes is Authenticate for a secret still in the request's
// header buffer; it keeps no reference to it.
func (s *System) AuthenticateBytes(secret []byte) (Principal, error) {
	env, kind, ok := parseSecret(secret)
	if !ok {
		return Principal{}, ErrInvalidKey
	}
	return s.authenticate(env, kind, sha256.Sum256(secret))
}

// authenticate checks a well-shaped secret, given by its digest, against
// the stored key.
func (s *System) authenticate(env Env, kind string, sum [sha256.Size]byte) (Principal, error) {
	ck, err := s.lookupKey(sum)
	if err != nil {
		return Principal{}, err
	}
	k := &ck.key
	var now time.Time
	if ck.env != nil && k.Kind != KindOwner {
		now = ck.env.now(s.clock) // a practice agent key ages with the practice clock (see keyNow)
	} else {
		now = s.clock.Now()
	}
	// A revocation ends a key whatever its time says: an owner key revoked
	// on an advanced practice clock, before owner keys left that clock, has
	// a revoked_at ahead of the service clock.
	if subtle.ConstantTimeCompare(ck.digest[:], sum[:]) != 1 || k.RevokedAt != nil ||
		!now.Before(k.ExpiresAt) || k.Kind != kind || EnvOf(k.Livemode) != env {
		return Principal{}, ErrInvalidKey
	}
	return Principal{KeyID: k.ID, Kind: k.Kind, OwnerID: k.OwnerID, AgentID: k.AgentID, Livemode: k.Livemode, Key: *k}, nil
}

// cachedKey is a stored key as authentication needs it: its digest as
// bytes and, for a practice key, the environment whose clock ages it.
type cachedKey struct {
	key    APIKey
	digest [sha256.Size]byte
	env    *envLedger
}

// lookupKey finds a stored key by the digest of its secret. Keys found are
// cached: every request authenticates, and decoding the stored key each
// time was a fifth of a read request's cost. Whatever changes a stored key
// (revocation, rotation, archiving its agent) must call forgetKey, which
// is why the cache holds only keys and never a negative answer. The
// cached environment stays valid as long as the key: both caches are
// cleared together when the journal fails (StoreFailed).
func (s *System) lookupKey(sum [sha256.Size]byte) (*cachedKey, error) {
	s.keyMu.RLock()
	k, ok := s.keyCache[sum]
	s.keyMu.RUnlock()
	if ok {
		return k, nil
	}
	// A revocation that lands while this lookup reads the store must win:
	// only cache what was read with no forgetKey in between.
	epoch := s.keyEpoch.Load()
	digest := hex.EncodeToString(sum[:])
	idb, err := s.store.Get(bKeyDigests, []byte(digest))
	if err != nil {
		return nil, ErrUnavailable
	}
	if idb == nil {
		return nil, ErrInvalidKey
	}
	ck := &cachedKey{}
	if found, err := s.getJSON(bKeys, idb, &ck.key); err != nil {
		return nil, ErrUnavailable
	} else if !found {
		return nil, ErrInvalidKey
	}
	if n, err := hex.Decode(ck.digest[:], []byte(ck.key.Digest)); err != nil || n != sha256.Size {
		return nil, ErrInvalidKey // a stored digest that is not one matches nothing
	}
	if !ck.key.Livemode {
		if ck.env, err = s.env(ck.key.OwnerID, EnvTest); err != nil {
			return nil, ErrUnavailable
		}
	}
	s.keyMu.Lock()
	if s.keyEpoch.Load() == epoch {
		s.keyCache[sum] = ck
	}
	s.keyMu.Unlock()
	return ck, nil
}

// forgetKey drops a key from the authentication cache after its change is
// durable.
func (s *System) forgetKey(digest string) {
	var sum [sha256.Size]byte
	_, _ = hex.Decode(sum[:], []byte(digest)) // a malformed digest was never cached
	s.keyMu.Lock()
	s.keyEpoch.Add(1)
	delete(s.keyCache, sum)
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
