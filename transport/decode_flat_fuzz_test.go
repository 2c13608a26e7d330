package transport

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeFlatStrings: whatever the one-pass check-body reader accepts,
// decodeStrict accepts too and reads the same values; whatever it refuses
// goes to decodeStrict, so readCheckBody answers exactly as decodeStrict.
func FuzzDecodeFlatStrings(f *testing.F) {
	for _, s := range []string{
		`{"destination":"api.vendor.com","amount":"0.50"}`, `{}`, ` { } `, `{"destination":""}`,
		`{"destination":"a","amount":"","currency":""}`, `{"amount":null,"destination":"x.com"}`,
		`{"destination":"a","destination":"b"}`, `{"Destination":"a"}`, `{"destination":"a\"b"}`,
		`{"destination":"a\u0041"}`, "{\"destination\":\"\xc3\xa9\"}", `{"destination":1}`,
		`{"destination":"a",}`, `{"destination":"a"} x`, `{"destination":"a"`, `{"destination" : "a" , "currency" : "usdc"}`,
		`{"memo":"x"}`, `[]`, `null`, "{\"destination\":\"a\x7f\"}", `{"amount":nul}`, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var vals [3]string
		var set [3]bool
		fast := decodeFlatStrings(body, checkMembers, vals[:], set[:])

		var want checkBody
		strictErr := decodeStrict(body, &want)
		if fast && strictErr != nil {
			t.Fatalf("one-pass reader accepted %q, decodeStrict refuses it: %s", body, strictErr.message)
		}
		if fast {
			// Independently of decodeStrict: encoding/json reads the same.
			var std checkBody
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&std); err != nil {
				t.Fatalf("one-pass reader accepted %q, encoding/json refuses it: %v", body, err)
			}
			if dup, err := duplicateMember(body); err != nil || dup != "" {
				t.Fatalf("one-pass reader accepted %q: duplicate %q, %v", body, dup, err)
			}
			for i, p := range []*string{std.Destination, std.Amount, std.Currency} {
				if (p != nil) != set[i] || p != nil && *p != vals[i] {
					t.Fatalf("one-pass reader read %q member %s as %q (set %v), encoding/json as %v",
						body, checkMembers[i], vals[i], set[i], p)
				}
			}
		}

		gotVals, gotSet, gotErr := readCheckBody(body)
		if (gotErr == nil) != (strictErr == nil) {
			t.Fatalf("readCheckBody(%q) error %v, decodeStrict %v", body, gotErr, strictErr)
		}
		if gotErr != nil {
			if gotErr.code != strictErr.code || gotErr.message != strictErr.message || gotErr.param != strictErr.param {
				t.Fatalf("readCheckBody(%q) refuses with %+v, decodeStrict with %+v", body, gotErr, strictErr)
			}
			return
		}
		for i, p := range []*string{want.Destination, want.Amount, want.Currency} {
			if (p != nil) != gotSet[i] || p != nil && *p != gotVals[i] {
				t.Fatalf("readCheckBody(%q) member %s = %q (set %v), decodeStrict read %v", body, checkMembers[i], gotVals[i], gotSet[i], p)
			}
		}
	})
}
