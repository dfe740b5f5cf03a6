package falsify

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// Failure is a defect a falsifier found; its verdict is fail.
type Failure struct{ Reason string }

func (f *Failure) Error() string { return f.Reason }

// Fail returns a *Failure with a formatted reason.
func Fail(format string, args ...any) error { return &Failure{Reason: fmt.Sprintf(format, args...)} }

// CodedRefusal is a refusal with a machine-readable class (Code), so that a
// caller can treat some refusals specially (apr qa marks "no_baseline"
// optional). It unwraps to the *refuse.Error.
type CodedRefusal struct {
	Code string
	Err  *refuse.Error
}

func (e *CodedRefusal) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *CodedRefusal) Unwrap() error { return e.Err }

// RefuseCode returns a refusal by by, of class code, with a formatted reason.
func RefuseCode(code, by, format string, args ...any) error {
	return &CodedRefusal{Code: code, Err: refuse.New(by, format, args...)}
}

// ErrReferenceWithdrawn is what a withdrawn reference returns (failclosed).
var ErrReferenceWithdrawn = errors.New("reference withdrawn")

// fault says how failclosed withdraws a falsifier's references.
type fault int

const (
	faultNone        fault = iota
	faultUnavailable       // Ref and CallRef refuse without calling
	faultErrors            // CallRef calls nothing and returns an error, as a broken reference would
)

func (f fault) String() string {
	switch f {
	case faultUnavailable:
		return "unavailable"
	case faultErrors:
		return "errors"
	}
	return "none"
}

// inputs are what a run was given, shared by its checks.
type inputs struct {
	modelPath string
	loaded    *loaded.Model // the model, opened once; nil when it could not be (modelErr)
	model     *gguf.File    // loaded.File
	modelErr  error
	fixtures  string
}

// Check is one falsifier's run: its contract entry, the inputs, and what it
// measured.
type Check struct {
	F    schema.Falsifier // the contract's falsifier (Binds filled in)
	Code Code
	Set  *contracts.Set
	Log  *slog.Logger

	in       *inputs
	run      *runner
	seed     int64
	seedUsed bool
	fault    fault
	refsUsed int
	measured map[string]float64
	order    []string
	details  []string
}

// By is the refuser name of this falsifier: "falsifier:<id>".
func (c *Check) By() string { return "falsifier:" + c.F.ID }

// Refuse returns a refusal by this falsifier.
func (c *Check) Refuse(format string, args ...any) error {
	return refuse.New(c.By(), format, args...)
}

// Measure records a measured value; thresholds of the same name judge it.
func (c *Check) Measure(name string, v float64) {
	if _, ok := c.measured[name]; !ok {
		c.order = append(c.order, name)
	}
	c.measured[name] = v
}

// Note adds a line of detail to the result (violations, mismatches).
func (c *Check) Note(format string, args ...any) {
	const maxDetails = 50
	switch {
	case len(c.details) < maxDetails:
		c.details = append(c.details, fmt.Sprintf(format, args...))
	case len(c.details) == maxDetails:
		c.details = append(c.details, "… (more left out)")
	}
}

// Seed returns the run's seed and records it in the result.
func (c *Check) Seed() int64 {
	c.seedUsed = true
	return c.seed
}

// ModelPath returns --model, or "".
func (c *Check) ModelPath() string { return c.in.modelPath }

// Model returns the opened --model, or a refusal when there is none.
func (c *Check) Model() (*gguf.File, error) {
	if c.in.modelPath == "" {
		return nil, c.Refuse("needs a model (--model FILE)")
	}
	if c.in.modelErr != nil {
		return nil, refuse.Wrap(c.By(), c.in.modelErr)
	}
	return c.in.model, nil
}

// Loaded returns the opened --model (its file, sha256, spec, tokenizer and
// logits cache, engine/loaded), or a refusal when there is none.
func (c *Check) Loaded() (*loaded.Model, error) {
	if _, err := c.Model(); err != nil {
		return nil, err
	}
	return c.in.loaded, nil
}

// ModelSHA256 returns the sha256 of --model's bytes.
func (c *Check) ModelSHA256() (string, error) {
	m, err := c.Loaded()
	if err != nil {
		return "", err
	}
	s, _, err := m.SHA256()
	if err != nil {
		return "", refuse.Wrap(c.By(), err)
	}
	return s, nil
}

// Fixture returns the path of rel under --fixtures, or a refusal when no
// fixtures directory was given.
func (c *Check) Fixture(rel string) (string, error) {
	if c.in.fixtures == "" {
		return "", c.Refuse("needs apr's shared fixtures (--fixtures DIR)")
	}
	return filepath.Join(c.in.fixtures, filepath.FromSlash(rel)), nil
}

// Ref marks reference name as consulted. It returns a refusal when the run
// has withdrawn the reference (failclosed); code must then not decide.
func (c *Check) Ref(name string) error {
	c.refsUsed++
	if c.fault == faultUnavailable {
		return refuse.Wrap(c.By(), fmt.Errorf("reference %s is unavailable: %w", name, ErrReferenceWithdrawn))
	}
	return nil
}

// CallRef calls reference name through fn. An error of fn — or, when
// failclosed withdraws the reference, an injected one — comes back as a
// refusal by this falsifier: a check whose reference failed cannot decide.
func (c *Check) CallRef(name string, fn func() error) error {
	if err := c.Ref(name); err != nil {
		return err
	}
	var err error
	if c.fault == faultErrors {
		err = fmt.Errorf("reference %s failed: %w", name, ErrReferenceWithdrawn)
	} else {
		err = fn()
	}
	if err != nil {
		if _, ok := refuse.As(err); ok {
			return err
		}
		return refuse.Wrap(c.By(), fmt.Errorf("reference %s: %w", name, err))
	}
	return nil
}

// Param returns param name.
func (c *Check) Param(name string) (any, bool) {
	v, ok := c.F.Params[name]
	return v, ok
}

// ParamString returns string param name, or def when absent.
func (c *Check) ParamString(name, def string) (string, error) {
	v, ok := c.F.Params[name]
	if !ok {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", c.Refuse("param %s is %T, want a string", name, v)
	}
	return s, nil
}

// ParamInt returns integer param name, or def when absent.
func (c *Check) ParamInt(name string, def int) (int, error) {
	v, ok := c.F.Params[name]
	if !ok {
		return def, nil
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<40 {
		return 0, c.Refuse("param %s is %v, want an integer", name, v)
	}
	return int(f), nil
}

// ParamFloat returns number param name, or def when absent.
func (c *Check) ParamFloat(name string, def float64) (float64, error) {
	v, ok := c.F.Params[name]
	if !ok {
		return def, nil
	}
	f, ok := toFloat(v)
	if !ok {
		return 0, c.Refuse("param %s is %v, want a number", name, v)
	}
	return f, nil
}

// ParamStrings returns list-of-strings param name.
func (c *Check) ParamStrings(name string) ([]string, error) {
	v, ok := c.F.Params[name]
	if !ok {
		return nil, c.Refuse("param %s is missing", name)
	}
	l, ok := v.([]any)
	if !ok {
		return nil, c.Refuse("param %s is %T, want a list of strings", name, v)
	}
	out := make([]string, len(l))
	for i, x := range l {
		s, ok := x.(string)
		if !ok {
			return nil, c.Refuse("param %s[%d] is %T, want a string", name, i, x)
		}
		out[i] = s
	}
	return out, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}
