package ratelimit

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// benchSubjects returns n key-id-like subjects.
func benchSubjects(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("key_%032x", i*2654435761)
	}
	return s
}

// BenchmarkAllowParallel is the request path: many goroutines, 10,000
// subjects with existing buckets, the system clock, limits scaled as for
// a load benchmark so that most requests are allowed.
func BenchmarkAllowParallel(b *testing.B) {
	subjects := benchSubjects(10_000)
	l := New(DefaultTable().Scaled(1000), nil)
	for _, s := range subjects {
		l.Allow(Key, false, s)
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(worker.Add(1)) * 7919
		for pb.Next() {
			l.Allow(Key, false, subjects[i%len(subjects)])
			i++
		}
	})
}

// BenchmarkAllowParallelOneSubject is the worst case: every goroutine on
// one bucket, one shard, one lock.
func BenchmarkAllowParallelOneSubject(b *testing.B) {
	l := New(DefaultTable().Scaled(1000), nil)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Allow(Key, false, "key_0123456789abcdef0123456789abcdef")
		}
	})
}

// BenchmarkAllowRefused measures a subject that is over its limit.
func BenchmarkAllowRefused(b *testing.B) {
	l := New(DefaultTable(), nil)
	for l.Allow(Spends, true, "agt").Allowed {
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l.Allow(Spends, true, "agt")
	}
}

// BenchmarkAllowSerial is one goroutine over 10,000 existing buckets.
func BenchmarkAllowSerial(b *testing.B) {
	subjects := benchSubjects(10_000)
	l := New(DefaultTable().Scaled(1000), nil)
	for _, s := range subjects {
		l.Allow(Key, false, s)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Allow(Key, false, subjects[i%len(subjects)])
		i++
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	l := New(DefaultTable().Scaled(1000), newFakeClock())
	l.Allow(Spends, true, "agt_1")
	if n := testing.AllocsPerRun(1000, func() { l.Allow(Spends, true, "agt_1") }); n != 0 {
		t.Fatalf("Allow on an existing bucket: %v allocations, want 0", n)
	}
	for l.Allow(Check, false, "agt_2").Allowed {
	}
	if n := testing.AllocsPerRun(1000, func() { l.Allow(Check, false, "agt_2") }); n != 0 {
		t.Fatalf("refused Allow: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { l.Allow(PracticeControl, true, "own") }); n != 0 {
		t.Fatalf("disabled Allow: %v allocations, want 0", n)
	}
}
