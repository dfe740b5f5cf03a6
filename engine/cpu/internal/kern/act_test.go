package kern_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// fixtureSrcAndQ returns the F32 source rows and ggml's quantization of them
// from the shared dequant fixture of type t.
func fixtureSrcAndQ(tb testing.TB, t quant.Type) ([]float32, []byte) {
	tb.Helper()
	dir := testutil.Fixtures(tb)
	f, err := gguf.Open(filepath.Join(dir, "dequant", t.String()+".gguf"))
	if err != nil {
		tb.Fatalf("open fixture: %v", err)
	}
	tb.Cleanup(func() { f.Close() })
	src, ok1 := f.Tensor("src")
	q, ok2 := f.Tensor("q")
	if !ok1 || !ok2 {
		tb.Fatalf("fixture %s lacks src or q", t)
	}
	raw := f.Data(src)
	x := make([]float32, len(raw)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return x, f.Data(q)
}

// TestQuantizeQ8_KMatchesGGML: ggml-cpu quantizes Q8_K activations with
// quantize_row_q8_K_ref on every platform, and the fixture's q was made with
// it, so kern must reproduce it bit for bit (bsums included).
func TestQuantizeQ8_KMatchesGGML(t *testing.T) {
	x, want := fixtureSrcAndQ(t, quant.Q8_K)
	got := make([]byte, len(want))
	kern.QuantizeQ8_K(x, got)
	for b := 0; b < len(want)/292; b++ {
		g, w := got[292*b:292*b+292], want[292*b:292*b+292]
		if string(g) != string(w) {
			// An all-zero source block leaves ggml's bsums unwritten (garbage);
			// kern writes zeros. Compare d and qs only there.
			if string(g[:260]) == string(w[:260]) && allZero(x[256*b:256*b+256]) {
				continue
			}
			t.Errorf("QuantizeQ8_K block %d differs from ggml's quantize_row_q8_K_ref", b)
		}
	}
}

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestQuantizeQ8_0AgainstGGMLRef: the fixture was made with ggml's portable
// quantize_row_q8_0_ref (d = amax/127, q = roundf(x·(1/d))); kern follows the
// x86 path (q = round-half-even(x·(127/amax))). The scales must be equal and a
// quant may differ only by one, and only where x·127/amax lies within a few
// ulps of a half-integer.
func TestQuantizeQ8_0AgainstGGMLRef(t *testing.T) {
	x, want := fixtureSrcAndQ(t, quant.Q8_0)
	got := make([]byte, len(want))
	kern.QuantizeQ8_0(x, got)
	checkQ8Like(t, "QuantizeQ8_0", x, got, want, 34, 2)
}

func checkQ8Like(t *testing.T, call string, x []float32, got, want []byte, bsz, qoff int) {
	t.Helper()
	diffs := 0
	for b := 0; b < len(want)/bsz; b++ {
		g, w := got[bsz*b:bsz*b+bsz], want[bsz*b:bsz*b+bsz]
		if g[0] != w[0] || g[1] != w[1] {
			t.Fatalf("%s block %d: d = %#04x, ggml %#04x", call, b, binary.LittleEndian.Uint16(g), binary.LittleEndian.Uint16(w))
		}
		var amax float32
		for _, v := range x[32*b : 32*b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		for j := 0; j < 32; j++ {
			gq, wq := int8(g[qoff+j]), int8(w[qoff+j])
			if gq == wq {
				continue
			}
			v := float64(x[32*b+j] * (127 / amax))
			frac := math.Abs(v - math.Trunc(v))
			if d := int(gq) - int(wq); d < -1 || d > 1 || math.Abs(frac-0.5) > 1e-5 {
				t.Fatalf("%s block %d q[%d] = %d, ggml %d (x·127/amax = %.9g is not at a tie)", call, b, j, gq, wq, v)
			}
			diffs++
		}
	}
	t.Logf("%s: %d quants differ by one at ties from ggml's portable reference", call, diffs)
}

func TestQuantizeQ8_0Properties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tests := []struct {
		name string
		x    []float32
	}{
		{"gaussian", randomActs(rng, 4096)},
		{"zeros", make([]float32, 64)},
		{"ties", []float32{0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127, -127, 63.5, -63.5, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}},
		{"denormal", []float32{1e-40, -1e-41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q0 := make([]byte, len(tc.x)/32*34)
			q1 := make([]byte, len(tc.x)/32*36)
			kern.QuantizeQ8_0(tc.x, q0)
			kern.QuantizeQ8_1(tc.x, q1)
			for b := 0; b < len(tc.x)/32; b++ {
				xs := tc.x[32*b : 32*b+32]
				var amax float32
				for _, v := range xs {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				id := float32(0)
				if amax != 0 {
					id = 127 / amax
				}
				wantD := quant.FP32ToFP16(amax / 127)
				b0, b1 := q0[34*b:], q1[36*b:]
				if got := binary.LittleEndian.Uint16(b0); got != wantD {
					t.Errorf("QuantizeQ8_0 block %d d = %#04x, want %#04x", b, got, wantD)
				}
				if got := binary.LittleEndian.Uint16(b1); got != wantD {
					t.Errorf("QuantizeQ8_1 block %d d = %#04x, want %#04x", b, got, wantD)
				}
				sum := int32(0) // summed before narrowing, wrapping, as ggml's hsum_i32_8
				for j, v := range xs {
					want := int8(max(-128, min(127, x86i32(v*id))))
					if int8(b0[2+j]) != want || int8(b1[4+j]) != want {
						t.Errorf("block %d q[%d] = %d / %d, want %d", b, j, int8(b0[2+j]), int8(b1[4+j]), want)
					}
					sum += x86i32(v * id)
				}
				if got, want := binary.LittleEndian.Uint16(b1[2:]), quant.FP32ToFP16(amax/127*float32(sum)); got != want {
					t.Errorf("QuantizeQ8_1 block %d s = %#04x, want %#04x", b, got, want)
				}
			}
		})
	}
}

func TestConvertF16AndBF16MatchQuant(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, 1<<16)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = math.Float32frombits(rng.Uint32()) // every bit pattern: NaN, Inf, subnormal
		case 1:
			x[i] = float32(rng.NormFloat64() * 1e-5) // half subnormals
		default:
			x[i] = float32(rng.NormFloat64() * 100)
		}
	}
	h := make([]byte, 2*len(x))
	bf := make([]byte, 2*len(x))
	kern.ConvertF16(x, h)
	kern.ConvertBF16(x, bf)
	for i, v := range x {
		if got, want := binary.LittleEndian.Uint16(h[2*i:]), quant.FP32ToFP16(v); got != want && !(isNaN16(got) && isNaN16(want)) {
			t.Fatalf("ConvertF16(%g = %#08x) = %#04x, quant.FP32ToFP16 = %#04x", v, math.Float32bits(v), got, want)
		}
		if got, want := binary.LittleEndian.Uint16(bf[2*i:]), quant.FP32ToBF16(v); got != want {
			t.Fatalf("ConvertBF16(%g = %#08x) = %#04x, quant.FP32ToBF16 = %#04x", v, math.Float32bits(v), got, want)
		}
	}
}

// x86i32 is VCVTPS2DQ: round half to even; NaN and out-of-range values
// become INT32_MIN (so with amax below 127/FLT_MAX, where 127/amax
// overflows, every quant saturates to -128 on x86).
func x86i32(v float32) int32 {
	r := math.RoundToEven(float64(v))
	if !(r >= -0x1p31 && r < 0x1p31) {
		return math.MinInt32
	}
	return int32(r)
}

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

func TestQuantizersPanicOnBadLengths(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"Q8_0 partial block", func() { kern.QuantizeQ8_0(make([]float32, 31), make([]byte, 34)) }},
		{"Q8_0 short dst", func() { kern.QuantizeQ8_0(make([]float32, 32), make([]byte, 33)) }},
		{"Q8_1 short dst", func() { kern.QuantizeQ8_1(make([]float32, 32), make([]byte, 35)) }},
		{"Q8_K partial block", func() { kern.QuantizeQ8_K(make([]float32, 255), make([]byte, 292)) }},
		{"F16 short dst", func() { kern.ConvertF16(make([]float32, 3), make([]byte, 5)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tc.name)
				}
			}()
			tc.f()
		})
	}
}

// TestQuantizersMatchQuantBitExact: engine/quant's QuantizeRowQ8_0/Q8_1/Q8_K
// implement the same ggml-cpu activation semantics independently; on finite
// inputs (quant refuses NaN and infinities) every byte must agree.
func TestQuantizersMatchQuantBitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	n := 256 * 64
	inputs := map[string][]float32{}
	g, ties, tiny, mixed := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
		ties[i] = float32(rng.IntN(255)-127) / 2
		tiny[i] = float32(rng.NormFloat64() * 1e-30)
		mixed[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6)))
	}
	inputs["gaussian"], inputs["ties"], inputs["tiny"], inputs["mixed"] = g, ties, tiny, mixed
	inputs["zeros"] = make([]float32, n)
	tests := []struct {
		name string
		size int
		kern func([]float32, []byte)
		ref  func([]float32, []byte) error
	}{
		{"Q8_0", 34, kern.QuantizeQ8_0, quant.QuantizeRowQ8_0},
		{"Q8_1", 36, kern.QuantizeQ8_1, quant.QuantizeRowQ8_1},
		{"Q8_K", 292, kern.QuantizeQ8_K, quant.QuantizeRowQ8_K},
	}
	for _, tc := range tests {
		for name, x := range inputs {
			per, blk := 32, tc.size
			if tc.name == "Q8_K" {
				per = 256
			}
			got := make([]byte, len(x)/per*blk)
			want := make([]byte, len(got))
			tc.kern(x, got)
			if err := tc.ref(x, want); err != nil {
				t.Fatalf("quant.QuantizeRow%s(%s): %v", tc.name, name, err)
			}
			for b := 0; b < len(got)/blk; b++ {
				if string(got[b*blk:(b+1)*blk]) != string(want[b*blk:(b+1)*blk]) {
					t.Errorf("kern.Quantize%s(%s) block %d differs from quant.QuantizeRow%s", tc.name, name, b, tc.name)
					break
				}
			}
		}
	}
}
