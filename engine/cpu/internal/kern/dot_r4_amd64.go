//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// Four-weight-row matvec kernels (rowsFunc), dot_r4_amd64.s,
// dot_r4k_amd64.s and dot_r4k2_amd64.s: each row's float32 operations are those of the
// single-row kernel of its type.

// r4Lead is how many weight rows ahead of the current group of four the
// four-row kernels' linear prefetch starts (two groups).
var r4Lead = 8

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

//go:noescape
func dotR4Q4_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q5_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q6_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q2_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4Q3_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4IQ4_XSAVX2(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4F32AVX2Main(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4F16AVX2Main(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotR4BF16AVX2Main(n int, w []byte, wstride int, a []byte, out []float32)

//go:noescape
func dotT8Q8_0AVX2(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q4_0AVX2(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8Q5_0AVX2(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

//go:noescape
func dotT8RQ8_0AVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)

//go:noescape
func dotT8RQ4_0AVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)

//go:noescape
func dotT8RQ5_0AVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)

//go:noescape
func dotT8RQ4_KAVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)

//go:noescape
func dotT8RQ6_KAVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)

//go:noescape
func repackQ8_0AVX2(nb int, a []byte, stride int, aq, corr []byte, bias int)

// rows4Float wraps a four-row float kernel whose assembly takes multiples of
// 8 values: each row's tail goes to the Go twin, as in dotF32AVX2.
func rows4Float(main rowsFunc, tail dotFunc, size int) rowsFunc {
	return func(n int, w []byte, wstride int, a []byte, out []float32) {
		m := n &^ 7
		main(m, w, wstride, a, out)
		if m < n {
			for j := 0; j < 4; j++ {
				row := w[j*wstride:]
				out[j] += tail(n-m, row[size*m:size*n], a[size*m:size*n])
			}
		}
	}
}

// registerRowsAVX2 is called by dot_amd64.go's init, after the AVX2
// kernels are registered.
func registerRowsAVX2() {
	registerRows4(quant.Q8_0, ISAAVX2, dotR4Q8_0AVX2)
	registerRows4(quant.Q4_0, ISAAVX2, dotR4Q4_0AVX2)
	registerRows4(quant.Q5_0, ISAAVX2, dotR4Q5_0AVX2)
	registerRows4(quant.IQ4_NL, ISAAVX2, dotR4IQ4_NLAVX2)
	registerRows4(quant.MXFP4, ISAAVX2, dotR4MXFP4AVX2)
	registerRows4(quant.Q4_K, ISAAVX2, dotR4Q4_KAVX2)
	registerRows4(quant.Q5_K, ISAAVX2, dotR4Q5_KAVX2)
	registerRows4(quant.Q6_K, ISAAVX2, dotR4Q6_KAVX2)
	registerRows4(quant.Q2_K, ISAAVX2, dotR4Q2_KAVX2)
	registerRows4(quant.Q3_K, ISAAVX2, dotR4Q3_KAVX2)
	registerRows4(quant.IQ4_XS, ISAAVX2, dotR4IQ4_XSAVX2)
	registerTile8(quant.Q8_0, ISAAVX2, dotT8Q8_0AVX2)
	registerTile8(quant.Q4_0, ISAAVX2, dotT8Q4_0AVX2)
	registerTile8(quant.Q5_0, ISAAVX2, dotT8Q5_0AVX2)
	registerTile8R(quant.Q8_0, ISAAVX2, dotT8RQ8_0AVX2, 0)
	registerTile8R(quant.Q4_0, ISAAVX2, dotT8RQ4_0AVX2, 8)
	registerTile8R(quant.Q5_0, ISAAVX2, dotT8RQ5_0AVX2, 16)
	registerTile8R(quant.Q4_K, ISAAVX2, dotT8RQ4_KAVX2, 0)
	registerTile8R(quant.Q6_K, ISAAVX2, dotT8RQ6_KAVX2, 0)
	if cpuHas(ISAAVX2) {
		repackQ8 = repackQ8_0AVX2
	}
	registerRows4(quant.F32, ISAAVX2, rows4Float(dotR4F32AVX2Main, dotF32Go, 4))
	registerRows4(quant.F16, ISAAVX2, rows4Float(dotR4F16AVX2Main, dotF16Go, 2))
	registerRows4(quant.BF16, ISAAVX2, rows4Float(dotR4BF16AVX2Main, dotBF16Go, 2))
}
