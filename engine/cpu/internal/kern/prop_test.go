package kern_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
)

var propSeed = flag.Int64("kern.seed", 0, "seed of the gopter properties (0: from the clock); every run logs it")

// TestPropertyKernelsWithinContract: for every runnable kernel, random blocks
// and activations of random length give a result within the contract
// tolerance of the dequantized float64 reference, and (for assembly kernels)
// within the same tolerance of the pure-Go twin.
func TestPropertyKernelsWithinContract(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("gopter seed %d (rerun with -kern.seed=%d)", seed, seed)
	pool := kern.NewPool(1)
	defer pool.Close()
	for _, k := range kernels(kern.OpMatVec) {
		var twin *kern.Kernel
		if k.Key.ISA != kern.ISAGo {
			key := k.Key
			key.ISA = kern.ISAGo
			var err error
			if twin, err = kern.Lookup(key); err != nil {
				t.Fatalf("%s has no Go twin: %v", k.Contract, err)
			}
		}
		t.Run(k.Contract, func(t *testing.T) {
			params := gopter.DefaultTestParametersWithSeed(seed)
			params.MinSuccessfulTests = 25
			props := gopter.NewProperties(params)
			props.Property("within contract of the dequantized reference", prop.ForAll(
				func(dataSeed uint64, units int) string {
					rng := rand.New(rand.NewPCG(dataSeed, 99))
					n := minCols(k) * units
					w := packed(t, k, kern.Weights{Type: k.Key.Type, Rows: 1, Cols: n, Data: randomWeights(rng, k.Key.Type, n)})
					x := randomActs(rng, n)
					want, tol := reference(t, k, w, x, 1)
					var s kern.Scratch
					got := make([]float32, 1)
					if err := k.Mul(pool, &s, got, w, x, 1); err != nil {
						return err.Error()
					}
					if d := math.Abs(float64(got[0]) - want[0]); !(d <= tol[0]) {
						return fmt.Sprintf("n=%d: got %g, reference %g ± %.3g", n, got[0], want[0], tol[0])
					}
					if twin != nil {
						g2 := make([]float32, 1)
						if err := twin.Mul(pool, &s, g2, w, x, 1); err != nil {
							return err.Error()
						}
						if d := math.Abs(float64(got[0]) - float64(g2[0])); !(d <= tol[0]) {
							return fmt.Sprintf("n=%d: got %g, Go twin %g ± %.3g", n, got[0], g2[0], tol[0])
						}
					}
					return ""
				},
				gen.UInt64(), gen.IntRange(1, 12),
			))
			props.TestingRun(t)
		})
	}
}

// TestPropertyMatMulWithinContract: the four-row kernels and the tiling of
// Mul give, for random activation row counts, every output within the
// contract tolerance of the reference.
func TestPropertyMatMulWithinContract(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("gopter seed %d (rerun with -kern.seed=%d)", seed, seed)
	pool := kern.NewPool(2)
	defer pool.Close()
	for _, k := range kernels(kern.OpMatMul) {
		t.Run(k.Contract, func(t *testing.T) {
			params := gopter.DefaultTestParametersWithSeed(seed)
			params.MinSuccessfulTests = 10
			props := gopter.NewProperties(params)
			props.Property("every output within contract", prop.ForAll(
				func(dataSeed uint64, units, rows, m int) string {
					rng := rand.New(rand.NewPCG(dataSeed, 7))
					n := minCols(k) * units
					w := packed(t, k, kern.Weights{Type: k.Key.Type, Rows: rows, Cols: n, Data: randomWeights(rng, k.Key.Type, rows*n)})
					x := randomActs(rng, m*n)
					want, tol := reference(t, k, w, x, m)
					var s kern.Scratch
					got := make([]float32, m*rows)
					if err := k.Mul(pool, &s, got, w, x, m); err != nil {
						return err.Error()
					}
					for i := range got {
						if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol[i]) {
							return fmt.Sprintf("n=%d rows=%d m=%d: out[%d] = %g, reference %g ± %.3g", n, rows, m, i, got[i], want[i], tol[i])
						}
					}
					return ""
				},
				gen.UInt64(), gen.IntRange(1, 4), gen.IntRange(1, 20), gen.IntRange(2, 11),
			))
			props.TestingRun(t)
		})
	}
}
