package contracts

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/schema"
)

// Entry is one contract in a listing.
type Entry struct {
	ID         string   `json:"id"`
	Group      string   `json:"group"`
	Summary    string   `json:"summary"`
	Pos        string   `json:"pos,omitempty"`
	Falsifiers []string `json:"falsifiers"`
}

// IDs returns every contract id, sorted.
func (s *Set) IDs() []string {
	var out []string
	for n := range s.Contracts.Model {
		out = append(out, GroupModel+"."+n)
	}
	for n := range s.Contracts.Kernel {
		out = append(out, GroupKernel+"."+n)
	}
	for n := range s.Contracts.Verb {
		out = append(out, GroupVerb+"."+n)
	}
	sort.Strings(out)
	return out
}

// List returns every contract with its falsifiers' ids, sorted by id.
func (s *Set) List() []Entry {
	var out []Entry
	for _, id := range s.IDs() {
		g, _, _ := strings.Cut(id, ".")
		e := Entry{ID: id, Group: g, Summary: s.summary(id), Pos: s.Pos(id), Falsifiers: []string{}}
		for _, f := range s.Falsifiers {
			if s.owner[f.ID] == id {
				e.Falsifiers = append(e.Falsifiers, f.ID)
			}
		}
		out = append(out, e)
	}
	return out
}

func (s *Set) summary(id string) string {
	g, n, _ := strings.Cut(id, ".")
	switch g {
	case GroupModel:
		return s.Contracts.Model[n].Summary
	case GroupKernel:
		return s.Contracts.Kernel[n].Summary
	case GroupVerb:
		return s.Contracts.Verb[n].Summary
	}
	return ""
}

// Has reports whether id is a contract of the set.
func (s *Set) Has(id string) bool {
	g, n, _ := strings.Cut(id, ".")
	switch g {
	case GroupModel:
		_, ok := s.Contracts.Model[n]
		return ok
	case GroupKernel:
		_, ok := s.Contracts.Kernel[n]
		return ok
	case GroupVerb:
		_, ok := s.Contracts.Verb[n]
		return ok
	}
	return false
}

// Pos returns where a contract or falsifier id was written ("" if unknown).
func (s *Set) Pos(id string) string {
	s.detail()
	return s.pos[id]
}

// Owner returns the contract that lists falsifier id.
func (s *Set) Owner(id string) string { return s.owner[id] }

// Show returns contract id as canonical CUE (defaults filled in), or false.
func (s *Set) Show(id string) (string, bool) {
	s.detail()
	t, ok := s.text[id]
	return t, ok
}

// Falsifier returns the falsifier with id.
func (s *Set) Falsifier(id string) (schema.Falsifier, bool) {
	i := sort.Search(len(s.Falsifiers), func(i int) bool { return s.Falsifiers[i].ID >= id })
	if i < len(s.Falsifiers) && s.Falsifiers[i].ID == id {
		return s.Falsifiers[i], true
	}
	return schema.Falsifier{}, false
}

// Model returns the model contract for architecture arch.
func (s *Set) Model(arch string) (*schema.Model, bool) {
	for n := range s.Contracts.Model {
		if m := s.Contracts.Model[n]; m.Arch == arch {
			return &m, true
		}
	}
	return nil, false
}

// ModelByID returns the model contract with id ("model.llama").
func (s *Set) ModelByID(id string) (*schema.Model, bool) {
	g, n, _ := strings.Cut(id, ".")
	m, ok := s.Contracts.Model[n]
	if g != GroupModel || !ok {
		return nil, false
	}
	return &m, true
}

// Kernel returns the kernel contract of ggml type t.
func (s *Set) Kernel(t quant.Type) (*schema.Kernel, bool) {
	for n := range s.Contracts.Kernel {
		if k := s.Contracts.Kernel[n]; k.Type == t.String() {
			return &k, true
		}
	}
	return nil, false
}

// KernelByID returns the kernel contract with id ("kernel.q4_k").
func (s *Set) KernelByID(id string) (*schema.Kernel, bool) {
	g, n, _ := strings.Cut(id, ".")
	k, ok := s.Contracts.Kernel[n]
	if g != GroupKernel || !ok {
		return nil, false
	}
	return &k, true
}

// Verb returns the contract of verb name ("run").
func (s *Set) Verb(name string) (*schema.Verb, bool) {
	v, ok := s.Contracts.Verb[name]
	if !ok {
		return nil, false
	}
	return &v, true
}

// ResolveKernel resolves a kernel implementation's contract id to the kernel
// contract and op it is held to. It accepts a contract id ("kernel.q4_k",
// op "") and the ids an engine's kernel registry names,
// "kernel.<op>.<TYPE>[.<backend>[.<isa>]]" (e.g. "kernel.matvec.Q4_K.cpu.avx2"),
// whose op the contract must list.
func (s *Set) ResolveKernel(id string) (*schema.Kernel, string, error) {
	if k, ok := s.KernelByID(id); ok {
		return k, "", nil
	}
	parts := strings.Split(id, ".")
	if len(parts) < 3 || len(parts) > 5 || parts[0] != GroupKernel {
		return nil, "", fmt.Errorf("kernel id %q is neither a kernel contract id nor kernel.<op>.<TYPE>[.<backend>[.<isa>]]", id)
	}
	op, typ := parts[1], parts[2]
	t, err := quant.ParseType(typ)
	if err != nil {
		return nil, "", fmt.Errorf("kernel id %q: %v", id, err)
	}
	k, ok := s.Kernel(t)
	if !ok {
		return nil, "", fmt.Errorf("kernel id %q: no kernel contract for type %s", id, typ)
	}
	if _, ok := k.Ops[op]; !ok {
		ops := make([]string, 0, len(k.Ops))
		for o := range k.Ops {
			ops = append(ops, o)
		}
		sort.Strings(ops)
		return nil, "", fmt.Errorf("kernel id %q: contract %s has no op %q (it has %s)", id, k.ID, op, strings.Join(ops, ", "))
	}
	return k, op, nil
}
