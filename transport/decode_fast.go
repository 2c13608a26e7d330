package transport

import "reflect"

// fastKeysOK is a single pass over the shapes agents send every time: one
// object of known fields with plain ASCII names, string/number/literal
// values and nested objects of known struct types. It answers true only
// when scanKeys would accept the body; anything else (escapes in names,
// arrays, unknown or repeated names, odd syntax) answers false and the
// full tokenizer decides and words the error. It exists because the
// tokenizer costs a third of a POST /v1/spends/check.
func fastKeysOK(body []byte, target reflect.Type) bool {
	st := structOf(target)
	if st == nil {
		return false
	}
	i := skipSpace(body, 0)
	end, ok := scanObject(body, i, st)
	if !ok {
		return false
	}
	return skipSpace(body, end) == len(body)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// maxFastKeys bounds the names remembered per object; more fall back.
const maxFastKeys = 16

// scanObject checks the object starting at b[i] against struct type st
// and returns the index after it.
func scanObject(b []byte, i int, st reflect.Type) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	fields := fieldsOf(st)
	var seen [maxFastKeys]string
	n := 0
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		start := i + 1
		j := start
		for j < len(b) && b[j] != '"' {
			c := b[j]
			if c == '\\' || c < 0x20 || c >= 0x80 {
				return 0, false
			}
			j++
		}
		if j >= len(b) {
			return 0, false
		}
		key := string(b[start:j])
		ft, known := fields[key]
		if !known || n == maxFastKeys {
			return 0, false
		}
		for _, s := range seen[:n] {
			if equalFoldASCII(s, key) {
				return 0, false
			}
		}
		seen[n] = key
		n++
		i = skipSpace(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipSpace(b, i+1)
		var ok bool
		if i, ok = scanValue(b, i, ft); !ok {
			return 0, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// scanValue checks one member value of type ft starting at b[i].
func scanValue(b []byte, i int, ft reflect.Type) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{':
		st := structOf(ft)
		if st == nil {
			return 0, false
		}
		return scanObject(b, i, st)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return 0, false
}

func scanString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			j++
			if j >= len(b) {
				return 0, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return 0, false
					}
				}
				j += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// scanNumber accepts exactly JSON's number grammar.
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > s
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	return i, true
}

func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := 0; k < len(a); k++ {
		x, y := a[k], b[k]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// maxFlatMembers is how many names decodeFlatStrings can track.
const maxFlatMembers = 8

// decodeFlatStrings reads the commonest body of all, an object of a few
// string members, in one pass and with one allocation: the member names
// must be exactly among names (same case), each at most once, and each
// value a string of printable ASCII without escapes, or null. vals[i] is
// set and set[i] is true for each name present with a string. It answers
// false for anything else, setting nothing that matters: the caller then
// decodes the body with decodeStrict, which decides and words the error.
// For the bodies it accepts, it reads what encoding/json reads (a fuzz
// target checks this).
func decodeFlatStrings(body []byte, names []string, vals []string, set []bool) bool {
	if len(names) > maxFlatMembers {
		return false
	}
	var seen [maxFlatMembers]bool
	var spans [maxFlatMembers][2]int
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return skipSpace(body, i+1) == len(body)
	}
	for {
		start, end, ok := plainString(body, i)
		if !ok {
			return false
		}
		k := -1
		for n, name := range names {
			if string(body[start:end]) == name {
				k = n
				break
			}
		}
		if k < 0 || seen[k] {
			return false
		}
		seen[k] = true
		i = skipSpace(body, end+1)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		if i < len(body) && body[i] == 'n' {
			if i, ok = scanLiteral(body, i, "null"); !ok {
				return false
			}
			spans[k] = [2]int{-1, -1}
		} else {
			if start, end, ok = plainString(body, i); !ok {
				return false
			}
			spans[k] = [2]int{start, end}
			i = end + 1
		}
		i = skipSpace(body, i)
		if i >= len(body) {
			return false
		}
		if body[i] == '}' {
			break
		}
		if body[i] != ',' {
			return false
		}
		i = skipSpace(body, i+1)
	}
	if skipSpace(body, i+1) != len(body) {
		return false
	}
	// One string for all values: they are cut from it.
	lo, hi := len(body), 0
	for k := range names {
		if seen[k] && spans[k][0] >= 0 {
			lo, hi = min(lo, spans[k][0]), max(hi, spans[k][1])
		}
	}
	var all string
	if lo < hi {
		all = string(body[lo:hi])
	}
	for k := range names {
		if !seen[k] || spans[k][0] < 0 {
			continue
		}
		if spans[k][0] < spans[k][1] {
			vals[k] = all[spans[k][0]-lo : spans[k][1]-lo]
		} else {
			vals[k] = ""
		}
		set[k] = true
	}
	return true
}

// plainString finds the string starting at b[i] when it holds only
// printable ASCII and no escapes; start and end bound its contents (end is
// the closing quote).
func plainString(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return i + 1, j, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return 0, 0, false
		}
	}
	return 0, 0, false
}
