//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// The packed float kernels on AVX-512F (r16f_amd64.s, written by
// gen/r16f.py), registered under the instruction set "avx512r16" for F32,
// F16 and BF16 (r16f.go describes their arithmetic and layout). Their Go
// twins are r16fTwin.

//go:noescape
func r16fxF321(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF322(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF323(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF324(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF325(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF326(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF327(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF328(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF329(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF3210(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF3211(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF3212(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF3213(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF3214(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF161(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF162(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF163(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF164(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF165(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF166(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF167(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF168(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF169(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF1610(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF1611(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF1612(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF1613(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxF1614(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF161(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF162(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF163(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF164(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF165(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF166(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF167(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF168(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF169(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF1610(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF1611(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF1612(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF1613(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fxBF1614(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func packR16W16(n8 int, src []byte, wrb int, dst []byte)

//go:noescape
func r16fdp1(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp2(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp3(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp4(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp5(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp6(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp7(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp8(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp9(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp10(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp11(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp12(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp13(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16fdp14(n2 int, w0, w1, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF321(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF322(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF323(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF324(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF325(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF326(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF161(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF162(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF163(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF164(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF165(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faF166(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faBF161(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faBF162(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faBF163(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faBF164(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faBF165(n int, w, a []byte, astride int, out []float32, ostride int)

//go:noescape
func r16faBF166(n int, w, a []byte, astride int, out []float32, ostride int)

// r16fAVX2 returns the AVX2 twins' r16fFunc for g (r16fa{T}{nt}): the two
// groups of a call one after the other.
func r16fAVX2(g func(n int, w, a []byte, astride int, out []float32, ostride int)) r16fFunc {
	return func(n int, w0, w1, a []byte, astride int, out []float32, ostride int) {
		g(n, w0, a, astride, out, ostride)
		g(n, w1, a, astride, out[r16Rows:], ostride)
	}
}

func init() {
	if cpuHas(ISAAVX512) { // VPERMT2W
		packW16 = packR16W16
	}
	registerR16F(quant.F32, ISAAVX512R16, dotF32AVX2, expandF32AVX2, []r16fFunc{r16fxF321, r16fxF322, r16fxF323, r16fxF324, r16fxF325, r16fxF326, r16fxF327, r16fxF328, r16fxF329, r16fxF3210, r16fxF3211, r16fxF3212, r16fxF3213, r16fxF3214})
	registerR16F(quant.F16, ISAAVX512R16, dotF16AVX2, expandF16AVX2, []r16fFunc{r16fxF161, r16fxF162, r16fxF163, r16fxF164, r16fxF165, r16fxF166, r16fxF167, r16fxF168, r16fxF169, r16fxF1610, r16fxF1611, r16fxF1612, r16fxF1613, r16fxF1614})
	registerR16F(quant.BF16, ISAAVX512R16, dotBF16AVX2, expandBF16AVX2, []r16fFunc{r16fxBF161, r16fxBF162, r16fxBF163, r16fxBF164, r16fxBF165, r16fxBF166, r16fxBF167, r16fxBF168, r16fxBF169, r16fxBF1610, r16fxBF1611, r16fxBF1612, r16fxBF1613, r16fxBF1614})
	registerR16FPairs(ISAAVX512BF16, dotBF16AVX2, []r16fFunc{r16fdp1, r16fdp2, r16fdp3, r16fdp4, r16fdp5, r16fdp6, r16fdp7, r16fdp8, r16fdp9, r16fdp10, r16fdp11, r16fdp12, r16fdp13, r16fdp14})
	registerR16F(quant.F32, ISAAVX2R16, dotF32AVX2, expandF32AVX2, []r16fFunc{r16fAVX2(r16faF321), r16fAVX2(r16faF322), r16fAVX2(r16faF323), r16fAVX2(r16faF324), r16fAVX2(r16faF325), r16fAVX2(r16faF326)})
	registerR16F(quant.F16, ISAAVX2R16, dotF16AVX2, expandF16AVX2, []r16fFunc{r16fAVX2(r16faF161), r16fAVX2(r16faF162), r16fAVX2(r16faF163), r16fAVX2(r16faF164), r16fAVX2(r16faF165), r16fAVX2(r16faF166)})
	registerR16F(quant.BF16, ISAAVX2R16, dotBF16AVX2, expandBF16AVX2, []r16fFunc{r16fAVX2(r16faBF161), r16fAVX2(r16faBF162), r16fAVX2(r16faBF163), r16fAVX2(r16faBF164), r16fAVX2(r16faBF165), r16fAVX2(r16faBF166)})
}
