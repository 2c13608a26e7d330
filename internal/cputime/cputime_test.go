//go:build unix

package cputime

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestProcessCountsWork: work on this goroutine shows in the process's CPU
// time, which never goes backwards.
func TestProcessCountsWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any measured work; the test binary has used CPU already", before)
	}
	sum := sha256.Sum256(nil)
	deadline := time.Now().Add(10 * time.Second)
	for Process()-before < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of hashing added only %v of CPU time", Process()-before)
		}
		for range 10000 {
			sum = sha256.Sum256(sum[:])
		}
	}
	if after := Process(); after < before {
		t.Fatalf("CPU time went backwards: %v then %v", before, after)
	}
}
