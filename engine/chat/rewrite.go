package chat

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The parsed template is adjusted before it runs, the way Jinja's sandbox
// intercepts operators (SandboxedEnvironment.intercepted_binops): each
// subscript, slice, arithmetic operator and printed expression is routed
// through a filter of this package that has Python's semantics and the
// render guard's limits. gonja still parses, scopes and runs everything;
// only these operations change hands. The names hold a dot, so no template
// can call them.
const (
	opGetItem  = "apr.getitem"
	opGetSlice = "apr.getslice"
	opPrint    = "apr.print"
	opBinary   = "apr.binop."
	opNot      = "apr.not"
)

// interceptedOps are the binary operators routed to binop (and/or keep
// gonja's short-circuit evaluation; comparisons stay with gonja).
var interceptedOps = map[tokens.Type]string{
	tokens.Addition:      "+",
	tokens.Subtraction:   "-",
	tokens.Multiply:      "*",
	tokens.Division:      "/",
	tokens.FloorDivision: "//",
	tokens.Modulo:        "%",
	tokens.Power:         "**",
	tokens.Tilde:         "~",
	tokens.Equals:        "==",
	tokens.Ne:            "!=",
}

var noneNode = func(loc *tokens.Token) nodes.Expression { return &nodes.None{Location: loc} }

// rewriter replaces nodes everywhere they are referenced: a node shared by
// two fields (a method call keeps its receiver twice) gets one replacement.
type rewriter struct {
	seen map[uintptr]bool
	repl map[nodes.Node]nodes.Node
}

func rewriteTemplate(root *nodes.Template) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("chat: preparing the template: %v", p)
		}
	}()
	rw := &rewriter{seen: map[uintptr]bool{}, repl: map[nodes.Node]nodes.Node{}}
	rw.walk(reflect.ValueOf(root))
	return nil
}

var tokenType = reflect.TypeFor[*tokens.Token]()

// replacement returns what n becomes, or nil when it stays.
func (rw *rewriter) replacement(n nodes.Node) nodes.Node {
	if r, ok := rw.repl[n]; ok {
		return r
	}
	var r nodes.Node
	switch x := n.(type) {
	case *nodes.GetItem:
		r = &nodes.FilteredExpression{Expression: x.Node, Filters: []*nodes.FilterCall{{
			Token: x.Location, Name: opGetItem, Args: []nodes.Expression{x.Arg}}}}
	case *nodes.GetSlice:
		arg := func(e nodes.Node) nodes.Expression {
			if e == nil {
				return noneNode(x.Location)
			}
			return e
		}
		r = &nodes.FilteredExpression{Expression: x.Node, Filters: []*nodes.FilterCall{{
			Token: x.Location, Name: opGetSlice, Args: []nodes.Expression{arg(x.Start), arg(x.End), arg(x.Step)}}}}
	case *nodes.Negation:
		r = &nodes.FilteredExpression{Expression: x.Term, Filters: []*nodes.FilterCall{{
			Token: x.Operator, Name: opNot}}}
	case *nodes.BinaryExpression:
		if x.Operator == nil || x.Operator.Token == nil {
			return nil
		}
		op, ok := interceptedOps[x.Operator.Token.Type]
		if !ok {
			return nil
		}
		r = &nodes.FilteredExpression{Expression: x.Left, Filters: []*nodes.FilterCall{{
			Token: x.Operator.Token, Name: opBinary + op, Args: []nodes.Expression{x.Right}}}}
	default:
		return nil
	}
	rw.repl[n] = r
	return r
}

// printed routes what {{ }} prints through str(), as Jinja prints.
func printed(o *nodes.Output) {
	wrap := func(e nodes.Expression) nodes.Expression {
		return &nodes.FilteredExpression{Expression: e, Filters: []*nodes.FilterCall{{Token: o.Start, Name: opPrint}}}
	}
	if o.Expression != nil {
		o.Expression = wrap(o.Expression)
	}
	if o.Alternative != nil {
		o.Alternative = wrap(o.Alternative)
	}
}

// walk visits every value reachable from v and swaps intercepted nodes in
// place, including in unexported fields of gonja's statements.
func (rw *rewriter) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Type() == tokenType {
			return
		}
		p := v.Pointer()
		if rw.seen[p] {
			return
		}
		rw.seen[p] = true
		if o, ok := pointerOf(v).Interface().(*nodes.Output); ok {
			printed(o)
		}
		rw.walk(v.Elem())
	case reflect.Interface:
		if !v.IsNil() {
			rw.walk(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			rw.slot(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			rw.slot(v.Index(i))
		}
	case reflect.Map:
		v = writable(v)
		iter := v.MapRange()
		var updates [][2]reflect.Value
		for iter.Next() {
			val := iter.Value()
			if n, ok := nodeOf(val); ok {
				if r := rw.replacement(n); r != nil && reflect.TypeOf(r).AssignableTo(val.Type()) {
					updates = append(updates, [2]reflect.Value{iter.Key(), reflect.ValueOf(r)})
					rw.walk(reflect.ValueOf(r))
					continue
				}
			}
			rw.walk(val)
		}
		for _, u := range updates {
			v.SetMapIndex(u[0], u[1])
		}
	}
}

// slot handles one field or element: replace it if it holds an intercepted
// node, then keep walking.
func (rw *rewriter) slot(f reflect.Value) {
	if n, ok := nodeOf(f); ok {
		if r := rw.replacement(n); r != nil && reflect.TypeOf(r).AssignableTo(f.Type()) {
			writable(f).Set(reflect.ValueOf(r))
			rw.walk(reflect.ValueOf(r))
			return
		}
	}
	rw.walk(f)
}

func nodeOf(v reflect.Value) (nodes.Node, bool) {
	if !v.IsValid() {
		return nil, false
	}
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, false
	}
	n, ok := pointerOf(v).Interface().(nodes.Node)
	return n, ok
}

// pointerOf returns pointer v without the read-only mark of unexported
// fields.
func pointerOf(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type().Elem(), v.UnsafePointer())
}

// writable returns v without the read-only mark reflect puts on values
// reached through unexported fields; v must be addressable or a map.
func writable(v reflect.Value) reflect.Value {
	if v.CanSet() || v.Kind() == reflect.Map && v.CanInterface() {
		return v
	}
	if v.CanAddr() {
		return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	return v
}
