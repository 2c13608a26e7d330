package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentpay/guard/internal/fastjson"
)

// decodeStrict decodes a JSON object into v, refusing what a lenient
// decoder would let through: malformed JSON, duplicate keys (which two
// parsers could read differently), unknown fields, trailing data and wrong
// types. The error names the param and says what to fix.
func decodeStrict(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badParam(codeInvalidJSON, "", "The request body is empty; send a JSON object.")
	}
	if err := checkUTF8(body); err != nil {
		return err
	}
	if t := reflect.TypeOf(v); fastKeysOK(body, t) {
		// Known, unique, well-formed keys: the body agents send every
		// time. The fast codec decodes it; whatever it refuses goes on to
		// encoding/json, whose errors name the field to fix.
		if fastjson.Unmarshal(body, v) == nil {
			return nil
		}
	} else if err := scanKeys(body, t); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(body, err)
	}
	return nil
}

// bodyError is decodeError with syntax errors placed exactly. A
// tokenizer's SyntaxError counts its offset from where its last value
// began, so "{\"a\": x}" would be reported at byte 4 and trailing data at
// the wrong place; checking the whole body again names the byte (counted
// from 1) where it goes wrong, and tells trailing data apart.
func bodyError(body []byte, err error) *apiError {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return decodeError(err)
	}
	var whole json.RawMessage
	if errors.As(json.Unmarshal(body, &whole), &se) && strings.HasSuffix(se.Error(), "after top-level value") {
		return badParam(codeInvalidJSON, "", fmt.Sprintf("The request body has data after the JSON object (at byte %d); send exactly one object.", se.Offset))
	}
	return decodeError(se)
}

// checkUTF8 refuses a body that is not UTF-8, as JSON text must be (RFC
// 8259 8.1). The decoders would replace each bad byte with U+FFFD and go
// on: a memo would be stored other than it was sent.
func checkUTF8(body []byte) *apiError {
	if utf8.Valid(body) {
		return nil
	}
	at := 0
	for at < len(body) {
		r, n := utf8.DecodeRune(body[at:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		at += n
	}
	return badParam(codeInvalidJSON, "", fmt.Sprintf("The request body is not valid UTF-8 (at byte %d); send JSON text encoded as UTF-8.", at))
}

// moneyFields are the request fields that carry an amount: a JSON number
// sent for one of them gets the reminder that amounts are strings.
var moneyFields = map[string]bool{"amount": true, "per_spend_limit": true, "daily_cap": true, "monthly_cap": true,
	"lifetime_cap": true, "approval_over": true, "destination_window_over": true, "reserve_floor": true,
	"low_balance_threshold": true}

func decodeError(err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		param := te.Field
		want := te.Type.String()
		switch {
		case strings.HasPrefix(want, "[]string"):
			// Before the string case: the wanted type names "string" too.
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be a JSON array of strings, like [\"a\", \"b\"], not a %s.", param, te.Value))
		case strings.Contains(want, "string") && te.Value == "number" && moneyFields[param[strings.LastIndexByte(param, '.')+1:]]:
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be a JSON string; write amounts as decimal strings like \"5.00\", not JSON numbers.", param))
		case strings.Contains(want, "string"):
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be a JSON string, not a %s.", param, te.Value))
		case strings.Contains(want, "int"):
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be a whole number, not a %s.", param, te.Value))
		case strings.Contains(want, "bool"):
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be true or false, not a %s.", param, te.Value))
		case strings.Contains(want, "[]"):
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be an array, not a %s.", param, te.Value))
		case param == "":
			return badParam(codeInvalidJSON, "", "The request body must be a JSON object.")
		default:
			return badParam(codeParameterInvalid, param, fmt.Sprintf("%s must be a JSON object, not a %s.", param, te.Value))
		}
	case errors.As(err, &se):
		return badParam(codeInvalidJSON, "", fmt.Sprintf("The request body is not valid JSON (at byte %d): %s.", se.Offset, se.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return badParam(codeInvalidJSON, "", "The request body ends before the JSON object does.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badParam(codeParameterUnknown, name, fmt.Sprintf("%s is not a field of this request; remove it (check the spelling).", name))
	}
	return badParam(codeInvalidJSON, "", "The request body could not be read as JSON: "+err.Error())
}

// fieldsOf maps the exact json names of a struct's fields to their types.
// encoding/json matches names case-insensitively, which would let
// {"amount":"1.00","AMOUNT":"2.00"} through as one field whose value is
// the last one; the scanner below insists on the exact spelling instead.
var fieldsCache sync.Map // reflect.Type -> map[string]reflect.Type

func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldsCache.Store(t, m)
	return m
}

var rawMessageType = reflect.TypeOf(json.RawMessage{})

// structOf is the struct type a JSON object decodes into, or nil when the
// target is not a struct we can check (a map, raw JSON, an interface).
func structOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

func elemOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t != rawMessageType {
		return t.Elem()
	}
	return nil
}

// scanKeys walks the JSON once with a tokenizer and refuses: anything but
// one object, duplicate keys (compared case-insensitively, as the decoder
// would match them), and keys that are not the exact name of a field of
// the target type. Errors name the full path of the field.
func scanKeys(body []byte, target reflect.Type) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object    bool
		path      string
		typ       reflect.Type // struct type of an object, element type of an array
		seen      map[string]bool
		expect    bool         // in an object: the next token is a key
		next      reflect.Type // type of the value that follows the current key
		valuePath string       // path of the value that follows the current key
	}
	var stack []*frame
	join := func(path, key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	pop := func() {
		stack = stack[:len(stack)-1]
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
	for first := true; ; first = false {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return bodyError(body, err)
		}
		if first {
			if d, ok := tok.(json.Delim); !ok || d != '{' {
				return badParam(codeInvalidJSON, "", "The request body must be a JSON object.")
			}
			stack = append(stack, &frame{object: true, typ: structOf(target), seen: map[string]bool{}, expect: true})
			continue
		}
		if len(stack) == 0 {
			return badParam(codeInvalidJSON, "", "The request body has data after the JSON object; send exactly one object.")
		}
		top := stack[len(stack)-1]
		if top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				pop()
				continue
			}
			k, _ := tok.(string)
			p := join(top.path, k)
			if top.seen[strings.ToLower(k)] {
				return badParam(codeInvalidJSON, p, p+" appears twice in the same object (names are compared without case); send each field once.")
			}
			top.seen[strings.ToLower(k)] = true
			top.next = nil
			if top.typ != nil {
				ft, ok := fieldsOf(top.typ)[k]
				if !ok {
					return badParam(codeParameterUnknown, p, p+" is not a field of this request; remove it (field names are lower case, check the spelling).")
				}
				top.next = ft
			}
			top.expect = false
			top.valuePath = p
			continue
		}
		var valueType reflect.Type
		var path string
		if top.object {
			valueType, path = top.next, top.valuePath
		} else {
			valueType, path = top.typ, top.path
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{object: true, path: path, typ: structOf(valueType), seen: map[string]bool{}, expect: true})
		case '[':
			stack = append(stack, &frame{path: path, typ: elemOf(valueType)})
		case '}', ']':
			pop()
		default:
			if top.object {
				top.expect = true
			}
		}
	}
}
