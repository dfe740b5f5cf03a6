package kern_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/quant"
)

// TestPlantIdentityEqualsGoKernel: a plant whose defect changes nothing
// (a scale × 1, a scale read from itself) computes exactly what the type's
// Go kernel computes, so a planted defect is the defect and nothing else;
// each real defect changes the products.
func TestPlantIdentityEqualsGoKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 2))
	const rows, cols, m = 8, 512, 3
	x := make([]float32, m*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	mul := func(k *kern.Kernel, w []byte, typ quant.Type) []float32 {
		pool := kern.NewPool(1)
		defer pool.Close()
		var s kern.Scratch
		out := make([]float32, m*rows)
		if err := k.Mul(pool, &s, out, kern.Weights{Type: typ, Rows: rows, Cols: cols, Data: w}, x, m); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		typ             quant.Type
		identity, wrong string
	}{
		{quant.Q8_0, "Q8_0:scale:1:1", "Q8_0:scale:1:1.05"},
		{quant.Q8_0, "Q8_0:scale:1:1", "Q8_0:drop_last"},
		{quant.Q4_K, "", "Q4_K:min_sign:3"}, // Q4_K's defects have no neutral form
		{quant.Q4_K, "", "Q4_K:nibble:5"},
		{quant.Q6_K, "Q6_K:scale_from:15:15", "Q6_K:scale_from:15:14"},
	} {
		w := randomWeights(rng, c.typ, rows*cols)
		goK, err := kern.Lookup(kern.Key{Op: kern.OpMatMul, Type: c.typ, Backend: kern.Backend, ISA: kern.ISAGo})
		if err != nil {
			t.Fatal(err)
		}
		want := mul(goK, w, c.typ)
		if c.identity != "" {
			p, err := kern.ParsePlant(c.identity)
			if err != nil {
				t.Fatalf("%s: %v", c.identity, err)
			}
			k, err := p.Kernel(kern.OpMatMul)
			if err != nil {
				t.Fatal(err)
			}
			if got := mul(k, w, c.typ); !equal(got, want) {
				t.Errorf("%s changes the products: %v, want %v", c.identity, got[:4], want[:4])
			}
		}
		p, err := kern.ParsePlant(c.wrong)
		if err != nil {
			t.Fatalf("%s: %v", c.wrong, err)
		}
		k, err := p.Kernel(kern.OpMatMul)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(k.Contract, "+plant("+c.wrong+")") || p.Type != c.typ {
			t.Errorf("%s: contract %q, type %s", c.wrong, k.Contract, p.Type)
		}
		if got := mul(k, w, c.typ); equal(got, want) {
			t.Errorf("%s does not change the products", c.wrong)
		}
	}
}

func equal(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestParsePlantRefuses: a plant it cannot read is an error naming the
// syntax, never a kernel left unplanted.
func TestParsePlantRefuses(t *testing.T) {
	for _, s := range []string{"", "Q8_0", "Q8_0:scale", "Q8_0:scale:x:1", "Q8_0:scale:1:y", "Q8_0:drop_last:1",
		"Q4_K:min_sign:8", "Q4_K:nibble", "Q6_K:scale_from:16:1", "Q5_K:nibble:1", "F32:scale:1:2"} {
		if p, err := kern.ParsePlant(s); err == nil || !strings.Contains(err.Error(), "Q8_0:scale:B:F") {
			t.Errorf("ParsePlant(%q) = %+v, %v; want an error naming the defects", s, p, err)
		}
	}
}

// TestActFormatsAreTheFormatLayers: every kernel converts its activations to
// the format quant.VecDotType names for its weight type — the table the
// reference's ggml numerics rounds by — so the judge and the engine cannot
// drift apart on what a product's activations are.
func TestActFormatsAreTheFormatLayers(t *testing.T) {
	for _, e := range kern.List() {
		want, err := quant.VecDotType(e.Key.Type)
		if err != nil {
			t.Errorf("%s: %v", e.Contract, err)
			continue
		}
		if e.Act != want.String() {
			t.Errorf("%s converts activations to %s, quant.VecDotType says %s", e.Contract, e.Act, want)
		}
	}
}
