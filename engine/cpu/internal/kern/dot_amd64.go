//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// Assembly kernels for amd64 (AVX2 + FMA + F16C), registered under the
// instruction set "avx2". Each has the signature of dotFunc or dot4Func and
// computes what its Go twin in dot_go.go computes (the twin's doc comment is
// the reference loop); only the order of float32 additions differs.

//go:noescape
func dotQ8_0AVX2(n int, w, a []byte) float32

//go:noescape
func dot4Q8_0AVX2(n int, w, a []byte, stride int, out *[4]float32)

//go:noescape
func dotQ4_0AVX2(n int, w, a []byte) float32

//go:noescape
func dotQ5_0AVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ4_NLAVX2(n int, w, a []byte) float32

//go:noescape
func dotMXFP4AVX2(n int, w, a []byte) float32

//go:noescape
func dotQ4_1AVX2(n int, w, a []byte) float32

//go:noescape
func dotQ5_1AVX2(n int, w, a []byte) float32

//go:noescape
func dotQ4_KAVX2(n int, w, a []byte) float32

//go:noescape
func dotQ5_KAVX2(n int, w, a []byte) float32

//go:noescape
func dotQ6_KAVX2(n int, w, a []byte) float32

//go:noescape
func dotQ2_KAVX2(n int, w, a []byte) float32

//go:noescape
func dotQ3_KAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ4_XSAVX2(n int, w, a []byte) float32

func init() {
	register(quant.Q8_0, ISAAVX2, quant.Q8_0, dotQ8_0AVX2, dot4Q8_0AVX2)
	register(quant.Q4_0, ISAAVX2, quant.Q8_0, dotQ4_0AVX2, nil)
	register(quant.Q5_0, ISAAVX2, quant.Q8_0, dotQ5_0AVX2, nil)
	register(quant.IQ4_NL, ISAAVX2, quant.Q8_0, dotIQ4_NLAVX2, nil)
	register(quant.MXFP4, ISAAVX2, quant.Q8_0, dotMXFP4AVX2, nil)
	register(quant.Q4_1, ISAAVX2, quant.Q8_1, dotQ4_1AVX2, nil)
	register(quant.Q5_1, ISAAVX2, quant.Q8_1, dotQ5_1AVX2, nil)
	register(quant.Q4_K, ISAAVX2, quant.Q8_K, dotQ4_KAVX2, nil)
	register(quant.Q5_K, ISAAVX2, quant.Q8_K, dotQ5_KAVX2, nil)
	register(quant.Q6_K, ISAAVX2, quant.Q8_K, dotQ6_KAVX2, nil)
	register(quant.Q2_K, ISAAVX2, quant.Q8_K, dotQ2_KAVX2, nil)
	register(quant.Q3_K, ISAAVX2, quant.Q8_K, dotQ3_KAVX2, nil)
	register(quant.IQ4_XS, ISAAVX2, quant.Q8_K, dotIQ4_XSAVX2, nil)
}
