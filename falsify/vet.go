package falsify

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/aprqa/apr/contracts"
)

// Vet checks a contract set against a registry, the way apr contracts vet
// does after the set itself loaded: every falsifier names registered code of
// its kind with the thresholds and params the code needs; every registered
// code is used by some contract (dead code is a problem); the code's own
// checks hold; every kernel id an engine's kernel registry names resolves to
// a kernel contract and op.
func Vet(set *contracts.Set, reg *Registry) []contracts.Problem {
	if reg == nil {
		reg = builtins()
	}
	var out []contracts.Problem
	used := map[string]bool{}
	var names []string
	for _, c := range reg.Codes() {
		names = append(names, c.ID)
	}
	for _, f := range set.Falsifiers {
		p := func(rule, format string, args ...any) {
			out = append(out, contracts.Problem{Pos: set.Pos(f.ID), ID: f.ID, Rule: rule, Msg: fmt.Sprintf(format, args...)})
		}
		code, ok := reg.Lookup(f.Code)
		if !ok {
			p("unbound", "names code %q, which no Go code registers (registered: %s)", f.Code, strings.Join(names, ", "))
			continue
		}
		used[f.Code] = true
		if string(code.Kind) != f.Kind {
			p("kind", "is of kind %s, but code %s is of kind %s", f.Kind, f.Code, code.Kind)
		}
		for _, t := range code.Thresholds {
			if _, ok := f.Thresholds[t]; !ok {
				p("threshold", "threshold %q is missing: code %s judges by %s", t, f.Code, strings.Join(code.Thresholds, ", "))
			}
		}
		for _, t := range slices.Sorted(maps.Keys(f.Thresholds)) {
			if len(code.Thresholds) > 0 && !slices.Contains(code.Thresholds, t) {
				p("threshold", "threshold %q is not one code %s measures (%s)", t, f.Code, strings.Join(code.Thresholds, ", "))
			}
		}
		for _, prm := range code.Params {
			if _, ok := f.Params[prm]; !ok {
				p("param", "param %q is missing: code %s needs it", prm, f.Code)
			}
		}
		if code.Vet != nil {
			for _, msg := range code.Vet(f, set) {
				p("code", "%s", msg)
			}
		}
		if code.Kind == KindFailClosed {
			for _, msg := range vetFailClosedRefs(f, set, reg) {
				p("code", "%s", msg)
			}
		}
	}
	for _, c := range reg.Codes() {
		if !used[c.ID] {
			out = append(out, contracts.Problem{ID: c.ID, Rule: "dead",
				Msg: fmt.Sprintf("registered falsifier code %s (%s) is used by no contract: dead code", c.ID, c.Kind)})
		}
	}
	reg.mu.RLock()
	sources := slices.Sorted(maps.Keys(reg.kernels))
	fns := make([]func() []string, len(sources))
	for i, s := range sources {
		fns[i] = reg.kernels[s]
	}
	reg.mu.RUnlock()
	for i, src := range sources {
		ids := fns[i]()
		sort.Strings(ids)
		for _, id := range ids {
			if _, _, err := set.ResolveKernel(id); err != nil {
				out = append(out, contracts.Problem{ID: id, Rule: "kernel-id", Msg: fmt.Sprintf("%s names it: %v", src, err)})
			}
		}
	}
	return out
}
