package persistence

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/cputime"
)

// benchPayload is random filler; records slice it at varying offsets so the
// benchmark measures the store rather than random number generation.
var benchPayload = func() []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 8192)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}()

// benchRecord builds a record shaped like the service's: 5 ops, ~1.5 KB.
func benchRecord(rng *rand.Rand, id uint64) Record {
	key := func(prefix string) []byte {
		return binary.BigEndian.AppendUint64([]byte(prefix), id)
	}
	val := func(n int) []byte {
		off := rng.IntN(len(benchPayload) - n)
		return benchPayload[off : off+n]
	}
	acct := key("acct/")
	binary.BigEndian.PutUint64(acct[5:], id%4096) // hot accounts are overwritten
	return Record{Ops: []Op{
		Put("accounts", acct, val(400)),
		Put("ledger", key("entry/"), val(600)),
		Put("holds", key("hold/"), val(300)),
		Put("idempotency", key("idem/"), val(150)),
		Del("holds", key("expired/")),
	}}
}

// BenchmarkAppendParallel measures durable records per second with 64
// concurrent appenders on GOMAXPROCS=2 (32 per P otherwise), each appending
// a ~1.5 KB record of 5 ops and waiting for its ticket, with real fsyncs and
// the default checkpointing running. cpu-ns/record is the process's CPU
// time per record, including the final checkpoint of Close.
func BenchmarkAppendParallel(b *testing.B) {
	s, err := Open(Options{Path: b.TempDir() + "/bench.db"})
	if err != nil {
		b.Fatal(err)
	}
	var ids atomic.Uint64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	cpu0 := cputime.Process()
	b.SetBytes(int64(len(EncodeRecord(benchRecord(rand.New(rand.NewPCG(1, 1)), 0)))))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(ids.Add(1)<<32, 7))
		ctx := context.Background()
		for pb.Next() {
			if err := s.Append(s.Gen(), benchRecord(rng, ids.Add(1))).Wait(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	closeAndReport(b, s, cpu0, b.N)
}

// closeAndReport closes the store (its final checkpoint counts) and
// reports the process CPU per record since cpu0, the throughput, the
// records per group commit and the checkpoints of a run that appended
// records records.
func closeAndReport(b *testing.B, s *Store, cpu0 time.Duration, records int) {
	b.Helper()
	st := s.Stats()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(records), "cpu-ns/record")
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Commits), "records/commit")
	}
	b.ReportMetric(float64(st.Checkpoints), "checkpoints")
}

// BenchmarkGet measures point reads, half served by the overlay and half by
// the entity bucket.
func BenchmarkGet(b *testing.B) {
	s, err := Open(Options{Path: b.TempDir() + "/bench.db"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	for i := range uint64(n) {
		if err := s.Append(s.Gen(), benchRecord(rng, i)).Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		if i == n/2 {
			if err := s.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var i uint64
		for pb.Next() {
			i++
			k := binary.BigEndian.AppendUint64([]byte("entry/"), i%n)
			if v, err := s.Get("ledger", k); err != nil || v == nil {
				b.Errorf("Get: %v, %v", v, err)
				return
			}
		}
	})
}
