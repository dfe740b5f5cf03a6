package chat

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// toEngine converts a Go value (as documented on Input) into the value
// gonja works on. Objects become *exec.Dict, whose pairs keep their order;
// an empty object becomes an empty Go map so that it is falsy, as {} is in
// Python (gonja counts every Dict as true).
func toEngine(v any, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("chat: input nests deeper than %d", maxJSONDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x, nil
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case int32:
		return int(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return int(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("chat: number %q: %w", string(x), err)
		}
		return f, nil
	case *Map:
		if x == nil || x.Len() == 0 {
			return map[string]any{}, nil
		}
		d := exec.NewDict()
		for _, k := range x.keys {
			e, err := toEngine(x.vals[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(e)})
		}
		return d, nil
	case map[string]any:
		if len(x) == 0 {
			return map[string]any{}, nil
		}
		d := exec.NewDict()
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e, err := toEngine(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(e)})
		}
		return d, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := toEngine(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := toEngine(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []*Map:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := toEngine(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("chat: cannot give a template a value of type %T", v)
}

// fromEngine converts a gonja value back into plain data (nil, bool, int64,
// float64, string, []any, *Map), the form tojson and equality work on.
func fromEngine(v *exec.Value, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("value nests deeper than %d", maxJSONDepth)
	}
	if v == nil || v.IsNil() {
		return nil, nil
	}
	if v.IsError() {
		return nil, fmt.Errorf("%s", v.Error())
	}
	switch {
	case v.IsBool():
		return v.Bool(), nil
	case v.IsInteger():
		return int64(v.Integer()), nil
	case v.IsFloat():
		return v.Float(), nil
	case v.IsString():
		return v.String(), nil
	case v.IsList():
		out := make([]any, 0, v.Len())
		for i := range v.Len() {
			e, err := fromEngine(exec.ToValue(v.Index(i)), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case v.IsDict():
		m := &Map{}
		var err error
		for _, p := range dictPairs(v) {
			var k string
			if k, err = pyKey(p.Key); err != nil {
				return nil, err
			}
			var e any
			if e, err = fromEngine(p.Value, depth+1); err != nil {
				return nil, err
			}
			m.Set(k, e)
		}
		return m, nil
	}
	return nil, fmt.Errorf("object of type %s is not JSON serializable", engineTypeName(v))
}

// pyKey is the string json.dumps writes for a dict key.
func pyKey(k *exec.Value) (string, error) {
	switch {
	case k.IsNil():
		return "null", nil
	case k.IsBool():
		if k.Bool() {
			return "true", nil
		}
		return "false", nil
	case k.IsInteger():
		return strconv.Itoa(k.Integer()), nil
	case k.IsFloat():
		return pyFloatJSON(k.Float()), nil
	case k.IsString():
		return k.String(), nil
	}
	return "", fmt.Errorf("keys must be str, int, float, bool or None, not %s", engineTypeName(k))
}

// dictPairs returns a dict's pairs in Python order: insertion order for an
// *exec.Dict, sorted keys for a Go map (whose order is not defined).
func dictPairs(v *exec.Value) []*exec.Pair {
	if d, ok := asDict(v); ok {
		return d.Pairs
	}
	rv := reflect.ValueOf(v.Interface())
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Map {
		return nil
	}
	keys := rv.MapKeys()
	pairs := make([]*exec.Pair, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, &exec.Pair{Key: exec.ToValue(k), Value: exec.ToValue(rv.MapIndex(k))})
	}
	sortPairs(pairs)
	return pairs
}

func asDict(v *exec.Value) (*exec.Dict, bool) {
	switch d := v.Interface().(type) {
	case *exec.Dict:
		return d, d != nil
	case exec.Dict:
		return &d, true
	}
	return nil, false
}

func sortPairs(p []*exec.Pair) {
	// Insertion sort on the keys' text: maps here are small (namespaces).
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].Key.String() < p[j-1].Key.String(); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// engineTypeName is the Python type name of a gonja value, for messages.
func engineTypeName(v *exec.Value) string {
	switch {
	case v == nil || v.IsNil():
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInteger():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	case v.IsCallable():
		return "function"
	}
	return fmt.Sprintf("%T", v.Interface())
}

// pyStr is Python's str(x) for template values: what the string filter
// gives and what Jinja prints.
func pyStr(v *exec.Value) string {
	if v.IsString() {
		return v.String()
	}
	var sb strings.Builder
	pyRepr(&sb, v, 0)
	return sb.String()
}

// pyRepr is Python's repr(x).
func pyRepr(sb *strings.Builder, v *exec.Value, depth int) {
	if depth > maxJSONDepth {
		sb.WriteString("...")
		return
	}
	switch {
	case v == nil || v.IsNil():
		sb.WriteString("None")
	case v.IsBool():
		if v.Bool() {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case v.IsInteger():
		sb.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		sb.WriteString(pyFloatRepr(v.Float()))
	case v.IsString():
		sb.WriteString(pyStrRepr(v.String()))
	case v.IsList():
		sb.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				sb.WriteString(", ")
			}
			pyRepr(sb, exec.ToValue(v.Index(i)), depth+1)
		}
		sb.WriteByte(']')
	case v.IsDict():
		sb.WriteByte('{')
		for i, p := range dictPairs(v) {
			if i > 0 {
				sb.WriteString(", ")
			}
			pyRepr(sb, p.Key, depth+1)
			sb.WriteString(": ")
			pyRepr(sb, p.Value, depth+1)
		}
		sb.WriteByte('}')
	default:
		sb.WriteString(v.String())
	}
}

// pyStrRepr is repr(str): single quotes unless the text holds a single
// quote and no double quote; backslash escapes for the quote, backslash and
// non-printable characters.
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

// toInt reads an integer argument, accepting floats with no fraction.
func toInt(v *exec.Value) (int, bool) {
	switch {
	case v.IsBool():
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case v.IsInteger():
		return v.Integer(), true
	case v.IsFloat():
		f := v.Float()
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int(f), true
		}
	}
	return 0, false
}
