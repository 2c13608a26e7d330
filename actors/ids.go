package actors

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
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
	putMillis(b[:6], now)
	binary.BigEndian.PutUint16(b[6:8], uint16(idSeq.Add(1)))
	if _, err := rand.Read(b[8:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// putMillis writes t in milliseconds since 1970 into the 6 bytes of b,
// big-endian: the time part of an id.
func putMillis(b []byte, t time.Time) {
	ms := uint64(max(t.UnixMilli(), 0))
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
}

// idTimePrefix is the beginning NewID gives every id of prefix minted in
// the millisecond of t: ids minted at t or later sort at or after it.
func idTimePrefix(prefix string, t time.Time) string {
	var b [6]byte
	putMillis(b[:], t)
	return prefix + "_" + hex.EncodeToString(b[:])
}

// idTime is the creation time NewID wrote into id, to the millisecond.
func idTime(id string) (time.Time, error) {
	_, rest, ok := strings.Cut(id, "_")
	var b [6]byte
	if !ok || len(rest) < 12 {
		return time.Time{}, fmt.Errorf("actors: %q is not an id", id)
	}
	if _, err := hex.Decode(b[:], []byte(rest[:12])); err != nil {
		return time.Time{}, fmt.Errorf("actors: %q is not an id", id)
	}
	ms := int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
	return time.UnixMilli(ms).UTC(), nil
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
