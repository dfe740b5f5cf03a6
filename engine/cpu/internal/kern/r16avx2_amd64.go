//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// The packed kernels on AVX2 (r16avx2_amd64.s, written by gen/r16avx2.py),
// registered under the instruction set "avx2r16": the avx512vnni16
// kernels' packing and float32 chains (r16.go), the block's integer sum
// formed with VPMADDUBSW and VPMADDWD in place of VPDPBUSD, so their
// results are bit for bit those of the Go twins r16x8Twin and r16x1Twin.
// Select takes them on a CPU with AVX2 but without AVX-512 VNNI (where the
// avx512vnni16 kernels of the same types rank above them).

//go:noescape
func r16x8Q8_0AVX2(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int)

//go:noescape
func r16x1Q8_0AVX2(nb int, w, a, aux []byte, out []float32)

//go:noescape
func r16x8Q5_0AVX2(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int)

//go:noescape
func r16x1Q5_0AVX2(nb int, w, a, aux []byte, out []float32)

//go:noescape
func r16k4Q4_KAVX2(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

//go:noescape
func r16k1Q4_KAVX2(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

//go:noescape
func r16k4Q6_KAVX2(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

//go:noescape
func r16k1Q6_KAVX2(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

// registerR16AVX2 is called by dot_amd64.go's init.
func registerR16AVX2() {
	registerR16(quant.Q8_0, ISAAVX2R16, packQ8_0R16, r16x8Q8_0AVX2, r16x1Q8_0AVX2)
	registerR16(quant.Q5_0, ISAAVX2R16, packQ5_0R16, r16x8Q5_0AVX2, r16x1Q5_0AVX2)
	registerR16K(quant.Q4_K, ISAAVX2R16, packQ4_KR16, r16k4Q4_KAVX2, r16k1Q4_KAVX2)
	registerR16K(quant.Q6_K, ISAAVX2R16, packQ6_KR16, r16k4Q6_KAVX2, r16k1Q6_KAVX2)
}
