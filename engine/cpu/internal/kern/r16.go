package kern

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/quant"
)

// Packed kernels ("r16"): the weights are repacked once, at load, into
// groups of sixteen rows laid out for 512-bit integer products, and every
// (weight row, activation row) pair is computed as
//
//	acc = 0
//	for each block b:  acc = fma(float32(Σ_b w·a), float32(d_w·d_a), acc)
//
// one float32 chain per pair over the blocks in order, the block's integer
// sum exact in int32 (VPDPBUSD on unsigned u = w + 128 against the signed
// activation quants, minus 128·Σa, which the activation side supplies) and
// d_w·d_a rounded to float32 before the fma. That is not ggml's vec_dot
// order (eight lanes per row, hsum at the end): these kernels are held to
// the kernel contract's bound, not to llama.cpp's bits. The chain is the
// same whatever the number of activation rows and whichever rows share the
// call: one lane of a 512-bit register is one pair, so a matmul row is bit
// for bit the matvec of that activation row (batch invariance), and the
// matvec and matmul keys of a type share the packed weights.
//
// Layout of the Q8_0 packing (packQ8_0R16): group g of sixteen rows takes
// nb·544 bytes at g·nb·544 (nb blocks per row): first, for each block b, at
// 512b, eight steps of 64 bytes, step k holding quants 4k..4k+3 of rows
// 0..15 (row r at 4r) as unsigned bytes w XOR 0x80 = w + 128; then, at
// 512·nb + 32b, the sixteen rows' fp16 scales of block b. Rows past the
// matrix's last are zero (quants 0x80, scale 0).
//
// Q5_0 (packQ5_0R16) keeps its 22 bytes per block and row: for block b, at
// 320b, four steps of 64 bytes, step k holding bytes 4k..4k+3 of rows
// 0..15's qs (row r at 4r: values 4k..4k+3 in the low nibbles, 16+4k..
// 16+4k+3 in the high ones), then eight 64-bit masks, mask k's bit 4r + i
// the fifth bit of value 4k + i of row r; the scales at 320·nb + 32b. The
// kernels unpack step k to u = q5 + 112 = w + 128 (the nibble, +16 where the
// mask bit is set, +112), so that the Q8_0 kernels' arithmetic follows
// unchanged. Rows past the last are zero bytes (scale 0).

const (
	r16Rows     = 16
	r16Acts     = 8 // activation rows of one r16x8 call
	r16AuxBytes = 8 // per activation block: int32 −128·Σq, float32 d
)

// r16Format is a packed type's block layout: the bytes of one block of
// sixteen rows (quants, then its scales at the group's end), the quant
// part alone, and the unsigned weight u = w + 128 of value 4k+j of row r
// in the quant part q of a block (the Go twins' reader).
type r16Format struct {
	block, quants int
	u             func(q []byte, k, r, j int) int32
	unit          int // values per block
}

var r16Formats = map[quant.Type]r16Format{
	quant.Q8_0: {544, 512, func(q []byte, k, r, j int) int32 { return int32(q[64*k+4*r+j]) }, 32},
	quant.Q5_0: {352, 320, func(q []byte, k, r, j int) int32 {
		nib := q[64*(k%4)+4*r+j]
		if k >= 4 {
			nib >>= 4
		}
		u := int32(nib&15) + 112
		if q[256+8*k+(4*r+j)/8]>>((4*r+j)%8)&1 != 0 {
			u += 16
		}
		return u
	}, 32},
}

// r16x8Func multiplies one packed group of sixteen weight rows (w, nb
// blocks) by a group of eight Q8_0 activation rows repacked by repackQ8
// (quants of block b of row t at aq[256b + 32t]), with the rows' block scales
// transposed in sc (sc[8b + t], actScalesGroup) and their corrections
// −128·Σq in init (init[8b + t]); it writes row t's sixteen results to
// out[t·ostride:], for t = 0..7.
type r16x8Func func(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int)

// r16x1Func multiplies one packed group of sixteen weight rows by one Q8_0
// activation row a (nb blocks of 34 bytes), aux holding per block the int32
// −128·Σq and the float32 scale (r16AuxBytes each); it writes the sixteen
// results to out[0:16].
type r16x1Func func(nb int, w, a, aux []byte, out []float32)

// packFunc packs groups [g0, g1) of sixteen rows of a rows×cols matrix src
// (ggml's layout) into dst (the whole packed matrix).
type packFunc func(rows, cols int, src, dst []byte, g0, g1 int)

// registerR16 registers (t, isa) as a packed kernel: its matvec and matmul
// take weights packed by pack and run r16x8 and r16x1. dot (the single-row
// kernel on ggml's layout) is what the listing and RunKernel callers see
// for unpacked use; Mul refuses unpacked weights.
func registerR16(t quant.Type, isa ISA, pack packFunc, x8 r16x8Func, x1 r16x1Func) {
	f, ok := r16Formats[t]
	if !ok {
		panic("kern: registerR16: no packing for " + t.String())
	}
	dot := map[quant.Type]dotFunc{quant.Q8_0: dotQ8_0Go, quant.Q5_0: dotQ5_0Go}[t]
	register(t, isa, quant.Q8_0, dot, nil)
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		k.pack, k.r16x8, k.r16x1, k.r16 = pack, x8, x1, f
	}
}

// Packs reports whether the kernel multiplies packed weights: Mul and
// MulActsMany then need Weights.Packed, written by Pack.
func (k *Kernel) Packs() bool { return k.pack != nil }

// PackedBytes is the size of the packed form of a rows×cols matrix.
func (k *Kernel) PackedBytes(rows, cols int) (int, error) {
	if k.pack == nil {
		return 0, fmt.Errorf("kern: %s does not pack its weights", k.Contract)
	}
	if _, _, err := k.rowBytes(cols); err != nil {
		return 0, err
	}
	return (rows + r16Rows - 1) / r16Rows * ((cols + k.r16.unit - 1) / k.r16.unit) * k.r16.block, nil
}

// Pack writes the packed form of w into dst (PackedBytes long), the groups
// of sixteen rows spread over the pool, and returns w with Packed = dst.
func (k *Kernel) Pack(p *Pool, w Weights, dst []byte) (Weights, error) {
	size, err := k.PackedBytes(w.Rows, w.Cols)
	if err != nil {
		return w, err
	}
	wrb, _, _ := k.rowBytes(w.Cols)
	if w.Type != k.Key.Type || len(w.Data) != w.Rows*wrb {
		return w, fmt.Errorf("kern: %s: cannot pack %d×%d %s weights of %d bytes", k.Contract, w.Rows, w.Cols, w.Type, len(w.Data))
	}
	if len(dst) != size {
		return w, fmt.Errorf("kern: %s: packed %d×%d weights take %d bytes, got %d", k.Contract, w.Rows, w.Cols, size, len(dst))
	}
	groups := (w.Rows + r16Rows - 1) / r16Rows
	p.For(groups, max(1, groups/(8*p.Threads())), func(lo, hi int) { k.pack(w.Rows, w.Cols, w.Data, dst, lo, hi) })
	w.Packed = dst
	return w, nil
}

// PackWeights is Pack into a new buffer on one thread (tests, tools).
func (k *Kernel) PackWeights(w Weights) (Weights, error) {
	if k.pack == nil {
		return w, nil
	}
	size, err := k.PackedBytes(w.Rows, w.Cols)
	if err != nil {
		return w, err
	}
	p := NewPool(1)
	defer p.Close()
	return k.Pack(p, w, make([]byte, size))
}

// packQ8_0R16 is the Q8_0 packing (see the layout above).
func packQ8_0R16(rows, cols int, src, dst []byte, g0, g1 int) {
	nb := cols / 32
	wrb := nb * q80Bytes
	gb := nb * r16Formats[quant.Q8_0].block
	for g := g0; g < g1; g++ {
		grp := dst[g*gb : (g+1)*gb]
		sc := grp[512*nb:]
		for r := 0; r < r16Rows; r++ {
			i := g*r16Rows + r
			if i >= rows {
				for b := 0; b < nb; b++ {
					for k := 0; k < 8; k++ {
						o := 512*b + 64*k + 4*r
						grp[o], grp[o+1], grp[o+2], grp[o+3] = 0x80, 0x80, 0x80, 0x80
					}
					sc[32*b+2*r], sc[32*b+2*r+1] = 0, 0
				}
				continue
			}
			row := src[i*wrb : (i+1)*wrb]
			for b := 0; b < nb; b++ {
				blk := row[b*q80Bytes : (b+1)*q80Bytes]
				sc[32*b+2*r], sc[32*b+2*r+1] = blk[0], blk[1]
				q, o := blk[2:34], grp[512*b+4*r:512*b+4*r+452]
				for k := 0; k < 8; k++ {
					binary.LittleEndian.PutUint32(o[64*k:], binary.LittleEndian.Uint32(q[4*k:])^0x80808080)
				}
			}
		}
	}
}

// auxQ8_0 writes the r16 kernels' per-block values of one Q8_0 activation
// row a (nb blocks) to aux: −128·Σq as int32 and d as float32, and, when
// init is not nil, −128·Σq also to init[8b] (the transposed group layout).
func auxQ8_0(nb int, a, aux []byte, init []int32) {
	for b := 0; b < nb; b++ {
		blk := a[b*q80Bytes : (b+1)*q80Bytes]
		s := int32(0)
		for _, q := range blk[2:] {
			s += int32(int8(q))
		}
		binary.LittleEndian.PutUint32(aux[8*b:], uint32(-128*s))
		binary.LittleEndian.PutUint32(aux[8*b+4:], math.Float32bits(fp16At(blk)))
		if init != nil {
			init[8*b] = -128 * s
		}
	}
}

// packQ5_0R16 is the Q5_0 packing (see the layout above).
func packQ5_0R16(rows, cols int, src, dst []byte, g0, g1 int) {
	const bb = 22 // bytes of a Q5_0 block
	nb := cols / 32
	wrb := nb * bb
	gb := nb * r16Formats[quant.Q5_0].block
	for g := g0; g < g1; g++ {
		grp := dst[g*gb : (g+1)*gb]
		sc := grp[320*nb:]
		clear(grp)
		for r := 0; r < r16Rows; r++ {
			i := g*r16Rows + r
			if i >= rows {
				continue
			}
			row := src[i*wrb : (i+1)*wrb]
			for b := 0; b < nb; b++ {
				blk := row[b*bb : (b+1)*bb]
				sc[32*b+2*r], sc[32*b+2*r+1] = blk[0], blk[1]
				qh := le32(blk[2:])
				q := grp[320*b:]
				for k := 0; k < 4; k++ {
					copy(q[64*k+4*r:64*k+4*r+4], blk[6+4*k:10+4*k])
				}
				for k := 0; k < 8; k++ {
					bits := byte(qh >> (4 * k) & 15) // values 4k..4k+3
					q[256+8*k+r/2] |= bits << (4 * (r % 2))
				}
			}
		}
	}
}

// r16x8Twin returns the Go twin of the r16x8 kernels of format f: the same
// int32 sums and float32 operations (fma32 rounds once, as VFMADD does).
func r16x8Twin(f r16Format) r16x8Func {
	return func(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int) {
		ws := w[f.quants*nb:]
		for t := 0; t < r16Acts; t++ {
			for r := 0; r < r16Rows; r++ {
				var acc float32
				for b := 0; b < nb; b++ {
					s := init[8*b+t]
					q := w[f.quants*b:]
					for k := 0; k < 8; k++ {
						for j := 0; j < 4; j++ {
							s += f.u(q, k, r, j) * int32(int8(aq[256*b+32*t+4*k+j]))
						}
					}
					d := float32(fp16At(ws[32*b+2*r:]) * sc[8*b+t])
					acc = fma32(float32(s), d, acc)
				}
				out[t*ostride+r] = acc
			}
		}
	}
}

// r16x1Twin returns the Go twin of the r16x1 kernels of format f.
func r16x1Twin(f r16Format) r16x1Func {
	return func(nb int, w, a, aux []byte, out []float32) {
		ws := w[f.quants*nb:]
		for r := 0; r < r16Rows; r++ {
			var acc float32
			for b := 0; b < nb; b++ {
				s := int32(le32(aux[8*b:]))
				q := w[f.quants*b:]
				for k := 0; k < 8; k++ {
					for j := 0; j < 4; j++ {
						s += f.u(q, k, r, j) * int32(int8(a[q80Bytes*b+2+4*k+j]))
					}
				}
				d := float32(fp16At(ws[32*b+2*r:]) * math.Float32frombits(le32(aux[8*b+4:])))
				acc = fma32(float32(s), d, acc)
			}
			out[r] = acc
		}
	}
}

// prepR16 writes tokens [lo, hi)'s aux rows and, for tokens in whole groups
// of eight, the transposed corrections st.ainit.
func (st *mulState) prepR16(lo, hi int) {
	a := st.a
	nb := a.Cols / 32
	full := len(st.ainit) / nb // tokens in whole groups
	for t := lo; t < hi; t++ {
		var init []int32
		if t < full {
			g, r := t/8, t%8
			init = st.ainit[g*nb*8+r:]
		}
		auxQ8_0(nb, a.Data[t*st.arb:(t+1)*st.arb], st.aux1[t*nb*r16AuxBytes:(t+1)*nb*r16AuxBytes], init)
	}
}

// r16Job runs weight rows [lo, hi) of one packed job (lo a multiple of
// sixteen) over every activation row: each group of sixteen weight rows
// over the whole groups of eight activation rows with r16x8, then over the
// rest one by one with r16x1. Groups with rows past the matrix's end go
// through the worker's buffer.
func (st *mulState) r16Job(worker int, jb *Job, lo, hi int) {
	k, m, rows, dst := jb.K, st.a.Rows, jb.W.Rows, jb.Dst
	nb := st.n / 32
	gb := nb * k.r16.block
	full := len(st.ainit) / nb
	tmp := st.r16out[worker]
	for r := lo; r < hi; r += r16Rows {
		w := jb.W.Packed[r/r16Rows*gb : (r/r16Rows+1)*gb]
		nr := min(r16Rows, rows-r)
		for t0 := 0; t0 < full; t0 += r16Acts {
			q := t0 / r16Acts
			aq, sc, init := st.aq[q*nb*256:(q+1)*nb*256], st.asc[q*nb*8:(q+1)*nb*8], st.ainit[q*nb*8:(q+1)*nb*8]
			if nr == r16Rows {
				k.r16x8(nb, w, aq, sc, init, dst[t0*rows+r:(t0+r16Acts-1)*rows+r+r16Rows], rows)
				continue
			}
			k.r16x8(nb, w, aq, sc, init, tmp[:r16Acts*r16Rows], r16Rows)
			for t := 0; t < r16Acts; t++ {
				copy(dst[(t0+t)*rows+r:(t0+t)*rows+rows], tmp[t*r16Rows:t*r16Rows+nr])
			}
		}
		for t := full; t < m; t++ {
			a := st.a.Data[t*st.arb : (t+1)*st.arb]
			aux := st.aux1[t*nb*r16AuxBytes : (t+1)*nb*r16AuxBytes]
			if nr == r16Rows {
				k.r16x1(nb, w, a, aux, dst[t*rows+r:t*rows+r+r16Rows])
				continue
			}
			k.r16x1(nb, w, a, aux, tmp[:r16Rows])
			copy(dst[t*rows+r:t*rows+rows], tmp[:nr])
		}
	}
}
