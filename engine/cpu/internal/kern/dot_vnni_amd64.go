//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// AVX-512 VNNI kernels (dot_vnni_amd64.s, dot_t8k_vnni_amd64.s,
// dot_t8q5_vnni_amd64.s, dot_t8q6_vnni_amd64.s), registered under the
// instruction set "avx512vnni" for Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_K, Q5_K and
// Q6_K. Their single-row and four-activation-row kernels are the AVX2 ones
// (the same results: these keys differ only in their four-weight-row and
// eight-activation-row kernels, which give every row exactly the AVX2
// single-row result; the K-quants' four-weight-row kernels are the AVX2
// ones too).

//go:noescape
func dotR4Q8_0VNNI(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q4_0VNNI(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q5_0VNNI(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4IQ4_NLVNNI(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotT8Q8_0VNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q4_0VNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q5_0VNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q4_KVNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q6_KVNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q5_KVNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

// registerVNNI is called by dot_amd64.go's init.
func registerVNNI() {
	const isa = ISAAVX512VNNI
	register(quant.Q8_0, isa, quant.Q8_0, dotQ8_0AVX2, dot4Q8_0AVX2)
	register(quant.Q4_0, isa, quant.Q8_0, dotQ4_0AVX2, dot4Q4_0AVX2)
	register(quant.Q5_0, isa, quant.Q8_0, dotQ5_0AVX2, dot4Q5_0AVX2)
	register(quant.IQ4_NL, isa, quant.Q8_0, dotIQ4_NLAVX2, dot4IQ4_NLAVX2)
	registerRows4(quant.Q8_0, isa, dotR4Q8_0VNNI)
	registerRows4(quant.Q4_0, isa, dotR4Q4_0VNNI)
	registerRows4(quant.Q5_0, isa, dotR4Q5_0VNNI)
	registerRows4(quant.IQ4_NL, isa, dotR4IQ4_NLVNNI)
	registerTile8(quant.Q8_0, isa, dotT8Q8_0VNNI)
	registerTile8(quant.Q4_0, isa, dotT8Q4_0VNNI)
	registerTile8(quant.Q5_0, isa, dotT8Q5_0VNNI)
	register(quant.Q4_K, isa, quant.Q8_K, dotQ4_KAVX2, dot4Q4_KAVX2)
	registerRows4(quant.Q4_K, isa, dotR4Q4_KAVX2)
	registerTile8(quant.Q4_K, isa, dotT8Q4_KVNNI)
	register(quant.Q5_K, isa, quant.Q8_K, dotQ5_KAVX2, dot4Q5_KAVX2)
	registerRows4(quant.Q5_K, isa, dotR4Q5_KAVX2)
	registerTile8(quant.Q5_K, isa, dotT8Q5_KVNNI)
	register(quant.Q6_K, isa, quant.Q8_K, dotQ6_KAVX2, dot4Q6_KAVX2)
	registerRows4(quant.Q6_K, isa, dotR4Q6_KAVX2)
	registerTile8(quant.Q6_K, isa, dotT8Q6_KVNNI)
}
