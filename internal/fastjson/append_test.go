package fastjson_test

import (
	"bytes"
	stdjson "encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/internal/randfill"
	"github.com/agentpay/guard/policy"
)

func TestAppendersSameAsEncodingJSON(t *testing.T) {
	t.Run("Spend", func(t *testing.T) { randfill.SameAsEncodingJSON(t, fastjson.AppendSpend) })
	t.Run("Ledger", func(t *testing.T) { randfill.SameAsEncodingJSON(t, fastjson.AppendLedger) })
	t.Run("NextAction", func(t *testing.T) { randfill.SameAsEncodingJSON(t, fastjson.AppendNextAction) })
	t.Run("ReceiptClaims", func(t *testing.T) { randfill.SameAsEncodingJSON(t, fastjson.AppendReceiptClaims) })
	t.Run("RuleDetail", func(t *testing.T) {
		randfill.SameAsEncodingJSON(t, func(b []byte, d *policy.RuleDetail) []byte { return fastjson.AppendRuleDetail(b, d) })
		if got := fastjson.AppendRuleDetail(nil, nil); string(got) != "null" {
			t.Fatalf("nil rule: %s", got)
		}
	})
	t.Run("Amount", func(t *testing.T) {
		randfill.SameAsEncodingJSON(t, func(b []byte, a *policy.Amount) []byte { return fastjson.AppendAmount(b, *a) })
	})
	t.Run("Strings", func(t *testing.T) {
		randfill.SameAsEncodingJSON(t, func(b []byte, l *[]string) []byte { return fastjson.AppendStrings(b, *l) })
		if got := fastjson.AppendStrings(nil, []string{}); string(got) != "[]" {
			t.Fatalf("empty list: %s", got)
		}
	})
}

// AppendString escapes every byte, alone and between plain text, and
// random text, as encoding/json does.
func TestAppendStringSameAsEncodingJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 13))
	var texts []string
	for c := 0; c < 256; c++ {
		texts = append(texts, string([]byte{byte(c)}), "ab"+string([]byte{byte(c)})+"cd")
	}
	pieces := []string{"a", "é", "\u2028", "\u2029", "💸", "\xff", "\xe2\x80", "<", "&", "\\", "\"", "\x7f", "日本"}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for n := rnd.IntN(10); n > 0; n-- {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		want, _ := stdjson.Marshal(s)
		if got := fastjson.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, encoding/json %s", s, got, want)
		}
	}
}
