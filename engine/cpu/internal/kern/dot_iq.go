package kern

import "github.com/aprqa/apr/engine/quant"

// The i-quant grids, from engine/quant (their one source), plus the sign
// masks as bytes.
var iqGrids = quant.IQGrids()

// ksign returns +1 or −1 for bit j of the IQ2/IQ3 sign byte s.
func ksign(s uint8, j int) int32 { return 1 - 2*int32(s>>j&1) }

// dotIQ2_XXSGo: IQ2_XXS · Q8_K. Per 32 values: four 8-wide grid points
// (byte indices), 4×7 sign bits and a 4-bit scale in one uint32; the result
// carries ggml's factor 1/8.
func dotIQ2_XXSGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[66*i : 66*i+66]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		d := fp16At(x) * yd
		bsum := int32(0)
		for ib := 0; ib < 8; ib++ {
			q := x[2+8*ib : 2+8*ib+8]
			aux1 := le32(q[4:])
			ls := int32(2*(aux1>>28) + 1)
			s := int32(0)
			for l := 0; l < 4; l++ {
				g := &iqGrids.IQ2XXS[q[l]]
				signs := iqGrids.KSigns[aux1>>(7*l)&127]
				y := q8[32*ib+8*l:]
				for j := 0; j < 8; j++ {
					s += int32(g[j]) * int32(int8(y[j])) * ksign(signs, j)
				}
			}
			bsum += s * ls
		}
		sumf += d * float32(bsum)
	}
	return 0.125 * sumf
}

// dotIQ2_XSGo: IQ2_XS · Q8_K. 9-bit grid index and 7-bit sign index per
// uint16, two 4-bit scales per 32 values.
func dotIQ2_XSGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[74*i : 74*i+74]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		d := fp16At(x) * yd
		sc := x[66:74]
		bsum := int32(0)
		for ib := 0; ib < 8; ib++ {
			for h := 0; h < 2; h++ {
				ls := int32(2*(sc[ib]>>(4*h)&15) + 1)
				s := int32(0)
				for l := 2 * h; l < 2*h+2; l++ {
					q := le16(x[2+8*ib+2*l:])
					g := &iqGrids.IQ2XS[q&511]
					signs := iqGrids.KSigns[q>>9]
					y := q8[32*ib+8*l:]
					for j := 0; j < 8; j++ {
						s += int32(g[j]) * int32(int8(y[j])) * ksign(signs, j)
					}
				}
				bsum += s * ls
			}
		}
		sumf += d * float32(bsum)
	}
	return 0.125 * sumf
}

// dotIQ2_SGo: IQ2_S · Q8_K. 10-bit grid index (8 bits in qs, 2 in qh),
// explicit sign bytes, two 4-bit scales per 32 values.
func dotIQ2_SGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[82*i : 82*i+82]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		d := fp16At(x) * yd
		qs, signs, qh, sc := x[2:34], x[34:66], x[66:74], x[74:82]
		bsum := int32(0)
		for ib := 0; ib < 8; ib++ {
			for h := 0; h < 2; h++ {
				ls := int32(2*(sc[ib]>>(4*h)&15) + 1)
				s := int32(0)
				for l := 2 * h; l < 2*h+2; l++ {
					idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
					g := &iqGrids.IQ2S[idx]
					sg := signs[4*ib+l]
					y := q8[32*ib+8*l:]
					for j := 0; j < 8; j++ {
						s += int32(g[j]) * int32(int8(y[j])) * ksign(sg, j)
					}
				}
				bsum += s * ls
			}
		}
		sumf += d * float32(bsum)
	}
	return 0.125 * sumf
}

// dotIQ3_XXSGo: IQ3_XXS · Q8_K. Two 4-wide grid points per 8 values, 7-bit
// sign indices and a 4-bit scale per 32 values; factor 1/4.
func dotIQ3_XXSGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[98*i : 98*i+98]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		d := fp16At(x) * yd
		q3, gas := x[2:66], x[66:98]
		bsum := int32(0)
		for ib := 0; ib < 8; ib++ {
			aux := le32(gas[4*ib:])
			ls := int32(2*(aux>>28) + 1)
			s := int32(0)
			for l := 0; l < 4; l++ {
				g1 := &iqGrids.IQ3XXS[q3[8*ib+2*l]]
				g2 := &iqGrids.IQ3XXS[q3[8*ib+2*l+1]]
				signs := iqGrids.KSigns[aux>>(7*l)&127]
				y := q8[32*ib+8*l:]
				for j := 0; j < 4; j++ {
					s += int32(g1[j]) * int32(int8(y[j])) * ksign(signs, j)
					s += int32(g2[j]) * int32(int8(y[j+4])) * ksign(signs, j+4)
				}
			}
			bsum += s * ls
		}
		sumf += d * float32(bsum)
	}
	return 0.25 * sumf
}

// dotIQ3_SGo: IQ3_S · Q8_K. 9-bit grid index (8 in qs, 1 in qh), explicit
// sign bytes, 4-bit scales.
func dotIQ3_SGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[110*i : 110*i+110]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		d := fp16At(x) * yd
		qs, qh, signs, sc := x[2:66], x[66:74], x[74:106], x[106:110]
		bsum := int32(0)
		for ib := 0; ib < 8; ib++ {
			ls := int32(2*(sc[ib/2]>>(4*(ib%2))&15) + 1)
			s := int32(0)
			for l := 0; l < 4; l++ {
				i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
				g1, g2 := &iqGrids.IQ3S[i1], &iqGrids.IQ3S[i2]
				sg := signs[4*ib+l]
				y := q8[32*ib+8*l:]
				for j := 0; j < 4; j++ {
					s += int32(g1[j]) * int32(int8(y[j])) * ksign(sg, j)
					s += int32(g2[j]) * int32(int8(y[j+4])) * ksign(sg, j+4)
				}
			}
			bsum += s * ls
		}
		sumf += d * float32(bsum)
	}
	return sumf
}

// iq1Delta is ggml's IQ1S_DELTA and IQ1M_DELTA.
const iq1Delta = 0.125

// dotIQ1_SGo: IQ1_S · Q8_K. 11-bit indices into the ternary grid, a 3-bit
// scale and a ±1/8 shift per 32 values (the shift uses Q8_K's bsums).
func dotIQ1_SGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[50*i : 50*i+50]
		yd, q8, bs := q8K(a[292*i : 292*i+292])
		qs, qh := x[2:34], x[34:50]
		sumi, sumi1 := int32(0), int32(0)
		for ib := 0; ib < 8; ib++ {
			h := le16(qh[2*ib:])
			ls := int32(2*(h>>12&7) + 1)
			delta := int32(1)
			if h&0x8000 != 0 {
				delta = -1
			}
			lsum := int32(0)
			for l := 0; l < 4; l++ {
				g := &iqGrids.IQ1S[int(qs[4*ib+l])|int(h>>(3*l)&7)<<8]
				y := q8[32*ib+8*l:]
				for j := 0; j < 8; j++ {
					lsum += int32(int8(y[j])) * int32(g[j])
				}
			}
			sumi += ls * lsum
			sumi1 += ls * delta * (bsum(bs, 2*ib) + bsum(bs, 2*ib+1))
		}
		sumf += fp16At(x) * yd * (float32(sumi) + iq1Delta*float32(sumi1))
	}
	return sumf
}

// dotIQ1_MGo: IQ1_M · Q8_K. Like IQ1_S with a shift sign per 8 values, two
// 3-bit scales per 32 values and the fp16 super-scale spread over the top
// nibbles of the scale words.
func dotIQ1_MGo(n int, w, a []byte) float32 {
	var sumf float32
	for i := 0; i < n/256; i++ {
		x := w[56*i : 56*i+56]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		qs, qh, scb := x[0:32], x[32:48], x[48:56]
		var sc [4]uint16
		for k := range sc {
			sc[k] = le16(scb[2*k:])
		}
		scale := sc[0]>>12 | sc[1]>>8&0xf0 | sc[2]>>4&0xf00 | sc[3]&0xf000
		sumi1, sumi2 := int32(0), int32(0)
		for ib := 0; ib < 8; ib++ {
			h := qh[2*ib : 2*ib+2]
			var sum1, sum2 [2]int32
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(uint16(h[l/2])<<(8-4*(l%2))&0x700)
				g := &iqGrids.IQ1S[idx]
				delta := int32(1)
				if h[l/2]>>(3+4*(l%2))&1 != 0 {
					delta = -1
				}
				y := q8[32*ib+8*l:]
				ls1, ls2 := int32(0), int32(0)
				for j := 0; j < 8; j++ {
					ls1 += int32(int8(y[j])) * int32(g[j])
					ls2 += int32(int8(y[j]))
				}
				sum1[l/2] += ls1
				sum2[l/2] += ls2 * delta
			}
			s := sc[ib/2] >> (6 * (ib % 2))
			l1 := int32(2*(s&7) + 1)
			l2 := int32(2*(s>>3&7) + 1)
			sumi1 += sum1[0]*l1 + sum1[1]*l2
			sumi2 += sum2[0]*l1 + sum2[1]*l2
		}
		sumf += fp16(scale) * yd * (float32(sumi1) + iq1Delta*float32(sumi2))
	}
	return sumf
}
