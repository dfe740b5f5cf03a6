package kern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// actInputs returns activation rows that exercise the converters: Gaussian
// values, exact ties, zeros, subnormals, huge values, infinities and, when
// withNaN, NaNs and every other bit pattern.
func actInputs(withNaN bool) map[string][]float32 {
	rng := rand.New(rand.NewPCG(11, 12))
	n := 32 * 256
	g := make([]float32, n)
	bits := make([]float32, n)
	ties := make([]float32, n)
	small := make([]float32, n)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
		ties[i] = float32(rng.IntN(255)-127) / 2 // many x·127/amax at .5
		small[i] = float32(rng.NormFloat64() * 1e-39)
		for {
			bits[i] = math.Float32frombits(rng.Uint32())
			if withNaN || !math.IsNaN(float64(bits[i])) {
				break
			}
		}
	}
	ties[5] = 127
	inf := append([]float32(nil), g...)
	inf[3], inf[100] = float32(math.Inf(1)), float32(math.Inf(-1))
	return map[string][]float32{"gaussian": g, "bits": bits, "ties": ties, "subnormal": small, "zeros": make([]float32, n), "inf": inf}
}

func TestQuantizeQ8_0AsmMatchesGo(t *testing.T) {
	for name, x := range actInputs(false) {
		got := make([]byte, len(x)/32*q80Bytes)
		want := make([]byte, len(got))
		quantizeQ8_0(x, got)
		quantizeQ8_0Go(x, want)
		for b := 0; b < len(x)/32; b++ {
			if string(got[34*b:34*b+34]) != string(want[34*b:34*b+34]) {
				t.Fatalf("%s: quantizeQ8_0 block %d = % x, Go twin % x", name, b, got[34*b:34*b+34], want[34*b:34*b+34])
			}
		}
	}
}

func TestConvertF16AsmMatchesGo(t *testing.T) {
	for name, x := range actInputs(true) {
		for _, n := range []int{len(x), len(x) - 5} { // with and without a tail
			got := make([]byte, 2*n)
			want := make([]byte, 2*n)
			convertF16(x[:n], got)
			convertF16Go(x[:n], want)
			if string(got) != string(want) {
				t.Fatalf("%s n=%d: convertF16 differs from its Go twin", name, n)
			}
		}
	}
}

func TestHalfHelpers(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := fp16(uint16(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("fp16(%#04x) = %g, want NaN", h, f)
			}
			continue
		}
		if back := fp32ToFP16(f); back != uint16(h) {
			t.Fatalf("fp32ToFP16(fp16(%#04x) = %g) = %#04x", h, f, back)
		}
	}
	for x := 0; x < 256; x++ {
		if got, want := e8m0HalfTab[x], float32(math.Ldexp(1, x-128)); got != want {
			t.Fatalf("e8m0HalfTab[%d] = %g, want 2^(x-128) = %g", x, got, want)
		}
	}
}
