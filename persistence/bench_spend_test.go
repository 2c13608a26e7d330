package persistence

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/internal/cputime"
)

// spendWorkload builds journal records shaped like the service's spend path:
// a spend is created by one record (8 ops: the spend, its indexes, the
// idempotency key, the agent's ledger, an event) and settled by a second (6
// ops: the spend again, a receipt, an event, the agent's ledger, the end of
// its hold). Ids are time-ordered like the service's ("spd_" and 32 hex
// digits), so new keys land at the end of their bucket, and each agent's
// ledger key is rewritten by every record of that agent. Value sizes are
// the service's: a settled spend and its receipt are about 1.4 and 1.5 KB.
type spendWorkload struct {
	agents []string
	owners []string
	seq    atomic.Uint64 // id counter, standing in for the clock
	events []atomic.Uint64
}

func newSpendWorkload(agents, owners int) *spendWorkload {
	rng := rand.New(rand.NewPCG(5, 6))
	w := &spendWorkload{events: make([]atomic.Uint64, owners)}
	for range owners {
		w.owners = append(w.owners, benchID(rng, "own", rng.Uint64()))
	}
	for range agents {
		w.agents = append(w.agents, benchID(rng, "agt", rng.Uint64()))
	}
	w.seq.Store(uint64(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) << 16)
	return w
}

// benchID is prefix_ and 32 hex digits, the first 16 from t (time order).
func benchID(rng *rand.Rand, prefix string, t uint64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], t)
	binary.BigEndian.PutUint64(b[8:], rng.Uint64())
	return prefix + "_" + hex.EncodeToString(b[:])
}

func benchVal(rng *rand.Rand, n int) []byte {
	off := rng.IntN(len(benchPayload) - n)
	return benchPayload[off : off+n]
}

func benchJoin(parts ...string) []byte {
	var b []byte
	for i, p := range parts {
		if i > 0 {
			b = append(b, '|')
		}
		b = append(b, p...)
	}
	return b
}

// spend returns the two records of one spend by a random agent.
func (w *spendWorkload) spend(rng *rand.Rand) (create, settle Record) {
	ai := rng.IntN(len(w.agents))
	oi := ai % len(w.owners)
	agent, owner := w.agents[ai], w.owners[oi]
	id := benchID(rng, "spd", w.seq.Add(1))
	event := func() []Op {
		seq := w.events[oi].Add(1)
		evt := benchID(rng, "evt", w.seq.Add(1))
		return []Op{
			Put("events", binary.BigEndian.AppendUint64(benchJoin(owner, "practice", ""), seq), benchVal(rng, 500)),
			Put("event_ids", []byte(evt), binary.BigEndian.AppendUint64(nil, seq)),
		}
	}
	create = Record{Ops: append([]Op{
		Put("active", benchJoin(agent, id), nil),
		Put("spends", []byte(id), benchVal(rng, 1400)),
		// The spend's entry in its agent's index holds its Idempotency-Key
		// record, so it is written where the agent's spends end, not at
		// a random place of a bucket keyed by the key.
		Put("agent_spends", benchJoin(agent, id), benchVal(rng, 190)),
		Put("env_spends", benchJoin(owner, "practice", id), []byte(agent)),
		Put("ledgers", []byte(agent), benchVal(rng, 200)),
	}, event()...)}
	settle = Record{Ops: append([]Op{
		Put("receipts", []byte(benchID(rng, "rcp", w.seq.Add(1))), benchVal(rng, 1500)),
		Put("spends", []byte(id), benchVal(rng, 1450)),
		Del("active", benchJoin(agent, id)),
		Put("ledgers", []byte(agent), benchVal(rng, 200)),
	}, event()...)}
	return create, settle
}

// BenchmarkSpendRecords runs the service's spend pattern: 64 concurrent
// appenders (like concurrent HTTP requests), each appending a spend's two
// records and waiting for each ticket, over 256 agents of 16 owners, with
// the default checkpointing. One op of the benchmark is one spend (two
// records). cpu-ns/record is the CPU time of the whole process (appenders
// included, and the final checkpoint of Close) per record: on a CPU-bound
// host, that is what the journal costs the service.
func BenchmarkSpendRecords(b *testing.B) {
	s, err := Open(Options{Path: b.TempDir() + "/bench.db"})
	if err != nil {
		b.Fatal(err)
	}
	w := newSpendWorkload(256, 16)
	var seeds atomic.Uint64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	cpu0 := cputime.Process()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(seeds.Add(1), 9))
		ctx := context.Background()
		for pb.Next() {
			create, settle := w.spend(rng)
			if err := s.Append(s.Gen(), create).Wait(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := s.Append(s.Gen(), settle).Wait(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	closeAndReport(b, s, cpu0, 2*b.N)
}
