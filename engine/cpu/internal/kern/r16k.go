package kern

import (
	"encoding/binary"
	"math"

	"github.com/aprqa/apr/engine/quant"
)

// Packed Q4_K (r16.go's scheme on Q8_K activations). Per (weight row,
// activation row) pair and super-block b of 256 values, with the sub-block
// sums isum_s = Σ q·a (exact, VPDPBUSD on the nibbles against the signed
// quants), asum_s = Σ a over sub-block s (from Q8_K's bsums) and the 6-bit
// scales and mins sc_s, m_s:
//
//	s = float32(d·da)
//	for pair j = 0..3:  acc = fma(float32(sc_2j·isum_2j + sc_2j+1·isum_2j+1), s, acc)
//	acc = fma(float32(Σ_s m_s·asum_s), float32(dmin·(−da)), acc)
//
// every integer exact in int32 and below 2²⁴ (so converted exactly), one
// float32 chain per pair over the blocks in order, the same for every m.
//
// Layout (packQ4_KR16): group g of sixteen rows takes nsb·2368 bytes,
// super-block b at 2368b: at 512j + 64k, j = 0..3, k = 0..7, bytes
// 32j+4k..32j+4k+3 of the rows' qs (row r at 4r: the low nibbles are
// sub-block 2j's values 4k..4k+3, the high ones sub-block 2j+1's); at
// 2048 + 16s + r the scale sc_s of row r; at 2176 + 32p + 2r the mins
// m_2p, m_2p+1 of row r (bytes); at 2304 + 2r d and at 2336 + 2r dmin of
// row r (fp16). 2368 = 16·144 + 64 bytes: 2.8% more than ggml's blocks.
// Rows past the last are zero.

// Q6_K (packQ6_KR16) is unpacked at load to u = q6 + 96 = w + 128, one
// byte per value: per super-block of sixteen rows, at 512j + 64k the rows'
// values 32j+4k..32j+4k+3 (row r at 4r), at 4096 + 16s + r the int8 scale
// of row r's sixteen values 16s.., at 4352 + 2r its d: 4384 bytes, 30%
// more than ggml's 3360 (Q6_K tensors are a small part of the files that
// carry them). Per pair and super-block, with Σ_s = Σ w·a over sixteen
// values (the accumulator starts at −128·bsums[s]):
//
//	s = float32(d·da)
//	for j = 0..7:  acc = fma(float32(sc_2j·Σ_2j + sc_2j+1·Σ_2j+1), s, acc)
//
// |sc·Σ| ≤ 128·16·32·128 = 2²³, so each pair's sum converts exactly.

const (
	r16KBlock     = 2368 // one Q4_K super-block of sixteen rows
	r16K6Block    = 4384 // one Q6_K super-block of sixteen rows
	r16KAuxBytes  = 96   // per activation row and super-block: four int16 pairs asum_2p, asum_2p+1; float32 da, −da; at 32, sixteen int32 −128·bsums[s]
	r16KActs      = 4    // activation rows of one r16k4 call
	q8KBlockBytes = 292
)

// r16kFunc multiplies one packed group of sixteen Q4_K weight rows (w, nsb
// super-blocks) by acts Q8_K activation rows (row t at a[t·astride:], its
// aux (auxQ8_KR16) at aux[t·xstride:]); row t's sixteen results go to
// out[t·ostride:]. acts is fixed per kernel (r16KActs or 1).
type r16kFunc func(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)

// registerR16K registers (Q4_K, isa) as a packed kernel on Q8_K activations.
func registerR16K(t quant.Type, isa ISA, pack packFunc, x4, x1 r16kFunc) {
	var dot dotFunc
	var f r16Format
	switch t {
	case quant.Q4_K:
		dot, f = dotQ4_KGo, r16Format{block: r16KBlock, unit: 256}
	case quant.Q6_K:
		dot, f = dotQ6_KGo, r16Format{block: r16K6Block, unit: 256}
	default:
		panic("kern: registerR16K: no packing for " + t.String())
	}
	register(t, isa, quant.Q8_K, dot, nil)
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		k.pack, k.r16k4, k.r16k1, k.r16 = pack, x4, x1, f
	}
}

// packQ6_KR16 is the Q6_K packing (see above).
func packQ6_KR16(rows, cols int, src, dst []byte, g0, g1 int) {
	nsb := cols / 256
	wrb := nsb * 210
	gb := nsb * r16K6Block
	for g := g0; g < g1; g++ {
		grp := dst[g*gb : (g+1)*gb]
		clear(grp)
		for r := 0; r < r16Rows; r++ {
			i := g*r16Rows + r
			if i >= rows {
				continue
			}
			row := src[i*wrb : (i+1)*wrb]
			for b := 0; b < nsb; b++ {
				x, o := row[210*b:210*b+210], grp[r16K6Block*b:r16K6Block*(b+1)]
				ql, qh := x[0:128], x[128:192]
				for t := 0; t < 256; t++ {
					half, gp, l := t/128, (t%128)/32, t%32
					lo := ql[64*half+l+32*(gp&1)] >> (4 * (gp / 2)) & 15
					hi := qh[32*half+l] >> (2 * gp) & 3
					o[512*(t/32)+64*(l/4)+4*r+l%4] = lo | hi<<4 + 96
				}
				for s := 0; s < 16; s++ {
					o[4096+16*s+r] = x[192+s]
				}
				copy(o[4352+2*r:4354+2*r], x[208:210])
			}
		}
	}
}

// packQ4_KR16 is the Q4_K packing (see the layout above).
func packQ4_KR16(rows, cols int, src, dst []byte, g0, g1 int) {
	nsb := cols / 256
	wrb := nsb * 144
	gb := nsb * r16KBlock
	for g := g0; g < g1; g++ {
		grp := dst[g*gb : (g+1)*gb]
		clear(grp)
		for r := 0; r < r16Rows; r++ {
			i := g*r16Rows + r
			if i >= rows {
				continue
			}
			row := src[i*wrb : (i+1)*wrb]
			for b := 0; b < nsb; b++ {
				x, o := row[144*b:144*b+144], grp[r16KBlock*b:r16KBlock*(b+1)]
				qs := x[16:144]
				for j := 0; j < 4; j++ {
					for k := 0; k < 8; k++ {
						copy(o[512*j+64*k+4*r:512*j+64*k+4*r+4], qs[32*j+4*k:32*j+4*k+4])
					}
				}
				for s := 0; s < 8; s++ {
					sc, m := kScaleMin(s, x[4:16])
					o[2048+16*s+r] = byte(sc)
					o[2176+32*(s/2)+2*r+s%2] = byte(m)
				}
				copy(o[2304+2*r:2306+2*r], x[0:2])
				copy(o[2336+2*r:2338+2*r], x[2:4])
			}
		}
	}
}

// auxQ8_KR16 writes one Q8_K activation row's aux (nsb super-blocks of
// r16KAuxBytes): the pair sums of its bsums as int16 (asum_s = bsums[2s] +
// bsums[2s+1], at most 32·127) and da, −da.
func auxQ8_KR16(nsb int, a, aux []byte) {
	for b := 0; b < nsb; b++ {
		blk, o := a[q8KBlockBytes*b:], aux[r16KAuxBytes*b:]
		for s := 0; s < 8; s++ {
			v := int16(le16(blk[260+4*s:])) + int16(le16(blk[262+4*s:]))
			binary.LittleEndian.PutUint16(o[2*s:], uint16(v))
		}
		d := math.Float32frombits(le32(blk))
		binary.LittleEndian.PutUint32(o[16:], math.Float32bits(d))
		binary.LittleEndian.PutUint32(o[20:], math.Float32bits(-d))
		clear(o[24:32])
		for s := 0; s < 16; s++ {
			binary.LittleEndian.PutUint32(o[32+4*s:], uint32(-128*int32(int16(le16(blk[260+2*s:])))))
		}
	}
}

// r16kTwin returns the Go twin of the packed kernels of t (Q4_K or Q6_K)
// for acts activation rows: the same integers and float32 operations.
func r16kTwin(t quant.Type, acts int) r16kFunc {
	if t == quant.Q6_K {
		return r16k6Twin(acts)
	}
	return func(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int) {
		for t := 0; t < acts; t++ {
			for r := 0; r < r16Rows; r++ {
				var acc float32
				for b := 0; b < nsb; b++ {
					o := w[r16KBlock*b:]
					q8 := a[t*astride+q8KBlockBytes*b+4:]
					x := aux[t*xstride+r16KAuxBytes*b:]
					da := math.Float32frombits(le32(x[16:]))
					s := float32(fp16At(o[2304+2*r:]) * da)
					for j := 0; j < 4; j++ {
						var lo, hi int32
						for k := 0; k < 8; k++ {
							for i := 0; i < 4; i++ {
								q := o[512*j+64*k+4*r+i]
								lo += int32(q&15) * int32(int8(q8[64*j+4*k+i]))
								hi += int32(q>>4) * int32(int8(q8[64*j+32+4*k+i]))
							}
						}
						v := int32(o[2048+16*(2*j)+r])*lo + int32(o[2048+16*(2*j+1)+r])*hi
						acc = fma32(float32(v), s, acc)
					}
					msum := int32(0)
					for s := 0; s < 8; s++ {
						msum += int32(o[2176+32*(s/2)+2*r+s%2]) * int32(int16(le16(x[2*s:])))
					}
					nd := math.Float32frombits(le32(x[20:]))
					acc = fma32(float32(msum), float32(fp16At(o[2336+2*r:])*nd), acc)
				}
				out[t*ostride+r] = acc
			}
		}
	}
}

func r16k6Twin(acts int) r16kFunc {
	return func(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int) {
		for t := 0; t < acts; t++ {
			for r := 0; r < r16Rows; r++ {
				var acc float32
				for b := 0; b < nsb; b++ {
					o := w[r16K6Block*b:]
					q8 := a[t*astride+q8KBlockBytes*b+4:]
					x := aux[t*xstride+r16KAuxBytes*b:]
					s := float32(fp16At(o[4352+2*r:]) * math.Float32frombits(le32(x[16:])))
					for j := 0; j < 8; j++ {
						var v int32
						for h := 0; h < 2; h++ {
							sub := 2*j + h
							is := int32(le32(x[32+4*sub:]))
							for k := 4 * h; k < 4*h+4; k++ {
								for i := 0; i < 4; i++ {
									is += int32(o[512*j+64*k+4*r+i]) * int32(int8(q8[32*j+4*k+i]))
								}
							}
							v += int32(int8(o[4096+16*sub+r])) * is
						}
						acc = fma32(float32(v), s, acc)
					}
				}
				out[t*ostride+r] = acc
			}
		}
	}
}

// r16kJob is r16Job for packed kernels on Q8_K activations: each group of
// sixteen weight rows over the activation rows in fours, then one by one.
func (st *mulState) r16kJob(worker int, jb *Job, lo, hi int) {
	k, m, rows, dst := jb.K, st.a.Rows, jb.W.Rows, jb.Dst
	nsb := st.n / 256
	gb := nsb * k.r16.block
	xs := nsb * r16KAuxBytes
	tmp := st.r16out[worker]
	for r := lo; r < hi; r += r16Rows {
		w := jb.W.Packed[r/r16Rows*gb : (r/r16Rows+1)*gb]
		nr := min(r16Rows, rows-r)
		t := 0
		for ; t < m; t++ {
			f, n := k.r16k1, 1
			if t+r16KActs <= m {
				f, n = k.r16k4, r16KActs
			}
			a, aux := st.a.Data[t*st.arb:(t+n)*st.arb], st.aux1[t*xs:(t+n)*xs]
			if nr == r16Rows {
				f(nsb, w, a, st.arb, aux, xs, dst[t*rows+r:(t+n-1)*rows+r+r16Rows], rows)
			} else {
				f(nsb, w, a, st.arb, aux, xs, tmp[:n*r16Rows], r16Rows)
				for i := 0; i < n; i++ {
					copy(dst[(t+i)*rows+r:(t+i)*rows+rows], tmp[i*r16Rows:i*r16Rows+nr])
				}
			}
			t += n - 1
		}
	}
}

// prepR16K writes tokens [lo, hi)'s Q8_K aux rows.
func (st *mulState) prepR16K(lo, hi int) {
	nsb := st.a.Cols / 256
	xs := nsb * r16KAuxBytes
	for t := lo; t < hi; t++ {
		auxQ8_KR16(nsb, st.a.Data[t*st.arb:(t+1)*st.arb], st.aux1[t*xs:(t+1)*xs])
	}
}
