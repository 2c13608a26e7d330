package persistence

import (
	"flag"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for TestRandomizedAgainstModel (0: random; env PERSISTENCE_SEED also works)")

func modelSeed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if env := os.Getenv("PERSISTENCE_SEED"); env != "" {
		v, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("PERSISTENCE_SEED: %v", err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// TestRandomizedAgainstModel drives the store with random puts, deletes,
// reads, scans, checkpoints and reopens, and compares every read with a
// plain map. Replay a failure with -seed=N or PERSISTENCE_SEED=N.
func TestRandomizedAgainstModel(t *testing.T) {
	seed := modelSeed(t)
	t.Logf("seed %d (replay: go test ./persistence/ -run TestRandomizedAgainstModel -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	steps := 1500
	if testing.Short() {
		steps = 300
	}
	buckets := []string{"a", "b", "c"}
	alphabet := []byte{'x', 'y', 0x00, 0xff}
	randKey := func() []byte {
		k := make([]byte, 1+rng.IntN(3))
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return k
	}
	model := map[string]map[string]string{}
	for _, b := range buckets {
		model[b] = map[string]string{}
	}

	dir := t.TempDir()
	newOpts := func() Options {
		return testOptions(dir, func(o *Options) {
			o.MaxBatch = 1 + rng.IntN(8)
			o.CheckpointRecords = 1 + rng.IntN(40)
			// Timer checkpoints add real concurrency; the results must
			// not depend on when they run.
			o.CheckpointInterval = time.Duration(1+rng.IntN(20)) * time.Millisecond
			o.hooks = &testHooks{
				noAutoCheckpoint: rng.IntN(3) == 0,
				chunkRecords:     1 + rng.IntN(10),
			}
		})
	}
	s := openStore(t, newOpts())
	defer func() { s.Close() }()

	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 45: // a burst of records, appended without waiting
			var tickets []*Ticket
			for range 1 + rng.IntN(6) {
				var rec Record
				for range 1 + rng.IntN(4) {
					b, k := buckets[rng.IntN(len(buckets))], randKey()
					if rng.IntN(3) == 0 {
						rec.Ops = append(rec.Ops, Del(b, k))
						delete(model[b], string(k))
					} else {
						v := []byte(strconv.Itoa(step))
						if rng.IntN(10) == 0 {
							v = []byte{}
						}
						rec.Ops = append(rec.Ops, Put(b, k, v))
						model[b][string(k)] = string(v)
					}
				}
				tickets = append(tickets, s.Append(s.Gen(), rec))
			}
			for _, tk := range tickets {
				if err := waitTicket(t, tk); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
		case r < 65:
			b, k := buckets[rng.IntN(len(buckets))], randKey()
			v, err := s.Get(b, k)
			if err != nil {
				t.Fatalf("step %d: Get: %v", step, err)
			}
			want, ok := model[b][string(k)]
			if ok != (v != nil) || string(v) != want {
				t.Fatalf("step %d: Get(%s, %q) = %q (present %v), want %q (present %v)", step, b, k, v, v != nil, want, ok)
			}
		case r < 88:
			b := buckets[rng.IntN(len(buckets))]
			var prefix, from []byte
			if rng.IntN(2) == 0 {
				k := randKey()
				prefix = k[:min(len(k), rng.IntN(2)+1)]
				if rng.IntN(3) == 0 {
					prefix = prefix[:0]
				}
			}
			if rng.IntN(2) == 0 {
				from = randKey()
			}
			reverse := rng.IntN(2) == 0
			limit := -1
			if rng.IntN(3) == 0 {
				limit = rng.IntN(5)
			}
			want := expectScan(model[b], prefix, from, reverse)
			var got []string
			err := s.Scan(b, prefix, from, reverse, func(k, v []byte) bool {
				got = append(got, string(k)+"="+string(v))
				return limit < 0 || len(got) < limit
			})
			if err != nil {
				t.Fatalf("step %d: Scan: %v", step, err)
			}
			if limit >= 0 && len(want) > max(limit, 1) {
				want = want[:max(limit, 1)]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Scan(%s, prefix %q, from %q, reverse %v, limit %d)\n got %q\nwant %q",
					step, b, prefix, from, reverse, limit, got, want)
			}
		case r < 94:
			if err := s.Checkpoint(); err != nil {
				t.Fatalf("step %d: Checkpoint: %v", step, err)
			}
		default:
			if err := s.Close(); err != nil {
				t.Fatalf("step %d: Close: %v", step, err)
			}
			s = openStore(t, newOpts())
		}
	}
	got := dumpStore(t, s)
	want := dump{}
	for b, m := range model {
		if len(m) > 0 {
			want[b] = m
		}
	}
	if d := diffDumps(want, got); d != "" {
		t.Fatalf("final state differs: %s", d)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}
