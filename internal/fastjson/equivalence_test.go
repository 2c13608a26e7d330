package fastjson_test

import (
	"bytes"
	stdjson "encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/internal/randfill"
	"github.com/agentpay/guard/policy"
)

// The service's stored and answered types, filled at random (every field,
// pointers both nil and set, strings with quotes, HTML, control and
// non-ASCII characters, amounts of every scale): the fast codec must
// produce the very bytes encoding/json produces, and decode them to the
// very value encoding/json decodes. The seed is printed on failure.
func TestSameAsEncodingJSON(t *testing.T) {
	samples := []any{
		&policy.Spend{}, &policy.Ledger{}, &policy.Policy{}, &policy.Balance{}, &policy.CheckResult{},
		&actors.StoredEvent{}, &actors.APIKey{}, &actors.Agent{}, &actors.EnvState{}, &actors.Owner{},
		&actors.Receipt{}, &actors.WebhookEndpoint{}, &actors.WebhookDelivery{}, &actors.NotificationChannel{},
	}
	for _, sample := range samples {
		typ := reflect.TypeOf(sample).Elem()
		t.Run(typ.String(), func(t *testing.T) {
			for seed := uint64(1); seed <= 300; seed++ {
				v := reflect.New(typ)
				randfill.Fill(v.Elem(), rand.New(rand.NewPCG(seed, 7)))
				want, err := stdjson.Marshal(v.Interface())
				if err != nil {
					t.Fatalf("seed %d: encoding/json: %v", seed, err)
				}
				got, err := fastjson.Marshal(v.Interface())
				if err != nil {
					t.Fatalf("seed %d: fastjson: %v", seed, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d: encodings differ\nencoding/json: %s\nfastjson:      %s", seed, want, got)
				}
				a, b := reflect.New(typ), reflect.New(typ)
				if err := stdjson.Unmarshal(want, a.Interface()); err != nil {
					t.Fatalf("seed %d: encoding/json decode: %v", seed, err)
				}
				if err := fastjson.Unmarshal(want, b.Interface()); err != nil {
					t.Fatalf("seed %d: fastjson decode: %v", seed, err)
				}
				// Compare through a second encoding: apd decimals hold
				// internal slices that DeepEqual would tell apart.
				ra, _ := stdjson.Marshal(a.Interface())
				rb, _ := stdjson.Marshal(b.Interface())
				if !bytes.Equal(ra, rb) {
					t.Fatalf("seed %d: decodings differ\nencoding/json: %s\nfastjson:      %s", seed, ra, rb)
				}
			}
		})
	}
}

// A document encoding/json refuses is refused by the fast codec too, so a
// damaged stored record is never half-read.
func TestRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, doc := range []string{``, `{`, `{"id":}`, `{"id":"x",}`, `[1,2`, `{"amount":"1.00"} x`, `nul`} {
		var a, b policy.Spend
		errStd := stdjson.Unmarshal([]byte(doc), &a)
		errFast := fastjson.Unmarshal([]byte(doc), &b)
		if (errStd == nil) != (errFast == nil) {
			t.Errorf("%q: encoding/json error %v, fastjson error %v", doc, errStd, errFast)
		}
	}
}
