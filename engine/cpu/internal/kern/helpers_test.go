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

// halfFields lists, per weight type, the byte offsets of fp16 fields inside
// one block. Random blocks get these set to moderate values so that no scale
// is Inf or NaN; every other byte stays random.
var halfFields = map[quant.Type][]int{
	quant.Q4_0: {0}, quant.Q4_1: {0, 2}, quant.Q5_0: {0}, quant.Q5_1: {0, 2},
	quant.Q8_0: {0}, quant.Q2_K: {80, 82}, quant.Q3_K: {108}, quant.Q4_K: {0, 2},
	quant.Q5_K: {0, 2}, quant.Q6_K: {208}, quant.IQ4_NL: {0}, quant.IQ4_XS: {0},
	quant.TQ1_0: {52}, quant.TQ2_0: {64}, quant.Q1_0: {0}, quant.Q2_0: {0},
	quant.IQ2_XXS: {0}, quant.IQ2_XS: {0}, quant.IQ2_S: {0}, quant.IQ3_XXS: {0},
	quant.IQ3_S: {0}, quant.IQ1_S: {0},
}

// randHalf returns a finite half of moderate magnitude (2^-12 … 2^1), either sign.
func randHalf(rng *rand.Rand) uint16 {
	exp := uint16(3 + rng.IntN(13))
	return uint16(rng.IntN(2))<<15 | exp<<10 | uint16(rng.IntN(1024))
}

// randomWeights returns n values of type t as random blocks: random bits
// everywhere except scale fields, which are finite and moderate.
func randomWeights(rng *rand.Rand, t quant.Type, n int) []byte {
	info, err := quant.Lookup(t)
	if err != nil {
		panic(err)
	}
	nb := n / info.BlockSize
	b := make([]byte, nb*info.TypeSize)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	switch t {
	case quant.F32:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return b
	case quant.F16:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], randHalf(rng))
		}
		return b
	case quant.BF16:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(float32(rng.NormFloat64()))>>16))
		}
		return b
	}
	for ib := 0; ib < nb; ib++ {
		blk := b[ib*info.TypeSize : (ib+1)*info.TypeSize]
		for _, off := range halfFields[t] {
			binary.LittleEndian.PutUint16(blk[off:], randHalf(rng))
		}
		switch t {
		case quant.MXFP4:
			blk[0] = byte(110 + rng.IntN(30)) // 2^(e-128): 2^-18 … 2^11
		case quant.IQ1_M:
			h := randHalf(rng)
			for k := 0; k < 4; k++ {
				w := binary.LittleEndian.Uint16(blk[48+2*k:])
				w = w&0x0fff | (h>>(4*k)&15)<<12
				binary.LittleEndian.PutUint16(blk[48+2*k:], w)
			}
		}
	}
	return b
}

// randomActs returns n activation values: Gaussian with a few outliers.
func randomActs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(64) == 0 {
			x[i] *= 20
		}
	}
	return x
}

// fixtureWeights returns the ggml-quantized tensor "q" of the shared dequant
// fixture of type t (8 rows of 512) and its shape, or skips.
func fixtureWeights(tb testing.TB, t quant.Type) (data []byte, rows, cols int) {
	tb.Helper()
	dir := testutil.Fixtures(tb)
	f, err := gguf.Open(filepath.Join(dir, "dequant", t.String()+".gguf"))
	if err != nil {
		tb.Fatalf("open fixture: %v", err)
	}
	tb.Cleanup(func() { f.Close() })
	ti, ok := f.Tensor("q")
	if !ok {
		tb.Fatalf("fixture %s has no tensor q", t)
	}
	return f.Data(ti), int(ti.Shape[1]), int(ti.Shape[0])
}

// reference computes, in float64, the dot product of each weight row with
// each activation row after dequantizing both with engine/quant (the
// activation after its conversion to the kernel's format), and the matching
// tolerance of the kernel contract:
//
//	|got − want| ≤ (blocks + 8) · 2^-23 · Σ|w_i·a_i|
//
// where blocks is the number of weight blocks in the row (float32 rounding
// once per block product and once per accumulation, with a margin of two).
func reference(tb testing.TB, k *kern.Kernel, w kern.Weights, x []float32, m int) (want, tol []float64) {
	tb.Helper()
	n := w.Cols
	wf := make([]float32, w.Rows*n)
	if err := quant.Dequantize(w.Type, w.Data, wf); err != nil {
		tb.Fatalf("dequantize weights: %v", err)
	}
	af := make([]float32, m*n)
	for i := 0; i < m; i++ {
		ab := convertAct(tb, k.Act, x[i*n:(i+1)*n])
		if err := quant.Dequantize(k.Act, ab, af[i*n:(i+1)*n]); err != nil {
			tb.Fatalf("dequantize activations: %v", err)
		}
	}
	info, _ := quant.Lookup(w.Type)
	blocks := float64(n / info.BlockSize)
	// Q8_1 carries s = fp16(d32·Σq) with the unrounded float32 scale d32,
	// while its quants decode with fp16(d32); Q4_1/Q5_1 add m_w·s per block.
	// Both roundings (2^-11 relative each) are part of ggml's arithmetic, so
	// the tolerance includes Σ_b |m_b|·|s_b|·2^-10.
	var q81 []float64
	if k.Act == quant.Q8_1 {
		q81 = make([]float64, m*w.Rows)
		nb := n / 32
		for i := 0; i < m; i++ {
			ab := convertAct(tb, k.Act, x[i*n:(i+1)*n])
			for r := 0; r < w.Rows; r++ {
				row := w.Data[r*nb*info.TypeSize:]
				for b := 0; b < nb; b++ {
					mw := float64(quant.FP16ToFP32(binary.LittleEndian.Uint16(row[b*info.TypeSize+2:])))
					sa := float64(quant.FP16ToFP32(binary.LittleEndian.Uint16(ab[36*b+2:])))
					q81[i*w.Rows+r] += math.Abs(mw*sa) * 0x1p-10
				}
			}
		}
	}
	// TQ1_0 and TQ2_0 follow ggml's AVX2 arithmetic, which subtracts the
	// Q8_K bsums (sums of 16 or 32 consecutive activations) from int lanes
	// that hold other values' products: the lanes, whose float32 products
	// are rounded one by one, can exceed Σ|w·a| by up to 2·Σ|a| per super-
	// block, so the bound includes Σ_b |d_w·d_a|·2·Σ|q_a|.
	var tq []float64
	if w.Type == quant.TQ1_0 || w.Type == quant.TQ2_0 {
		dOff := map[quant.Type]int{quant.TQ1_0: 52, quant.TQ2_0: 64}[w.Type]
		nb := n / 256
		tq = make([]float64, m*w.Rows)
		for i := 0; i < m; i++ {
			ab := convertAct(tb, k.Act, x[i*n:(i+1)*n])
			for r := 0; r < w.Rows; r++ {
				row := w.Data[r*nb*info.TypeSize:]
				for b := 0; b < nb; b++ {
					dw := float64(quant.FP16ToFP32(binary.LittleEndian.Uint16(row[b*info.TypeSize+dOff:])))
					blk := ab[b*292:]
					da := float64(math.Float32frombits(binary.LittleEndian.Uint32(blk)))
					var sq float64
					for _, q := range blk[4:260] {
						sq += math.Abs(float64(int8(q)))
					}
					tq[i*w.Rows+r] += math.Abs(dw*da) * 2 * sq
				}
			}
		}
	}
	want = make([]float64, m*w.Rows)
	tol = make([]float64, m*w.Rows)
	for i := 0; i < m; i++ {
		for r := 0; r < w.Rows; r++ {
			var s, sa float64
			for c := 0; c < n; c++ {
				p := float64(wf[r*n+c]) * float64(af[i*n+c])
				s += p
				sa += math.Abs(p)
			}
			want[i*w.Rows+r] = s
			tol[i*w.Rows+r] = (blocks+8)*0x1p-23*sa + 1e-30
			if q81 != nil {
				tol[i*w.Rows+r] += q81[i*w.Rows+r]
			}
			if tq != nil {
				tol[i*w.Rows+r] += (blocks + 8) * 0x1p-23 * tq[i*w.Rows+r]
			}
		}
	}
	return want, tol
}

// convertAct converts one activation row to format act with kern's converter.
func convertAct(tb testing.TB, act quant.Type, x []float32) []byte {
	tb.Helper()
	info, _ := quant.Lookup(act)
	b := make([]byte, len(x)/info.BlockSize*info.TypeSize)
	switch act {
	case quant.F32:
		kern.ConvertF32(x, b)
	case quant.F16:
		kern.ConvertF16(x, b)
	case quant.BF16:
		kern.ConvertBF16(x, b)
	case quant.Q8_0:
		kern.QuantizeQ8_0(x, b)
	case quant.Q8_1:
		kern.QuantizeQ8_1(x, b)
	case quant.Q8_K:
		kern.QuantizeQ8_K(x, b)
	default:
		tb.Fatalf("no converter for %s", act)
	}
	return b
}

// guard is the sentinel written around output buffers.
const guard = -7.25e30

const nGuard = 17

// guarded returns a slice of n values with nGuard sentinels on each side of
// it in the backing array, and a check that the sentinels are intact.
func guarded(n int) ([]float32, func(tb testing.TB, call string)) {
	buf := make([]float32, n+2*nGuard)
	for i := range buf {
		buf[i] = guard
	}
	return buf[nGuard : nGuard+n : nGuard+n], func(tb testing.TB, call string) {
		tb.Helper()
		for i := 0; i < nGuard; i++ {
			if buf[i] != guard || buf[nGuard+n+i] != guard {
				tb.Fatalf("%s wrote outside dst (guard %d)", call, i)
			}
		}
	}
}

// kernels returns the registered kernels for op that this machine runs.
func kernels(op kern.Op) []*kern.Kernel {
	var out []*kern.Kernel
	for _, e := range kern.List() {
		if e.Key.Op != op || !e.Runnable {
			continue
		}
		k, err := kern.Lookup(e.Key)
		if err != nil {
			panic(err)
		}
		out = append(out, k)
	}
	return out
}

// minCols is the row-length unit of kernel k's tests: rowUnit, or 37 for
// float types, so that rows exercise both the vector loop and its tail.
func minCols(k *kern.Kernel) int {
	if u := rowUnit(k); u > 1 {
		return u
	}
	return 37
}

// rowUnit is the smallest row length kernel k accepts: the least common
// multiple of its weight and activation block sizes.
func rowUnit(k *kern.Kernel) int {
	wi, _ := quant.Lookup(k.Key.Type)
	ai, _ := quant.Lookup(k.Act)
	a, b := wi.BlockSize, ai.BlockSize
	g, h := a, b
	for h != 0 {
		g, h = h, g%h
	}
	return a / g * b
}

// packed returns w as k multiplies it: packed (Kernel.PackWeights) for a
// packed kernel, as it is for the others.
func packed(tb testing.TB, k *kern.Kernel, w kern.Weights) kern.Weights {
	tb.Helper()
	p, err := k.PackWeights(w)
	if err != nil {
		tb.Fatalf("%s: %v", k.Contract, err)
	}
	return p
}
