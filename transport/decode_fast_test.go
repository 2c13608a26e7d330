package transport

import (
	"reflect"
	"strings"
	"testing"
)

// The fast path takes the bodies agents send every time and leaves every
// unusual one to the full scanner (which words the errors).
func TestFastKeysPath(t *testing.T) {
	spend := reflect.TypeOf(&spendBody{})
	check := reflect.TypeOf(&checkBody{})
	for _, tc := range []struct {
		typ  reflect.Type
		body string
		fast bool
	}{
		{check, `{"destination":"api.vendor.com","amount":"1.00"}`, true},
		{check, " {\n\"destination\" : \"a\\u00e9\\n\" , \"currency\":null}\t", true},
		{spend, ValidSpendBody, true},
		{spend, `{"amount":"1.00","resource":{"url":"https://x/y","method":"GET"}}`, true},
		{check, `{}`, true},
		{check, `{"amount":1.5e-3}`, true}, // a type error is the decoder's to word
		// Left to the full scanner:
		{check, `{"amount":"1.00","AMOUNT":"2.00"}`, false},
		{check, `{"amount":"1.00","amount":"2.00"}`, false},
		{check, `{"Amount":"1.00"}`, false},
		{check, `{"nope":"1.00"}`, false},
		{check, `{"am\u006fu\u006et":"1.00"}`, false},
		{check, `{"amount":["1.00"]}`, false},
		{check, `{"amount":"1.00",}`, false},
		{check, `{"amount":"1.00"} {}`, false},
		{check, `{"amount":01}`, false},
		{check, `{"amount":-}`, false},
		{check, `{"amount":tru}`, false},
		{check, "{\"amount\":\"a\x01\"}", false},
		{check, `{"amount":"\x"}`, false},
		{check, `{"amount":"1.00"`, false},
		{check, `[]`, false},
		{check, `{"destination":{"x":1}}`, false}, // a string field cannot hold an object
	} {
		if got := fastKeysOK([]byte(tc.body), tc.typ); got != tc.fast {
			t.Errorf("fastKeysOK(%s) = %v, want %v", tc.body, got, tc.fast)
		}
		if tc.fast {
			if err := scanKeys([]byte(tc.body), tc.typ); err != nil {
				t.Errorf("fast path took %s, which the scanner refuses: %s", tc.body, err.message)
			}
		}
	}
}

// A syntax error names the byte where the body goes wrong, counted from 1,
// and data after the object is called that, wherever the fault sits.
func TestSyntaxErrorsNameTheByte(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"destination": x}`, "(at byte 17): invalid character 'x' looking for beginning of value"},
		{`{"destination":"api.vendor.com"}x`, "has data after the JSON object (at byte 33)"},
		{`{"destination":"api.vendor.com"}  }`, "has data after the JSON object (at byte 35)"},
		{`{"destination":"a\x"}`, "(at byte 19): invalid character 'x' in string escape code"},
		{`{"destination":"api.vendor.com", "amount": 1.0.0}`, "(at byte 47)"},
	} {
		err := decodeStrict([]byte(tc.body), &checkBody{})
		if err == nil || !strings.Contains(err.message, tc.want) {
			t.Errorf("%s: got %+v, want a message containing %q", tc.body, err, tc.want)
		}
	}
}
