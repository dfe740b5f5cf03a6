package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// jsonOpts are the json.dumps arguments Hugging Face's tojson passes on.
type jsonOpts struct {
	ensureASCII bool
	indent      int    // -1: no newlines (indent=None)
	indentStr   string // used instead of spaces when indent was given as a string
	itemSep     string
	keySep      string
	sortKeys    bool
}

// pyJSON encodes v (nil, bool, int64, float64, string, []any, *Map) as
// Python's json.dumps does.
func pyJSON(v any, o jsonOpts) (string, error) {
	var sb strings.Builder
	if err := o.encode(&sb, v, 0); err != nil {
		return "", err
	}
	return sb.String(), nil
}

func (o jsonOpts) newline(sb *strings.Builder, level int) {
	if o.indent < 0 && o.indentStr == "" {
		return
	}
	sb.WriteByte('\n')
	unit := o.indentStr
	if unit == "" {
		unit = strings.Repeat(" ", o.indent)
	}
	for range level {
		sb.WriteString(unit)
	}
}

func (o jsonOpts) encode(sb *strings.Builder, v any, level int) error {
	if level > maxJSONDepth {
		return fmt.Errorf("tojson: nesting deeper than %d", maxJSONDepth)
	}
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		if x {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case int64:
		sb.WriteString(strconv.FormatInt(x, 10))
	case float64:
		sb.WriteString(pyFloatJSON(x))
	case string:
		pyQuote(sb, x, o.ensureASCII)
	case []any:
		if len(x) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteString(o.itemSep)
			}
			o.newline(sb, level+1)
			if err := o.encode(sb, e, level+1); err != nil {
				return err
			}
		}
		o.newline(sb, level)
		sb.WriteByte(']')
	case *Map:
		if x.Len() == 0 {
			sb.WriteString("{}")
			return nil
		}
		keys := x.keys
		if o.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(o.itemSep)
			}
			o.newline(sb, level+1)
			pyQuote(sb, k, o.ensureASCII)
			sb.WriteString(o.keySep)
			if err := o.encode(sb, x.vals[k], level+1); err != nil {
				return err
			}
		}
		o.newline(sb, level)
		sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: object of type %T is not JSON serializable", v)
	}
	return nil
}

// pyFloatJSON is float.__repr__ as json.dumps writes it (NaN and Infinity
// as JavaScript spells them).
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

// pyFloatRepr is Python's repr(float): the shortest digits that round-trip,
// positional when the decimal exponent is in [-4, 16), else scientific with
// a signed exponent of at least two digits; integral values keep ".0".
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX, shortest
	i := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= 16 {
		return e // Go writes e+16 / e-05 exactly as Python does
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyQuote writes s as a JSON string the way json.dumps does: only '"', '\\'
// and control characters are escaped (plus everything past ASCII, as UTF-16
// escapes, when ensureASCII).
func pyQuote(sb *strings.Builder, s string, ensureASCII bool) {
	sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (ensureASCII && r == 0x7f):
				fmt.Fprintf(sb, `\u%04x`, r)
			case ensureASCII && r > 0x7f:
				if r > 0xffff {
					a, b := utf16.EncodeRune(r)
					fmt.Fprintf(sb, `\u%04x\u%04x`, a, b)
				} else {
					fmt.Fprintf(sb, `\u%04x`, r)
				}
			default:
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
}
