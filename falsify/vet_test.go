package falsify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/falsify"
)

func TestVetEmbedded(t *testing.T) {
	if ps := falsify.Vet(embedded(t), fullRegistry()); len(ps) > 0 {
		t.Errorf("Vet(embedded contracts, builtins + verb_fields):\n%v", ps)
	}
}

// TestVetBroken feeds Vet each class of broken contract/registry pairing it
// must catch and checks the message.
func TestVetBroken(t *testing.T) {
	nop := func(ctx context.Context, c *falsify.Check) error { return nil }
	without := func(id string) *falsify.Registry {
		r := falsify.NewRegistry()
		for _, c := range fullRegistry().Codes() {
			if c.ID != id {
				r.Register(c.ID, c.Kind, c.Run, falsify.Thresholds(c.Thresholds...), falsify.Params(c.Params...),
					falsify.Refs(c.Refs...), falsify.VetWith(c.Vet))
			}
		}
		return r
	}
	tests := []struct {
		name string
		reg  func() *falsify.Registry
		edit func(t *testing.T, f map[string]string)
		rule string
		want string
	}{
		{"falsifier names code that is not registered", func() *falsify.Registry { return without("greedy_golden") }, nil,
			"unbound", `names code "greedy_golden", which no Go code registers`},
		{"registered code used by no contract", func() *falsify.Registry {
			r := fullRegistry()
			r.Register("orphan", falsify.KindGolden, nop)
			return r
		}, nil, "dead", "orphan (golden) is used by no contract: dead code"},
		{"kind disagrees", func() *falsify.Registry {
			r := without("timing")
			r.Register("timing", falsify.KindGolden, nop, falsify.Thresholds("max_leak_ms", "max_shortfall_ms"))
			return r
		}, nil, "kind", "is of kind timing, but code timing is of kind golden"},
		{"threshold missing", fullRegistry, func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = mustReplace(t, f["verbs.cue"], `			max_shortfall_ms: {op: "<=", value: timing.tolerance_ms + timing.tolerance_rel*params.delay_ms, unit: "ms",
				doc: "largest amount by which a planted stage's field moved less than the delay"}
`, "")
		}, "threshold", `threshold "max_shortfall_ms" is missing`},
		{"threshold the code does not measure", fullRegistry, func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = mustReplace(t, f["verbs.cue"], `thresholds: violations: {op: "==", value: 0}
		failure: "apr logits`, `thresholds: {violations: {op: "==", value: 0}, speed: {op: ">", value: 1}}
		failure: "apr logits`)
		}, "threshold", `threshold "speed" is not one code verb_fields measures`},
		{"param missing", fullRegistry, func(t *testing.T, f map[string]string) {
			f["kernels.cue"] = mustReplace(t, f["kernels.cue"], `params: target: "q8_0.dequant_exact"`, ``)
		}, "param", `param "target" is missing`},
		{"failclosed target unknown", fullRegistry, func(t *testing.T, f map[string]string) {
			f["kernels.cue"] = mustReplace(t, f["kernels.cue"], `params: target: "q8_0.dequant_exact"`, `params: target: "nonesuch"`)
		}, "code", `target "nonesuch" is not a falsifier`},
		{"failclosed target consults no reference", fullRegistry, func(t *testing.T, f map[string]string) {
			f["kernels.cue"] = mustReplace(t, f["kernels.cue"], `params: target: "f32.dequant_exact"`, `params: target: "f32.dequant_layout"`)
		}, "code", "consults no reference"},
		{"exact check without an independent reference", fullRegistry, func(t *testing.T, f map[string]string) {
			f["kernels.cue"] = mustReplace(t, f["kernels.cue"], "{\n\t\t\tid:      \"q4_k.dequant_layout\"",
				`{id: "q4_k.dequant_exact", kind: "property", code: "dequant_exact", summary: "x", thresholds: mismatches: {op: "==", value: 0}, failure: "x"},
		{
			id:      "q4_k.dequant_layout"`)
		}, "code", "no independent Q4_K dequantizer"},
		{"kernel id an engine names does not resolve", func() *falsify.Registry {
			r := fullRegistry()
			r.RegisterKernelIDs("engine/cpu", func() []string {
				return []string{"kernel.matvec.Q4_K.cpu.avx2", "kernel.matvec.Q9_K.cpu.go", "kernel.softmax.F32.cpu.go"}
			})
			return r
		}, nil, "kernel-id", "Q9_K"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := embedded(t)
			if tt.edit != nil {
				var err error
				set, err = contracts.LoadDir(contractsDir(t, func(f map[string]string) { tt.edit(t, f) }))
				if err != nil {
					t.Fatalf("LoadDir: %v", err)
				}
			}
			ps := falsify.Vet(set, tt.reg())
			for _, p := range ps {
				if p.Rule == tt.rule && strings.Contains(p.String(), tt.want) {
					return
				}
			}
			t.Errorf("Vet(%s) problems:\n%v\nwant one of rule %q mentioning %q", tt.name, ps, tt.rule, tt.want)
		})
	}
}

func TestRegisterPanicsOnProgrammerErrors(t *testing.T) {
	nop := func(ctx context.Context, c *falsify.Check) error { return nil }
	for name, fn := range map[string]func(r *falsify.Registry){
		"duplicate id": func(r *falsify.Registry) {
			r.Register("x", falsify.KindShape, nop)
			r.Register("x", falsify.KindShape, nop)
		},
		"unknown kind": func(r *falsify.Registry) { r.Register("x", "vibes", nop) },
		"nil func":     func(r *falsify.Registry) { r.Register("x", falsify.KindShape, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p == nil || !strings.HasPrefix(p.(string), "falsify: ") {
					t.Errorf("Register with %s: panic %v, want a falsify: programmer-error panic", name, p)
				}
			}()
			fn(falsify.NewRegistry())
		})
	}
}
