package contracts

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/schema"
)

// check makes the checks CUE cannot: unique falsifier ids, binds that
// resolve, model expressions that parse and name what exists, kernel layouts
// that agree with the ggml type registry, timing stages that name fields.
func check(s *Set) []Problem {
	var out []Problem
	seen := map[string]bool{}
	for _, id := range s.IDs() {
		seen[id] = true
	}
	count := map[string]int{}
	for _, f := range s.Falsifiers {
		count[f.ID]++
	}
	for _, f := range s.Falsifiers {
		if count[f.ID] > 1 {
			out = append(out, Problem{ID: f.ID, Rule: "duplicate",
				Msg: fmt.Sprintf("falsifier id %s is used %d times; falsifier ids are unique across the set", f.ID, count[f.ID])})
			count[f.ID] = 0 // report once
		}
		if seen[f.ID] {
			out = append(out, Problem{ID: f.ID, Rule: "duplicate", Msg: "a falsifier may not share its id with a contract"})
		}
		if !s.Has(f.Binds) {
			out = append(out, Problem{ID: f.ID, Rule: "binds", Msg: fmt.Sprintf("binds %s, which is not a contract of this set", f.Binds)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Contracts.Model)) {
		m := s.Contracts.Model[name]
		if _, errs := compileModel(&m); len(errs) > 0 {
			for _, e := range errs {
				out = append(out, Problem{ID: m.ID, Rule: "expr", Msg: e})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Contracts.Kernel)) {
		k := s.Contracts.Kernel[name]
		out = append(out, checkKernel(s, &k)...)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Contracts.Verb)) {
		v := s.Contracts.Verb[name]
		if v.Verb != name {
			out = append(out, Problem{ID: v.ID, Rule: "verb", Msg: fmt.Sprintf("contract verb.%s describes verb %q", name, v.Verb)})
		}
		if v.Timing != nil {
			for _, st := range slices.Sorted(maps.Keys(v.Timing.Stages)) {
				if _, ok := v.Fields[v.Timing.Stages[st]]; !ok {
					out = append(out, Problem{ID: v.ID, Rule: "verb",
						Msg: fmt.Sprintf("timing stage %s reports in field %q, which the contract does not list", st, v.Timing.Stages[st])})
				}
			}
		}
	}
	return out
}

func checkKernel(s *Set, k *schema.Kernel) []Problem {
	p := func(format string, args ...any) Problem {
		return Problem{ID: k.ID, Rule: "kernel", Msg: fmt.Sprintf(format, args...)}
	}
	t, err := quant.ParseType(k.Type)
	if err != nil {
		return []Problem{p("%v", err)}
	}
	info, err := quant.Lookup(t)
	if err != nil {
		return []Problem{p("%v", err)}
	}
	var out []Problem
	if int(t) != k.TypeID {
		out = append(out, p("type_id %d, but ggml's %s is %d", k.TypeID, k.Type, int(t)))
	}
	if info.BlockSize != k.BlockSize || info.TypeSize != k.BlockBytes {
		out = append(out, p("layout %d values in %d bytes, but ggml's %s is %d values in %d bytes", k.BlockSize, k.BlockBytes, k.Type, info.BlockSize, info.TypeSize))
	}
	if want := strings.ToLower(k.Type); k.ID != GroupKernel+"."+want {
		out = append(out, p("the contract of type %s must be named kernel.%s", k.Type, want))
	}
	for _, op := range slices.Sorted(maps.Keys(k.Ops)) {
		if a := k.Ops[op].Activation; a != "" {
			if _, err := quant.ParseType(a); err != nil {
				out = append(out, p("op %s: activation %v", op, err))
			}
		}
	}
	return out
}
