package quant_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/quant"
)

func TestDequantizeRefusesBadInput(t *testing.T) {
	tests := []struct {
		name    string
		typ     quant.Type
		src     int // bytes
		dst     int // values
		unknown bool
		want    string
	}{
		{name: "unknown id", typ: 99, src: 4, dst: 1, unknown: true, want: "id 99"},
		{name: "removed id names its old type", typ: 4, src: 18, dst: 32, unknown: true, want: "Q4_2"},
		{name: "partial block", typ: quant.Q4_K, src: 144, dst: 255, want: "not a multiple of the block size 256"},
		{name: "short src", typ: quant.Q8_0, src: 33, dst: 32, want: "need 34 bytes, got 33"},
		{name: "long src", typ: quant.Q8_0, src: 35, dst: 32, want: "need 34 bytes, got 35"},
		{name: "empty src for one block", typ: quant.IQ2_XXS, src: 0, dst: 256, want: "need 66 bytes, got 0"},
		{name: "F16 odd bytes", typ: quant.F16, src: 3, dst: 2, want: "need 4 bytes, got 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := quant.Dequantize(tc.typ, make([]byte, tc.src), make([]float32, tc.dst))
			if err == nil {
				t.Fatalf("Dequantize(%v, %d bytes, %d values) = nil, want error", tc.typ, tc.src, tc.dst)
			}
			if got := errors.Is(err, quant.ErrUnknownType); got != tc.unknown {
				t.Errorf("Dequantize(%v): errors.Is(err, ErrUnknownType) = %v, want %v (err: %v)", tc.typ, got, tc.unknown, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dequantize(%v): error %q does not mention %q", tc.typ, err, tc.want)
			}
		})
	}
}

func TestDequantizeEmptyIsNoop(t *testing.T) {
	for _, in := range quant.All() {
		if err := quant.Dequantize(in.Type, nil, nil); err != nil {
			t.Errorf("Dequantize(%s, nil, nil) = %v, want nil", in.Name, err)
		}
	}
}

func TestQuantizeRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		typ  quant.Type
		src  []float32
		dst  int
		is   error
		want string
	}{
		{name: "unknown id", typ: 77, src: make([]float32, 32), dst: 34, is: quant.ErrUnknownType, want: "id 77"},
		{name: "no quantizer", typ: quant.IQ2_XXS, src: make([]float32, 256), dst: 66, is: quant.ErrNoQuantizer, want: "IQ2_XXS"},
		{name: "partial block", typ: quant.Q8_0, src: make([]float32, 33), dst: 34, want: "not a multiple of the block size 32"},
		{name: "short dst", typ: quant.Q4_K, src: make([]float32, 256), dst: 143, want: "need 144 bytes, got 143"},
		{name: "NaN", typ: quant.Q8_0, src: withAt(32, 5, float32(math.NaN())), dst: 34, want: "value 5 is NaN"},
		{name: "Inf", typ: quant.Q4_0, src: withAt(32, 31, float32(math.Inf(-1))), dst: 18, want: "value 31 is -Inf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := quant.Quantize(tc.typ, tc.src, make([]byte, tc.dst))
			if err == nil {
				t.Fatalf("Quantize(%v, %d values, %d bytes) = nil, want error", tc.typ, len(tc.src), tc.dst)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Quantize(%v): error %v does not wrap %v", tc.typ, err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Quantize(%v): error %q does not mention %q", tc.typ, err, tc.want)
			}
		})
	}
}

// withAt returns n zeros with v at index i.
func withAt(n, i int, v float32) []float32 {
	x := make([]float32, n)
	x[i] = v
	return x
}

// TestQuantizeFloatTypesKeepNonFinite: F16/BF16 encode NaN and infinities
// (they are representable), only block formats refuse them.
func TestQuantizeFloatTypesKeepNonFinite(t *testing.T) {
	src := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e6}
	for _, typ := range []quant.Type{quant.F16, quant.BF16, quant.F32} {
		info, _ := quant.Lookup(typ)
		q := make([]byte, len(src)*info.TypeSize)
		if err := quant.Quantize(typ, src, q); err != nil {
			t.Fatalf("Quantize(%s, ±Inf, NaN) = %v", info.Name, err)
		}
		got := make([]float32, len(src))
		if err := quant.Dequantize(typ, q, got); err != nil {
			t.Fatalf("Dequantize(%s): %v", info.Name, err)
		}
		if !math.IsInf(float64(got[0]), 1) || !math.IsInf(float64(got[1]), -1) || !math.IsNaN(float64(got[2])) {
			t.Errorf("%s round trip of +Inf, -Inf, NaN = %v", info.Name, got[:3])
		}
	}
}

// unreadBytes lists block bytes that ggml's dequantizer does not read: the
// Q8_K bsums (only dot products use them) and the Q8_1 sum s.
var unreadBytes = map[quant.Type][2]int{
	quant.Q8_K: {260, 292},
	quant.Q8_1: {2, 4},
}

// TestEveryBlockByteIsRead flips, for each byte of the first two blocks of a
// Gaussian row of every fixture type (and of a Q8_1 block), each of its 8
// bits in turn and requires that at least one flip changes the decoded
// values: a dequantizer that ignored a byte (or decoded a block from the
// wrong offset) fails here. Bytes ggml itself never reads must not change
// anything.
func TestEveryBlockByteIsRead(t *testing.T) {
	type blockCase struct {
		name string
		typ  quant.Type
		q    []byte
	}
	var cases []blockCase
	for _, fx := range loadDequantFixtures(t) {
		info, _ := quant.Lookup(fx.typ)
		n := 2 * info.TypeSize
		if info.BlockSize == 1 {
			n = 16 * info.TypeSize // 16 values of a float type
		}
		cases = append(cases, blockCase{fx.name, fx.typ, append([]byte(nil), fx.q[:n]...)})
	}
	q81 := make([]byte, 2*36)
	x := make([]float32, 64)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	if err := quant.Quantize(quant.Q8_1, x, q81); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, blockCase{"Q8_1", quant.Q8_1, q81})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, _ := quant.Lookup(tc.typ)
			n := len(tc.q) / info.TypeSize * info.BlockSize
			base := make([]float32, n)
			if err := quant.Dequantize(tc.typ, tc.q, base); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n)
			for i := range tc.q {
				changed := false
				for bit := range 8 {
					mut := append([]byte(nil), tc.q...)
					mut[i] ^= 1 << bit
					if err := quant.Dequantize(tc.typ, mut, got); err != nil {
						t.Fatal(err)
					}
					if firstBitDiff(base, got) >= 0 {
						changed = true
					}
				}
				inBlock := i % info.TypeSize
				r, unread := unreadBytes[tc.typ]
				unread = unread && inBlock >= r[0] && inBlock < r[1]
				if changed == unread {
					t.Errorf("%s byte %d (offset %d in its block): flipping its bits changed the output = %v, want %v", tc.name, i, inBlock, changed, !unread)
				}
			}
		})
	}
}

// TestFP16RoundTripAllHalves: every non-NaN half survives FP16ToFP32 then
// FP32ToFP16; every NaN comes back as ggml's quiet NaN 0x7e00 with its sign.
func TestFP16RoundTripAllHalves(t *testing.T) {
	for h := range 1 << 16 {
		f := quant.FP16ToFP32(uint16(h))
		got := quant.FP32ToFP16(f)
		want := uint16(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want = uint16(h)&0x8000 | 0x7e00
			if !math.IsNaN(float64(f)) {
				t.Fatalf("FP16ToFP32(%#04x) = %v, want NaN", h, f)
			}
		}
		if got != want {
			t.Fatalf("FP32ToFP16(FP16ToFP32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

// ggmlFP32ToFP16 is a transcription of ggml's ggml_compute_fp32_to_fp16
// (the float rounding trick), kept here only as a differential oracle for
// FP32ToFP16's integer implementation.
func ggmlFP32ToFP16(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)  // 2^112
	scaleToZero := math.Float32frombits(0x08800000) // 2^-110
	base := float32(float32(abs(f)*scaleToInf) * scaleToZero)
	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits(bias>>1+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007c00
	mantBits := bits & 0x00000fff
	nonsign := expBits + mantBits
	if shl1w > 0xff000000 {
		return uint16(sign>>16) | 0x7e00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

func abs(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func TestFP32ToFP16MatchesGGMLAlgorithm(t *testing.T) {
	check := func(b uint32) {
		f := math.Float32frombits(b)
		if got, want := quant.FP32ToFP16(f), ggmlFP32ToFP16(f); got != want {
			t.Fatalf("FP32ToFP16(%g = %#08x) = %#04x, ggml gives %#04x", f, b, got, want)
		}
	}
	// Every float32 near the half boundaries: exponents 101..143 with the low
	// mantissa bits around the rounding point, plus random patterns.
	for e := uint32(95); e <= 145; e++ {
		for _, m := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fe000, 0x7fefff, 0x7ff000, 0x7fffff} {
			check(e<<23 | m)
			check(1<<31 | e<<23 | m)
		}
		for m := uint32(0); m < 1<<23; m += 4093 {
			check(e<<23 | m)
		}
	}
	for _, b := range []uint32{0, 1 << 31, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff, 0x477fe000, 0x477fefff, 0x477ff000, 0x33000000, 0x33000001, 0x387fc000} {
		check(b)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		check(r.Uint32())
	}
}

func TestFP32ToBF16(t *testing.T) {
	tests := []struct {
		name string
		in   uint32
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"round down below half", 0x3f807fff, 0x3f80},
		{"tie to even (stays)", 0x3f808000, 0x3f80},
		{"tie to even (up)", 0x3f818000, 0x3f82},
		{"above half", 0x3f808001, 0x3f81},
		{"overflow to inf", 0x7f7fffff, 0x7f80},
		{"subnormal kept", 0x00010000, 0x0001},
		{"negative zero", 0x80000000, 0x8000},
		{"signalling NaN made quiet", 0x7f800001, 0x7fc0},
		{"NaN payload kept", 0xffa50000, 0xffe5},
	}
	var got, want []uint16
	for _, tc := range tests {
		got = append(got, quant.FP32ToBF16(math.Float32frombits(tc.in)))
		want = append(want, tc.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FP32ToBF16 over %d cases mismatch (-want +got):\n%s", len(tests), diff)
	}
}

// TestQ8ActivationFormats checks the activation formats the CPU engine
// uses against their definitions: Q8_1's s is fp16(d*sum(q)) with the
// float32 d = amax/127, Q8_K's
// bsums are the sums of 16 codes and its d is float32.
func TestQ8ActivationFormats(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	q1 := make([]byte, 8*36)
	if err := quant.Quantize(quant.Q8_1, x, q1); err != nil {
		t.Fatal(err)
	}
	for b := range 8 {
		blk := q1[36*b:]
		var amax float32
		for _, v := range x[32*b : 32*b+32] {
			amax = max(amax, abs(v))
		}
		d := amax / 127 // ggml uses the float32 d, not its fp16 rounding, for s
		if got, want := uint16(blk[0])|uint16(blk[1])<<8, quant.FP32ToFP16(d); got != want {
			t.Errorf("Q8_1 block %d: d = %#04x, want fp16(amax/127) = %#04x", b, got, want)
		}
		var sum int32
		for _, q := range blk[4:36] {
			sum += int32(int8(q))
		}
		s := uint16(blk[2]) | uint16(blk[3])<<8
		if want := quant.FP32ToFP16(float32(sum) * d); s != want {
			t.Errorf("Q8_1 block %d: s = %#04x, want fp16(d*sum) = %#04x", b, s, want)
		}
	}
	qk := make([]byte, 292)
	if err := quant.Quantize(quant.Q8_K, x, qk); err != nil {
		t.Fatal(err)
	}
	for j := range 16 {
		var sum int32
		for _, q := range qk[4+16*j : 4+16*j+16] {
			sum += int32(int8(q))
		}
		got := int16(uint16(qk[260+2*j]) | uint16(qk[261+2*j])<<8)
		if int32(got) != sum {
			t.Errorf("Q8_K bsums[%d] = %d, want %d", j, got, sum)
		}
	}
}
