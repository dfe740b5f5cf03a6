package schema

import (
	"fmt"
	"math"
)

// A Tolerance is read one way: a value got passes against want when
//
//	|got − want| ≤ Abs + Rel·scale     (Bound(scale))
//
// or when the two float32 values are at most ULP units in the last place
// apart. scale is the size the error of the computation grows with: |want|
// for one value (Within: dequantization, a single output), and for a dot
// product of n quantized blocks the sum of |wᵢ·aᵢ| over the row times
// (n + 8), the growth of float32 accumulation error (the kernel contracts'
// dot ops, falsify's kernel_dot). The zero Tolerance demands bit-exact
// equality (and treats +0 and −0 as equal).

// Bound is the largest |got − want| the tolerance allows at scale.
func (t Tolerance) Bound(scale float64) float64 { return t.Abs + t.Rel*scale }

// Exact reports whether t demands bit-exact equality.
func (t Tolerance) Exact() bool { return t.Abs == 0 && t.Rel == 0 && t.ULP == 0 }

func (t Tolerance) String() string {
	return fmt.Sprintf("abs %g, rel %g, ulp %d", t.Abs, t.Rel, t.ULP)
}

// Within reports whether got is within t of want, at scale |want|. A NaN or
// Inf is never within any tolerance (even of itself).
func (t Tolerance) Within(got, want float32) bool {
	g, w := float64(got), float64(want)
	if math.IsNaN(g) || math.IsNaN(w) || math.IsInf(g, 0) || math.IsInf(w, 0) {
		return false
	}
	if math.Abs(g-w) <= t.Bound(math.Abs(w)) {
		return true
	}
	return t.ULP > 0 && ULPDistance(got, want) <= t.ULP
}

// ULPDistance returns how many representable float32 values lie between a
// and b (0 when equal; +0 and −0 are 0 apart). NaN or Inf gives math.MaxInt64.
func ULPDistance(a, b float32) int64 {
	fa, fb := float64(a), float64(b)
	if math.IsNaN(fa) || math.IsNaN(fb) || math.IsInf(fa, 0) || math.IsInf(fb, 0) {
		return math.MaxInt64
	}
	ord := func(x float32) int64 {
		u := int64(math.Float32bits(x))
		if u&(1<<31) != 0 {
			return -(u & 0x7fffffff)
		}
		return u
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}
