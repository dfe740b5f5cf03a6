//go:build amd64 && !noasm

package kern_test

import (
	"errors"
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// avx2R16Types are the weight types with packed AVX2 kernels.
var avx2R16Types = []quant.Type{quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K}

// TestAVX2R16Selection: on the instruction sets of an AVX2-only CPU
// (kern.AVX2ISAs: the AVX-512 ones masked off) Select chooses the packed
// avx2r16 kernels of the types that have them and the unpacked avx2 ones
// of the others, exact chooses no packed kernel, and on this CPU's own
// sets avx512vnni16 still ranks above avx2r16. A CPU without AVX2 refuses
// the avx2r16 keys by their contract ids and the AVX2 sets by name.
func TestAVX2R16Selection(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K, quant.Q4_0} {
		has := false
		for _, x := range avx2R16Types {
			has = has || x == typ
		}
		for _, op := range []kern.Op{kern.OpMatVec, kern.OpMatMul} {
			key := kern.Key{Op: op, Type: typ, Backend: kern.Backend, ISA: kern.ISAAVX2R16}
			k, err := kern.Lookup(key)
			if !kern.Runnable(kern.ISAAVX2) {
				var r *refuse.Error
				if has && (!errors.As(err, &r) || r.By != key.Contract()) {
					t.Errorf("Lookup(%s) on a CPU without AVX2: err = %v, want a refusal by %s", key, err, key.Contract())
				}
				if _, err := kern.SelectOn(op, typ, kern.AVX2ISAs, false); err == nil {
					t.Errorf("SelectOn(%s, %s, AVX2ISAs) on a CPU without AVX2 succeeded", op, typ)
				}
				continue
			}
			if has != (err == nil) {
				t.Errorf("Lookup(%s) = %v, err %v; want registered = %v", key, k, err, has)
			}
			if has && !k.Packs() {
				t.Errorf("%s does not pack its weights", key)
			}
			sel, err := kern.SelectOn(op, typ, kern.AVX2ISAs, false)
			if err != nil {
				t.Fatal(err)
			}
			want := kern.ISAAVX2
			if has {
				want = kern.ISAAVX2R16
			}
			if sel.Key.ISA != want {
				t.Errorf("SelectOn(%s, %s, AVX2ISAs) = %s, want the %s kernel", op, typ, sel.Contract, want)
			}
			ex, err := kern.SelectOn(op, typ, kern.AVX2ISAs, true)
			if err != nil || ex.Key.ISA != kern.ISAAVX2 {
				t.Errorf("SelectOn(%s, %s, AVX2ISAs, exact) = %v, %v; want the avx2 kernel", op, typ, ex, err)
			}
			if all, _ := kern.Select(op, typ); has && kern.Runnable(kern.ISAAVX512VNNI16) && all.Key.ISA != kern.ISAAVX512VNNI16 {
				t.Errorf("Select(%s, %s) = %s on a CPU with AVX-512 VNNI, want avx512vnni16", op, typ, all.Contract)
			}
		}
	}
	if kern.Runnable(kern.ISAAVX512) {
		// Masking is by name: an instruction set outside the list is never
		// chosen, one this CPU lacks is refused.
		if k, err := kern.SelectOn(kern.OpMatMul, quant.F32, kern.AVX2ISAs, false); err != nil || k.Key.ISA == kern.ISAAVX512 {
			t.Errorf("SelectOn(matmul, F32, AVX2ISAs) = %v, %v; want no AVX-512 kernel", k, err)
		}
	}
}
