package randfill

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// SameAsEncodingJSON fills a T at random for each of 500 seeds and fails t
// unless appendFn writes the very bytes encoding/json writes for it. They
// are appended after a prefix, so an appender that drops what it was given
// fails too.
func SameAsEncodingJSON[T any](t testing.TB, appendFn func([]byte, *T) []byte) {
	t.Helper()
	const prefix = "prefix:"
	for seed := uint64(1); seed <= 500; seed++ {
		var v T
		Fill(reflect.ValueOf(&v).Elem(), rand.New(rand.NewPCG(seed, 5)))
		want, err := json.Marshal(&v)
		if err != nil {
			t.Fatalf("seed %d: encoding/json: %v", seed, err)
		}
		got := appendFn([]byte(prefix), &v)
		if !bytes.Equal(got, append([]byte(prefix), want...)) {
			t.Fatalf("seed %d: encodings differ\nencoding/json: %s\nby hand:       %s", seed, want, got)
		}
	}
}
