//go:build amd64 && !noasm

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

// TestAVX512KernelsAreChosenOnlyWithTheFeatures: the avx512vnni kernels
// (and the packed avx512vnni16 ones of Q8_0, Q5_0, Q4_K and Q6_K) are
// registered in every amd64 build; on a CPU without AVX-512 VNNI Lookup
// refuses them by their contract id and Select does not pick them, and on
// one with it Select picks them (avx512vnni16 where registered).
func TestAVX512KernelsAreChosenOnlyWithTheFeatures(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		for _, op := range []kern.Op{kern.OpMatVec, kern.OpMatMul} {
			key := kern.Key{Op: op, Type: typ, Backend: kern.Backend, ISA: kern.ISAAVX512VNNI}
			found := false
			for _, e := range kern.List() {
				if e.Key == key {
					found = true
					if e.Runnable != kern.Runnable(kern.ISAAVX512VNNI) {
						t.Errorf("List: %s runnable = %v, CPU has it = %v", key, e.Runnable, kern.Runnable(kern.ISAAVX512VNNI))
					}
				}
			}
			if !found {
				t.Errorf("List has no %s", key)
			}
			k, err := kern.Lookup(key)
			sel, serr := kern.Select(op, typ)
			want := kern.ISAAVX512VNNI
			if typ == quant.Q8_0 || typ == quant.Q5_0 || typ == quant.Q4_K || typ == quant.Q6_K {
				want = kern.ISAAVX512VNNI16 // packed, preferred where VNNI runs
			}
			if serr != nil {
				t.Fatalf("Select(%s, %s): %v", op, typ, serr)
			}
			if kern.Runnable(kern.ISAAVX512VNNI) {
				if err != nil {
					t.Errorf("Lookup(%s) on a CPU with AVX-512 VNNI: %v", key, err)
				} else if k.Contract != key.Contract() {
					t.Errorf("Lookup(%s).Contract = %s", key, k.Contract)
				}
				if sel.Key.ISA != want {
					t.Errorf("Select(%s, %s) = %s on a CPU with AVX-512 VNNI", op, typ, sel.Contract)
				}
				continue
			}
			var r *refuse.Error
			if !errors.As(err, &r) || r.By != key.Contract() {
				t.Errorf("Lookup(%s) on a CPU without AVX-512 VNNI: err = %v, want a refusal by %s", key, err, key.Contract())
			}
			if typ == quant.Q8_0 || typ == quant.Q5_0 || typ == quant.Q4_K || typ == quant.Q6_K {
				k16 := key
				k16.ISA = kern.ISAAVX512VNNI16
				if _, err := kern.Lookup(k16); !errors.As(err, &r) || r.By != k16.Contract() {
					t.Errorf("Lookup(%s) on a CPU without AVX-512 VNNI: err = %v, want a refusal by %s", k16, err, k16.Contract())
				}
			}
			if sel.Key.ISA == kern.ISAAVX512VNNI || sel.Key.ISA == kern.ISAAVX512VNNI16 {
				t.Errorf("Select(%s, %s) = %s on a CPU without AVX-512 VNNI", op, typ, sel.Contract)
			}
		}
	}
}

// TestAssemblyISAsAgreeBitForBit: every runnable assembly kernel of a key
// gives bit for bit the AVX2 kernel's results (they all follow ggml's AVX2
// float order), for decode (m = 1, eleven weight rows: the four-row kernels
// and the single-row remainder) and prefill (m = 13: eight-, four- and
// single-row kernels), with odd and even block counts.
func TestAssemblyISAsAgreeBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	pool := kern.NewPool(2)
	defer pool.Close()
	for _, e := range kern.List() {
		if !e.Runnable || e.Key.ISA == kern.ISAGo || e.Key.ISA == kern.ISAAVX2 {
			continue
		}
		if e.Key.ISA == kern.ISAAVX512VNNI16 || e.Key.ISA == kern.ISAAVX2R16 || e.Key.ISA == kern.ISAAVX512R16 || e.Key.ISA == kern.ISAAVX512BF16 {
			// Packed kernels sum in their own order (one float32 chain per
			// pair, not ggml's eight lanes): TestMulR16 and TestMulWithGoR16F
			// hold them bit for bit to that chain, the property tests to the
			// contract.
			continue
		}
		k, err := kern.Lookup(e.Key)
		if err != nil {
			t.Fatal(err)
		}
		base := e.Key
		base.ISA = kern.ISAAVX2
		ref, err := kern.Lookup(base)
		if err != nil {
			t.Fatalf("%s has no AVX2 twin: %v", e.Contract, err)
		}
		t.Run(e.Contract, func(t *testing.T) {
			m := 1
			if e.Key.Op == kern.OpMatMul {
				m = 13
			}
			for _, units := range []int{1, 2, 3, 7, 28} {
				n, rows := minCols(k)*units, 11
				w := kern.Weights{Type: e.Key.Type, Rows: rows, Cols: n, Data: randomWeights(rng, e.Key.Type, rows*n)}
				x := randomActs(rng, m*n)
				var s kern.Scratch
				got, check := guarded(m * rows)
				if err := k.Mul(pool, &s, got, w, x, m); err != nil {
					t.Fatal(err)
				}
				check(t, fmt.Sprintf("%s.Mul", k.Contract))
				want := make([]float32, m*rows)
				if err := ref.Mul(pool, &s, want, w, x, m); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d: %s.Mul(m=%d)[%d] = %g (%#08x), %s gives %g (%#08x)", n, k.Contract, m, i, got[i], math.Float32bits(got[i]), ref.Contract, want[i], math.Float32bits(want[i]))
					}
				}
			}
		})
	}
}
