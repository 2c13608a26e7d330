package transport

import (
	"reflect"
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
