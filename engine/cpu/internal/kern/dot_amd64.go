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
func dot4Q8_0AVX2(n int, w, a []byte, stride int, out []float32, ostride int)

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

//go:noescape
func dotF32AVX2Main(n int, w, a []byte) float32

//go:noescape
func dotF16AVX2Main(n int, w, a []byte) float32

//go:noescape
func dotBF16AVX2Main(n int, w, a []byte) float32

// dotF32AVX2 runs the assembly on the largest multiple of 8 values and the
// Go twin on the rest; likewise dotF16AVX2 and dotBF16AVX2.
func dotF32AVX2(n int, w, a []byte) float32 {
	m := n &^ 7
	s := dotF32AVX2Main(m, w, a)
	if m < n {
		s += dotF32Go(n-m, w[4*m:], a[4*m:])
	}
	return s
}

func dotF16AVX2(n int, w, a []byte) float32 {
	m := n &^ 7
	s := dotF16AVX2Main(m, w, a)
	if m < n {
		s += dotF16Go(n-m, w[2*m:], a[2*m:])
	}
	return s
}

func dotBF16AVX2(n int, w, a []byte) float32 {
	m := n &^ 7
	s := dotBF16AVX2Main(m, w, a)
	if m < n {
		s += dotBF16Go(n-m, w[2*m:], a[2*m:])
	}
	return s
}

//go:noescape
func convertF16AVX2(x []float32, dst []byte)

//go:noescape
func quantizeQ8_0AVX2(x []float32, dst []byte)

func convertF16Asm(x []float32, dst []byte) {
	m := len(x) &^ 7
	convertF16AVX2(x[:m], dst[:2*m])
	convertF16Go(x[m:], dst[2*m:])
}

//go:noescape
func dot4Q4_0AVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4Q5_0AVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4IQ4_NLAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4MXFP4AVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4Q4_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4Q5_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4Q6_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4F32AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4F16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4BF16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot8F32AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot8F16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot8BF16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)

// dot8Float is dot4Float for the eight-row kernels.
func dot8Float(main dot4Func, tail dotFunc, size int) dot4Func {
	return func(n int, w, a []byte, stride int, out []float32, ostride int) {
		m := n &^ 7
		main(m, w, a, stride, out, ostride)
		if m < n {
			for r := 0; r < 8; r++ {
				row := a[r*stride:]
				out[r*ostride] += tail(n-m, w[size*m:], row[size*m:size*n])
			}
		}
	}
}

// dot4Float wraps a four-row float kernel whose assembly takes multiples of
// 8 values: the tail of each row goes to the Go twin.
func dot4Float(main dot4Func, tail dotFunc, size int) dot4Func {
	return func(n int, w, a []byte, stride int, out []float32, ostride int) {
		m := n &^ 7
		main(m, w, a, stride, out, ostride)
		if m < n {
			for r := 0; r < 4; r++ {
				row := a[r*stride:]
				out[r*ostride] += tail(n-m, w[size*m:], row[size*m:size*n])
			}
		}
	}
}

//go:noescape
func dot4Q2_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4Q3_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dot4IQ4_XSAVX2(n int, w, a []byte, stride int, out []float32, ostride int)

//go:noescape
func dotIQ2_XXSAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ2_XSAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ2_SAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ3_XXSAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ3_SAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ1_SAVX2(n int, w, a []byte) float32

//go:noescape
func dotIQ1_MAVX2(n int, w, a []byte) float32

//go:noescape
func dotTQ2_0AVX2(n int, w, a []byte) float32

//go:noescape
func dotNVFP4AVX2(n int, w, a []byte) float32

//go:noescape
func dotQ1_0AVX2(n int, w, a []byte) float32

//go:noescape
func dotQ2_0AVX2(n int, w, a []byte) float32

//go:noescape
func dotTQ1_0AVX2(n int, w, a []byte) float32

func init() {
	register(quant.F32, ISAAVX2, quant.F32, dotF32AVX2, dot4Float(dot4F32AVX2Main, dotF32Go, 4))
	register(quant.F16, ISAAVX2, quant.F16, dotF16AVX2, dot4Float(dot4F16AVX2Main, dotF16Go, 2))
	register(quant.BF16, ISAAVX2, quant.BF16, dotBF16AVX2, dot4Float(dot4BF16AVX2Main, dotBF16Go, 2))
	registerDot8(quant.F32, ISAAVX2, dot8Float(dot8F32AVX2Main, dotF32Go, 4))
	registerDot8(quant.F16, ISAAVX2, dot8Float(dot8F16AVX2Main, dotF16Go, 2))
	registerDot8(quant.BF16, ISAAVX2, dot8Float(dot8BF16AVX2Main, dotBF16Go, 2))
	register(quant.Q8_0, ISAAVX2, quant.Q8_0, dotQ8_0AVX2, dot4Q8_0AVX2)
	register(quant.Q4_0, ISAAVX2, quant.Q8_0, dotQ4_0AVX2, dot4Q4_0AVX2)
	register(quant.Q5_0, ISAAVX2, quant.Q8_0, dotQ5_0AVX2, dot4Q5_0AVX2)
	register(quant.IQ4_NL, ISAAVX2, quant.Q8_0, dotIQ4_NLAVX2, dot4IQ4_NLAVX2)
	register(quant.MXFP4, ISAAVX2, quant.Q8_0, dotMXFP4AVX2, dot4MXFP4AVX2)
	register(quant.Q4_1, ISAAVX2, quant.Q8_1, dotQ4_1AVX2, nil)
	register(quant.Q5_1, ISAAVX2, quant.Q8_1, dotQ5_1AVX2, nil)
	register(quant.Q4_K, ISAAVX2, quant.Q8_K, dotQ4_KAVX2, dot4Q4_KAVX2)
	register(quant.Q5_K, ISAAVX2, quant.Q8_K, dotQ5_KAVX2, dot4Q5_KAVX2)
	register(quant.Q6_K, ISAAVX2, quant.Q8_K, dotQ6_KAVX2, dot4Q6_KAVX2)
	register(quant.Q2_K, ISAAVX2, quant.Q8_K, dotQ2_KAVX2, dot4Q2_KAVX2)
	register(quant.Q3_K, ISAAVX2, quant.Q8_K, dotQ3_KAVX2, dot4Q3_KAVX2)
	register(quant.IQ4_XS, ISAAVX2, quant.Q8_K, dotIQ4_XSAVX2, dot4IQ4_XSAVX2)
	register(quant.IQ2_XXS, ISAAVX2, quant.Q8_K, dotIQ2_XXSAVX2, nil)
	register(quant.IQ2_XS, ISAAVX2, quant.Q8_K, dotIQ2_XSAVX2, nil)
	register(quant.IQ2_S, ISAAVX2, quant.Q8_K, dotIQ2_SAVX2, nil)
	register(quant.IQ3_XXS, ISAAVX2, quant.Q8_K, dotIQ3_XXSAVX2, nil)
	register(quant.IQ3_S, ISAAVX2, quant.Q8_K, dotIQ3_SAVX2, nil)
	register(quant.IQ1_S, ISAAVX2, quant.Q8_K, dotIQ1_SAVX2, nil)
	register(quant.IQ1_M, ISAAVX2, quant.Q8_K, dotIQ1_MAVX2, nil)
	register(quant.TQ2_0, ISAAVX2, quant.Q8_K, dotTQ2_0AVX2, nil)
	register(quant.NVFP4, ISAAVX2, quant.Q8_0, dotNVFP4AVX2, nil)
	register(quant.Q1_0, ISAAVX2, quant.Q8_0, dotQ1_0AVX2, nil)
	register(quant.Q2_0, ISAAVX2, quant.Q8_0, dotQ2_0AVX2, nil)
	register(quant.TQ1_0, ISAAVX2, quant.Q8_K, dotTQ1_0AVX2, nil)
	registerRowsAVX2()
	registerVNNI()
	registerR16VNNI()
	registerR16AVX2()
	registerTileFAVX512()
	if cpuHas(ISAAVX2) {
		quantizeQ8_0 = quantizeQ8_0AVX2
		convertF16 = convertF16Asm
	}
}
