package kern_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// allWeightTypes are the weight types the reference engine supports; every
// one must have a kernel on every build.
var allWeightTypes = []quant.Type{
	quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
	quant.Q8_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S,
	quant.IQ1_M, quant.IQ4_NL, quant.IQ4_XS, quant.TQ1_0, quant.TQ2_0, quant.MXFP4,
	quant.NVFP4, quant.Q1_0, quant.Q2_0,
}

// wantAct is ggml's vec_dot_type per weight type (ggml-cpu type_traits_cpu).
var wantAct = map[quant.Type]quant.Type{
	quant.F32: quant.F32, quant.F16: quant.F16, quant.BF16: quant.BF16,
	quant.Q4_0: quant.Q8_0, quant.Q5_0: quant.Q8_0, quant.Q8_0: quant.Q8_0,
	quant.IQ4_NL: quant.Q8_0, quant.MXFP4: quant.Q8_0, quant.NVFP4: quant.Q8_0,
	quant.Q1_0: quant.Q8_0, quant.Q2_0: quant.Q8_0,
	quant.Q4_1: quant.Q8_1, quant.Q5_1: quant.Q8_1,
}

func TestEveryTypeHasAGoKernel(t *testing.T) {
	for _, typ := range allWeightTypes {
		for _, op := range []kern.Op{kern.OpMatVec, kern.OpMatMul} {
			key := kern.Key{Op: op, Type: typ, Backend: kern.Backend, ISA: kern.ISAGo}
			k, err := kern.Lookup(key)
			if err != nil {
				t.Errorf("Lookup(%s): %v", key, err)
				continue
			}
			want, ok := wantAct[typ]
			if !ok {
				want = quant.Q8_K
			}
			if k.Act != want {
				t.Errorf("Lookup(%s).Act = %s, want %s (ggml's vec_dot_type)", key, k.Act, want)
			}
			if k.Contract != fmt.Sprintf("kernel.%s.%s.cpu.go", op, typ) {
				t.Errorf("Lookup(%s).Contract = %q", key, k.Contract)
			}
		}
	}
}

func TestLookupRefusesUnregisteredKeys(t *testing.T) {
	tests := []struct {
		name string
		key  kern.Key
	}{
		{"unknown isa", kern.Key{Op: kern.OpMatVec, Type: quant.Q4_K, Backend: kern.Backend, ISA: "sse2"}},
		{"unknown op", kern.Key{Op: "conv", Type: quant.Q4_K, Backend: kern.Backend, ISA: kern.ISAGo}},
		{"non-weight type", kern.Key{Op: kern.OpMatVec, Type: quant.Q8_K, Backend: kern.Backend, ISA: kern.ISAGo}},
		{"other backend", kern.Key{Op: kern.OpMatVec, Type: quant.Q4_K, Backend: "cuda", ISA: kern.ISAGo}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := kern.Lookup(tc.key)
			if err == nil {
				t.Fatalf("Lookup(%s) = %s, want a refusal", tc.key, k.Contract)
			}
			r, ok := refuse.As(err)
			if !ok || !errors.Is(err, refuse.ErrRefused) {
				t.Fatalf("Lookup(%s) error %v is not a refusal", tc.key, err)
			}
			if r.By != tc.key.Contract() {
				t.Errorf("Lookup(%s) refused by %q, want the key's contract id", tc.key, r.By)
			}
		})
	}
}

func TestLookupRefusesISAsThisCPULacks(t *testing.T) {
	for _, e := range kern.List() {
		if e.Runnable {
			continue
		}
		if _, err := kern.Lookup(e.Key); !errors.Is(err, refuse.ErrRefused) {
			t.Errorf("Lookup(%s) on a CPU without %s: err = %v, want a refusal", e.Key, e.Key.ISA, err)
		}
	}
}

func TestSelectPrefersTheMostSpecificRunnableISA(t *testing.T) {
	for _, typ := range allWeightTypes {
		k, err := kern.Select(kern.OpMatVec, typ)
		if err != nil {
			t.Fatalf("Select(matvec, %s): %v", typ, err)
		}
		for _, e := range kern.List() {
			if e.Key.Op == kern.OpMatVec && e.Key.Type == typ && e.Runnable && e.Key.ISA != k.Key.ISA && e.Key.ISA != kern.ISAGo && k.Key.ISA == kern.ISAGo {
				t.Errorf("Select(matvec, %s) = %s although %s is runnable", typ, k.Contract, e.Contract)
			}
		}
	}
	if _, err := kern.Select(kern.OpMatVec, quant.Q8_K); !errors.Is(err, refuse.ErrRefused) {
		t.Errorf("Select(matvec, Q8_K): err = %v, want a refusal (Q8_K is not a weight type)", err)
	}
}

func TestListIsCompleteAndNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range kern.List() {
		if e.Contract != e.Key.Contract() || seen[e.Contract] {
			t.Errorf("List entry %+v: contract id wrong or duplicated", e)
		}
		seen[e.Contract] = true
	}
	if len(seen) < 2*len(allWeightTypes) {
		t.Errorf("List has %d entries, want at least %d", len(seen), 2*len(allWeightTypes))
	}
}

// TestKernelsMatchDequantizedReference runs every runnable kernel on random
// blocks (and on ggml-quantized fixture blocks, below) against the float64
// dot product of the dequantized operands.
func TestKernelsMatchDequantizedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := kern.NewPool(2)
	defer pool.Close()
	for _, k := range kernels(kern.OpMatVec) {
		t.Run(k.Contract, func(t *testing.T) {
			base := minCols(k)
			for _, mult := range []int{1, 3, 19} {
				n := base * mult
				w := kern.Weights{Type: k.Key.Type, Rows: 5, Cols: n, Data: randomWeights(rng, k.Key.Type, 5*n)}
				x := randomActs(rng, n)
				checkMul(t, k, pool, w, x, 1)
			}
		})
	}
}

func TestKernelsOnGGMLQuantizedBlocks(t *testing.T) {
	pool := kern.NewPool(1)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range kernels(kern.OpMatVec) {
		if k.Key.Type == quant.F32 {
			continue // no F32 fixture
		}
		t.Run(k.Contract, func(t *testing.T) {
			data, rows, cols := fixtureWeights(t, k.Key.Type)
			w := kern.Weights{Type: k.Key.Type, Rows: rows, Cols: cols, Data: data}
			checkMul(t, k, pool, w, randomActs(rng, cols), 1)
		})
	}
}

// TestMatMulMatchesReference checks the tiled matrix-matrix path, with
// thread counts and activation row counts that exercise remainders.
func TestMatMulMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, threads := range []int{1, 2, 3} {
		pool := kern.NewPool(threads)
		for _, k := range kernels(kern.OpMatMul) {
			t.Run(fmt.Sprintf("%s/threads=%d", k.Contract, threads), func(t *testing.T) {
				n := minCols(k) * 2
				rows := 37
				w := kern.Weights{Type: k.Key.Type, Rows: rows, Cols: n, Data: randomWeights(rng, k.Key.Type, rows*n)}
				for _, m := range []int{2, 4, 7} {
					checkMul(t, k, pool, w, randomActs(rng, m*n), m)
				}
			})
		}
		pool.Close()
	}
}

// checkMul runs k.Mul into a guarded dst and compares it with reference.
func checkMul(t *testing.T, k *kern.Kernel, pool *kern.Pool, w kern.Weights, x []float32, m int) {
	t.Helper()
	w = packed(t, k, w)
	want, tol := reference(t, k, w, x, m)
	dst, check := guarded(m * w.Rows)
	xCopy := append([]float32(nil), x...)
	wCopy := append([]byte(nil), w.Data...)
	var s kern.Scratch
	call := fmt.Sprintf("%s.Mul(%dx%d, m=%d)", k.Contract, w.Rows, w.Cols, m)
	if err := k.Mul(pool, &s, dst, w, x, m); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	check(t, call)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(xCopy[i]) {
			t.Fatalf("%s modified its activations", call)
		}
	}
	if string(wCopy) != string(w.Data) {
		t.Fatalf("%s modified its weights", call)
	}
	bad := 0
	for i, g := range dst {
		if d := math.Abs(float64(g) - want[i]); !(d <= tol[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g ± %.3g (off by %.3g)", call, i, g, want[i], tol[i], d)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d outputs outside the contract tolerance", call, bad, len(dst))
	}
}

func TestMulRejectsBadShapes(t *testing.T) {
	k, err := kern.Lookup(kern.Key{Op: kern.OpMatVec, Type: quant.Q4_0, Backend: kern.Backend, ISA: kern.ISAGo})
	if err != nil {
		t.Fatal(err)
	}
	pool := kern.NewPool(1)
	defer pool.Close()
	good := kern.Weights{Type: quant.Q4_0, Rows: 2, Cols: 64, Data: make([]byte, 2*2*18)}
	tests := []struct {
		name string
		w    kern.Weights
		x    []float32
		dst  []float32
		m    int
	}{
		{"wrong type", kern.Weights{Type: quant.Q8_0, Rows: 2, Cols: 64, Data: make([]byte, 4*34)}, make([]float32, 64), make([]float32, 2), 1},
		{"cols not a block multiple", kern.Weights{Type: quant.Q4_0, Rows: 2, Cols: 48, Data: make([]byte, 36)}, make([]float32, 48), make([]float32, 2), 1},
		{"short weights", kern.Weights{Type: quant.Q4_0, Rows: 2, Cols: 64, Data: make([]byte, 71)}, make([]float32, 64), make([]float32, 2), 1},
		{"short activations", good, make([]float32, 63), make([]float32, 2), 1},
		{"short dst", good, make([]float32, 64), make([]float32, 1), 1},
		{"matvec with two rows", good, make([]float32, 128), make([]float32, 4), 2},
		{"zero rows", good, nil, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s kern.Scratch
			if err := k.Mul(pool, &s, tc.dst, tc.w, tc.x, tc.m); err == nil {
				t.Errorf("Mul(%s) = nil, want an error", tc.name)
			}
		})
	}
}

// TestMatMulRowsEqualMatVec: a matmul row is bit for bit the matvec result
// of that activation row (the four-row kernels do each row's float32
// operations in the single-row kernel's order), so prefill and decode agree
// exactly. Row lengths cover odd and even block counts.
func TestMatMulRowsEqualMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	pool := kern.NewPool(2)
	defer pool.Close()
	for _, mm := range kernels(kern.OpMatMul) {
		key := mm.Key
		key.Op = kern.OpMatVec
		mv, err := kern.Lookup(key)
		if err != nil {
			t.Fatalf("%s has no matvec twin: %v", mm.Contract, err)
		}
		t.Run(mm.Contract, func(t *testing.T) {
			for _, units := range []int{1, 2, 3, 7} {
				// m = 13 = 8 + 4 + 1 runs the eight-row, four-row and
				// single-row kernels where a type has them.
				n, rows, m := minCols(mm)*units, 9, 13
				w := packed(t, mm, kern.Weights{Type: key.Type, Rows: rows, Cols: n, Data: randomWeights(rng, key.Type, rows*n)})
				x := randomActs(rng, m*n)
				var s kern.Scratch
				got := make([]float32, m*rows)
				if err := mm.Mul(pool, &s, got, w, x, m); err != nil {
					t.Fatal(err)
				}
				one := make([]float32, rows)
				for i := 0; i < m; i++ {
					if err := mv.Mul(pool, &s, one, w, x[i*n:(i+1)*n], 1); err != nil {
						t.Fatal(err)
					}
					for r := 0; r < rows; r++ {
						if g, w := got[i*rows+r], one[r]; math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("n=%d: %s.Mul(m=%d) row %d col %d = %g (%#08x), %s.Mul(m=1) = %g (%#08x)", n, mm.Contract, m, i, r, g, math.Float32bits(g), mv.Contract, w, math.Float32bits(w))
						}
					}
				}
			}
		})
	}
}

// TestMatVecRowsEqualSingleRow: a matvec over many weight rows (the
// four-row kernels where a type has them, and the single-row kernel for the
// rest) gives each row bit for bit what the same row alone gives, with odd
// and even block counts and row counts that leave remainders.
func TestMatVecRowsEqualSingleRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, threads := range []int{1, 2} {
		pool := kern.NewPool(threads)
		for _, k := range kernels(kern.OpMatVec) {
			t.Run(fmt.Sprintf("%s/threads=%d", k.Contract, threads), func(t *testing.T) {
				for _, units := range []int{1, 2, 3, 7} {
					n, rows := minCols(k)*units, 11
					w := packed(t, k, kern.Weights{Type: k.Key.Type, Rows: rows, Cols: n, Data: randomWeights(rng, k.Key.Type, rows*n)})
					x := randomActs(rng, n)
					var s kern.Scratch
					got, check := guarded(rows)
					if err := k.Mul(pool, &s, got, w, x, 1); err != nil {
						t.Fatal(err)
					}
					check(t, k.Contract+".Mul")
					rb := len(w.Data) / rows
					one := make([]float32, 1)
					for r := 0; r < rows; r++ {
						wr := packed(t, k, kern.Weights{Type: w.Type, Rows: 1, Cols: n, Data: w.Data[r*rb : (r+1)*rb]})
						if err := k.Mul(pool, &s, one, wr, x, 1); err != nil {
							t.Fatal(err)
						}
						if math.Float32bits(got[r]) != math.Float32bits(one[0]) {
							t.Fatalf("n=%d: %s.Mul(%d rows) row %d = %g (%#08x), the row alone %g (%#08x)", n, k.Contract, rows, r, got[r], math.Float32bits(got[r]), one[0], math.Float32bits(one[0]))
						}
					}
				}
			})
		}
		pool.Close()
	}
}

// TestMulActsManyEqualsMulActs: one dispatch over several matrices gives each
// exactly what MulActs gives it alone, for decode (m = 1) and prefill.
func TestMulActsManyEqualsMulActs(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	pool := kern.NewPool(2)
	defer pool.Close()
	types := []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL}
	const n = 256
	for _, m := range []int{1, 6} {
		op := kern.OpMatMul
		if m == 1 {
			op = kern.OpMatVec
		}
		var jobs []kern.Job
		for i, typ := range types {
			k, err := kern.Select(op, typ)
			if err != nil {
				t.Fatal(err)
			}
			rows := 5 + 13*i
			w := packed(t, k, kern.Weights{Type: typ, Rows: rows, Cols: n, Data: randomWeights(rng, typ, rows*n)})
			jobs = append(jobs, kern.Job{K: k, W: w, Dst: make([]float32, m*rows)})
		}
		x := randomActs(rng, m*n)
		var s kern.Scratch
		var a kern.Acts
		if err := jobs[0].K.Convert(pool, &s, &a, x, m, n); err != nil {
			t.Fatal(err)
		}
		if err := kern.MulActsMany(pool, &s, &a, jobs); err != nil {
			t.Fatalf("MulActsMany(m=%d): %v", m, err)
		}
		for _, jb := range jobs {
			want := make([]float32, len(jb.Dst))
			if err := jb.K.MulActs(pool, &s, want, jb.W, &a); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(jb.Dst[i]) {
					t.Fatalf("MulActsMany(m=%d) %s[%d] = %g, MulActs %g", m, jb.K.Contract, i, jb.Dst[i], want[i])
				}
			}
		}
	}
}

func TestMulActsManyRefusesMixedFormats(t *testing.T) {
	pool := kern.NewPool(1)
	defer pool.Close()
	kq, _ := kern.Select(kern.OpMatVec, quant.Q8_0)
	kk, _ := kern.Select(kern.OpMatVec, quant.Q4_K)
	var s kern.Scratch
	var a kern.Acts
	if err := kq.Convert(pool, &s, &a, make([]float32, 256), 1, 256); err != nil {
		t.Fatal(err)
	}
	jobs := []kern.Job{
		{K: kq, W: kern.Weights{Type: quant.Q8_0, Rows: 1, Cols: 256, Data: make([]byte, 8*34)}, Dst: make([]float32, 1)},
		{K: kk, W: kern.Weights{Type: quant.Q4_K, Rows: 1, Cols: 256, Data: make([]byte, 144)}, Dst: make([]float32, 1)},
	}
	if err := kern.MulActsMany(pool, &s, &a, jobs); err == nil {
		t.Errorf("MulActsMany(Q8_0 acts, Q4_K job) = nil, want an error naming the activation format")
	}
	if err := kern.MulActsMany(pool, &s, &a, nil); err == nil {
		t.Errorf("MulActsMany(no jobs) = nil, want an error")
	}
}

func TestMulDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	pool := kern.NewPool(2)
	defer pool.Close()
	for _, m := range []int{1, 8} {
		op := kern.OpMatVec
		if m > 1 {
			op = kern.OpMatMul
		}
		k, _ := kern.Select(op, quant.Q4_K)
		w := packed(t, k, kern.Weights{Type: quant.Q4_K, Rows: 64, Cols: 512, Data: randomWeights(rng, quant.Q4_K, 64*512)})
		x := randomActs(rng, m*512)
		dst := make([]float32, m*64)
		var s kern.Scratch
		if err := k.Mul(pool, &s, dst, w, x, m); err != nil {
			t.Fatal(err)
		}
		if allocs := testing.AllocsPerRun(20, func() { _ = k.Mul(pool, &s, dst, w, x, m) }); allocs != 0 {
			t.Errorf("%s.Mul(m=%d) allocates %v times per call in steady state, want 0", k.Contract, m, allocs)
		}
	}
}
