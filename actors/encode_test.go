package actors_test

import (
	"bytes"
	stdjson "encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/randfill"
)

// Every form a spend journals by hand is the form encoding/json writes, so
// a record reads the same whichever wrote it.
func TestStoredFormsSameAsEncodingJSON(t *testing.T) {
	t.Run("EnvState", func(t *testing.T) { randfill.SameAsEncodingJSON(t, actors.AppendEnvState) })
	t.Run("Receipt", func(t *testing.T) { randfill.SameAsEncodingJSON(t, actors.AppendReceipt) })
	t.Run("IdemRecord", func(t *testing.T) { randfill.SameAsEncodingJSON(t, actors.AppendIdemRecord) })
	t.Run("ActiveRecord", func(t *testing.T) { randfill.SameAsEncodingJSON(t, actors.AppendActiveRecord) })
	t.Run("SpendRef", func(t *testing.T) { randfill.SameAsEncodingJSON(t, actors.AppendSpendRef) })
	// The filler gives an event's payload a map; the spend's own payload is
	// the one written by hand, so both are held to encoding/json.
	t.Run("StoredEvent", func(t *testing.T) { randfill.SameAsEncodingJSON(t, actors.AppendStoredEvent) })
	t.Run("StoredEventOfASpend", func(t *testing.T) {
		for seed := uint64(1); seed <= 500; seed++ {
			rnd := rand.New(rand.NewPCG(seed, 9))
			var ev actors.StoredEvent
			var ref actors.SpendRef
			randfill.Fill(reflect.ValueOf(&ev).Elem(), rnd)
			randfill.Fill(reflect.ValueOf(&ref).Elem(), rnd)
			ev.Data.Object = ref
			want, err := stdjson.Marshal(&ev)
			if err != nil {
				t.Fatalf("seed %d: encoding/json: %v", seed, err)
			}
			if got := actors.AppendStoredEvent(nil, &ev); !bytes.Equal(got, want) {
				t.Fatalf("seed %d: encodings differ\nencoding/json: %s\nby hand:       %s", seed, want, got)
			}
		}
	})
}
