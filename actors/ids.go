package actors

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
	"time"
)

// idSeq breaks ties between ids minted in the same millisecond, so ids of
// one process sort in creation order.
var idSeq atomic.Uint32

// NewID returns prefix + "_" + 32 hex characters. The first 12 hex digits are
// the creation time in milliseconds, so keys built from ids sort by time and
// new spends append to the end of the index instead of landing on random
// pages. The rest is a 16-bit sequence and 64 random bits.
func NewID(prefix string, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	binary.BigEndian.PutUint16(b[6:8], uint16(idSeq.Add(1)))
	if _, err := rand.Read(b[8:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// RandomHex returns n random bytes as hex, for nonces and secrets.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ValidID reports whether s is prefix_<32 lower-case hex>.
func ValidID(prefix, s string) bool {
	if len(s) != len(prefix)+1+32 || s[:len(prefix)] != prefix || s[len(prefix)] != '_' {
		return false
	}
	for _, c := range s[len(prefix)+1:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
