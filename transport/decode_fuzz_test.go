package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeStrict: decodeStrict never panics, and whatever it accepts is
// one JSON object that encoding/json also accepts, without two members of
// one object that encoding/json would read as the same field (it matches
// names without regard to case, so "amount" and "AMOUNT" are a duplicate).
func FuzzDecodeStrict(f *testing.F) {
	f.Add([]byte(ValidSpendBody))
	for _, c := range BadSpendCases {
		f.Add([]byte(c.Body))
	}
	for _, s := range []string{
		`{}`, `null`, `"x"`, `{"resource":null}`, `{"resource":{}}`, `{"memo":"\u00e9\ud800"}`,
		`{"amount":"1.00","AMOUNT":"2.00"}`, `{"resource":{"url":"a","Url":"b"}}`,
		`{"amount":"1.00"} {"amount":"2.00"}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"memo":["a",{"x":1}]}`,
		`{"amount":"1.00",}`, `{"amount":"1.00"}]`, "{\"amount\":\"1.00\"}\n",
		"{\"memo\":\"a\xffb\"}", "{\"memo\":\"\xed\xa0\x80\"}", `{"memo":"\ud800x"}`, `{"memo":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v spendBody
		// The fast path may only accept what the full scanner accepts.
		if fastKeysOK(body, reflect.TypeOf(&v)) {
			if err := scanKeys(body, reflect.TypeOf(&v)); err != nil {
				t.Fatalf("fast path accepted %q, the scanner refuses it: %s", body, err.message)
			}
		}
		if err := decodeStrict(body, &v); err != nil {
			if err.code == "" || err.message == "" {
				t.Fatalf("refusal without code or message: %+v", err)
			}
			if _, ok := errorTable[err.code]; !ok {
				t.Fatalf("refusal code %q is not in the error table", err.code)
			}
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
			t.Fatalf("decodeStrict accepted %q, encoding/json says %v", body, err)
		}
		// Whichever codec decoded it, the result is what encoding/json
		// makes of the body.
		var want spendBody
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("decodeStrict accepted %q, encoding/json refuses it: %v", body, err)
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("decodeStrict read %q as %+v, encoding/json as %+v", body, v, want)
		}
		if dup, err := duplicateMember(body); err != nil {
			t.Fatalf("decodeStrict accepted %q, which does not tokenize: %v", body, err)
		} else if dup != "" {
			t.Fatalf("decodeStrict accepted %q with a duplicate member %q", body, dup)
		}
	})
}

// duplicateMember walks the JSON value recursively and returns the first
// member name that appears twice in one object, comparing names the way
// encoding/json matches struct fields (case-insensitively).
func duplicateMember(body []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var walk func() (string, error)
	walk = func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				name := strings.ToLower(strings.ToUpper(k.(string)))
				if seen[name] {
					return k.(string), nil
				}
				seen[name] = true
				if d, err := walk(); d != "" || err != nil {
					return d, err
				}
			}
			_, err := dec.Token()
			return "", err
		case json.Delim('['):
			for dec.More() {
				if d, err := walk(); d != "" || err != nil {
					return d, err
				}
			}
			_, err := dec.Token()
			return "", err
		}
		return "", nil
	}
	d, err := walk()
	if err != nil || d != "" {
		return d, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("data after the first value")
	}
	return "", nil
}
