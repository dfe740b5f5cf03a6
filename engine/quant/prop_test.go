package quant_test

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

	"github.com/aprqa/apr/engine/quant"
)

var propSeed = flag.Int64("quant.seed", 0, "gopter seed for the quant property tests (0: time-based; the seed is logged)")

// errBound is a format's accuracy promise: after Quantize then Dequantize,
// every value of a block is within Rel*max|x in the block| + Abs of its
// input, for blocks whose max |x| lies in [MinAbs, MaxAbs] (or is 0). The
// block is the format's block (one value for F16/BF16, 256 for k-quants).
type errBound struct {
	Rel, Abs       float64
	MinAbs, MaxAbs float64
}

// fp16Ulp is the absolute rounding error of an fp16 scale in the subnormal
// range (half the spacing 2^-24); code*fp16Ulp bounds the error it causes.
const fp16Ulp = 0x1p-25

// Error bounds per format. The plain block formats' bounds follow from the
// code step and the fp16 rounding of their scale (comments give the terms);
// the k-quant and IQ4 bounds are engineering bounds (their scale searches
// have no closed form): TestRoundTripBoundsHold logs the worst measured ratio
// so the margin stays visible.
var (
	// F16: round to nearest, relative 2^-11; subnormal spacing 2^-24.
	BoundF16 = errBound{Rel: 0x1p-11, Abs: fp16Ulp, MaxAbs: 65504}
	// BF16: 8 significant bits, relative 2^-8; float32 subnormals 2^-134.
	BoundBF16 = errBound{Rel: 0x1p-8, Abs: 0x1p-134, MaxAbs: 3.0e38}
	// Q8_0/Q8_1: d = amax/127, half a step + 127 * fp16 rounding of d.
	BoundQ8_0 = errBound{Rel: 0.5/127 + 0x1p-11, Abs: 127 * fp16Ulp, MaxAbs: 8e6}
	// Q8_K: float32 d, half a step (plus float32 rounding).
	BoundQ8_K = errBound{Rel: 0.5 / 127 * 1.003, Abs: 0, MaxAbs: 1e30}
	// Q4_0: d = max/-8; the opposite extreme clips at 7d: amax/8.
	BoundQ4_0 = errBound{Rel: 1.0/8 + 8*0x1p-11, Abs: 8 * fp16Ulp, MaxAbs: 5e5}
	// Q4_1: d = (max-min)/15 <= 2amax/15, half a step + rounding of d and m.
	BoundQ4_1 = errBound{Rel: 1.0/15 + 3*0x1p-11, Abs: 16 * fp16Ulp, MaxAbs: 65504}
	// Q5_0: d = max/-16; the opposite extreme clips at 15d: amax/16.
	BoundQ5_0 = errBound{Rel: 1.0/16 + 0x1p-11, Abs: 16 * fp16Ulp, MaxAbs: 1e6}
	// Q5_1: d <= 2amax/31, half a step + rounding of d and m.
	BoundQ5_1 = errBound{Rel: 1.0/31 + 3*0x1p-11, Abs: 32 * fp16Ulp, MaxAbs: 65504}
	// Q1_0: ±mean|x|, off by at most amax.
	BoundQ1_0 = errBound{Rel: 1 + 0x1p-11, Abs: fp16Ulp, MaxAbs: 65504}
	// Q2_0 and the ternary TQ1_0/TQ2_0: d = amax, half a step.
	BoundQ2_0 = errBound{Rel: 0.5 + 2*0x1p-11, Abs: 2 * fp16Ulp, MaxAbs: 65504}
	BoundTQ   = errBound{Rel: 0.5 + 0x1p-11, Abs: fp16Ulp, MaxAbs: 65504}
	// MXFP4: power-of-two scale 2^(floor(log2 amax)-2); clipping above 1.5*2^k
	// and the widest gap (4..6) are both <= amax/4. Exponents below -125 wrap.
	BoundMXFP4 = errBound{Rel: 0.25, Abs: 0, MinAbs: 0x1p-124, MaxAbs: 3e38}
	// NVFP4: UE4M3 scale amax/6 (2^-9..448): the widest gap plus the scale's
	// rounding; below 0.09 the subnormal scale adds up to ~0.007.
	BoundNVFP4 = errBound{Rel: 0.25, Abs: 0.008, MaxAbs: 6 * 448}
	// Q2_K: ggml weights its (scale, min) fit by |x|, so zeros in a sparse
	// sub-block carry no weight and may decode anywhere in that sub-block's
	// 2-bit range (measured up to 0.64*amax on sparse blocks).
	BoundQ2_K = errBound{Rel: 1.0, Abs: 2 * 64 * fp16Ulp, MaxAbs: 65504}
	// The other k-quants and IQ4 (engineering bounds; 30000 random sparse and
	// 20000 mixed blocks stayed below about 3/4 of each). Abs is twice the
	// codes times the fp16 scale's subnormal rounding: a block whose scale
	// rounds to 0 decodes to 0, an error of up to that much.
	BoundQ3_K   = errBound{Rel: 0.375, Abs: 2 * 128 * fp16Ulp, MaxAbs: 65504}
	BoundQ4_K   = errBound{Rel: 0.15, Abs: 4 * 63 * 15 * fp16Ulp, MaxAbs: 65504}
	BoundQ5_K   = errBound{Rel: 0.09, Abs: 4 * 63 * 31 * fp16Ulp, MaxAbs: 65504}
	BoundQ6_K   = errBound{Rel: 0.035, Abs: 2 * 128 * 33 * fp16Ulp, MaxAbs: 65504}
	BoundIQ4_NL = errBound{Rel: 0.2, Abs: 2 * 127 * fp16Ulp, MaxAbs: 65504}
	BoundIQ4_XS = errBound{Rel: 0.2, Abs: 2 * 32 * 127 * fp16Ulp, MaxAbs: 65504}
)

var bounds = map[quant.Type]errBound{
	quant.F32: {MaxAbs: math.MaxFloat32},
	quant.F16: BoundF16, quant.BF16: BoundBF16,
	quant.Q8_0: BoundQ8_0, quant.Q8_1: BoundQ8_0, quant.Q8_K: BoundQ8_K,
	quant.Q4_0: BoundQ4_0, quant.Q4_1: BoundQ4_1, quant.Q5_0: BoundQ5_0, quant.Q5_1: BoundQ5_1,
	quant.Q1_0: BoundQ1_0, quant.Q2_0: BoundQ2_0, quant.TQ1_0: BoundTQ, quant.TQ2_0: BoundTQ,
	quant.MXFP4: BoundMXFP4, quant.NVFP4: BoundNVFP4,
	quant.Q2_K: BoundQ2_K, quant.Q3_K: BoundQ3_K, quant.Q4_K: BoundQ4_K, quant.Q5_K: BoundQ5_K, quant.Q6_K: BoundQ6_K,
	quant.IQ4_NL: BoundIQ4_NL, quant.IQ4_XS: BoundIQ4_XS,
}

// quantizable returns every type Quantize supports, failing if one has no
// stated bound.
func quantizable(t *testing.T) []quant.Info {
	var out []quant.Info
	for _, in := range quant.All() {
		if !quant.CanQuantize(in.Type) {
			continue
		}
		if _, ok := bounds[in.Type]; !ok {
			t.Fatalf("%s has a quantizer but no stated error bound", in.Name)
		}
		out = append(out, in)
	}
	return out
}

func propParams(t *testing.T) *gopter.TestParameters {
	seed := *propSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("gopter seed %d (rerun with: go test ./engine/quant -run '%s' -quant.seed=%d)", seed, t.Name(), seed)
	p := gopter.DefaultTestParametersWithSeed(seed)
	p.MinSuccessfulTests = 60
	return p
}

// blockSpec describes generated input: a distribution, a decimal scale and a
// seed for the values.
type blockSpec struct {
	Kind  int     // 0 gaussian, 1 uniform, 2 gaussian + outliers, 3 positive, 4 constant, 5 ramp, 6 mostly zero
	Log10 float64 // scale = 10^Log10
	Seed  uint64
}

func (s blockSpec) String() string {
	return fmt.Sprintf("{kind %d, scale 1e%.2f, seed %d}", s.Kind, s.Log10, s.Seed)
}

func genBlockSpec() gopter.Gen {
	return gopter.CombineGens(gen.IntRange(0, 6), gen.Float64Range(-7, 4.5), gen.UInt64()).Map(func(v []any) blockSpec {
		return blockSpec{Kind: v[0].(int), Log10: v[1].(float64), Seed: v[2].(uint64)}
	})
}

// values fills n values from s.
func (s blockSpec) values(n int) []float32 {
	r := rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15))
	scale := math.Pow(10, s.Log10)
	x := make([]float32, n)
	for i := range x {
		var v float64
		switch s.Kind {
		case 0:
			v = r.NormFloat64()
		case 1:
			v = 2*r.Float64() - 1
		case 2:
			v = r.NormFloat64()
			if r.IntN(32) == 0 {
				v *= 20 + 60*r.Float64()
			}
		case 3:
			v = r.Float64()
		case 4:
			v = 1
		case 5:
			v = -1 + 2*float64(i)/float64(n-1)
		case 6:
			if r.IntN(8) == 0 {
				v = r.NormFloat64()
			}
		}
		x[i] = float32(v * scale)
	}
	return x
}

// checkRoundTrip quantizes x as t, dequantizes it and returns a description
// of the first value outside the bound ("" if none) and the worst ratio
// err/(Rel*amax+Abs) seen.
func checkRoundTrip(t quant.Type, x []float32) (string, float64) {
	in, _ := quant.Lookup(t)
	b := bounds[t]
	q := make([]byte, len(x)/in.BlockSize*in.TypeSize)
	if err := quant.Quantize(t, x, q); err != nil {
		return fmt.Sprintf("Quantize(%s): %v", in.Name, err), 0
	}
	y := make([]float32, len(x))
	if err := quant.Dequantize(t, q, y); err != nil {
		return fmt.Sprintf("Dequantize(%s): %v", in.Name, err), 0
	}
	worst := 0.0
	for s := 0; s < len(x); s += in.BlockSize {
		amax := 0.0
		for _, v := range x[s : s+in.BlockSize] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		inDomain := amax == 0 || (amax >= b.MinAbs && amax <= b.MaxAbs)
		limit := b.Rel*amax + b.Abs
		for i := s; i < s+in.BlockSize; i++ {
			if math.IsNaN(float64(y[i])) || math.IsInf(float64(y[i]), 0) {
				if inDomain {
					return fmt.Sprintf("%s value %d: %g decodes to %g", in.Name, i, x[i], y[i]), worst
				}
				continue
			}
			if !inDomain {
				continue
			}
			e := math.Abs(float64(x[i]) - float64(y[i]))
			if e > limit {
				return fmt.Sprintf("%s value %d: %g decodes to %g, error %g > bound %g (block max %g)", in.Name, i, x[i], y[i], e, limit, amax), worst
			}
			if limit > 0 {
				worst = math.Max(worst, e/limit)
			}
		}
	}
	return "", worst
}

func TestRoundTripBoundsHold(t *testing.T) {
	for _, in := range quantizable(t) {
		t.Run(in.Name, func(t *testing.T) {
			worst := 0.0
			props := gopter.NewProperties(propParams(t))
			props.Property("dequant(quant(x)) within bound", prop.ForAll(func(s blockSpec, blocks int) string {
				msg, w := checkRoundTrip(in.Type, s.values(blocks*max(in.BlockSize, 32)))
				worst = max(worst, w)
				return msg
			}, genBlockSpec(), gen.IntRange(1, 3)))
			props.TestingRun(t)
			t.Logf("%s: worst error used %.1f%% of the bound", in.Name, 100*worst)
		})
	}
}

// TestBlocksAreIndependent: quantizing or dequantizing a row gives the
// concatenation of doing it block by block (no state crosses a block
// boundary, and block i is read from and written to its own offset).
func TestBlocksAreIndependent(t *testing.T) {
	for _, in := range quantizable(t) {
		t.Run(in.Name, func(t *testing.T) {
			props := gopter.NewProperties(propParams(t))
			props.Property("row = concatenated blocks", prop.ForAll(func(s1, s2 blockSpec) string {
				bs := in.BlockSize
				x := append(s1.values(max(bs, 32)), s2.values(max(bs, 32))...)
				nb := len(x) / bs
				row := make([]byte, nb*in.TypeSize)
				if err := quant.Quantize(in.Type, x, row); err != nil {
					return err.Error()
				}
				for b := range nb {
					one := make([]byte, in.TypeSize)
					if err := quant.Quantize(in.Type, x[b*bs:(b+1)*bs], one); err != nil {
						return err.Error()
					}
					if string(one) != string(row[b*in.TypeSize:(b+1)*in.TypeSize]) {
						return fmt.Sprintf("block %d quantized alone differs from within the row", b)
					}
				}
				y := make([]float32, len(x))
				if err := quant.Dequantize(in.Type, row, y); err != nil {
					return err.Error()
				}
				for b := range nb {
					one := make([]float32, bs)
					if err := quant.Dequantize(in.Type, row[b*in.TypeSize:(b+1)*in.TypeSize], one); err != nil {
						return err.Error()
					}
					if i := firstBitDiff(one, y[b*bs:(b+1)*bs]); i >= 0 {
						return fmt.Sprintf("block %d value %d dequantized alone differs from within the row", b, i)
					}
				}
				return ""
			}, genBlockSpec(), genBlockSpec()))
			props.TestingRun(t)
		})
	}
}

// TestPartialRowsAreErrors: any length that is not a multiple of the block
// size is refused by both directions, for every known type.
func TestPartialRowsAreErrors(t *testing.T) {
	props := gopter.NewProperties(propParams(t))
	types := quant.All()
	props.Property("partial rows are refused", prop.ForAll(func(ti, n int) string {
		in := types[ti%len(types)]
		if in.BlockSize == 1 {
			return "" // every length is whole
		}
		if n%in.BlockSize == 0 {
			n++
		}
		if err := quant.Dequantize(in.Type, make([]byte, (n/in.BlockSize+1)*in.TypeSize), make([]float32, n)); err == nil {
			return fmt.Sprintf("Dequantize(%s, %d values) accepted a partial block", in.Name, n)
		}
		if quant.CanQuantize(in.Type) {
			if err := quant.Quantize(in.Type, make([]float32, n), make([]byte, (n/in.BlockSize+1)*in.TypeSize)); err == nil {
				return fmt.Sprintf("Quantize(%s, %d values) accepted a partial block", in.Name, n)
			}
		}
		return ""
	}, gen.IntRange(0, 1000), gen.IntRange(1, 2000)))
	props.TestingRun(t)
}

// TestSpecialBlocks: all-zero blocks decode to exact zeros; blocks at the fp16
// limit (±65504), with huge outliers, and of tiny values (1e-8) stay finite
// and within each format's bound where it applies.
func TestSpecialBlocks(t *testing.T) {
	const n = 512
	fill := func(f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	r := rand.New(rand.NewPCG(5, 6))
	gauss := fill(func(int) float32 { return float32(r.NormFloat64()) })
	cases := []struct {
		name string
		x    []float32
	}{
		{"zeros", make([]float32, n)},
		{"fp16 max ±65504", fill(func(i int) float32 { return float32(65504 * (1 - 2*(i%2))) })},
		{"fp16 max then zeros", fill(func(i int) float32 {
			if i%32 == 0 {
				return 65504
			}
			return 0
		})},
		{"huge outliers", fill(func(i int) float32 {
			if i%97 == 3 {
				return 3e4 * float32(1-2*(i%2))
			}
			return gauss[i]
		})},
		{"tiny 1e-8", fill(func(i int) float32 { return 1e-8 * gauss[i] })},
		{"tiny constant 1e-8", fill(func(int) float32 { return 1e-8 })},
		{"one nonzero per block", fill(func(i int) float32 {
			if i%256 == 17 {
				return -2.5
			}
			return 0
		})},
	}
	for _, in := range quantizable(t) {
		for _, tc := range cases {
			msg, _ := checkRoundTrip(in.Type, tc.x)
			if msg != "" {
				t.Errorf("%s, %s: %s", in.Name, tc.name, msg)
			}
			if tc.name == "zeros" {
				q := make([]byte, n/in.BlockSize*in.TypeSize)
				y := make([]float32, n)
				if err := quant.Quantize(in.Type, tc.x, q); err != nil {
					t.Fatal(err)
				}
				if err := quant.Dequantize(in.Type, q, y); err != nil {
					t.Fatal(err)
				}
				for i, v := range y {
					if v != 0 {
						t.Errorf("%s: all-zero input decodes to %g at %d", in.Name, v, i)
						break
					}
				}
			}
		}
	}
}
