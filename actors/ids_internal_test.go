package actors

import (
	"testing"
	"time"
)

// An id carries its creation time, and the time prefix of an instant
// sorts between the ids minted before and after it.
func TestIDTime(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 30, 0, 123456789, time.UTC)
	id := NewID("spd", at)
	got, err := idTime(id)
	if err != nil || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("idTime(%s) = %v, %v; want %v", id, got, err, at.Truncate(time.Millisecond))
	}
	if p := idTimePrefix("spd", at); !(p <= id && id < idTimePrefix("spd", at.Add(time.Millisecond))) {
		t.Fatalf("%s does not sort between the prefixes of its millisecond (%s)", id, p)
	}
	if before := NewID("spd", at.Add(-time.Millisecond)); before >= idTimePrefix("spd", at) {
		t.Fatalf("an id of the millisecond before (%s) sorts after the prefix", before)
	}
	for _, bad := range []string{"", "spd", "spd_", "spd_zz0000000000", "spd_0123"} {
		if _, err := idTime(bad); err == nil {
			t.Errorf("idTime(%q) accepted", bad)
		}
	}
}
