package quant_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// TestQuantizeRowQ8RoundsHalfToEven pins the one place where ggml-cpu's x86
// activation quantizer differs from the reference: with amax = 127 (so the
// scale is exactly 1) the value 2.5 becomes 2 (round half to even), where
// quantize_row_q8_0_ref gives 3 (round half away from zero).
func TestQuantizeRowQ8RoundsHalfToEven(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 127, 2.5, -3.5, 0.5
	tests := []struct {
		name     string
		typ      quant.Type
		row      func([]float32, []byte) error
		qOff     int
		wantSIMD []int8
		wantRef  []int8
	}{
		{"Q8_0", quant.Q8_0, quant.QuantizeRowQ8_0, 2, []int8{127, 2, -4, 0}, []int8{127, 3, -4, 1}},
		{"Q8_1", quant.Q8_1, quant.QuantizeRowQ8_1, 4, []int8{127, 2, -4, 0}, []int8{127, 3, -4, 1}},
	}
	for _, tc := range tests {
		info, _ := quant.Lookup(tc.typ)
		simd, ref := make([]byte, info.TypeSize), make([]byte, info.TypeSize)
		if err := tc.row(x, simd); err != nil {
			t.Fatalf("QuantizeRow%s: %v", tc.name, err)
		}
		if err := quant.Quantize(tc.typ, x, ref); err != nil {
			t.Fatalf("Quantize(%s): %v", tc.name, err)
		}
		for i := range tc.wantSIMD {
			if got := int8(simd[tc.qOff+i]); got != tc.wantSIMD[i] {
				t.Errorf("QuantizeRow%s code %d = %d, want %d", tc.name, i, got, tc.wantSIMD[i])
			}
			if got := int8(ref[tc.qOff+i]); got != tc.wantRef[i] {
				t.Errorf("Quantize(%s) code %d = %d, want %d", tc.name, i, got, tc.wantRef[i])
			}
		}
		if !bytes.Equal(simd[:2], ref[:2]) {
			t.Errorf("%s: QuantizeRow d %x differs from the reference d %x", tc.name, simd[:2], ref[:2])
		}
	}
}

// TestQuantizeRowQ8AgreesWithReference: on random rows the x86 activation
// quantizers store the same scales as the reference and codes within one of
// it; Q8_K is the reference itself.
func TestQuantizeRowQ8AgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, 4*r.Float64()-2))
	}
	diffs := 0
	for _, tc := range []struct {
		typ  quant.Type
		row  func([]float32, []byte) error
		qOff int
	}{
		{quant.Q8_0, quant.QuantizeRowQ8_0, 2},
		{quant.Q8_1, quant.QuantizeRowQ8_1, 4},
	} {
		info, _ := quant.Lookup(tc.typ)
		simd, ref := make([]byte, len(x)/32*info.TypeSize), make([]byte, len(x)/32*info.TypeSize)
		if err := tc.row(x, simd); err != nil {
			t.Fatal(err)
		}
		if err := quant.Quantize(tc.typ, x, ref); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < len(ref); b += info.TypeSize {
			if !bytes.Equal(simd[b:b+2], ref[b:b+2]) {
				t.Fatalf("%s block %d: d differs", info.Name, b/info.TypeSize)
			}
			for i := b + tc.qOff; i < b+info.TypeSize; i++ {
				if d := int(int8(simd[i])) - int(int8(ref[i])); d < -1 || d > 1 {
					t.Fatalf("%s byte %d: code %d vs reference %d", info.Name, i, int8(simd[i]), int8(ref[i]))
				} else if d != 0 {
					diffs++
				}
			}
		}
	}
	t.Logf("x86 activation codes differing by one from the reference: %d of %d", diffs, 2*len(x))
	k1, k2 := make([]byte, len(x)/256*292), make([]byte, len(x)/256*292)
	if err := quant.QuantizeRowQ8_K(x, k1); err != nil {
		t.Fatal(err)
	}
	if err := quant.Quantize(quant.Q8_K, x, k2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) {
		t.Errorf("QuantizeRowQ8_K differs from Quantize(Q8_K)")
	}
}

func TestQuantizeRowQ8RefusesBadInput(t *testing.T) {
	x := make([]float32, 64)
	x[40] = float32(math.NaN())
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"partial", quant.QuantizeRowQ8_0(make([]float32, 31), make([]byte, 34)), "not a multiple"},
		{"short dst", quant.QuantizeRowQ8_1(make([]float32, 32), make([]byte, 35)), "need 36 bytes"},
		{"NaN", quant.QuantizeRowQ8_0(x, make([]byte, 68)), "value 40 is NaN"},
		{"Q8_K partial", quant.QuantizeRowQ8_K(make([]float32, 32), make([]byte, 292)), "not a multiple"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, tc.err, tc.want)
		}
	}
}
