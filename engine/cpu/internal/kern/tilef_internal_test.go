package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aprqa/apr/engine/quant"
)

// floatTypes are the weight types with float tile kernels, with their Go
// expander and tail dot, and the bytes of one value.
var floatTypes = []struct {
	t      quant.Type
	size   int
	expand expandFunc
	dot    dotFunc
}{
	{quant.F32, 4, expandF32Go, dotF32Go},
	{quant.F16, 2, expandF16Go, dotF16Go},
	{quant.BF16, 2, expandBF16Go, dotBF16Go},
}

// floatRow returns n random values of type t (size bytes each): normal
// values, some large, some zero, a few negative zeros and, for F16, some
// subnormals.
func floatRow(rng *rand.Rand, t quant.Type, n int) []byte {
	b := make([]byte, n*4)
	for i := 0; i < n; i++ {
		f := float32(rng.NormFloat64())
		switch rng.IntN(40) {
		case 0:
			f *= 300
		case 1:
			f = 0
		case 2:
			f = float32(math.Copysign(0, -1))
		case 3:
			f *= 1e-6 // F16 subnormal
		}
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	switch t {
	case quant.F16:
		o := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(o[2*i:], fp32ToFP16(math.Float32frombits(le32(b[4*i:]))))
		}
		return o
	case quant.BF16:
		o := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(o[2*i:], fp32ToBF16(math.Float32frombits(le32(b[4*i:]))))
		}
		return o
	}
	return b
}

// chainDot is what every tile output must be, written out plainly: one
// eight-lane fma chain over the first 8·⌊n/8⌋ values, hsum_float_8, plus
// the tail's Go dot (the eight-row AVX2 kernel's operations).
func chainDot(n, size int, expand expandFunc, tail dotFunc, w, a []byte) float32 {
	n8 := n / 8
	wf, af := make([]byte, 32*n8), make([]byte, 32*n8)
	expand(n8, w, wf, 32)
	expand(n8, a, af, 32)
	var acc [8]float32
	for i := 0; i < 8*n8; i++ {
		acc[i&7] = fma32(math.Float32frombits(le32(wf[4*i:])), math.Float32frombits(le32(af[4*i:])), acc[i&7])
	}
	s := hsum8(&acc)
	if n > 8*n8 {
		s += tail(n-8*n8, w[size*8*n8:], a[size*8*n8:])
	}
	return s
}

// TestExpandersMatchGo: the expanders registered with the tile kernels
// write what their Go twins write, at a stride, and nothing between.
func TestExpandersMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, e := range List() {
		k, _ := Lookup(e.Key)
		if !e.Runnable || k == nil || k.tileF == nil {
			continue
		}
		for _, ft := range floatTypes {
			if ft.t != e.Key.Type {
				continue
			}
			for _, n8 := range []int{1, 5, 64} {
				src := floatRow(rng, ft.t, 8*n8)
				got, want := make([]byte, n8*96), make([]byte, n8*96)
				for i := range got {
					got[i], want[i] = 0xa5, 0xa5
				}
				k.expand(n8, src, got[32:], 96)
				ft.expand(n8, src, want[32:], 96)
				if string(got) != string(want) {
					t.Fatalf("%s: expand(n8=%d) differs from its Go twin", e.Contract, n8)
				}
			}
		}
	}
}

// TestTileFEqualsGoTwin: every registered tile kernel gives bit for bit
// what tileF4x12Go gives (outputs and the carried accumulators), whole and
// in pieces, and the Go twin gives each output the plain chain (chainDot
// without tail).
func TestTileFEqualsGoTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	tiles := map[string]tileFFunc{"go": tileF4x12Go}
	for _, e := range List() {
		if k, _ := Lookup(e.Key); e.Runnable && k != nil && k.tileF != nil && e.Key.Op == OpMatMul {
			tiles[e.Contract] = k.tileF
		}
	}
	for _, n8 := range []int{1, 3, 70} {
		n := 8 * n8
		w := make([]byte, 4*32*n8+32) // rows 32·n8 + 8 bytes apart: a stride that is not the row length
		ws := 32*n8 + 8
		wrows := make([][]byte, 4)
		for j := 0; j < 4; j++ {
			wrows[j] = floatRow(rng, quant.F32, n)
			copy(w[j*ws:], wrows[j])
		}
		arows := make([][]byte, tileFActs)
		a := make([]byte, n8*tileFStep)
		for r := range arows {
			arows[r] = floatRow(rng, quant.F32, n)
			expandF32Go(n8, arows[r], a[64*(r/2)+32*(r%2):], tileFStep)
		}
		for name, tile := range tiles {
			whole := make([]float32, 48)
			acc := make([]float32, tileFAcc)
			tile(n8, w[:3*ws+32*n8], ws, a, acc, tileFirst|tileLast, whole, 4)
			for j := 0; j < 4; j++ {
				for r := 0; r < tileFActs; r++ {
					want := chainDot(n, 4, expandF32Go, dotF32Go, wrows[j], arows[r])
					if math.Float32bits(whole[4*r+j]) != math.Float32bits(want) {
						t.Fatalf("%s n=%d: out[%d] = %g, want %g (the eight-lane chain)", name, n, 4*r+j, whole[4*r+j], want)
					}
				}
			}
			// In pieces of 1, 2, … steps, through acc.
			pieces := make([]float32, 48)
			for b0, step := 0, 1; b0 < n8; b0, step = b0+step, step+1 {
				b1 := min(n8, b0+step)
				flags := 0
				if b0 == 0 {
					flags |= tileFirst
				}
				if b1 == n8 {
					flags |= tileLast
				}
				tile(b1-b0, w[32*b0:3*ws+32*b1], ws, a[b0*tileFStep:b1*tileFStep], acc, flags, pieces, 4)
			}
			for i := range whole {
				if math.Float32bits(whole[i]) != math.Float32bits(pieces[i]) {
					t.Fatalf("%s n=%d: out[%d] in pieces = %g, whole = %g", name, n, i, pieces[i], whole[i])
				}
			}
		}
	}
}

// TestMulWithGoTileF runs Mul's tile path with the Go twins (so that it is
// tested in -tags noasm builds too): every output is the plain chain of its
// row pair, bit for bit, with activation rows that pad the last group, weight
// rows that pad the last four, tails (n mod 8) and several threads; and
// within the contract's bound of the float64 dot product.
func TestMulWithGoTileF(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, ft := range floatTypes {
		base, err := Lookup(Key{Op: OpMatMul, Type: ft.t, Backend: Backend, ISA: ISAGo})
		if err != nil {
			t.Fatal(err)
		}
		k := *base
		k.tileF, k.expand, k.ftail = tileF4x12Go, ft.expand, ft.dot
		for _, threads := range []int{1, 2} {
			pool := NewPool(threads)
			for _, c := range []struct{ n, rows, m int }{{37, 9, 13}, {8, 4, 8}, {520, 21, 25}} {
				t.Run(fmt.Sprintf("%s/threads=%d/n=%d/rows=%d/m=%d", ft.t, threads, c.n, c.rows, c.m), func(t *testing.T) {
					wd := make([]byte, 0, c.rows*c.n*ft.size)
					for r := 0; r < c.rows; r++ {
						wd = append(wd, floatRow(rng, ft.t, c.n)...)
					}
					w := Weights{Type: ft.t, Rows: c.rows, Cols: c.n, Data: wd}
					var s Scratch
					x, dst := mulRandom(t, &k, pool, &s, w, rng, c.m)
					if len(s.st.af) == 0 {
						t.Fatal("Mul did not take the tile path")
					}
					arb := c.n * ft.size
					a := make([]byte, c.m*arb)
					k.convert(x, a)
					wrb := c.n * ft.size
					for i := 0; i < c.m; i++ {
						for r := 0; r < c.rows; r++ {
							wr, ar := wd[r*wrb:(r+1)*wrb], a[i*arb:(i+1)*arb]
							want := chainDot(c.n, ft.size, ft.expand, ft.dot, wr, ar)
							got := dst[i*c.rows+r]
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("dst[%d, %d] = %g, want %g", i, r, got, want)
							}
							// The contract: |got − Σ w·a| ≤ (n + 8)·2⁻²³·Σ|w·a|.
							wf, af := make([]float32, c.n), make([]float32, c.n)
							if err := quant.Dequantize(ft.t, wr, wf); err != nil {
								t.Fatal(err)
							}
							if err := quant.Dequantize(ft.t, ar, af); err != nil {
								t.Fatal(err)
							}
							var ref, mag float64
							for l := range wf {
								ref += float64(wf[l]) * float64(af[l])
								mag += math.Abs(float64(wf[l]) * float64(af[l]))
							}
							if d := math.Abs(float64(got) - ref); d > float64(c.n+8)*0x1p-23*mag {
								t.Fatalf("dst[%d, %d] = %g, Σ w·a = %g: off by %g, beyond the contract's %g", i, r, got, ref, d, float64(c.n+8)*0x1p-23*mag)
							}
						}
					}
				})
			}
			pool.Close()
		}
	}
}

// BenchmarkTileFHot runs the tile kernels on operands in L1 (one group
// piece of 64 steps and four weight rows): the kernel's own speed, without
// memory.
func BenchmarkTileFHot(b *testing.B) {
	tiles := map[string]tileFFunc{"go": tileF4x12Go}
	for _, e := range List() {
		if k, _ := Lookup(e.Key); e.Runnable && k != nil && k.tileF != nil && e.Key.Type == quant.F16 && e.Key.Op == OpMatMul {
			tiles[string(e.Key.ISA)] = k.tileF
		}
	}
	rng := rand.New(rand.NewPCG(47, 48))
	const n8 = tileFPiece
	w := floatRow(rng, quant.F32, 4*8*n8)
	a := floatRow(rng, quant.F32, 12*8*n8)
	acc, out := make([]float32, tileFAcc), make([]float32, 48)
	for name, tile := range tiles {
		for _, flags := range []int{tileFirst, tileFirst | tileLast} {
			b.Run(fmt.Sprintf("%s/flags=%d", name, flags), func(b *testing.B) {
				for b.Loop() {
					tile(n8, w, 32*n8, a, acc, flags, out, 4)
				}
				b.ReportMetric(2*4*12*8*n8*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
