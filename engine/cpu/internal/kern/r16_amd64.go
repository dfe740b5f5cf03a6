//go:build amd64 && !noasm

package kern

import "github.com/aprqa/apr/engine/quant"

// The packed Q8_0, Q5_0, Q4_K and Q6_K kernels on AVX-512 VNNI (r16_amd64.s, written by
// gen/r16.py), registered under the instruction set "avx512vnni16" (r16.go
// and r16k.go describe their arithmetic and layouts). Their Go twins are
// r16x8Twin, r16x1Twin and r16kTwin.

//go:noescape
func r16x8Q8_0VNNI(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int)

//go:noescape
func r16x1Q8_0VNNI(nb int, w, a, aux []byte, out []float32)

//go:noescape
func r16x8Q5_0VNNI(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int)

//go:noescape
func r16x1Q5_0VNNI(nb int, w, a, aux []byte, out []float32)

// registerR16VNNI is called by dot_amd64.go's init.
func registerR16VNNI() {
	registerR16(quant.Q8_0, ISAAVX512VNNI16, packQ8_0R16, r16x8Q8_0VNNI, r16x1Q8_0VNNI)
	registerR16(quant.Q5_0, ISAAVX512VNNI16, packQ5_0R16, r16x8Q5_0VNNI, r16x1Q5_0VNNI)
	registerR16KVNNI()
}

//go:noescape
func r16k4Q4_KVNNI(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

//go:noescape
func r16k1Q4_KVNNI(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

//go:noescape
func r16k4Q6_KVNNI(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

//go:noescape
func r16k1Q6_KVNNI(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

// registerR16KVNNI registers the packed Q4_K and Q6_K kernels (called from
// registerR16VNNI).
func registerR16KVNNI() {
	registerR16K(quant.Q4_K, ISAAVX512VNNI16, packQ4_KR16, r16k4Q4_KVNNI, r16k1Q4_KVNNI)
	registerR16K(quant.Q6_K, ISAAVX512VNNI16, packQ6_KR16, r16k4Q6_KVNNI, r16k1Q6_KVNNI)
}
