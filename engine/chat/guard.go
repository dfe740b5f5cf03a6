package chat

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Limits that keep a hostile template bounded. Real chat templates stay far
// below every one of them.
const (
	// MaxTemplateBytes bounds the template source.
	MaxTemplateBytes = 1 << 20
	// MaxOutputBytes bounds the rendered prompt.
	MaxOutputBytes = 64 << 20
	// MaxCallDepth bounds macro nesting (recursion).
	MaxCallDepth = 64
	// MaxRange is Jinja's sandbox limit on range() (jinja2.sandbox.MAX_RANGE).
	MaxRange = 100000
	// MaxIntArg bounds integer arguments of filters and methods (widths,
	// counts), so that center(10**12) and friends cannot exhaust memory.
	MaxIntArg = 1 << 20
	// MaxSteps bounds the control structures one render may execute.
	MaxSteps = 10_000_000
)

// ErrLimit marks a render stopped by one of the limits above or by its
// context.
var ErrLimit = errors.New("chat: render limit")

// guardKey is where a render's guard sits in gonja's context. It is not a
// Jinja identifier, so no template can read or replace it.
const guardKey = "apr.guard"

// guard is the per-render state the wrapped control structures and the
// output writer consult.
type guard struct {
	ctx   context.Context
	steps int
	depth int
	out   int
	err   error // the first limit hit or exception raised; gonja's error chains lose it
}

// fail records err as the render's cause (the first one wins) and returns it.
func (g *guard) fail(err error) error {
	if g.err == nil {
		g.err = err
	}
	return err
}

// failIn records err in the guard of context c, if any.
func failIn(c *exec.Context, err error) error {
	if g := guardOf(c); g != nil {
		return g.fail(err)
	}
	return err
}

func (g *guard) step() error {
	g.steps++
	if g.steps > MaxSteps {
		return g.fail(fmt.Errorf("%w: more than %d statements executed", ErrLimit, MaxSteps))
	}
	if err := g.ctx.Err(); err != nil {
		return g.fail(fmt.Errorf("%w: %w", ErrLimit, err))
	}
	return nil
}

func (g *guard) enter() error {
	g.depth++
	if g.depth > MaxCallDepth {
		return g.fail(fmt.Errorf("%w: macro calls nested deeper than %d", ErrLimit, MaxCallDepth))
	}
	return g.step()
}

func (g *guard) leave() { g.depth-- }

// guardOf returns the render's guard, found through the context chain.
func guardOf(c *exec.Context) *guard {
	if c == nil {
		return nil
	}
	v, ok := c.Get(guardKey)
	if !ok {
		return nil
	}
	g, _ := v.(*guard)
	return g
}

// limitWriter is the render's output: it stops a render that writes too
// much or outlives its context.
type limitWriter struct {
	w io.Writer
	g *guard
}

func (l *limitWriter) Write(p []byte) (int, error) {
	l.g.out += len(p)
	if l.g.out > MaxOutputBytes {
		return 0, l.g.fail(fmt.Errorf("%w: output larger than %d bytes", ErrLimit, MaxOutputBytes))
	}
	if err := l.g.ctx.Err(); err != nil {
		return 0, l.g.fail(fmt.Errorf("%w: %w", ErrLimit, err))
	}
	return l.w.Write(p)
}

// guarded wraps a control structure so that each execution counts as a
// step and checks the context.
type guarded struct {
	inner exec.ControlStructure
}

func (g guarded) Position() *tokens.Token { return g.inner.Position() }
func (g guarded) String() string          { return g.inner.String() }

func (g guarded) Execute(r *exec.Renderer, b *nodes.ControlStructureBlock) error {
	if st := guardOf(r.Environment.Context); st != nil {
		if err := st.step(); err != nil {
			return err
		}
	}
	return g.inner.Execute(r, b)
}

// guardedMacro wraps the macro statement: the macro it defines counts its
// nesting depth on every call, so that recursion stops with an error
// instead of exhausting the stack.
type guardedMacro struct {
	inner exec.ControlStructure
	name  string
}

func (g guardedMacro) Position() *tokens.Token { return g.inner.Position() }
func (g guardedMacro) String() string          { return g.inner.String() }

func (g guardedMacro) Execute(r *exec.Renderer, b *nodes.ControlStructureBlock) error {
	st := guardOf(r.Environment.Context)
	if st != nil {
		if err := st.step(); err != nil {
			return err
		}
	}
	if err := g.inner.Execute(r, b); err != nil {
		return err
	}
	v, ok := r.Environment.Context.Get(g.name)
	if !ok || st == nil {
		return nil
	}
	m, ok := v.(exec.Macro)
	if !ok {
		return fmt.Errorf("chat: macro %q was not defined as a macro", g.name)
	}
	r.Environment.Context.Set(g.name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if err := st.enter(); err != nil {
			st.leave()
			return exec.AsValue(err)
		}
		defer st.leave()
		return m(params)
	}))
	return nil
}
