package randfill

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"

	"github.com/agentpay/guard/policy"
)

var amountType = reflect.TypeOf(policy.Amount{})
var timeType = reflect.TypeOf(time.Time{})
var patternType = reflect.TypeOf(policy.Pattern{})

// Fill sets v, which must be settable, to a random value of its type.
func Fill(v reflect.Value, rnd *rand.Rand) { filler{rnd: rnd}.fill(v, 0) }

type filler struct{ rnd *rand.Rand }

func (f filler) str() string {
	pieces := []string{"a", "Z", "9", "_", "-", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\x01", "é", "日本", "\u2028", "💸", "/", "."}
	var b strings.Builder
	for n := f.rnd.IntN(12); n > 0; n-- {
		b.WriteString(pieces[f.rnd.IntN(len(pieces))])
	}
	return b.String()
}

func (f filler) fill(v reflect.Value, depth int) {
	if v.Type() == amountType {
		s := fmt.Sprintf("%d.%0*d", f.rnd.IntN(100000), 1+f.rnd.IntN(6), f.rnd.IntN(1000))
		if f.rnd.IntN(4) == 0 {
			s = fmt.Sprint(f.rnd.IntN(50))
		}
		v.Set(reflect.ValueOf(policy.MustAmount(s)))
		return
	}
	if v.Type() == patternType {
		hosts := []string{"api.vendor.com", "*.vendor.com", "xn--bcher-kva.de", "a-1.b.vendor.org", "*.deep.api.vendor.net"}
		p, err := policy.ParsePattern(hosts[f.rnd.IntN(len(hosts))])
		if err != nil {
			panic(err)
		}
		v.Set(reflect.ValueOf(p))
		return
	}
	if v.Type() == timeType {
		at := time.Unix(1_700_000_000+f.rnd.Int64N(200_000_000), f.rnd.Int64N(1e9)).UTC()
		if f.rnd.IntN(3) == 0 {
			at = at.Truncate(time.Second)
		}
		v.Set(reflect.ValueOf(at))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.rnd.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if f.rnd.IntN(4) > 0 { // else zero, for omitempty
			v.SetInt(f.rnd.Int64N(1<<31) - 1<<30)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f.rnd.IntN(4) > 0 {
			v.SetUint(f.rnd.Uint64N(1 << 40))
		}
	case reflect.Float32, reflect.Float64:
		if f.rnd.IntN(4) > 0 {
			v.SetFloat(float64(f.rnd.IntN(100000)) / 8)
		}
	case reflect.Pointer:
		if depth > 4 || f.rnd.IntN(3) == 0 {
			return // nil
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if depth > 4 || f.rnd.IntN(4) == 0 {
			return // nil
		}
		n := f.rnd.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if depth > 4 || f.rnd.IntN(4) == 0 || v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		for n := f.rnd.IntN(4); n > 0; n-- {
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, depth+1)
			m.SetMapIndex(reflect.ValueOf(f.str()).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Interface:
		// Event payloads: objects of strings, numbers, booleans and nulls.
		if depth > 4 {
			return
		}
		obj := map[string]any{}
		for n := f.rnd.IntN(4); n > 0; n-- {
			switch f.rnd.IntN(5) {
			case 0:
				obj[f.str()] = f.str()
			case 1:
				obj[f.str()] = float64(f.rnd.IntN(1000))
			case 2:
				obj[f.str()] = f.rnd.IntN(2) == 0
			case 3:
				obj[f.str()] = nil
			default:
				obj[f.str()] = []any{f.str(), 1.5}
			}
		}
		v.Set(reflect.ValueOf(obj))
	}
}
