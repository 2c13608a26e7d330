package fastjson

import gojson "github.com/goccy/go-json"

// Marshal encodes v exactly as encoding/json.Marshal would.
func Marshal(v any) ([]byte, error) { return gojson.Marshal(v) }

// Unmarshal decodes data into v as encoding/json.Unmarshal would: unknown
// fields are ignored and field names match case-insensitively. Use it for
// data this service wrote itself; requests from outside go through the
// strict decoder of the transport package.
func Unmarshal(data []byte, v any) error { return gojson.Unmarshal(data, v) }
