//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// Four-weight-row matvec kernels (rowsFunc), dot_r4_amd64.s and
// dot_r4k_amd64.s: each row's float32 operations are those of the
// single-row kernel of its type.

//go:noescape
func dotR4Q8_0AVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q4_0AVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q5_0AVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4IQ4_NLAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4MXFP4AVX2(n int, w []byte, wstride int, a []byte, out []float32)

// registerRowsAVX2 is called by dot_amd64.go's init, after the AVX2
// kernels are registered.
func registerRowsAVX2() {
	registerRows4(quant.Q8_0, ISAAVX2, dotR4Q8_0AVX2)
	registerRows4(quant.Q4_0, ISAAVX2, dotR4Q4_0AVX2)
	registerRows4(quant.Q5_0, ISAAVX2, dotR4Q5_0AVX2)
	registerRows4(quant.IQ4_NL, ISAAVX2, dotR4IQ4_NLAVX2)
	registerRows4(quant.MXFP4, ISAAVX2, dotR4MXFP4AVX2)
}
