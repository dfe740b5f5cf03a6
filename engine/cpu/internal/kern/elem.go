package kern

import "math"

// Element-wise functions in ggml-cpu's AVX2+FMA arithmetic, lane for lane
// (the arithmetic behind llama.cpp's reference logits on amd64): whole
// groups of 8 values go through ggml_v_expf / ggml_v_silu (ARM's
// optimized-routines expf: x = n·ln2 + b, a degree-5 polynomial in b, the
// exponent added to the bits, a two-factor scale when |n| > 126), the
// values past the last whole group through ggml's scalar code with libm's
// expf. On amd64 with AVX2 the groups run in assembly (elem_amd64.s); the
// Go forms below are their twins, bit for bit (tests), and what runs
// elsewhere.

// SiLU sets dst[i] = x[i]/(1 + e^(−x[i])) as ggml_vec_silu_f32 computes it.
// dst and x have the same length and may be the same slice; otherwise they
// must not overlap.
func SiLU(dst, x []float32) {
	if len(dst) != len(x) {
		panic("kern: SiLU: dst and x differ in length")
	}
	n8 := len(x) &^ 7
	siluGroups(dst[:n8], x[:n8])
	for i := n8; i < len(x); i++ {
		dst[i] = siluTail(x[i])
	}
}

// SwiGLU sets dst[i] = silu(gate[i])·up[i] as ggml_vec_swiglu_f32 computes
// it. The three slices have the same length; dst may be gate or up.
func SwiGLU(dst, gate, up []float32) {
	if len(dst) != len(gate) || len(dst) != len(up) {
		panic("kern: SwiGLU: dst, gate and up differ in length")
	}
	n8 := len(dst) &^ 7
	swigluGroups(dst[:n8], gate[:n8], up[:n8])
	for i := n8; i < len(dst); i++ {
		dst[i] = siluTail(gate[i]) * up[i]
	}
}

// SoftMax sets dst[i] = e^(src[i] − mx) and returns their sum as
// ggml_vec_soft_max_f32 computes it (each group of 8 reduced in float32 as
// its AVX2 code reduces it, then added to a float64 total; the remaining
// values added one by one). dst may be src. Normalising (dst·(1/Σ)) is the
// caller's.
func SoftMax(dst, src []float32, mx float32) float64 {
	return ExpSum(dst, src, mx, len(src), 0)
}

// ExpSum is SoftMax over a row that continues: values from index valid on
// are masked (they become 0 and add 0, as ggml's −∞ mask makes them), and
// the group sums are added to sum, so that a row split into pieces of a
// multiple of 8 values gives exactly what one call over the whole row
// gives.
func ExpSum(dst, src []float32, mx float32, valid int, sum float64) float64 {
	if len(dst) != len(src) {
		panic("kern: ExpSum: dst and src differ in length")
	}
	valid = min(max(valid, 0), len(src))
	n8 := len(src) &^ 7
	sum = expSumGroups(dst[:n8], src[:n8], mx, min(valid, n8), sum)
	for i := n8; i < len(src); i++ {
		var e float32
		if i < valid {
			e = libmExpf(src[i] - mx)
		}
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

// Sigmoid sets dst[i] = 1/(1 + e^(−x[i])) as ggml's sigmoid op computes it:
// scalar, with libm's expf (ggml has no vector form of it).
func Sigmoid(dst, x []float32) {
	if len(dst) != len(x) {
		panic("kern: Sigmoid: dst and x differ in length")
	}
	for i, v := range x {
		dst[i] = 1 / (1 + libmExpf(-v))
	}
}

// The group kernels in use; the amd64 build replaces them with assembly
// when the CPU has AVX2 and FMA.
var (
	siluGroups   = siluGroupsGo
	swigluGroups = swigluGroupsGo
	expSumGroups = expSumGroupsGo
)

func siluGroupsGo(dst, x []float32) {
	for i, v := range x {
		dst[i] = vsilu(v)
	}
}

func swigluGroupsGo(dst, g, u []float32) {
	for i := range dst {
		dst[i] = vsilu(g[i]) * u[i]
	}
}

// expSumGroupsGo is ggml_vec_soft_max_f32's AVX2 loop over whole groups of
// 8 (len(x) a multiple of 8), lanes from index valid on masked to 0.
func expSumGroupsGo(dst, x []float32, mx float32, valid int, sum float64) float64 {
	for i := 0; i < len(x); i += 8 {
		var v [8]float32
		for l := range v {
			if i+l < valid {
				v[l] = vexpf(x[i+l] - mx)
			}
			dst[i+l] = v[l]
		}
		// hi + lo, then movehl, then movehdup, as ggml reduces.
		a0, a1, a2, a3 := v[4]+v[0], v[5]+v[1], v[6]+v[2], v[7]+v[3]
		sum += float64((a0 + a2) + (a1 + a3))
	}
	return sum
}

// vexpf is one lane of ggml_v_expf on AVX2+FMA.
func vexpf(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + 0x3f800000)
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, 0x1.ffffecp-1*b)
	an := abs32(n)
	if !(an > 126) { // also NaN
		return fma32(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	if an > 192 {
		return s1 * s1
	}
	s2 := math.Float32frombits(e - g)
	return fma32(s2, j, s2) * s1
}

// vsilu is one lane of ggml_v_silu: x/(1 + ggml_v_expf(0 − x)).
func vsilu(x float32) float32 { return x / (1 + vexpf(0-x)) }

// siluTail is ggml_silu_f32, which ggml uses past the last group of 8.
func siluTail(x float32) float32 { return x / (1 + libmExpf(-x)) }

// libmExpf is expf as glibc computes it (within 0.502 ulp): here the
// float64 exponential rounded to float32.
func libmExpf(x float32) float32 { return float32(math.Exp(float64(x))) }

// fma32 returns a·b + c rounded once to float32, as VFMADD*PS does. a·b is
// exact in float64; the float64 sum s is rounded, and its rounding error
// (Knuth's two-sum) decides the one case where rounding s to float32 can
// differ from rounding the exact sum: s exactly halfway between two
// float32 values.
func fma32(a, b, c float32) float32 {
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	r := float32(s)
	if math.IsInf(s, 0) || math.IsNaN(s) || float64(r) == s {
		return r
	}
	bb := s - p
	err := (p - (s - bb)) + (q - bb)
	if err == 0 {
		return r
	}
	// r is the float32 nearest s; the other neighbour of s is o.
	var o float32
	if float64(r) < s {
		o = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		o = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if float64(r)+float64(o) != 2*s {
		return r // s is not a midpoint
	}
	// A tie in s, not in the exact sum: round towards the exact sum.
	if (err > 0) == (float64(o) > s) {
		return o
	}
	return r
}
