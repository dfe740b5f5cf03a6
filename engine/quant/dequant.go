package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize decodes len(dst) values of type t from src, exactly as ggml's
// to_float does (bit for bit; each formula below names the ggml function it
// reproduces and keeps its order of float32 operations). src must hold exactly
// the blocks of len(dst) values, and len(dst) must be a multiple of the block
// size. Q8_1, for which ggml has no dequantizer, is decoded from its layout
// as d*q (the stored sum s is not needed). I8, I16, I32, I64 and F64 are
// converted to the nearest float32, as a C cast does.
//
// An unknown type is refused with an error wrapping ErrUnknownType; wrong
// lengths are errors. Dequantize never panics and never allocates.
func Dequantize(t Type, src []byte, dst []float32) error {
	info, err := Lookup(t)
	if err != nil {
		return err
	}
	want, ok := info.RowBytes(int64(len(dst)))
	if !ok {
		return fmt.Errorf("quant: dequantize %s: %d values is not a multiple of the block size %d", info.Name, len(dst), info.BlockSize)
	}
	if int64(len(src)) != want {
		return fmt.Errorf("quant: dequantize %s: %d values need %d bytes, got %d", info.Name, len(dst), want, len(src))
	}
	fn := dequantizers[t]
	if fn == nil {
		// Every known type has a dequantizer; this is a registry/table mismatch.
		return fmt.Errorf("quant: dequantize %s: no dequantizer", info.Name)
	}
	fn(src, dst)
	return nil
}

// dequantizers holds one row decoder per type. Each is called with src and dst
// of matching lengths (whole blocks).
var dequantizers = map[Type]func(src []byte, dst []float32){
	F32:     dequantF32,
	F16:     dequantF16,
	BF16:    dequantBF16,
	F64:     dequantF64,
	I8:      dequantI8,
	I16:     dequantI16,
	I32:     dequantI32,
	I64:     dequantI64,
	Q1_0:    dequantQ1_0,
	Q2_0:    dequantQ2_0,
	Q4_0:    dequantQ4_0,
	Q4_1:    dequantQ4_1,
	Q5_0:    dequantQ5_0,
	Q5_1:    dequantQ5_1,
	Q8_0:    dequantQ8_0,
	Q8_1:    dequantQ8_1,
	MXFP4:   dequantMXFP4,
	NVFP4:   dequantNVFP4,
	Q2_K:    dequantQ2_K,
	Q3_K:    dequantQ3_K,
	Q4_K:    dequantQ4_K,
	Q5_K:    dequantQ5_K,
	Q6_K:    dequantQ6_K,
	Q8_K:    dequantQ8_K,
	IQ2_XXS: dequantIQ2_XXS,
	IQ2_XS:  dequantIQ2_XS,
	IQ2_S:   dequantIQ2_S,
	IQ3_XXS: dequantIQ3_XXS,
	IQ3_S:   dequantIQ3_S,
	IQ1_S:   dequantIQ1_S,
	IQ1_M:   dequantIQ1_M,
	IQ4_NL:  dequantIQ4_NL,
	IQ4_XS:  dequantIQ4_XS,
	TQ1_0:   dequantTQ1_0,
	TQ2_0:   dequantTQ2_0,
}

// Conventions of the decoders: float32(a*b) + c (never a*b + c) keeps Go from
// fusing a multiply-add that ggml computes with two roundings; le16 reads the
// little-endian uint16 at b[i:].

func le16(b []byte, i int) uint16  { return binary.LittleEndian.Uint16(b[i:]) }
func le32(b []byte, i int) uint32  { return binary.LittleEndian.Uint32(b[i:]) }
func half(b []byte, i int) float32 { return fp16Table[le16(b, i)] }

// ---- plain and integer types --------------------------------------------

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(le32(src, 4*i))
	}
}

// fp16Table maps every half to its float32 (256 KiB, built from FP16ToFP32
// at package initialisation) for whole F16 rows.
var fp16Table [1 << 16]float32

func init() {
	for h := range fp16Table {
		fp16Table[h] = FP16ToFP32(uint16(h))
	}
}

func dequantF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = fp16Table[le16(src, 2*i)]
	}
}

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToFP32(le16(src, 2*i))
	}
}

func dequantF64(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
	}
}

func dequantI8(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int8(src[i]))
	}
}

func dequantI16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int16(le16(src, 2*i)))
	}
}

func dequantI32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int32(le32(src, 4*i)))
	}
}

func dequantI64(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int64(binary.LittleEndian.Uint64(src[8*i:])))
	}
}

// ---- 32-value (and Q1_0/Q2_0/NVFP4) block types ---------------------------

// dequantQ1_0: block {d fp16, qs[16]}, 128 values; bit j of qs gives +d (1)
// or -d (0). ggml dequantize_row_q1_0.
func dequantQ1_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 18 {
		blk, y := src[b:b+18], dst[:128]
		db := math.Float32bits(half(blk, 0))
		for k, bits := range blk[2:18] {
			for b := range 8 {
				// bit set: d; clear: -d (ggml's neg_d, a sign flip)
				y[8*k+b] = math.Float32frombits(db ^ uint32(^bits>>b&1)<<31)
			}
		}
		dst = dst[128:]
	}
}

// dequantQ2_0: block {d fp16, qs[16]}, 64 values of 2 bits (4 per byte, low
// bits first) meaning -1, 0, 1, 2 times d. ggml dequantize_row_q2_0.
func dequantQ2_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 18 {
		blk, y := src[b:b+18], dst[:64]
		d := half(blk, 0)
		for j := range 64 {
			q := int32(blk[2+j/4]>>(2*(j%4))) & 3
			y[j] = float32(q-1) * d
		}
		dst = dst[64:]
	}
}

// dequantQ4_0: block {d fp16, qs[16]}; value j is (low nibble - 8)*d, value
// j+16 is (high nibble - 8)*d. ggml dequantize_row_q4_0.
func dequantQ4_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 18 {
		blk, y := src[b:b+18], dst[:32]
		d := half(blk, 0)
		for j := range 16 {
			q := blk[2+j]
			y[j] = float32(int32(q&0xf)-8) * d
			y[j+16] = float32(int32(q>>4)-8) * d
		}
		dst = dst[32:]
	}
}

// dequantQ4_1: block {d, m fp16, qs[16]}; value = nibble*d + m.
// ggml dequantize_row_q4_1.
func dequantQ4_1(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 20 {
		blk, y := src[b:b+20], dst[:32]
		d, m := half(blk, 0), half(blk, 2)
		for j := range 16 {
			q := blk[4+j]
			y[j] = float32(float32(q&0xf)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
		dst = dst[32:]
	}
}

// dequantQ5_0: block {d fp16, qh u32, qs[16]}; bit j of qh is the fifth bit
// of value j; value = (q - 16)*d. ggml dequantize_row_q5_0.
func dequantQ5_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 22 {
		blk, y := src[b:b+22], dst[:32]
		d := half(blk, 0)
		qh := le32(blk, 2)
		for j := range 16 {
			q := blk[6+j]
			h0 := int32(qh>>j<<4) & 0x10
			h1 := int32(qh>>(j+12)) & 0x10
			y[j] = float32((int32(q&0xf)|h0)-16) * d
			y[j+16] = float32((int32(q>>4)|h1)-16) * d
		}
		dst = dst[32:]
	}
}

// dequantQ5_1: block {d, m fp16, qh u32, qs[16]}; value = q*d + m.
// ggml dequantize_row_q5_1.
func dequantQ5_1(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 24 {
		blk, y := src[b:b+24], dst[:32]
		d, m := half(blk, 0), half(blk, 2)
		qh := le32(blk, 4)
		for j := range 16 {
			q := blk[8+j]
			h0 := int32(qh>>j<<4) & 0x10
			h1 := int32(qh>>(j+12)) & 0x10
			y[j] = float32(float32(int32(q&0xf)|h0)*d) + m
			y[j+16] = float32(float32(int32(q>>4)|h1)*d) + m
		}
		dst = dst[32:]
	}
}

// dequantQ8_0: block {d fp16, qs[32] int8}; value = q*d.
// ggml dequantize_row_q8_0.
func dequantQ8_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 34 {
		blk, y := src[b:b+34], dst[:32]
		d := half(blk, 0)
		for j := range 32 {
			y[j] = float32(int8(blk[2+j])) * d
		}
		dst = dst[32:]
	}
}

// dequantQ8_1: block {d fp16, s fp16, qs[32] int8}; value = q*d. ggml has
// no dequantizer for Q8_1 (it only feeds dot products); this follows the
// layout, d*q as for Q8_0, ignoring s (= d*sum(q)).
func dequantQ8_1(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 36 {
		blk, y := src[b:b+36], dst[:32]
		d := half(blk, 0)
		for j := range 32 {
			y[j] = float32(int8(blk[4+j])) * d
		}
		dst = dst[32:]
	}
}

// dequantMXFP4: block {e E8M0, qs[16]}; value = kvalues_mxfp4[nibble] *
// 2^(e-128). ggml dequantize_row_mxfp4.
func dequantMXFP4(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 17 {
		blk, y := src[b:b+17], dst[:32]
		d := e8m0Half(blk[0])
		for j := range 16 {
			q := blk[1+j]
			y[j] = float32(kvaluesMXFP4[q&0xf]) * d
			y[j+16] = float32(kvaluesMXFP4[q>>4]) * d
		}
		dst = dst[32:]
	}
}

// dequantNVFP4: block {d[4] UE4M3, qs[32]}, 64 values in 4 sub-blocks of 16,
// each with its own scale; nibble layout per sub-block as MXFP4.
// ggml dequantize_row_nvfp4.
func dequantNVFP4(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 36 {
		blk, y := src[b:b+36], dst[:64]
		for s := range 4 {
			d := ue4m3ToFP32(blk[s])
			qs, ys := blk[4+8*s:4+8*s+8], y[16*s:16*s+16]
			for j := range 8 {
				ys[j] = float32(kvaluesMXFP4[qs[j]&0xf]) * d
				ys[j+8] = float32(kvaluesMXFP4[qs[j]>>4]) * d
			}
		}
		dst = dst[64:]
	}
}

// ---- ternary ------------------------------------------------------------

// dequantTQ1_0: block {qs[48], qh[4], d fp16}; 5 trits per qs byte and 4 per
// qh byte, stored as a fixed-point fraction: trit n of byte q is
// ((q*3^n mod 256)*3) >> 8. ggml dequantize_row_tq1_0.
func dequantTQ1_0(src []byte, dst []float32) {
	pow3 := [6]uint8{1, 3, 9, 27, 81, 243}
	trit := func(q uint8, n int) float32 {
		v := q * pow3[n] // mod 256, as the uint8_t product in ggml
		return float32(int32(uint16(v)*3>>8) - 1)
	}
	for b := 0; len(dst) > 0; b += 54 {
		blk := src[b : b+54]
		d := half(blk, 52)
		y := dst[:256]
		k := 0
		for n := range 5 {
			for m := range 32 {
				y[k] = trit(blk[m], n) * d
				k++
			}
		}
		for n := range 5 {
			for m := range 16 {
				y[k] = trit(blk[32+m], n) * d
				k++
			}
		}
		for n := range 4 {
			for j := range 4 {
				y[k] = trit(blk[48+j], n) * d
				k++
			}
		}
		dst = dst[256:]
	}
}

// dequantTQ2_0: block {qs[64], d fp16}; 2-bit codes 0,1,2 mean -1,0,+1.
// ggml dequantize_row_tq2_0.
func dequantTQ2_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 66 {
		blk := src[b : b+66]
		d := half(blk, 64)
		y := dst[:256]
		k := 0
		for j := 0; j < 64; j += 32 {
			for l := range 4 {
				for m := range 32 {
					q := int32(blk[j+m]>>(2*l)) & 3
					y[k] = float32(q-1) * d
					k++
				}
			}
		}
		dst = dst[256:]
	}
}

// ---- k-quants (256-value super-blocks) -----------------------------------

// dequantQ2_K: block {scales[16], qs[64], d, dmin fp16}; 16 sub-blocks of 16,
// scale nibble low = scale, high = min; value = d*sc*q - dmin*m.
// ggml dequantize_row_q2_K.
func dequantQ2_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 84 {
		blk := src[b : b+84]
		scales, qs := blk[0:16], blk[16:80]
		d, dmin := half(blk, 80), half(blk, 82)
		y := dst[:256]
		is := 0
		for n := 0; n < 256; n += 128 {
			q := qs[n/4 : n/4+32]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					sc := scales[is]
					is++
					dl := d * float32(sc&0xf)
					ml := dmin * float32(sc>>4)
					for l := range 16 {
						v := int32(q[l+16*half]>>shift) & 3
						y[l] = float32(dl*float32(v)) - ml
					}
					y = y[16:]
				}
			}
		}
		dst = dst[256:]
	}
}

// q3KScales unpacks the sixteen 6-bit scales of a Q3_K block (12 bytes) as
// ggml's dequantize_row_q3_K does, still biased by 32.
func q3KScales(s []byte) [16]int8 {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0, a1, tmp := le32(s, 0), le32(s, 4), le32(s, 8)
	aux := [4]uint32{
		(a0 & kmask2) | ((tmp >> 0 & kmask1) << 4),
		(a1 & kmask2) | ((tmp >> 2 & kmask1) << 4),
		(a0 >> 4 & kmask2) | ((tmp >> 4 & kmask1) << 4),
		(a1 >> 4 & kmask2) | ((tmp >> 6 & kmask1) << 4),
	}
	var out [16]int8
	for i := range 16 {
		out[i] = int8(aux[i/4] >> (8 * (i % 4)))
	}
	return out
}

// dequantQ3_K: block {hmask[32], qs[64], scales[12], d fp16}; value =
// d*(sc-32)*(q2 - (high bit clear ? 4 : 0)). ggml dequantize_row_q3_K.
func dequantQ3_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 110 {
		blk := src[b : b+110]
		hm, qs := blk[0:32], blk[32:96]
		scales := q3KScales(blk[96:108])
		dAll := half(blk, 108)
		y := dst[:256]
		is := 0
		m := uint8(1)
		for n := 0; n < 256; n += 128 {
			q := qs[n/4 : n/4+32]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					dl := dAll * float32(int32(scales[is])-32)
					is++
					for l := range 16 {
						v := int32(q[l+16*half]>>shift) & 3
						if hm[l+16*half]&m == 0 {
							v -= 4
						}
						y[l] = dl * float32(v)
					}
					y = y[16:]
				}
				m <<= 1
			}
		}
		dst = dst[256:]
	}
}

// scaleMinK4 returns the 6-bit scale and min of sub-block j from the 12
// packed bytes q of a Q4_K/Q5_K block (ggml get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xf) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// dequantQ4_K: block {d, dmin fp16, scales[12], qs[128]}; 8 sub-blocks of
// 32; value = d*sc*q - dmin*m. ggml dequantize_row_q4_K.
func dequantQ4_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 144 {
		blk := src[b : b+144]
		d, dmin := half(blk, 0), half(blk, 2)
		scales, qs := blk[4:16], blk[16:144]
		y := dst[:256]
		for j := 0; j < 4; j++ {
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			q := qs[32*j : 32*j+32]
			for l := range 32 {
				y[l] = float32(d1*float32(q[l]&0xf)) - m1
				y[l+32] = float32(d2*float32(q[l]>>4)) - m2
			}
			y = y[64:]
		}
		dst = dst[256:]
	}
}

// dequantQ5_K: block {d, dmin fp16, scales[12], qh[32], qs[128]}; as Q4_K
// with a fifth bit from qh. ggml dequantize_row_q5_K.
func dequantQ5_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 176 {
		blk := src[b : b+176]
		d, dmin := half(blk, 0), half(blk, 2)
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:176]
		y := dst[:256]
		u1, u2 := uint8(1), uint8(2)
		for j := 0; j < 4; j++ {
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			ql := qs[32*j : 32*j+32]
			for l := range 32 {
				v1 := int32(ql[l] & 0xf)
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				v2 := int32(ql[l] >> 4)
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				y[l] = float32(d1*float32(v1)) - m1
				y[l+32] = float32(d2*float32(v2)) - m2
			}
			y = y[64:]
			u1 <<= 2
			u2 <<= 2
		}
		dst = dst[256:]
	}
}

// dequantQ6_K: block {ql[128], qh[64], scales[16] int8, d fp16}; value =
// d*sc*(q-32) with q = 4 low bits from ql and 2 high bits from qh.
// ggml dequantize_row_q6_K.
func dequantQ6_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 210 {
		blk := src[b : b+210]
		d := half(blk, 208)
		y := dst[:256]
		for n := range 2 {
			ql, qh, sc := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], blk[192+8*n:192+8*n+8]
			for l := range 32 {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[l] = d * float32(int8(sc[is])) * float32(q1)
				y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			y = y[128:]
		}
		dst = dst[256:]
	}
}

// dequantQ8_K: block {d float32, qs[256] int8, bsums[16] int16}; value =
// d*q. ggml dequantize_row_q8_K.
func dequantQ8_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 292 {
		blk, y := src[b:b+292], dst[:256]
		d := math.Float32frombits(le32(blk, 0))
		for j := range 256 {
			y[j] = d * float32(int8(blk[4+j]))
		}
		dst = dst[256:]
	}
}

// ---- i-quants ---------------------------------------------------------------

// signed returns g or -g as ggml's "g * (signs & mask ? -1.f : 1.f)" does.
func signed(v float32, neg bool) float32 {
	if neg {
		return v * -1
	}
	return v
}

// dequantIQ2_XXS: block {d fp16, qs[32] u16}; per 32 values two u32: the
// first holds four 8-bit grid indices, the second four 7-bit sign indices and
// a 4-bit scale. ggml dequantize_row_iq2_xxs.
func dequantIQ2_XXS(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 66 {
		blk := src[b : b+66]
		d := half(blk, 0)
		y := dst[:256]
		for ib := range 8 {
			a0, a1 := le32(blk, 2+8*ib), le32(blk, 6+8*ib)
			db := d * (0.5 + float32(a1>>28)) * 0.25
			for l := range 4 {
				grid := &iq2xxsGrid[uint8(a0>>(8*l))]
				signs := ksignsIQ2XS[(a1>>(7*l))&127]
				for j := range 8 {
					y[j] = signed(db*float32(grid[j]), signs>>j&1 != 0)
				}
				y = y[8:]
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ2_XS: block {d fp16, qs[32] u16, scales[8]}; each u16 is a 9-bit
// grid index and a 7-bit sign index; two 4-bit scales per 32 values.
// ggml dequantize_row_iq2_xs.
func dequantIQ2_XS(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 74 {
		blk := src[b : b+74]
		d := half(blk, 0)
		y := dst[:256]
		for ib := range 8 {
			sc := blk[66+ib]
			db := [2]float32{
				d * (0.5 + float32(sc&0xf)) * 0.25,
				d * (0.5 + float32(sc>>4)) * 0.25,
			}
			for l := range 4 {
				q := le16(blk, 2+2*(4*ib+l))
				grid := &iq2xsGrid[q&511]
				signs := ksignsIQ2XS[q>>9]
				for j := range 8 {
					y[j] = signed(db[l/2]*float32(grid[j]), signs>>j&1 != 0)
				}
				y = y[8:]
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ2_S: block {d fp16, qs[64] (32 grid low bytes then 32 sign
// bytes), qh[8], scales[8]}; 10-bit grid indices. ggml dequantize_row_iq2_s.
func dequantIQ2_S(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 82 {
		blk := src[b : b+82]
		d := half(blk, 0)
		qs, signs, qh, scales := blk[2:34], blk[34:66], blk[66:74], blk[74:82]
		y := dst[:256]
		for ib := range 8 {
			db := [2]float32{
				d * (0.5 + float32(scales[ib]&0xf)) * 0.25,
				d * (0.5 + float32(scales[ib]>>4)) * 0.25,
			}
			for l := range 4 {
				dl := db[l/2]
				idx := int(qs[4*ib+l]) | (int(qh[ib])<<(8-2*l))&0x300
				grid := &iq2sGrid[idx]
				s := signs[4*ib+l]
				for j := range 8 {
					y[j] = signed(dl*float32(grid[j]), s>>j&1 != 0)
				}
				y = y[8:]
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ3_XXS: block {d fp16, qs[64] grid indices, 8 u32 of four 7-bit
// sign indices and a 4-bit scale}. ggml dequantize_row_iq3_xxs.
func dequantIQ3_XXS(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 98 {
		blk := src[b : b+98]
		d := half(blk, 0)
		qs := blk[2:66]
		y := dst[:256]
		for ib := range 8 {
			aux := le32(blk, 66+4*ib)
			db := d * (0.5 + float32(aux>>28)) * 0.5
			for l := range 4 {
				signs := ksignsIQ2XS[(aux>>(7*l))&127]
				g1 := &iq3xxsGrid[qs[8*ib+2*l]]
				g2 := &iq3xxsGrid[qs[8*ib+2*l+1]]
				for j := range 4 {
					y[j] = signed(db*float32(g1[j]), signs>>j&1 != 0)
					y[j+4] = signed(db*float32(g2[j]), signs>>(j+4)&1 != 0)
				}
				y = y[8:]
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ3_S: block {d fp16, qs[64], qh[8], signs[32], scales[4]}; 9-bit
// grid indices, odd scales 1+2*nibble. ggml dequantize_row_iq3_s.
func dequantIQ3_S(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 110 {
		blk := src[b : b+110]
		d := half(blk, 0)
		qs, qh, signs, scales := blk[2:66], blk[66:74], blk[74:106], blk[106:110]
		y := dst[:256]
		for ib := 0; ib < 8; ib += 2 {
			db := [2]float32{
				d * float32(1+2*int32(scales[ib/2]&0xf)),
				d * float32(1+2*int32(scales[ib/2]>>4)),
			}
			for h := range 2 {
				q := qs[8*(ib+h) : 8*(ib+h)+8]
				hb := int(qh[ib+h])
				sg := signs[4*(ib+h) : 4*(ib+h)+4]
				for l := range 4 {
					g1 := &iq3sGrid[int(q[2*l])|(hb<<(8-2*l))&256]
					g2 := &iq3sGrid[int(q[2*l+1])|(hb<<(7-2*l))&256]
					for j := range 4 {
						y[j] = signed(db[h]*float32(g1[j]), sg[l]>>j&1 != 0)
						y[j+4] = signed(db[h]*float32(g2[j]), sg[l]>>(j+4)&1 != 0)
					}
					y = y[8:]
				}
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ1_S: block {d fp16, qs[32], qh[8] u16}; 11-bit grid indices of
// {-1,0,1}^8, a 3-bit odd scale and a ±1/8 shift per 32 values.
// ggml dequantize_row_iq1_s.
func dequantIQ1_S(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 50 {
		blk := src[b : b+50]
		d := half(blk, 0)
		qs := blk[2:34]
		y := dst[:256]
		for ib := range 8 {
			qh := le16(blk, 34+2*ib)
			dl := d * float32(2*int32(qh>>12&7)+1)
			delta := float32(iq1sDelta)
			if qh&0x8000 != 0 {
				delta = -iq1sDelta
			}
			for l := range 4 {
				grid := &iq1sGrid[int(qs[4*ib+l])|int(qh>>(3*l)&7)<<8]
				for j := range 8 {
					y[j] = dl * (float32(grid[j]) + delta)
				}
				y = y[8:]
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ1_M: block {qs[32], qh[16], scales[8]}; the fp16 super-block
// scale is spread over the top nibbles of the four u16 scale words.
// ggml dequantize_row_iq1_m.
func dequantIQ1_M(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 56 {
		blk := src[b : b+56]
		qs, qh := blk[0:32], blk[32:48]
		sc := [4]uint16{le16(blk, 48), le16(blk, 50), le16(blk, 52), le16(blk, 54)}
		d := FP16ToFP32(sc[0]>>12 | (sc[1]>>8)&0x00f0 | (sc[2]>>4)&0x0f00 | sc[3]&0xf000)
		y := dst[:256]
		for ib := range 8 {
			s := sc[ib/2] >> (6 * (ib % 2))
			dl1 := d * float32(2*int32(s&7)+1)
			dl2 := d * float32(2*int32(s>>3&7)+1)
			h0, h1 := int(qh[2*ib]), int(qh[2*ib+1])
			idx := [4]int{
				int(qs[4*ib+0]) | (h0<<8)&0x700,
				int(qs[4*ib+1]) | (h0<<4)&0x700,
				int(qs[4*ib+2]) | (h1<<8)&0x700,
				int(qs[4*ib+3]) | (h1<<4)&0x700,
			}
			var delta [4]float32
			for l, bit := range [4]int{h0 & 0x08, h0 & 0x80, h1 & 0x08, h1 & 0x80} {
				delta[l] = iq1sDelta
				if bit != 0 {
					delta[l] = -iq1sDelta
				}
			}
			for l := range 4 {
				dl := dl1
				if l >= 2 {
					dl = dl2
				}
				grid := &iq1sGrid[idx[l]]
				for j := range 8 {
					y[j] = dl * (float32(grid[j]) + delta[l])
				}
				y = y[8:]
			}
		}
		dst = dst[256:]
	}
}

// dequantIQ4_NL: block {d fp16, qs[16]}; value = d*kvalues_iq4nl[nibble].
// ggml dequantize_row_iq4_nl.
func dequantIQ4_NL(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 18 {
		blk, y := src[b:b+18], dst[:32]
		d := half(blk, 0)
		for j := range 16 {
			y[j] = d * float32(kvaluesIQ4NL[blk[2+j]&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[blk[2+j]>>4])
		}
		dst = dst[32:]
	}
}

// dequantIQ4_XS: block {d fp16, scales_h u16, scales_l[4], qs[128]}; 6-bit
// scales biased by 32 per 32 values. ggml dequantize_row_iq4_xs.
func dequantIQ4_XS(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b += 136 {
		blk := src[b : b+136]
		d := half(blk, 0)
		sh := le16(blk, 2)
		sl, qs := blk[4:8], blk[8:136]
		y := dst[:256]
		for ib := range 8 {
			ls := int32(sl[ib/2]>>(4*(ib%2)))&0xf | int32(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			q := qs[16*ib : 16*ib+16]
			for j := range 16 {
				y[j] = dl * float32(kvaluesIQ4NL[q[j]&0xf])
				y[j+16] = dl * float32(kvaluesIQ4NL[q[j]>>4])
			}
			y = y[32:]
		}
		dst = dst[256:]
	}
}
