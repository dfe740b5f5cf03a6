package schema

// The Go types CUE values decode into. Field names follow the JSON tags,
// which are the CUE field names.

// Contracts is a decoded #Contracts: every contract of a set by group and name.
type Contracts struct {
	Model      map[string]Model     `json:"model,omitempty"`
	Kernel     map[string]Kernel    `json:"kernel,omitempty"`
	Verb       map[string]Verb      `json:"verb,omitempty"`
	Tolerances map[string]Tolerance `json:"tolerances,omitempty"`
}

// Tolerance is a decoded #Tolerance, apr's one tolerance type (oracle
// compares with it; see tolerance.go for how it is read).
type Tolerance struct {
	Name string  `json:"name,omitempty"`
	Abs  float64 `json:"abs"`
	Rel  float64 `json:"rel"`
	ULP  int64   `json:"ulp"`
}

// Threshold is a decoded #Threshold: the check passes when measured Op Value.
type Threshold struct {
	Op    string  `json:"op"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	Doc   string  `json:"doc,omitempty"`
}

// Holds reports whether measured satisfies t. NaN never does; an unknown op
// never does.
func (t Threshold) Holds(measured float64) bool {
	if measured != measured { // NaN
		return false
	}
	switch t.Op {
	case "<=":
		return measured <= t.Value
	case "<":
		return measured < t.Value
	case ">=":
		return measured >= t.Value
	case ">":
		return measured > t.Value
	case "==":
		return measured == t.Value
	}
	return false
}

// Falsifier is a decoded #Falsifier.
type Falsifier struct {
	ID         string               `json:"id"`
	Kind       string               `json:"kind"`
	Code       string               `json:"code"`
	Binds      string               `json:"binds,omitempty"`
	Summary    string               `json:"summary"`
	Params     map[string]any       `json:"params,omitempty"`
	Thresholds map[string]Threshold `json:"thresholds"`
	Failure    string               `json:"failure"`
}

// Model is a decoded #Model.
type Model struct {
	ID          string            `json:"id"`
	Arch        string            `json:"arch"`
	Summary     string            `json:"summary"`
	HParams     map[string]HParam `json:"hparams"`
	Derived     map[string]string `json:"derived,omitempty"`
	Constraints []Constraint      `json:"constraints,omitempty"`
	Tensors     []Tensor          `json:"tensors"`
	WeightTypes []string          `json:"weight_types"`
	VectorTypes []string          `json:"vector_types"`
	Falsifiers  []Falsifier       `json:"falsifiers,omitempty"`
}

// HParam is a decoded #HParam.
type HParam struct {
	Key         string   `json:"key"`
	Type        string   `json:"type"`
	Required    bool     `json:"required"`
	LenOf       string   `json:"len_of,omitempty"`
	Default     any      `json:"default,omitempty"`
	DefaultExpr string   `json:"default_expr,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	Max         *float64 `json:"max,omitempty"`
	Len         *int     `json:"len,omitempty"`
	Doc         string   `json:"doc,omitempty"`
}

// Constraint is a decoded #Constraint.
type Constraint struct {
	Expr string `json:"expr"`
	Why  string `json:"why"`
}

// Tensor is a decoded #Tensor.
type Tensor struct {
	Name     string   `json:"name"`
	Shape    []string `json:"shape"`
	Required bool     `json:"required"`
	When     string   `json:"when,omitempty"`
	Types    []string `json:"types,omitempty"`
	Doc      string   `json:"doc,omitempty"`
}

// Kernel is a decoded #Kernel.
type Kernel struct {
	ID         string              `json:"id"`
	Summary    string              `json:"summary"`
	Type       string              `json:"type"`
	TypeID     int                 `json:"type_id"`
	BlockSize  int                 `json:"block_size"`
	BlockBytes int                 `json:"block_bytes"`
	Reference  string              `json:"reference"`
	Ops        map[string]KernelOp `json:"ops"`
	Falsifiers []Falsifier         `json:"falsifiers,omitempty"`
}

// KernelOp is a decoded #KernelOp.
type KernelOp struct {
	Reference  string    `json:"reference"`
	Activation string    `json:"activation,omitempty"`
	Tolerance  Tolerance `json:"tolerance"`
	Doc        string    `json:"doc,omitempty"`
}

// Verb is a decoded #Verb.
type Verb struct {
	ID         string           `json:"id"`
	Verb       string           `json:"verb"`
	Summary    string           `json:"summary"`
	JSON       bool             `json:"json"`
	Fields     map[string]Field `json:"fields"`
	Timing     *Timing          `json:"timing,omitempty"`
	Falsifiers []Falsifier      `json:"falsifiers,omitempty"`
}

// Field is a decoded #Field.
type Field struct {
	Type     string `json:"type"`
	Unit     string `json:"unit,omitempty"`
	Stream   string `json:"stream"`
	Required bool   `json:"required"`
	Doc      string `json:"doc,omitempty"`
}

// Timing is a decoded #Timing.
type Timing struct {
	Stages       map[string]string `json:"stages"`
	ToleranceMS  float64           `json:"tolerance_ms"`
	ToleranceRel float64           `json:"tolerance_rel"`
}
