package chat

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// filterOverrides are the filters where gonja differs from Jinja2 as
// transformers configures it.
func filterOverrides() map[string]exec.FilterFunction {
	fs := map[string]exec.FilterFunction{
		"tojson":   filterToJSON,
		"items":    filterItems,
		"string":   filterString,
		"dictsort": filterDictsort,
		"round":    filterRound,
		"trim":     filterTrim,
	}
	for name, f := range opFilters() {
		fs[name] = f
	}
	// Width and count arguments are bounded (MaxIntArg).
	for _, name := range []string{"batch", "center", "indent", "slice", "truncate", "wordwrap", "format"} {
		if f, ok := builtins.Filters.Get(name); ok {
			fs[name] = boundedFilter(name, f)
		}
	}
	return fs
}

func errValue(err error) *exec.Value { return exec.AsValue(err) }

// checkIntArgs refuses integer arguments beyond MaxIntArg.
func checkIntArgs(name string, va *exec.VarArgs) error {
	check := func(v *exec.Value) error {
		if v != nil && v.IsInteger() && (v.Integer() > MaxIntArg || v.Integer() < -MaxIntArg) {
			return fmt.Errorf("%w: %s: argument %d is larger than %d", ErrLimit, name, v.Integer(), MaxIntArg)
		}
		return nil
	}
	for _, a := range va.Args {
		if err := check(a); err != nil {
			return err
		}
	}
	for _, a := range va.KwArgs {
		if err := check(a); err != nil {
			return err
		}
	}
	return nil
}

func boundedFilter(name string, f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
		if err := checkIntArgs(name, va); err != nil {
			return errValue(err)
		}
		return f(e, in, va)
	}
}

// args binds positional and keyword arguments to Python parameter names,
// as a Python call does. Missing ones are nil.
func args(fn string, va *exec.VarArgs, names ...string) ([]*exec.Value, error) {
	out := make([]*exec.Value, len(names))
	if len(va.Args) > len(names) {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", fn, len(names), len(va.Args))
	}
	copy(out, va.Args)
	for k, v := range va.KwArgs {
		i := -1
		for j, n := range names {
			if n == k {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", fn, k)
		}
		if out[i] != nil {
			return nil, fmt.Errorf("%s() got multiple values for argument '%s'", fn, k)
		}
		out[i] = v
	}
	return out, nil
}

func isNone(v *exec.Value) bool { return v == nil || v.IsNil() }

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), keyword arguments
// honoured.
func filterToJSON(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	a, err := args("tojson", va, "ensure_ascii", "indent", "separators", "sort_keys")
	if err != nil {
		return errValue(err)
	}
	o := jsonOpts{indent: -1}
	if !isNone(a[0]) {
		o.ensureASCII = a[0].IsTrue()
	}
	if !isNone(a[1]) {
		switch {
		case a[1].IsString():
			o.indentStr = a[1].String()
			if o.indentStr == "" {
				o.indent = 0
			}
		default:
			n, ok := toInt(a[1])
			if !ok || a[1].IsFloat() {
				return errValue(fmt.Errorf("tojson: indent must be an int or a string, not %s", engineTypeName(a[1])))
			}
			if n > 64 {
				return errValue(fmt.Errorf("%w: tojson: indent %d is larger than 64", ErrLimit, n))
			}
			o.indent = max(n, 0)
		}
	}
	o.itemSep, o.keySep = ", ", ": "
	if o.indent >= 0 || o.indentStr != "" {
		o.itemSep = ","
	}
	if !isNone(a[2]) {
		if !a[2].IsList() || a[2].Len() != 2 {
			return errValue(errors.New("tojson: separators must be a pair of strings"))
		}
		i, k := exec.ToValue(a[2].Index(0)), exec.ToValue(a[2].Index(1))
		if !i.IsString() || !k.IsString() {
			return errValue(errors.New("tojson: separators must be a pair of strings"))
		}
		o.itemSep, o.keySep = i.String(), k.String()
	}
	if !isNone(a[3]) {
		o.sortKeys = a[3].IsTrue()
	}
	v, err := fromEngine(in, 0)
	if err != nil {
		return errValue(fmt.Errorf("tojson: %w", err))
	}
	s, err := pyJSON(v, o)
	if err != nil {
		return errValue(err)
	}
	return exec.AsValue(s)
}

// filterItems is Jinja's items: the (key, value) pairs of a mapping, in
// order; nothing for an undefined value.
func filterItems(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(va.Args) > 0 || len(va.KwArgs) > 0 {
		return errValue(errors.New("items() takes no arguments"))
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if !in.IsDict() {
		return errValue(errors.New("Can only get item pairs from a mapping."))
	}
	return exec.AsValue(pairList(dictPairs(in)))
}

func pairList(ps []*exec.Pair) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		out[i] = []any{p.Key, p.Value}
	}
	return out
}

// filterString is Python's str(x).
func filterString(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsValue(pyStr(in))
}

// filterDictsort is Jinja's dictsort(case_sensitive=False, by='key',
// reverse=False).
func filterDictsort(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	a, err := args("dictsort", va, "case_sensitive", "by", "reverse")
	if err != nil {
		return errValue(err)
	}
	if !in.IsDict() {
		return errValue(errors.New("dictsort: can only sort a mapping"))
	}
	caseSensitive := !isNone(a[0]) && a[0].IsTrue()
	byValue := false
	if !isNone(a[1]) {
		switch a[1].String() {
		case "key":
		case "value":
			byValue = true
		default:
			return errValue(errors.New("You can only sort by either 'key' or 'value'"))
		}
	}
	reverse := !isNone(a[2]) && a[2].IsTrue()
	ps := append([]*exec.Pair(nil), dictPairs(in)...)
	key := func(p *exec.Pair) *exec.Value {
		if byValue {
			return p.Value
		}
		return p.Key
	}
	var cmpErr error
	sort.SliceStable(ps, func(i, j int) bool {
		c, err := pyCompare(key(ps[i]), key(ps[j]), caseSensitive)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	if cmpErr != nil {
		return errValue(fmt.Errorf("dictsort: %w", cmpErr))
	}
	return exec.AsValue(pairList(ps))
}

// pyCompare orders two scalars as Python's < does (strings lower-cased
// unless caseSensitive, as Jinja's sort filters do).
func pyCompare(a, b *exec.Value, caseSensitive bool) (int, error) {
	switch {
	case a.IsString() && b.IsString():
		x, y := a.String(), b.String()
		if !caseSensitive {
			x, y = strings.ToLower(x), strings.ToLower(y)
		}
		return strings.Compare(x, y), nil
	case a.IsNumber() && b.IsNumber() || a.IsBool() && b.IsBool():
		x, y := a.Float(), b.Float()
		if a.IsBool() {
			x, y = boolFloat(a.Bool()), boolFloat(b.Bool())
		}
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", engineTypeName(a), engineTypeName(b))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// filterRound is Jinja's round(precision=0, method='common'): 'common' is
// Python's round (ties to even on the exact binary value), 'ceil' and
// 'floor' round up and down; the result is a float.
func filterRound(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	a, err := args("round", va, "precision", "method")
	if err != nil {
		return errValue(err)
	}
	if !in.IsNumber() {
		return errValue(fmt.Errorf("round: must be a number, not %s", engineTypeName(in)))
	}
	prec := 0
	if !isNone(a[0]) {
		n, ok := toInt(a[0])
		if !ok || n > 300 || n < -300 {
			return errValue(fmt.Errorf("round: bad precision %s", a[0].String()))
		}
		prec = n
	}
	method := "common"
	if !isNone(a[1]) {
		method = a[1].String()
	}
	x := in.Float()
	switch method {
	case "common":
		if prec >= 0 {
			s := strconv.FormatFloat(x, 'f', prec, 64)
			f, _ := strconv.ParseFloat(s, 64)
			return exec.AsValue(f)
		}
		p := math.Pow(10, float64(-prec))
		return exec.AsValue(math.RoundToEven(x/p) * p)
	case "ceil", "floor":
		p := math.Pow(10, float64(prec))
		if method == "ceil" {
			return exec.AsValue(math.Ceil(x*p) / p)
		}
		return exec.AsValue(math.Floor(x*p) / p)
	}
	return errValue(errors.New("method must be 'common', 'ceil' or 'floor'"))
}

// filterTrim is Jinja's trim(chars=None): str(value).strip(chars), so a
// list is trimmed as its Python text.
func filterTrim(e *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	a, err := args("trim", va, "chars")
	if err != nil {
		return errValue(err)
	}
	s := ""
	if !in.IsNil() {
		s = pyStr(in)
	}
	chars, given, err := optString("trim", a[0])
	if err != nil {
		return errValue(err)
	}
	cut := pyIsSpace
	if given {
		cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
	}
	return exec.AsValue(strings.TrimFunc(s, cut))
}
