package contracts

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode"
)

// ErrExpr is wrapped by every error of parsing or evaluating an expression.
var ErrExpr = errors.New("expression")

// Expr is a parsed integer expression over hyper-parameter names, as model
// contracts write tensor shapes, derived values, constraints and per-layer
// conditions: integer literals, names, unary - and !, * / %, + -, the
// comparisons == != < <= > >= and && ||, with parentheses. Comparisons and
// logic give 0 or 1; / and % are integer division, by zero an error; an
// overflow is an error, never a wrapped value.
type Expr struct {
	src  string
	root node
}

type node interface{}

type (
	lit   struct{ v int64 }
	ident struct{ name string }
	unary struct {
		op string
		x  node
	}
	binary struct {
		op   string
		x, y node
	}
)

// MaxExprLen bounds an expression's length; contracts write short ones.
const MaxExprLen = 512

// ParseExpr parses s.
func ParseExpr(s string) (*Expr, error) {
	if len(s) > MaxExprLen {
		return nil, fmt.Errorf("%w %q: longer than %d bytes", ErrExpr, s[:32]+"…", MaxExprLen)
	}
	toks, err := lex(s)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrExpr, s, err)
	}
	p := &parser{toks: toks}
	root, err := p.expr(0)
	if err == nil && p.i < len(p.toks) {
		err = fmt.Errorf("unexpected %q", p.toks[p.i].s)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrExpr, s, err)
	}
	return &Expr{src: s, root: root}, nil
}

// String returns the source text.
func (e *Expr) String() string { return e.src }

// Names returns the names the expression refers to, sorted, each once.
func (e *Expr) Names() []string {
	seen := map[string]bool{}
	var walk func(n node)
	walk = func(n node) {
		switch n := n.(type) {
		case ident:
			seen[n.name] = true
		case unary:
			walk(n.x)
		case binary:
			walk(n.x)
			walk(n.y)
		}
	}
	walk(e.root)
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Eval evaluates the expression; env returns a name's value.
func (e *Expr) Eval(env func(name string) (int64, bool)) (int64, error) {
	v, err := eval(e.root, env)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %v", ErrExpr, e.src, err)
	}
	return v, nil
}

func eval(n node, env func(string) (int64, bool)) (int64, error) {
	switch n := n.(type) {
	case lit:
		return n.v, nil
	case ident:
		v, ok := env(n.name)
		if !ok {
			return 0, fmt.Errorf("%s has no value", n.name)
		}
		return v, nil
	case unary:
		x, err := eval(n.x, env)
		if err != nil {
			return 0, err
		}
		if n.op == "!" {
			return b2i(x == 0), nil
		}
		if x == math.MinInt64 {
			return 0, errors.New("overflow")
		}
		return -x, nil
	case binary:
		x, err := eval(n.x, env)
		if err != nil {
			return 0, err
		}
		// && and || short-circuit, so "has_a && a > 0" style guards work.
		if n.op == "&&" && x == 0 {
			return 0, nil
		}
		if n.op == "||" && x != 0 {
			return 1, nil
		}
		y, err := eval(n.y, env)
		if err != nil {
			return 0, err
		}
		return arith(n.op, x, y)
	}
	panic("contracts: unknown expression node")
}

func arith(op string, x, y int64) (int64, error) {
	switch op {
	case "+":
		s := x + y
		if (x > 0 && y > 0 && s < 0) || (x < 0 && y < 0 && s >= 0) {
			return 0, fmt.Errorf("overflow in %d + %d", x, y)
		}
		return s, nil
	case "-":
		d := x - y
		if (x >= 0 && y < 0 && d < 0) || (x < 0 && y > 0 && d >= 0) {
			return 0, fmt.Errorf("overflow in %d - %d", x, y)
		}
		return d, nil
	case "*":
		if x == 0 || y == 0 {
			return 0, nil
		}
		p := x * y
		if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return 0, fmt.Errorf("overflow in %d * %d", x, y)
		}
		return p, nil
	case "/", "%":
		if y == 0 {
			return 0, fmt.Errorf("division by zero in %d %s %d", x, op, y)
		}
		if x == math.MinInt64 && y == -1 {
			return 0, errors.New("overflow")
		}
		if op == "/" {
			return x / y, nil
		}
		return x % y, nil
	case "==":
		return b2i(x == y), nil
	case "!=":
		return b2i(x != y), nil
	case "<":
		return b2i(x < y), nil
	case "<=":
		return b2i(x <= y), nil
	case ">":
		return b2i(x > y), nil
	case ">=":
		return b2i(x >= y), nil
	case "&&":
		return b2i(x != 0 && y != 0), nil
	case "||":
		return b2i(x != 0 || y != 0), nil
	}
	return 0, fmt.Errorf("unknown operator %q", op)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

type token struct {
	kind byte // 'n' number, 'i' identifier, 'o' operator or parenthesis
	s    string
	v    int64
}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			v, err := strconv.ParseInt(s[i:j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("number %s out of range", s[i:j])
			}
			out = append(out, token{kind: 'n', s: s[i:j], v: v})
			i = j
		case c == '_' || unicode.IsLetter(c) && c < 128:
			j := i
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			out = append(out, token{kind: 'i', s: s[i:j]})
			i = j
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", "<=", ">=", "&&", "||":
				out = append(out, token{kind: 'o', s: two})
				i += 2
				continue
			}
			switch c {
			case '+', '-', '*', '/', '%', '<', '>', '!', '(', ')':
				out = append(out, token{kind: 'o', s: string(c)})
				i++
			default:
				return nil, fmt.Errorf("unexpected character %q at %d", c, i)
			}
		}
	}
	return out, nil
}

var precedence = map[string]int{
	"||": 1, "&&": 2,
	"==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
	"+": 4, "-": 4,
	"*": 5, "/": 5, "%": 5,
}

type parser struct {
	toks []token
	i    int
}

// expr parses a binary expression whose operators bind tighter than min.
func (p *parser) expr(min int) (node, error) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		prec, ok := precedence[t.s]
		if t.kind != 'o' || !ok || prec <= min {
			break
		}
		p.i++
		y, err := p.expr(prec)
		if err != nil {
			return nil, err
		}
		x = binary{op: t.s, x: x, y: y}
	}
	return x, nil
}

func (p *parser) unary() (node, error) {
	if p.i >= len(p.toks) {
		return nil, errors.New("unexpected end")
	}
	t := p.toks[p.i]
	p.i++
	switch {
	case t.kind == 'n':
		return lit{t.v}, nil
	case t.kind == 'i':
		return ident{t.s}, nil
	case t.s == "-" || t.s == "!":
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return unary{op: t.s, x: x}, nil
	case t.s == "(":
		x, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.toks) || p.toks[p.i].s != ")" {
			return nil, errors.New("missing )")
		}
		p.i++
		return x, nil
	}
	return nil, fmt.Errorf("unexpected %q", t.s)
}
