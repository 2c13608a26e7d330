package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters of new hashes: RFC 9106's second recommended option
// (64 MiB, three passes). Verification reads the parameters from the hash,
// so hashes made with other parameters keep working.
const (
	argonTime    = 3
	argonMemory  = 64 * 1024
	argonThreads = 2
	argonKeyLen  = 32
	// MinPasswordLength is the shortest password an owner may set, in
	// characters.
	MinPasswordLength = 12
	// MaxPasswordLength is the longest password sign-in reads, in bytes: a
	// longer one could be set but never used.
	MaxPasswordLength = 1024
)

// CheckNewPassword says what keeps pw from being an owner's password, or
// nil.
func CheckNewPassword(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLength {
		return fmt.Errorf("a password must have at least %d characters", MinPasswordLength)
	}
	if len(pw) > MaxPasswordLength {
		return fmt.Errorf("a password must have at most %d characters", MaxPasswordLength)
	}
	return nil
}

// HashPassword returns the PHC string of an argon2id hash of pw with a
// random salt: $argon2id$v=19$m=65536,t=3,p=2$salt$key.
func HashPassword(pw string) string {
	return hashWith(pw, argonMemory, argonTime, argonThreads)
}

func hashWith(pw string, memory, time uint32, threads uint8) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(err)
	}
	key := argon2.IDKey([]byte(pw), salt, time, memory, threads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memory, time, threads,
		enc.EncodeToString(salt), enc.EncodeToString(key))
}

// VerifyPassword reports whether pw matches the PHC argon2id hash. A hash
// it cannot read never matches.
func VerifyPassword(hash, pw string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil ||
		memory == 0 || memory > 1<<20 || time == 0 || time > 16 || threads == 0 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	want, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(want) < 16 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}
