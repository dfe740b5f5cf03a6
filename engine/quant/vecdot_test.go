package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// TestRoundActivations: each weight type's activations come back as the
// dequantized blocks of its activation format's quantizer (F16/BF16: the
// half rounding; F32: unchanged), the scratch is reused, and a row that is
// not whole blocks, a NaN and a type with no products are errors.
func TestRoundActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 3))
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	for _, c := range []struct {
		w, act quant.Type
		q      func([]float32, []byte) error
	}{
		{quant.Q4_0, quant.Q8_0, quant.QuantizeRowQ8_0},
		{quant.Q4_1, quant.Q8_1, quant.QuantizeRowQ8_1},
		{quant.Q4_K, quant.Q8_K, quant.QuantizeRowQ8_K},
		{quant.IQ2_XXS, quant.Q8_K, quant.QuantizeRowQ8_K},
	} {
		if a, err := quant.VecDotType(c.w); err != nil || a != c.act {
			t.Errorf("VecDotType(%s) = %s, %v; want %s", c.w, a, err, c.act)
		}
		info, _ := quant.Lookup(c.act)
		blocks := make([]byte, len(x)/info.BlockSize*info.TypeSize)
		if err := c.q(x, blocks); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(x))
		if err := quant.Dequantize(c.act, blocks, want); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(x))
		scratch, err := quant.RoundActivations(c.w, x, got, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(scratch) == 0 {
			t.Errorf("%s: no scratch returned", c.w)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: value %d is %v, want %v", c.w, i, got[i], want[i])
			}
		}
	}
	for _, c := range []struct {
		w     quant.Type
		round func(float32) float32
	}{
		{quant.F32, func(v float32) float32 { return v }},
		{quant.F16, func(v float32) float32 { return quant.FP16ToFP32(quant.FP32ToFP16(v)) }},
		{quant.BF16, func(v float32) float32 { return quant.BF16ToFP32(quant.FP32ToBF16(v)) }},
	} {
		got := make([]float32, len(x))
		if _, err := quant.RoundActivations(c.w, x, got, nil); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != c.round(x[i]) {
				t.Fatalf("%s: value %d is %v, want %v", c.w, i, got[i], c.round(x[i]))
			}
		}
	}
	if _, err := quant.RoundActivations(quant.Q8_0, x[:33], make([]float32, 33), nil); err == nil {
		t.Error("33 values rounded to Q8_0 blocks: no error")
	}
	bad := append([]float32(nil), x[:32]...)
	bad[5] = float32(math.NaN())
	if _, err := quant.RoundActivations(quant.Q8_0, bad, make([]float32, 32), nil); err == nil {
		t.Error("a NaN rounded to Q8_0: no error")
	}
	if _, err := quant.RoundActivations(quant.Q8_K, x, make([]float32, len(x)), nil); err == nil {
		t.Error("Q8_K has no products, yet its activations were rounded")
	}
}

// TestMinSumCorrection: for a Q4_1 row, Σ dequant(w)·dequant(act) plus
// Σ_blocks m·correction equals ggml's product d_w·d_a·Σq·q + m·s computed
// block by block from the bytes (s the Q8_1 block's stored sum); other
// types have no correction, and BlockMins refuses them.
func TestMinSumCorrection(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 4))
	const n = 256
	w, x := make([]float32, n), make([]float32, n)
	for i := range w {
		w[i], x[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	wb := make([]byte, n/32*20)
	if err := quant.Quantize(quant.Q4_1, w, wb); err != nil {
		t.Fatal(err)
	}
	ab := make([]byte, n/32*36)
	if err := quant.QuantizeRowQ8_1(x, ab); err != nil {
		t.Fatal(err)
	}
	wd, ad := make([]float32, n), make([]float32, n)
	if err := quant.Dequantize(quant.Q4_1, wb, wd); err != nil {
		t.Fatal(err)
	}
	if _, err := quant.RoundActivations(quant.Q4_1, x, ad, nil); err != nil {
		t.Fatal(err)
	}
	corr, err := quant.MinSumCorrections(quant.Q4_1, x)
	if err != nil || len(corr) != n/32 {
		t.Fatalf("MinSumCorrections: %v, %d blocks", err, len(corr))
	}
	mins := make([]float32, n/32)
	if err := quant.BlockMins(quant.Q4_1, wb, mins); err != nil {
		t.Fatal(err)
	}
	var got, want float64
	for i := range wd {
		got += float64(wd[i]) * float64(ad[i])
	}
	for b := range mins {
		got += float64(mins[b]) * corr[b]
		d, m := quant.FP16ToFP32(uint16(wb[20*b])|uint16(wb[20*b+1])<<8), quant.FP16ToFP32(uint16(wb[20*b+2])|uint16(wb[20*b+3])<<8)
		da, s := quant.FP16ToFP32(uint16(ab[36*b])|uint16(ab[36*b+1])<<8), quant.FP16ToFP32(uint16(ab[36*b+2])|uint16(ab[36*b+3])<<8)
		var iq float64
		for j := range 16 {
			q := wb[20*b+4+j]
			iq += float64(q&15)*float64(int8(ab[36*b+4+j])) + float64(q>>4)*float64(int8(ab[36*b+4+j+16]))
		}
		want += float64(d)*float64(da)*iq + float64(m)*float64(s)
	}
	if math.Abs(got-want) > 1e-9*math.Abs(want)+1e-9 {
		t.Errorf("product with the correction %.12g, ggml's %.12g", got, want)
	}
	if c, err := quant.MinSumCorrections(quant.Q4_0, x); c != nil || err != nil {
		t.Errorf("Q4_0 has a min correction: %v, %v", c, err)
	}
	if err := quant.BlockMins(quant.Q4_0, make([]byte, 18), make([]float32, 1)); err == nil {
		t.Error("BlockMins of Q4_0: no error")
	}
}
