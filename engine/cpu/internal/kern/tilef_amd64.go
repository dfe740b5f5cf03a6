//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// The float tile kernels on AVX-512F (tilef_amd64.s) and AVX2
// (tilef2_amd64.s) and the expanders on AVX2 + F16C. The AVX-512 one is
// registered under the instruction set "avx512" for F32, F16 and BF16, whose
// other kernels are the AVX2 ones; the AVX2 one is added to the "avx2"
// kernels of these types. Every row gets exactly the AVX2 single-row result
// either way.

//go:noescape
func tileF4x12AVX512(n8 int, w []byte, wstride int, a []byte, acc []float32, flags int, out []float32, ostride int)

//go:noescape
func tileF4x12AVX2(n8 int, w []byte, wstride int, a []byte, acc []float32, flags int, out []float32, ostride int)

// prefetchL2 asks for the cache lines of b in L2 (PREFETCHT1).
//
//go:noescape
func prefetchL2(b []byte)

//go:noescape
func expandF16AVX2(n8 int, src, dst []byte, dstride int)

//go:noescape
func expandBF16AVX2(n8 int, src, dst []byte, dstride int)

//go:noescape
func expandF32AVX2(n8 int, src, dst []byte, dstride int)

// registerTileFAVX512 is called by dot_amd64.go's init, after the AVX2
// kernels are registered.
func registerTileFAVX512() {
	prefetch = prefetchL2
	const isa = ISAAVX512
	for _, f := range []struct {
		t      quant.Type
		dot    dotFunc
		dot4   dot4Func
		dot8   dot4Func
		rows4  rowsFunc
		expand expandFunc
		tail   dotFunc
	}{
		{quant.F32, dotF32AVX2, dot4Float(dot4F32AVX2Main, dotF32Go, 4), dot8Float(dot8F32AVX2Main, dotF32Go, 4), rows4Float(dotR4F32AVX2Main, dotF32Go, 4), expandF32AVX2, dotF32Go},
		{quant.F16, dotF16AVX2, dot4Float(dot4F16AVX2Main, dotF16Go, 2), dot8Float(dot8F16AVX2Main, dotF16Go, 2), rows4Float(dotR4F16AVX2Main, dotF16Go, 2), expandF16AVX2, dotF16Go},
		{quant.BF16, dotBF16AVX2, dot4Float(dot4BF16AVX2Main, dotBF16Go, 2), dot8Float(dot8BF16AVX2Main, dotBF16Go, 2), rows4Float(dotR4BF16AVX2Main, dotBF16Go, 2), expandBF16AVX2, dotBF16Go},
	} {
		register(f.t, isa, f.t, f.dot, f.dot4)
		registerDot8(f.t, isa, f.dot8)
		registerRows4(f.t, isa, f.rows4)
		registerTileF(f.t, isa, tileF4x12AVX512, f.expand, f.tail)
		registerTileF(f.t, ISAAVX2, tileF4x12AVX2, f.expand, f.tail)
	}
}
