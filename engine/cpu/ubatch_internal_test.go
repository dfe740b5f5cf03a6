package cpu

import (
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
)

// TestChooseUBatch: a model whose feed-forward down matrix takes a packed
// float kernel passes floatUBatch tokens at a time (the avx2 set's too,
// on avx2r16); quantized models, and every model on the exact sets (no
// packed kernel), keep graph.UBatch (0).
func TestChooseUBatch(t *testing.T) {
	spec := func(tp quant.Type) *model.Spec {
		return &model.Spec{Layers: []model.Layer{{}, {FFNDown: &model.Tensor{Type: tp}}}}
	}
	k, err := kern.Select(kern.OpMatMul, quant.F16)
	if err != nil {
		t.Fatal(err)
	}
	packedFloats := k.Packs() // avx512r16 (or avx2r16) in this build and on this CPU
	avx2Packed := false
	if k2, err := kern.SelectOn(kern.OpMatMul, quant.F16, kern.AVX2ISAs, false); err == nil {
		avx2Packed = k2.Packs() // avx2r16
	}
	for _, c := range []struct {
		set  string
		t    quant.Type
		want int
	}{
		{"", quant.F16, map[bool]int{true: floatUBatch}[packedFloats]},
		{"", quant.BF16, map[bool]int{true: floatUBatch}[packedFloats]},
		{"", quant.Q8_0, 0},
		{"", quant.Q4_K, 0},
		{"exact", quant.F16, 0},
		{"avx2", quant.F16, map[bool]int{true: floatUBatch}[avx2Packed]},
		{"avx2-exact", quant.F16, 0},
	} {
		ks, err := lookupKernelSet(c.set)
		if err != nil {
			t.Fatal(err)
		}
		be, err := newBackendSet(1, ks)
		if err != nil {
			if c.set == "avx2" || c.set == "avx2-exact" {
				continue // no AVX2 here: the set is refused
			}
			t.Fatal(err)
		}
		if got := be.chooseUBatch(spec(c.t)); got != c.want {
			t.Errorf("kernel set %q, %s feed-forward: ubatch %d, want %d", c.set, c.t, got, c.want)
		}
		be.close()
	}
}
