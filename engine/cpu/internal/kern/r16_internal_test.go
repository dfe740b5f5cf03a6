package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// q80Rows returns rows random Q8_0 rows of n values: random scales (some
// zero), quants over the whole int8 range, −128 included.
func q80Rows(rng *rand.Rand, rows, n int) []byte {
	b := make([]byte, rows*n/32*q80Bytes)
	for o := 0; o < len(b); o += q80Bytes {
		d := float32(rng.NormFloat64() * 0.02)
		if rng.IntN(30) == 0 {
			d = 0
		}
		binary.LittleEndian.PutUint16(b[o:], fp32ToFP16(d))
		for j := 2; j < q80Bytes; j++ {
			b[o+j] = byte(rng.IntN(256))
		}
	}
	return b
}

// q50Rows returns rows random Q5_0 rows of n values (some scales zero).
func q50Rows(rng *rand.Rand, rows, n int) []byte {
	b := make([]byte, rows*n/32*22)
	for o := 0; o < len(b); o += 22 {
		d := float32(rng.NormFloat64() * 0.02)
		if rng.IntN(30) == 0 {
			d = 0
		}
		binary.LittleEndian.PutUint16(b[o:], fp32ToFP16(d))
		for j := 2; j < 22; j++ {
			b[o+j] = byte(rng.IntN(256))
		}
	}
	return b
}

// r16Gen returns the random rows generator of a packed type, the signed
// weight j of one of its blocks (ggml's layout), and its bytes per block.
func r16Gen(t quant.Type) (func(*rand.Rand, int, int) []byte, func(blk []byte, j int) int32, int) {
	if t == quant.Q5_0 {
		return q50Rows, func(blk []byte, j int) int32 {
			qh := le32(blk[2:])
			v := int32(blk[6+j%16])
			if j >= 16 {
				v >>= 4
			}
			return v&15 | int32(qh>>j&1)<<4 - 16
		}, 22
	}
	return q80Rows, func(blk []byte, j int) int32 { return int32(int8(blk[2+j])) }, q80Bytes
}

// r16Chain is what every packed kernel's output must be, written out from
// ggml's layout: one float32 chain over the blocks of Σ w·a (exact) times
// float32(d_w·d_a).
func r16Chain(t quant.Type, nb int, w, a []byte) float32 {
	_, wv, bb := r16Gen(t)
	var acc float32
	for b := 0; b < nb; b++ {
		wb, ab := w[b*bb:], a[b*q80Bytes:]
		s := int32(0)
		for j := 0; j < 32; j++ {
			s += wv(wb, j) * int32(int8(ab[2+j]))
		}
		acc = fma32(float32(s), float32(fp16At(wb)*fp16At(ab)), acc)
	}
	return acc
}

func TestPackQ8_0R16Layout(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const rows, n = 21, 96
	nb := n / 32
	src := q80Rows(rng, rows, n)
	dst := make([]byte, 2*nb*r16Formats[quant.Q8_0].block)
	packQ8_0R16(rows, n, src, dst, 0, 2)
	for g := 0; g < 2; g++ {
		grp := dst[g*nb*r16Formats[quant.Q8_0].block:]
		for r := 0; r < r16Rows; r++ {
			i := 16*g + r
			for b := 0; b < nb; b++ {
				sc := le16(grp[512*nb+32*b+2*r:])
				if i >= rows {
					if sc != 0 {
						t.Fatalf("padded row %d block %d: scale %#04x, want 0", i, b, sc)
					}
				} else if want := le16(src[i*nb*q80Bytes+b*q80Bytes:]); sc != want {
					t.Fatalf("row %d block %d: scale %#04x, want %#04x", i, b, sc, want)
				}
				for v := 0; v < 32; v++ {
					got := grp[512*b+64*(v/4)+4*r+v%4]
					want := byte(0x80)
					if i < rows {
						want = src[i*nb*q80Bytes+b*q80Bytes+2+v] ^ 0x80
					}
					if got != want {
						t.Fatalf("row %d block %d value %d: %#02x, want %#02x", i, b, v, got, want)
					}
				}
			}
		}
	}
}

// q4KRows returns rows random Q4_K rows of n values (some d or dmin zero).
func q4KRows(rng *rand.Rand, rows, n int) []byte {
	b := make([]byte, rows*n/256*144)
	for o := 0; o < len(b); o += 144 {
		for j := 4; j < 144; j++ {
			b[o+j] = byte(rng.IntN(256))
		}
		d, dm := float32(rng.NormFloat64()*0.001), float32(rng.NormFloat64()*0.001)
		switch rng.IntN(20) {
		case 0:
			d = 0
		case 1:
			dm = 0
		}
		binary.LittleEndian.PutUint16(b[o:], fp32ToFP16(d))
		binary.LittleEndian.PutUint16(b[o+2:], fp32ToFP16(dm))
	}
	return b
}

// r16KChain is what every packed Q4_K output must be, written out from
// ggml's layout (r16k.go's chain).
func r16KChain(nsb int, w, a []byte) float32 {
	var acc float32
	for b := 0; b < nsb; b++ {
		x, y := w[144*b:], a[292*b:]
		da, q8, bs := q8K(y[:292])
		qs := x[16:144]
		s := float32(fp16At(x) * da)
		for j := 0; j < 4; j++ {
			var lo, hi int32
			for l := 0; l < 32; l++ {
				lo += int32(qs[32*j+l]&15) * int32(int8(q8[64*j+l]))
				hi += int32(qs[32*j+l]>>4) * int32(int8(q8[64*j+32+l]))
			}
			sc0, _ := kScaleMin(2*j, x[4:16])
			sc1, _ := kScaleMin(2*j+1, x[4:16])
			acc = fma32(float32(sc0*lo+sc1*hi), s, acc)
		}
		msum := int32(0)
		for sb := 0; sb < 8; sb++ {
			_, m := kScaleMin(sb, x[4:16])
			msum += m * (bsum(bs, 2*sb) + bsum(bs, 2*sb+1))
		}
		acc = fma32(float32(msum), float32(fp16At(x[2:])*-da), acc)
	}
	return acc
}

// q6KRows returns rows random Q6_K rows of n values (some d zero; int8
// scales over the whole range).
func q6KRows(rng *rand.Rand, rows, n int) []byte {
	b := make([]byte, rows*n/256*210)
	for o := 0; o < len(b); o += 210 {
		for j := 0; j < 208; j++ {
			b[o+j] = byte(rng.IntN(256))
		}
		d := float32(rng.NormFloat64() * 0.0005)
		if rng.IntN(20) == 0 {
			d = 0
		}
		binary.LittleEndian.PutUint16(b[o+208:], fp32ToFP16(d))
	}
	return b
}

// r16K6Chain is what every packed Q6_K output must be, written out from
// ggml's layout (r16k.go's chain).
func r16K6Chain(nsb int, w, a []byte) float32 {
	var acc float32
	for b := 0; b < nsb; b++ {
		x, y := w[210*b:], a[292*b:]
		da, q8, _ := q8K(y[:292])
		ql, qh, sc := x[0:128], x[128:192], x[192:208]
		s := float32(fp16At(x[208:]) * da)
		for j := 0; j < 8; j++ {
			var v int32
			for h := 0; h < 2; h++ {
				is := int32(0)
				for t := 32*j + 16*h; t < 32*j+16*h+16; t++ {
					half, gp, l := t/128, (t%128)/32, t%32
					lo := ql[64*half+l+32*(gp&1)] >> (4 * (gp / 2)) & 15
					hi := qh[32*half+l] >> (2 * gp) & 3
					is += (int32(lo|hi<<4) - 32) * int32(int8(q8[t]))
				}
				v += int32(int8(sc[2*j+h])) * is
			}
			acc = fma32(float32(v), s, acc)
		}
	}
	return acc
}

// r16Twins returns the packed kernels to test: the Go twins, and the
// assembly where this machine runs it.
func r16Twins(t *testing.T) map[string]*Kernel {
	out := map[string]*Kernel{}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K} {
		base, err := Lookup(Key{Op: OpMatMul, Type: typ, Backend: Backend, ISA: ISAGo})
		if err != nil {
			t.Fatal(err)
		}
		goK := *base
		switch typ {
		case quant.Q4_K:
			goK.pack, goK.r16k4, goK.r16k1 = packQ4_KR16, r16kTwin(typ, r16KActs), r16kTwin(typ, 1)
			goK.r16 = r16Format{block: r16KBlock, unit: 256}
		case quant.Q6_K:
			goK.pack, goK.r16k4, goK.r16k1 = packQ6_KR16, r16kTwin(typ, r16KActs), r16kTwin(typ, 1)
			goK.r16 = r16Format{block: r16K6Block, unit: 256}
		default:
			f := r16Formats[typ]
			goK.pack, goK.r16x8, goK.r16x1, goK.r16 = map[quant.Type]packFunc{quant.Q8_0: packQ8_0R16, quant.Q5_0: packQ5_0R16}[typ], r16x8Twin(f), r16x1Twin(f), f
		}
		out[typ.String()+"/go"] = &goK
		for _, isa := range []ISA{ISAAVX512VNNI16, ISAAVX2R16} {
			if k, err := Lookup(Key{Op: OpMatMul, Type: typ, Backend: Backend, ISA: isa}); err == nil {
				out[typ.String()+"/"+string(isa)] = k
			}
		}
	}
	return out
}

// TestMulR16 runs Mul through the packed path (Go twins, and the assembly
// where it runs) and checks every output against the chain written out
// from ggml's layout, bit for bit: so each row's result is the same
// whatever m, the other rows and the threads (batch invariance), and the
// matvec of the row alone; and within the contract's (B + 8)·2⁻²³·Σ|w·a|
// of the float64 dot.
func TestMulR16(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	for name, k := range r16Twins(t) {
		typ := k.Key.Type
		unit := k.r16.unit
		for _, threads := range []int{1, 2} {
			pool := NewPool(threads)
			for _, c := range []struct{ units, rows, m int }{{1, 9, 1}, {3, 21, 3}, {2, 16, 8}, {5, 40, 13}, {8, 33, 25}, {2, 17, 6}} {
				n := c.units * unit
				t.Run(fmt.Sprintf("%s/threads=%d/n=%d/rows=%d/m=%d", name, threads, n, c.rows, c.m), func(t *testing.T) {
					var wd []byte
					var chain func(w, a []byte) float32
					var wrb int
					if typ == quant.Q4_K {
						wd, wrb = q4KRows(rng, c.rows, n), c.units*144
						chain = func(w, a []byte) float32 { return r16KChain(c.units, w, a) }
					} else if typ == quant.Q6_K {
						wd, wrb = q6KRows(rng, c.rows, n), c.units*210
						chain = func(w, a []byte) float32 { return r16K6Chain(c.units, w, a) }
					} else {
						gen, _, bb := r16Gen(typ)
						wd, wrb = gen(rng, c.rows, n), c.units*bb
						chain = func(w, a []byte) float32 { return r16Chain(typ, c.units, w, a) }
					}
					w, err := k.PackWeights(Weights{Type: typ, Rows: c.rows, Cols: n, Data: wd})
					if err != nil {
						t.Fatal(err)
					}
					var s Scratch
					x, dst := mulRandom(t, k, pool, &s, w, rng, c.m)
					var a Acts
					if err := k.Convert(pool, &s, &a, x, c.m, n); err != nil {
						t.Fatal(err)
					}
					arb := len(a.Data) / c.m
					for i := 0; i < c.m; i++ {
						for r := 0; r < c.rows; r++ {
							wr, ar := wd[r*wrb:(r+1)*wrb], a.Data[i*arb:(i+1)*arb]
							want := chain(wr, ar)
							got := dst[i*c.rows+r]
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("dst[%d, %d] = %g, want %g", i, r, got, want)
							}
							wf, af := make([]float32, n), make([]float32, n)
							if err := quant.Dequantize(typ, wr, wf); err != nil {
								t.Fatal(err)
							}
							if err := quant.Dequantize(a.Type, ar, af); err != nil {
								t.Fatal(err)
							}
							var ref, mag float64
							for l := range wf {
								ref += float64(wf[l]) * float64(af[l])
								mag += math.Abs(float64(wf[l]) * float64(af[l]))
							}
							if d := math.Abs(float64(got) - ref); d > float64(c.units+8)*0x1p-23*mag {
								t.Fatalf("dst[%d, %d] = %g, Σ w·a = %g: off by %g, beyond the contract's %g", i, r, got, ref, d, float64(c.units+8)*0x1p-23*mag)
							}
						}
					}
				})
			}
			pool.Close()
		}
	}
}

// TestMulR16RefusesUnpackedWeights: a packed kernel never reads ggml's
// layout as if it were packed.
func TestMulR16RefusesUnpackedWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	pool := NewPool(1)
	defer pool.Close()
	for name, k := range r16Twins(t) {
		gen, _, _ := r16Gen(k.Key.Type)
		switch k.Key.Type {
		case quant.Q4_K:
			gen = q4KRows
		case quant.Q6_K:
			gen = q6KRows
		}
		n := 256
		w := Weights{Type: k.Key.Type, Rows: 16, Cols: n, Data: gen(rng, 16, n)}
		var s Scratch
		for _, m := range []int{1, 9} {
			if err := k.Mul(pool, &s, make([]float32, 16*m), w, make([]float32, n*m), m); err == nil {
				t.Errorf("%s: Mul(m=%d) of unpacked weights = nil, want an error", name, m)
			}
		}
	}
}

// TestUnpackRowGivesTheFileBytes: every packed row unpacks to exactly the
// bytes of ggml's layout it was packed from, padded groups included.
func TestUnpackRowGivesTheFileBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(67, 68))
	for name, k := range r16Twins(t) {
		typ := k.Key.Type
		var gen func(*rand.Rand, int, int) []byte
		switch typ {
		case quant.Q4_K:
			gen = q4KRows
		case quant.Q6_K:
			gen = q6KRows
		default:
			gen, _, _ = r16Gen(typ)
		}
		const rows = 21
		n := 3 * k.r16.unit
		w, err := k.PackWeights(Weights{Type: typ, Rows: rows, Cols: n, Data: gen(rng, rows, n)})
		if err != nil {
			t.Fatal(err)
		}
		wrb := len(w.Data) / rows
		for r := 0; r < rows; r++ {
			got := make([]byte, wrb)
			if err := k.UnpackRow(w, r, got); err != nil {
				t.Fatal(err)
			}
			if want := w.Data[r*wrb : (r+1)*wrb]; string(got) != string(want) {
				t.Fatalf("%s: UnpackRow(%d) = % x…, want % x…", name, r, got[:16], want[:16])
			}
		}
		if err := k.UnpackRow(w, rows, make([]byte, wrb)); err == nil {
			t.Errorf("%s: UnpackRow past the last row = nil, want an error", name)
		}
	}
}

// mulRandom multiplies w by m rows of random activations with k.Mul into
// a result buffer with a sentinel past its end, failing t if Mul errs or
// writes past it; it returns the activations and the m·w.Rows results.
func mulRandom(t *testing.T, k *Kernel, pool *Pool, s *Scratch, w Weights, rng *rand.Rand, m int) (x, dst []float32) {
	t.Helper()
	x = make([]float32, m*w.Cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	dst = make([]float32, m*w.Rows+1)
	dst[len(dst)-1] = 12345
	if err := k.Mul(pool, s, dst[:m*w.Rows], w, x, m); err != nil {
		t.Fatal(err)
	}
	if dst[len(dst)-1] != 12345 {
		t.Fatal("Mul wrote past dst")
	}
	return x, dst[:m*w.Rows]
}
