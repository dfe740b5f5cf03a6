package quant_test

import (
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// benchValues is the number of float32 values per benchmark call: 1 MiB of
// output.
const benchValues = 1 << 18

// benchInput returns realistic encoded data for t: the quantization of
// Gaussian values where apr can quantize t, random bytes otherwise (every
// i-quant bit pattern is a valid block).
func benchInput(tb testing.TB, t quant.Info) []byte {
	r := rand.New(rand.NewPCG(42, uint64(t.Type)))
	src := make([]byte, benchValues/t.BlockSize*t.TypeSize)
	if quant.CanQuantize(t.Type) && t.Type != quant.F32 {
		x := make([]float32, benchValues)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		if err := quant.Quantize(t.Type, x, src); err != nil {
			tb.Fatal(err)
		}
		return src
	}
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	if t.Type == quant.F32 || t.Type == quant.F64 {
		// keep floats finite: clear the top exponent bit of every value
		for i := t.TypeSize - 1; i < len(src); i += t.TypeSize {
			src[i] &^= 0x40
		}
	}
	return src
}

// BenchmarkDequantize measures decoding throughput (MB/s of float32 output)
// for every ggml type over 1 MiB of output.
func BenchmarkDequantize(b *testing.B) {
	dst := make([]float32, benchValues)
	for _, t := range quant.All() {
		src := benchInput(b, t)
		b.Run(t.Name, func(b *testing.B) {
			b.SetBytes(int64(4 * benchValues))
			b.ReportAllocs()
			for b.Loop() {
				if err := quant.Dequantize(t.Type, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize measures encoding throughput (MB/s of float32 input) for
// every type apr can quantize, over 1 MiB of Gaussian input.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	x := make([]float32, benchValues)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, t := range quant.All() {
		if !quant.CanQuantize(t.Type) {
			continue
		}
		dst := make([]byte, benchValues/t.BlockSize*t.TypeSize)
		b.Run(t.Name, func(b *testing.B) {
			b.SetBytes(int64(4 * benchValues))
			b.ReportAllocs()
			for b.Loop() {
				if err := quant.Quantize(t.Type, x, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
