// Package fastjson is the JSON codec of the hot paths: the records every
// spend journals, the events it emits, the stored objects actors decode
// and the answers agents read most. It produces byte-for-byte what
// encoding/json produces for the same value (sorted map keys, HTML-safe
// escaping, MarshalJSON and time.Time honoured) at well under half the CPU
// and allocations, which the spend and read benchmarks measured; the rest
// of the code base keeps encoding/json, where speed does not matter and
// its error messages are the ones users see.
//
// The codec is github.com/goccy/go-json; the equivalence with
// encoding/json over the service's own types is held by this package's
// tests, so a change of either library that breaks it fails the build.
package fastjson
