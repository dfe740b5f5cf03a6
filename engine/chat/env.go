package chat

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/logging"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// TemplateError is raised by a template through raise_exception (Jinja's
// TemplateError): the template itself rejects its input.
type TemplateError struct {
	Message string
}

func (e *TemplateError) Error() string { return e.Message }

// securityError is Jinja's SecurityError: the immutable sandbox forbids
// methods that modify lists and dicts.
func securityError(method, typ string) error {
	return fmt.Errorf("access to attribute '%s' of '%s' object is unsafe", method, typ)
}

var (
	envOnce sync.Once
	envErr  error
	env     *exec.Environment
)

// environment returns the shared, read-only part of the Jinja environment:
// filters, tests, methods and statements. Per-render state (variables, the
// guard, the clock) lives in each render's context.
func environment() (*exec.Environment, error) {
	envOnce.Do(func() {
		logging.SetEnabled(false) // gonja logs through logrus when enabled; apr keeps stderr its own
		env, envErr = newEnvironment()
	})
	return env, envErr
}

func newEnvironment() (*exec.Environment, error) {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	for name, f := range filterOverrides() {
		if err := setFilter(filters, name, f); err != nil {
			return nil, err
		}
	}
	tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
	for name, t := range testOverrides() {
		var err error
		if tests.Exists(name) {
			err = tests.Replace(name, t)
		} else {
			err = tests.Register(name, t)
		}
		if err != nil {
			return nil, fmt.Errorf("chat: test %s: %w", name, err)
		}
	}
	statements, err := statementSet()
	if err != nil {
		return nil, err
	}
	return &exec.Environment{
		Context:           exec.EmptyContext(),
		Filters:           filters,
		Tests:             tests,
		ControlStructures: statements,
		Methods:           methodSets(),
	}, nil
}

// setFilter installs f as name, guarding its integer arguments.
func setFilter(fs *exec.FilterSet, name string, f exec.FilterFunction) error {
	if fs.Exists(name) {
		return fs.Replace(name, f)
	}
	return fs.Register(name, f)
}

// statementSet is Jinja's set of statements as transformers enables it:
// the built-in ones plus loop controls (break, continue). "do" and "trans"
// belong to extensions transformers does not load, so they are unknown tags;
// include, import, from and extends find no template (there is no loader).
// Every statement counts as a step of the render guard.
func statementSet() (*exec.ControlStructureSet, error) {
	names := []string{"autoescape", "block", "filter", "for", "if", "macro", "raw",
		"set", "with", "break", "continue", "call", "include", "import", "from", "extends"}
	m := map[string]parser.ControlStructureParser{}
	for _, name := range names {
		p, ok := controlStructures.All.Get(name)
		if !ok {
			return nil, fmt.Errorf("chat: gonja has no %q statement", name)
		}
		m[name] = guardParser(p)
	}
	return exec.NewControlStructureSet(m), nil
}

func guardParser(p parser.ControlStructureParser) parser.ControlStructureParser {
	return func(pp *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := p(pp, args)
		if err != nil || cs == nil {
			return cs, err
		}
		ecs, ok := cs.(exec.ControlStructure)
		if !ok {
			return cs, nil
		}
		if m, ok := cs.(*controlStructures.MacroControlStructure); ok && m.Macro != nil {
			return guardedMacro{inner: ecs, name: m.Name}, nil
		}
		return guarded{inner: ecs}, nil
	}
}

// oneShotLoader hands gonja the template source once; every later read
// (include, import, extends) fails, as it does in transformers, whose
// environment has no loader.
type oneShotLoader struct {
	name   string
	source string
	mu     sync.Mutex
	served bool
}

func (l *oneShotLoader) Read(path string) (io.Reader, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if path != l.name || l.served {
		return nil, fmt.Errorf("template %q not found: chat templates cannot load other templates", path)
	}
	l.served = true
	return strings.NewReader(l.source), nil
}

func (l *oneShotLoader) Resolve(path string) (string, error) { return path, nil }

func (l *oneShotLoader) Inherit(from string) (loaders.Loader, error) { return l, nil }

var _ loaders.Loader = (*oneShotLoader)(nil)

// raiseException is transformers' raise_exception global.
func raiseException(e *exec.Evaluator, va *exec.VarArgs) (*exec.Value, error) {
	msg := ""
	if len(va.Args) > 0 {
		msg = pyStr(va.Args[0])
	}
	return nil, failIn(e.Environment.Context, &TemplateError{Message: msg})
}

// rangeFunc is Python's range, limited as Jinja's sandbox limits it.
func rangeFunc(e *exec.Evaluator, va *exec.VarArgs) (*exec.Value, error) {
	if len(va.KwArgs) > 0 {
		return nil, errors.New("range() takes no keyword arguments")
	}
	ints := make([]int, len(va.Args))
	for i, a := range va.Args {
		n, ok := toInt(a)
		if !ok || a.IsFloat() {
			return nil, fmt.Errorf("range() argument %d must be an integer, not %s", i+1, engineTypeName(a))
		}
		ints[i] = n
	}
	start, stop, step := 0, 0, 1
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return nil, fmt.Errorf("range expected 1 to 3 arguments, got %d", len(ints))
	}
	if step == 0 {
		return nil, errors.New("range() arg 3 must not be zero")
	}
	n := 0
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		n = (start - stop - step - 1) / -step
	}
	if n > MaxRange {
		return nil, failIn(e.Environment.Context, fmt.Errorf("%w: range too big (%d items; the sandbox allows %d)", ErrLimit, n, MaxRange))
	}
	out := make([]any, n)
	for i := range n {
		out[i] = start + i*step
	}
	return exec.AsValue(out), nil
}
