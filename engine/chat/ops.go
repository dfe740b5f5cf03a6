package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// opFilters are the filters the rewritten template calls for subscripts,
// slices, operators and printing (see rewrite.go).
func opFilters() map[string]exec.FilterFunction {
	fs := map[string]exec.FilterFunction{
		opGetItem:  opFilter(getItem),
		opGetSlice: opFilter(getSlice),
		opNot: func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
			if in.IsError() {
				return in
			}
			return exec.AsValue(!in.IsTrue())
		},
		opPrint: func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
			if in.IsError() {
				return in
			}
			if in.IsNil() {
				return exec.AsValue("") // gonja cannot tell None from undefined; undefined prints nothing
			}
			return exec.AsValue(pyStr(in))
		},
	}
	for _, op := range interceptedOps {
		fs[opBinary+op] = opFilter(func(l *exec.Value, args []*exec.Value) (any, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("operator %s needs two operands", op)
			}
			return binop(op, l, args[0])
		})
	}
	return fs
}

func opFilter(f func(in *exec.Value, args []*exec.Value) (any, error)) exec.FilterFunction {
	return func(_ *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		for _, a := range va.Args {
			if a.IsError() {
				return a
			}
		}
		v, err := f(in, va.Args)
		if err != nil {
			return errValue(err)
		}
		if ev, ok := v.(*exec.Value); ok {
			return ev
		}
		return exec.AsValue(v)
	}
}

// isInt reports an integer in Python's sense (bools count).
func isInt(v *exec.Value) bool { return v.IsInteger() || v.IsBool() }

func intOf(v *exec.Value) int {
	if v.IsBool() {
		if v.Bool() {
			return 1
		}
		return 0
	}
	return v.Integer()
}

// getItem is obj[key] as Jinja's environment.getitem does it: a missing
// item is undefined, not an error.
func getItem(obj *exec.Value, args []*exec.Value) (any, error) {
	key := args[0]
	switch {
	case obj.IsNil():
		return nil, nil
	case obj.IsString():
		if !isInt(key) {
			return nil, nil
		}
		r := []rune(obj.String())
		i := intOf(key)
		if i < 0 {
			i += len(r)
		}
		if i < 0 || i >= len(r) {
			return nil, nil
		}
		return string(r[i]), nil
	case obj.IsList():
		if isInt(key) {
			n := obj.Len()
			i := intOf(key)
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return nil, nil
			}
			return exec.ToValue(obj.Index(i)), nil
		}
	case obj.IsDict():
		for _, p := range dictPairs(obj) {
			if p.Key.EqualValueTo(key) && p.Key.IsString() == key.IsString() {
				return p.Value, nil
			}
		}
		return nil, nil
	default:
		if v, ok := obj.GetItem(key.Interface()); ok {
			return v, nil
		}
	}
	if key.IsString() {
		if v, ok := obj.GetAttribute(key.String()); ok {
			return v, nil
		}
	}
	return nil, nil
}

// getSlice is obj[start:stop:step] for lists and strings (by character).
func getSlice(obj *exec.Value, args []*exec.Value) (any, error) {
	if len(args) != 3 {
		return nil, errors.New("slice needs start, stop and step")
	}
	var n int
	var runes []rune
	switch {
	case obj.IsString():
		runes = []rune(obj.String())
		n = len(runes)
	case obj.IsList():
		n = obj.Len()
	case obj.IsNil():
		return nil, nil
	default:
		return nil, fmt.Errorf("'%s' object is not subscriptable", engineTypeName(obj))
	}
	idx := make([]int, 3)
	given := make([]bool, 3)
	for i, a := range args {
		if a.IsNil() {
			continue
		}
		if !isInt(a) {
			return nil, errors.New("slice indices must be integers or None")
		}
		idx[i], given[i] = intOf(a), true
	}
	step := 1
	if given[2] {
		step = idx[2]
	}
	if step == 0 {
		return nil, errors.New("slice step cannot be zero")
	}
	start, stop := sliceBounds(idx[0], given[0], idx[1], given[1], step, n)
	var picks []int
	if step > 0 {
		for i := start; i < stop; i += step {
			picks = append(picks, i)
		}
	} else {
		for i := start; i > stop; i += step {
			picks = append(picks, i)
		}
	}
	if runes != nil || obj.IsString() {
		out := make([]rune, len(picks))
		for j, i := range picks {
			out[j] = runes[i]
		}
		return string(out), nil
	}
	out := make([]any, len(picks))
	for j, i := range picks {
		out[j] = exec.ToValue(obj.Index(i))
	}
	return out, nil
}

// sliceBounds is CPython's PySlice_AdjustIndices.
func sliceBounds(start int, hasStart bool, stop int, hasStop bool, step, n int) (int, int) {
	adjust := func(i int, lo, hi int) int {
		if i < 0 {
			i += n
			if i < 0 {
				return lo
			}
			return i
		}
		if i >= n {
			return hi
		}
		return i
	}
	if step > 0 {
		s, e := 0, n
		if hasStart {
			s = adjust(start, 0, n)
		}
		if hasStop {
			e = adjust(stop, 0, n)
		}
		return s, e
	}
	s, e := n-1, -1
	if hasStart {
		s = adjust(start, -1, n-1)
	}
	if hasStop {
		e = adjust(stop, -1, n-1)
	}
	return s, e
}

func typeErr(op string, l, r *exec.Value) error {
	return fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, engineTypeName(l), engineTypeName(r))
}

func checkSize(n int) error {
	if n > MaxOutputBytes || n < 0 {
		return fmt.Errorf("%w: a value larger than %d", ErrLimit, MaxOutputBytes)
	}
	return nil
}

// binop applies a Python binary operator.
func binop(op string, l, r *exec.Value) (any, error) {
	num := func(v *exec.Value) bool { return v.IsNumber() || v.IsBool() }
	bothInt := isInt(l) && isInt(r)
	switch op {
	case "==", "!=":
		eq := pyEqual(l, r, 0)
		return eq == (op == "=="), nil
	case "~":
		ls, rs := "", ""
		if !l.IsNil() {
			ls = pyStr(l)
		}
		if !r.IsNil() {
			rs = pyStr(r)
		}
		if err := checkSize(len(ls) + len(rs)); err != nil {
			return nil, err
		}
		return ls + rs, nil
	case "+":
		switch {
		case bothInt:
			return intOf(l) + intOf(r), nil
		case num(l) && num(r):
			return l.Float() + r.Float(), nil
		case l.IsString() && r.IsString():
			if err := checkSize(len(l.String()) + len(r.String())); err != nil {
				return nil, err
			}
			return l.String() + r.String(), nil
		case l.IsString():
			return nil, fmt.Errorf("can only concatenate str (not \"%s\") to str", engineTypeName(r))
		case l.IsList() && r.IsList():
			if err := checkSize(l.Len() + r.Len()); err != nil {
				return nil, err
			}
			out := make([]any, 0, l.Len()+r.Len())
			for i := range l.Len() {
				out = append(out, exec.ToValue(l.Index(i)))
			}
			for i := range r.Len() {
				out = append(out, exec.ToValue(r.Index(i)))
			}
			return out, nil
		}
	case "-":
		switch {
		case bothInt:
			return intOf(l) - intOf(r), nil
		case num(l) && num(r):
			return l.Float() - r.Float(), nil
		}
	case "*":
		switch {
		case bothInt:
			return intOf(l) * intOf(r), nil
		case num(l) && num(r):
			return l.Float() * r.Float(), nil
		case l.IsString() && isInt(r), isInt(l) && r.IsString():
			s, n := l, r
			if isInt(l) {
				s, n = r, l
			}
			times := max(intOf(n), 0)
			if times > 0 && len(s.String()) > MaxOutputBytes/times {
				return nil, checkSize(-1)
			}
			return strings.Repeat(s.String(), times), nil
		case l.IsList() && isInt(r), isInt(l) && r.IsList():
			lst, n := l, r
			if isInt(l) {
				lst, n = r, l
			}
			times := max(intOf(n), 0)
			if times > 0 && lst.Len() > MaxOutputBytes/times {
				return nil, checkSize(-1)
			}
			out := make([]any, 0, lst.Len()*times)
			for range times {
				for i := range lst.Len() {
					out = append(out, exec.ToValue(lst.Index(i)))
				}
			}
			return out, nil
		}
	case "/":
		if num(l) && num(r) {
			if r.Float() == 0 {
				return nil, errors.New("division by zero")
			}
			return numF(l) / numF(r), nil
		}
	case "//":
		switch {
		case bothInt:
			if intOf(r) == 0 {
				return nil, errors.New("integer division or modulo by zero")
			}
			a, b := intOf(l), intOf(r)
			q := a / b
			if (a%b != 0) && ((a < 0) != (b < 0)) {
				q--
			}
			return q, nil
		case num(l) && num(r):
			if numF(r) == 0 {
				return nil, errors.New("float floor division by zero")
			}
			return math.Floor(numF(l) / numF(r)), nil
		}
	case "%":
		switch {
		case bothInt:
			if intOf(r) == 0 {
				return nil, errors.New("integer division or modulo by zero")
			}
			a, b := intOf(l), intOf(r)
			m := a % b
			if m != 0 && (m < 0) != (b < 0) {
				m += b
			}
			return m, nil
		case num(l) && num(r):
			if numF(r) == 0 {
				return nil, errors.New("float modulo")
			}
			a, b := numF(l), numF(r)
			m := math.Mod(a, b)
			if m != 0 && (m < 0) != (b < 0) {
				m += b
			}
			return m, nil
		case l.IsString():
			return nil, errors.New("printf-style string formatting ('...' % x) is not supported; use the format filter")
		}
	case "**":
		switch {
		case bothInt && intOf(r) >= 0:
			base, exp := intOf(l), intOf(r)
			if f := math.Pow(float64(base), float64(exp)); math.Abs(f) >= 1<<62 {
				return nil, errors.New("integer power too large")
			}
			res := 1
			for ; exp > 0; exp >>= 1 {
				if exp&1 == 1 {
					res *= base
				}
				base *= base
			}
			return res, nil
		case num(l) && num(r):
			return math.Pow(numF(l), numF(r)), nil
		}
	}
	return nil, typeErr(op, l, r)
}

func numF(v *exec.Value) float64 {
	if v.IsBool() || v.IsInteger() {
		return float64(intOf(v))
	}
	return v.Float()
}

// pyEqual is Python's ==: numbers compare by value (True == 1), lists
// element by element, dicts by their items.
func pyEqual(a, b *exec.Value, depth int) bool {
	if depth > maxJSONDepth {
		return false
	}
	num := func(v *exec.Value) bool { return v.IsNumber() || v.IsBool() }
	switch {
	case a.IsNil() || b.IsNil():
		return a.IsNil() && b.IsNil()
	case num(a) && num(b):
		if isInt(a) && isInt(b) {
			return intOf(a) == intOf(b)
		}
		return numF(a) == numF(b)
	case a.IsString() && b.IsString():
		return a.String() == b.String()
	case a.IsList() && b.IsList():
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !pyEqual(exec.ToValue(a.Index(i)), exec.ToValue(b.Index(i)), depth+1) {
				return false
			}
		}
		return true
	case a.IsDict() && b.IsDict():
		pa, pb := dictPairs(a), dictPairs(b)
		if len(pa) != len(pb) {
			return false
		}
		for _, p := range pa {
			found := false
			for _, q := range pb {
				if pyEqual(p.Key, q.Key, depth+1) {
					if !pyEqual(p.Value, q.Value, depth+1) {
						return false
					}
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return a.EqualValueTo(b)
}
