package cpu

import "math"

// Element-wise functions as ggml-cpu computes them on an AVX2+FMA machine
// (the machine llama.cpp's reference logits come from), lane for lane. The
// vector ones (SiLU, SwiGLU, the softmax's exponentials and sum: ggml_v_expf /
// ggml_v_silu for whole groups of 8, libm's expf for the tails) are kern's
// (kern.SiLU, kern.SwiGLU, kern.SoftMax, kern.ExpSum, AVX2 where the CPU has
// it); ggmlref_internal_test.go holds their scalar definition, which the
// tests hold kern's to bit for bit. Here are ggml's scalar ops. An
// activation an ulp away from llama.cpp's can round to another int8 when
// the next product quantizes it, so these are reproduced exactly rather
// than approximated.

// sigmoid is ggml's op_sigmoid: 1/(1+expf(−x)) with libm's expf.
func sigmoid(x float32) float32 { return 1 / (1 + libmExpf(-x)) }

// softplus is ggml's: x above 20 passes through, else logf(1+expf(x)) in
// float32.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + libmExpf(x))))
}

// libmExpf is expf as glibc computes it (within 0.502 ulp; here the
// correctly rounded value).
func libmExpf(x float32) float32 { return float32(math.Exp(float64(x))) }
