package transport

import (
	"regexp"
	"testing"
)

func TestRequestIDsAreUniqueAndShaped(t *testing.T) {
	ids := newRequestIDs()
	other := newRequestIDs()
	shape := regexp.MustCompile(`^req_[0-9a-f]{12}[0-9a-z]{8,13}$`)
	seen := make(map[string]bool)
	for range 10_000 {
		id := ids.next()
		if !shape.MatchString(id) {
			t.Fatalf("request id %q has the wrong shape", id)
		}
		if seen[id] {
			t.Fatalf("request id %q issued twice", id)
		}
		seen[id] = true
	}
	if id := other.next(); seen[id] {
		t.Fatalf("a second process would issue %q again", id)
	}
}
