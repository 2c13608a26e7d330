package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// decodeStrict decodes a JSON object into v, refusing what a lenient
// decoder would let through: malformed JSON, duplicate keys (which two
// parsers could read differently), unknown fields, trailing data and wrong
// types. The error names the param and says what to fix.
func decodeStrict(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badParam(codeInvalidJSON, "", "The request body is empty; send a JSON object.")
	}
	if err := scanDuplicates(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	return nil
}

func decodeError(err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		param := te.Field
		want := te.Type.String()
		switch {
		case strings.Contains(want, "string") && te.Value == "number":
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

// scanDuplicates walks the JSON once with a tokenizer, rejecting duplicate
// object keys and anything after the first value.
func scanDuplicates(body []byte) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
		path   string
		expect bool // next token in an object is a key
		key    string
	}
	var stack []*frame
	pathOf := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object && f.key != "" {
			if f.path == "" {
				return f.key
			}
			return f.path + "." + f.key
		}
		return f.path
	}
	first := true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return decodeError(err)
		}
		if len(stack) == 0 && !first {
			return badParam(codeInvalidJSON, "", "The request body has data after the JSON object; send exactly one object.")
		}
		if first {
			if d, ok := tok.(json.Delim); !ok || d != '{' {
				return badParam(codeInvalidJSON, "", "The request body must be a JSON object.")
			}
		}
		first = false
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 {
					stack[len(stack)-1].expect = stack[len(stack)-1].object
				}
				continue
			}
			k, _ := tok.(string)
			if top.keys[k] {
				p := k
				if top.path != "" {
					p = top.path + "." + k
				}
				return badParam(codeInvalidJSON, p, fmt.Sprintf("%s appears twice in the same object; send each field once.", p))
			}
			top.keys[k] = true
			top.key = k
			top.expect = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, path: pathOf(), expect: true})
		case '[':
			stack = append(stack, &frame{path: pathOf()})
		case '}', ']':
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				stack[len(stack)-1].expect = stack[len(stack)-1].object
			}
		default:
			if top != nil && top.object {
				top.expect = true
			}
		}
	}
	return nil
}
