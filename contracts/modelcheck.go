package contracts

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/schema"
)

// The violation rules of a model check. Metadata rules are about the
// hyper-parameters; the others about tensors.
const (
	RuleArch       = "arch"       // general.architecture is not the contract's
	RuleHParam     = "hparam"     // a hyper-parameter is missing, of the wrong type, or out of range
	RuleConstraint = "constraint" // a constraint does not hold
	RuleMissing    = "missing"    // a required tensor is absent
	RuleShape      = "shape"      // a tensor's shape is not what the hyper-parameters imply
	RuleType       = "type"       // a tensor's type is not allowed
	RuleUnexpected = "unexpected" // a tensor the architecture does not read
)

// MetadataRules and TensorRules split a report's violations between the
// metadata_plausibility and tensor_contract falsifiers.
var (
	MetadataRules = []string{RuleArch, RuleHParam, RuleConstraint}
	TensorRules   = []string{RuleMissing, RuleShape, RuleType, RuleUnexpected}
)

// Violation is one way a file breaks a model contract.
type Violation struct {
	Rule    string `json:"rule"`
	Subject string `json:"subject"` // the hyper-parameter, constraint or tensor
	Msg     string `json:"msg"`
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s [%s]", v.Subject, v.Msg, v.Rule) }

// ModelReport is the result of checking a file against a model contract.
type ModelReport struct {
	Contract string         `json:"contract"`
	Arch     string         `json:"arch"`
	HParams  map[string]any `json:"hparams"` // resolved values (int64, float64, bool, string)
	Defaults []string       `json:"defaults,omitempty"`
	// Constraints over optional hyper-parameters the file does not carry
	// do not apply; they are counted, not checked.
	ConstraintsChecked int         `json:"constraints_checked"`
	ConstraintsSkipped int         `json:"constraints_not_applicable"`
	TensorsExpected    int         `json:"tensors_expected"`
	TensorsChecked     int         `json:"tensors_checked"`
	Violations         []Violation `json:"violations"`
}

// Count returns the number of violations whose rule is one of rules.
func (r *ModelReport) Count(rules ...string) int {
	n := 0
	for _, v := range r.Violations {
		for _, ru := range rules {
			if v.Rule == ru {
				n++
				break
			}
		}
	}
	return n
}

// Filter returns the violations whose rule is one of rules.
func (r *ModelReport) Filter(rules ...string) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		for _, ru := range rules {
			if v.Rule == ru {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

type compiledTensor struct {
	t        schema.Tensor
	shape    []*Expr
	when     *Expr
	perLayer bool
}

type compiledModel struct {
	m           *schema.Model
	derived     map[string]*Expr
	defaults    map[string]*Expr
	constraints []*Expr
	tensors     []compiledTensor
}

// exprTypes are the hyper-parameter types an expression may name.
var exprTypes = map[string]bool{"uint": true, "int": true, "bool": true, "array": true}

// compileModel parses every expression of m and checks the names they use;
// the second result lists what is wrong (for contracts vet).
func compileModel(m *schema.Model) (*compiledModel, []string) {
	cm := &compiledModel{m: m, derived: map[string]*Expr{}, defaults: map[string]*Expr{}}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	parse := func(where, s string, layer bool) *Expr {
		e, err := ParseExpr(s)
		if err != nil {
			bad("%s: %v", where, err)
			return nil
		}
		for _, n := range e.Names() {
			if n == "i" && layer {
				continue
			}
			if _, ok := m.Derived[n]; ok {
				continue
			}
			hp, ok := m.HParams[n]
			switch {
			case !ok && n == "i":
				bad("%s: %q uses i, which only per-layer tensors ({i} in the name) have", where, s)
			case !ok:
				bad("%s: %q names %s, which is neither a hyper-parameter nor a derived value", where, s, n)
			case !exprTypes[hp.Type]:
				bad("%s: %q names %s, a %s hyper-parameter; expressions are over integers", where, s, n, hp.Type)
			}
		}
		return e
	}
	for _, name := range slices.Sorted(maps.Keys(m.Derived)) {
		if _, clash := m.HParams[name]; clash {
			bad("derived %s: also a hyper-parameter", name)
		}
		cm.derived[name] = parse("derived "+name, m.Derived[name], false)
	}
	for _, name := range slices.Sorted(maps.Keys(m.HParams)) {
		hp := m.HParams[name]
		if hp.DefaultExpr != "" {
			if hp.Default != nil {
				bad("hparam %s: both default and default_expr", name)
			}
			cm.defaults[name] = parse("hparam "+name+" default_expr", hp.DefaultExpr, false)
		}
		if hp.LenOf != "" && hp.Type != "uint" {
			bad("hparam %s: len_of gives a count, so its type must be uint, not %s", name, hp.Type)
		}
		if hp.Len != nil && hp.Type != "array" {
			bad("hparam %s: len applies to arrays only", name)
		}
	}
	// Cycles among derived values and defaults.
	deps := func(n string) []string {
		if e := cm.derived[n]; e != nil {
			return e.Names()
		}
		if e := cm.defaults[n]; e != nil {
			return e.Names()
		}
		return nil
	}
	state := map[string]int{}
	var visit func(n string, path []string)
	visit = func(n string, path []string) {
		switch state[n] {
		case 1:
			bad("cycle: %s", strings.Join(append(path, n), " → "))
			return
		case 2:
			return
		}
		state[n] = 1
		for _, d := range deps(n) {
			visit(d, append(path, n))
		}
		state[n] = 2
	}
	for _, n := range append(slices.Sorted(maps.Keys(m.Derived)), slices.Sorted(maps.Keys(m.HParams))...) {
		visit(n, nil)
	}
	for i, c := range m.Constraints {
		cm.constraints = append(cm.constraints, parse(fmt.Sprintf("constraint %d", i), c.Expr, false))
	}
	names := map[string]bool{}
	for _, t := range m.Tensors {
		if names[t.Name] {
			bad("tensor %s: listed twice", t.Name)
		}
		names[t.Name] = true
		ct := compiledTensor{t: t, perLayer: strings.Contains(t.Name, "{i}")}
		if strings.Count(t.Name, "{i}") > 1 || strings.ContainsAny(strings.ReplaceAll(t.Name, "{i}", ""), "{}") {
			bad("tensor %s: the only placeholder a name may hold is one {i}", t.Name)
		}
		if ct.perLayer {
			if hp, ok := m.HParams["n_layer"]; !ok || hp.Type != "uint" {
				bad("tensor %s: per-layer tensors need a uint hyper-parameter named n_layer", t.Name)
			}
		}
		if len(t.Shape) > gguf.MaxDims {
			bad("tensor %s: %d dimensions, ggml has at most %d", t.Name, len(t.Shape), gguf.MaxDims)
		}
		for d, s := range t.Shape {
			ct.shape = append(ct.shape, parse(fmt.Sprintf("tensor %s dim %d", t.Name, d), s, ct.perLayer))
		}
		if t.When != "" {
			ct.when = parse("tensor "+t.Name+" when", t.When, ct.perLayer)
		}
		cm.tensors = append(cm.tensors, ct)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cm, nil
}

// CheckModel checks f against model contract m: general.architecture, every
// hyper-parameter (presence, type, range), the constraints, and every tensor
// (present when required, shape from the hyper-parameters, allowed type; no
// tensor the contract does not describe). It returns an error only when the
// contract itself is broken (which vet rejects); everything wrong with the
// file is a Violation in the report.
func CheckModel(m *schema.Model, f *gguf.File) (*ModelReport, error) {
	cm, errs := compileModel(m)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s: %s", ErrInvalid, m.ID, strings.Join(errs, "; "))
	}
	r := &ModelReport{Contract: m.ID, Arch: f.Architecture(), HParams: map[string]any{}, Violations: []Violation{}}
	if r.Arch != m.Arch {
		r.Violations = append(r.Violations, Violation{RuleArch, "general.architecture",
			fmt.Sprintf("is %q, the contract is for %q", r.Arch, m.Arch)})
	}
	e := &modelEnv{cm: cm, f: f, arch: m.Arch, r: r, vals: map[string]int64{}, state: map[string]int{}}
	for _, name := range slices.Sorted(maps.Keys(m.HParams)) {
		e.get(name)
	}
	sort.Strings(r.Defaults)
	for i, c := range cm.constraints {
		if !e.available(c) {
			r.ConstraintsSkipped++
			continue
		}
		r.ConstraintsChecked++
		v, err := c.Eval(e.get)
		why := m.Constraints[i].Why
		switch {
		case err != nil:
			r.Violations = append(r.Violations, Violation{RuleConstraint, c.String(), fmt.Sprintf("cannot be evaluated (%v): %s", err, why)})
		case v == 0:
			r.Violations = append(r.Violations, Violation{RuleConstraint, c.String(), fmt.Sprintf("does not hold (%s): %s", e.describe(c), why)})
		}
	}
	e.checkTensors()
	return r, nil
}

type modelEnv struct {
	cm    *compiledModel
	f     *gguf.File
	arch  string
	r     *ModelReport
	vals  map[string]int64
	state map[string]int // 0 new, 1 resolving, 2 present, 3 absent
}

func (e *modelEnv) key(k string) string { return strings.ReplaceAll(k, "{arch}", e.arch) }

func (e *modelEnv) violate(rule, subject, format string, args ...any) {
	e.r.Violations = append(e.r.Violations, Violation{rule, subject, fmt.Sprintf(format, args...)})
}

// get resolves a name for expressions: a derived value or a hyper-parameter.
// Absent (optional and not in the file, or broken) gives false.
func (e *modelEnv) get(name string) (int64, bool) {
	switch e.state[name] {
	case 1, 3:
		return 0, false
	case 2:
		return e.vals[name], true
	}
	e.state[name] = 1
	v, ok := e.resolve(name)
	if ok {
		e.state[name], e.vals[name] = 2, v
	} else {
		e.state[name] = 3
	}
	return v, ok
}

func (e *modelEnv) resolve(name string) (int64, bool) {
	if d := e.cm.derived[name]; d != nil {
		v, err := d.Eval(e.get)
		if err != nil {
			return 0, false
		}
		e.r.HParams[name] = v
		return v, true
	}
	hp, ok := e.cm.m.HParams[name]
	if !ok {
		return 0, false
	}
	key := e.key(hp.Key)
	val, present := e.f.Get(key)
	if !present && hp.LenOf != "" {
		if arr, ok := e.f.Get(e.key(hp.LenOf)); ok && arr.Type == gguf.TypeArray {
			n := int64(arr.Len())
			e.r.HParams[name] = n
			return n, e.inRange(name, hp, key, float64(n))
		}
	}
	if !present {
		if hp.DefaultExpr != "" {
			v, err := e.cm.defaults[name].Eval(e.get)
			if err != nil {
				e.violate(RuleHParam, key, "absent, and its default %q cannot be evaluated: %v", hp.DefaultExpr, err)
				return 0, false
			}
			e.r.HParams[name] = v
			e.r.Defaults = append(e.r.Defaults, name)
			return v, true
		}
		if hp.Default != nil {
			e.r.HParams[name] = hp.Default
			e.r.Defaults = append(e.r.Defaults, name)
			return defaultInt(hp.Default)
		}
		if hp.Required {
			where := key
			if hp.LenOf != "" {
				where += " (or " + e.key(hp.LenOf) + ")"
			}
			e.violate(RuleHParam, key, "required, absent (%s)", where)
		}
		return 0, false
	}
	return e.read(name, hp, key, val)
}

// read type-checks and range-checks a present hyper-parameter.
func (e *modelEnv) read(name string, hp schema.HParam, key string, val gguf.Value) (int64, bool) {
	wrong := func() (int64, bool) {
		e.violate(RuleHParam, key, "is %s, the contract wants %s", val.TypeName(), hp.Type)
		return 0, false
	}
	switch hp.Type {
	case "uint", "int":
		if val.Type == gguf.TypeArray || val.Type == gguf.TypeFloat32 || val.Type == gguf.TypeFloat64 || val.Type == gguf.TypeBool || val.Type == gguf.TypeString {
			return wrong()
		}
		v, ok := val.Int()
		if !ok {
			u, uok := val.Uint()
			if !uok || u > math.MaxInt64 {
				e.violate(RuleHParam, key, "value out of range")
				return 0, false
			}
			v = int64(u)
		}
		if hp.Type == "uint" && v < 0 {
			e.violate(RuleHParam, key, "is %d, the contract wants an unsigned value", v)
			return 0, false
		}
		e.r.HParams[name] = v
		return v, e.inRange(name, hp, key, float64(v))
	case "float":
		v, ok := val.Float()
		if !ok || val.Type == gguf.TypeArray {
			return wrong()
		}
		e.r.HParams[name] = v
		e.inRange(name, hp, key, v)
		return 0, false
	case "bool":
		b, ok := val.Bool()
		if !ok {
			return wrong()
		}
		e.r.HParams[name] = b
		if b {
			return 1, true
		}
		return 0, true
	case "string":
		s, ok := val.Str()
		if !ok {
			return wrong()
		}
		e.r.HParams[name] = s
		return 0, false
	case "array":
		if val.Type != gguf.TypeArray {
			return wrong()
		}
		n := int64(val.Len())
		e.r.HParams[name] = n
		if hp.Len != nil && n != int64(*hp.Len) {
			e.violate(RuleHParam, key, "has %d elements, the contract wants %d", n, *hp.Len)
			return 0, false
		}
		return n, true
	}
	return wrong()
}

func (e *modelEnv) inRange(name string, hp schema.HParam, key string, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		e.violate(RuleHParam, key, "is %v", v)
		return false
	}
	if hp.Min != nil && v < *hp.Min {
		e.violate(RuleHParam, key, "is %s, below the minimum %s", num(v), num(*hp.Min))
		return false
	}
	if hp.Max != nil && v > *hp.Max {
		e.violate(RuleHParam, key, "is %s, above the maximum %s", num(v), num(*hp.Max))
		return false
	}
	return true
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func defaultInt(d any) (int64, bool) {
	switch x := d.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x), true
		}
	case int:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// available reports whether every name x depends on has a value.
func (e *modelEnv) available(x *Expr) bool {
	for _, n := range x.Names() {
		if _, ok := e.get(n); !ok {
			return false
		}
	}
	return true
}

// describe lists the values of the names x uses: "n_head=8 n_head_kv=3".
func (e *modelEnv) describe(x *Expr) string {
	var parts []string
	for _, n := range x.Names() {
		if v, ok := e.get(n); ok {
			parts = append(parts, fmt.Sprintf("%s=%d", n, v))
		}
	}
	return strings.Join(parts, " ")
}

func (e *modelEnv) checkTensors() {
	expected := map[string]bool{}
	nLayer, haveLayers := e.get("n_layer")
	for _, ct := range e.cm.tensors {
		if !ct.perLayer {
			e.checkTensor(ct, ct.t.Name, e.get, expected)
			continue
		}
		if !haveLayers {
			e.violate(RuleMissing, ct.t.Name, "cannot be checked: the layer count n_layer is unknown")
			continue
		}
		for i := int64(0); i < nLayer; i++ {
			env := func(n string) (int64, bool) {
				if n == "i" {
					return i, true
				}
				return e.get(n)
			}
			name := strings.ReplaceAll(ct.t.Name, "{i}", strconv.FormatInt(i, 10))
			if ct.when != nil {
				w, err := ct.when.Eval(env)
				if err != nil {
					e.violate(RuleShape, name, "condition %q cannot be evaluated: %v", ct.when, err)
					continue
				}
				if w == 0 {
					continue
				}
			}
			e.checkTensor(ct, name, env, expected)
		}
	}
	for i := range e.f.Tensors {
		t := &e.f.Tensors[i]
		if !expected[t.Name] {
			e.violate(RuleUnexpected, t.Name, "is not a tensor the %s contract describes%s", e.cm.m.Arch, e.whyUnexpected(t.Name, nLayer, haveLayers))
		}
	}
}

// whyUnexpected says, for a per-layer name, what rule excluded it.
func (e *modelEnv) whyUnexpected(name string, nLayer int64, haveLayers bool) string {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return ""
	}
	idx, suffix, ok := strings.Cut(rest, ".")
	i, err := strconv.ParseInt(idx, 10, 64)
	if !ok || err != nil {
		return ""
	}
	for _, ct := range e.cm.tensors {
		if ct.t.Name != "blk.{i}."+suffix {
			continue
		}
		if haveLayers && i >= nLayer {
			return fmt.Sprintf(" (layer %d ≥ n_layer %d)", i, nLayer)
		}
		if ct.when != nil {
			return fmt.Sprintf(" (not in layer %d: %s is false)", i, ct.when)
		}
	}
	return ""
}

func (e *modelEnv) checkTensor(ct compiledTensor, name string, env func(string) (int64, bool), expected map[string]bool) {
	e.r.TensorsExpected++
	expected[name] = true
	t, ok := e.f.Tensor(name)
	if !ok {
		if ct.t.Required {
			e.violate(RuleMissing, name, "required, absent")
		}
		return
	}
	e.r.TensorsChecked++
	want := make([]int64, len(ct.shape))
	for d, x := range ct.shape {
		v, err := x.Eval(env)
		if err != nil {
			e.violate(RuleShape, name, "dim %d (%s) cannot be computed: %v", d, x, err)
			return
		}
		want[d] = v
	}
	if !sameShape(want, t.Shape) {
		var exprs []string
		for _, x := range ct.shape {
			exprs = append(exprs, x.String())
		}
		e.violate(RuleShape, name, "shape %v, the contract wants %v = [%s]", t.Shape, want, strings.Join(exprs, ", "))
	}
	allowed := ct.t.Types
	if len(allowed) == 0 {
		allowed = e.cm.m.WeightTypes
		if len(ct.shape) == 1 {
			allowed = e.cm.m.VectorTypes
		}
	}
	if !contains(allowed, t.Type.String()) {
		e.violate(RuleType, name, "type %s is not allowed here (allowed: %s)", t.Type, strings.Join(allowed, " "))
	}
	if _, err := quant.Lookup(t.Type); err != nil {
		e.violate(RuleType, name, "%v", err)
	}
}

// sameShape compares ggml shapes as ggml does: trailing dimensions of 1 do
// not count.
func sameShape(a, b []int64) bool {
	n := max(len(a), len(b))
	at := func(s []int64, i int) int64 {
		if i < len(s) {
			return s[i]
		}
		return 1
	}
	for i := 0; i < n; i++ {
		if at(a, i) != at(b, i) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
