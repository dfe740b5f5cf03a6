package kern

import (
	"encoding/binary"
	"math"
)

// The pure-Go kernels. Each computes the dot product of one weight row w
// (n values of its weight type, n a multiple of the block size) with one
// activation row a (n values of the activation type ggml pairs with that
// weight type), block by block on the integers, exactly in the arithmetic
// of ggml's generic vec_dot_<w>_<a> (integer sums per block or sub-block,
// then float32 scale products). They are registered for every platform under
// the instruction set "go", and are the twins the assembly kernels are
// tested against. The caller guarantees len(w) and len(a) match n.

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// q8K reads the parts of one Q8_K block.
func q8K(b []byte) (d float32, qs []byte, bsums []byte) {
	return math.Float32frombits(le32(b)), b[4:260], b[260:292]
}

func bsum(bs []byte, j int) int32 { return int32(int16(le16(bs[2*j:]))) }

// dotF32Go: Σ w[i]·a[i] over float32, accumulated in float32 in 8 lanes
// (the shape of ggml's vectorised vec_dot_f32).
func dotF32Go(n int, w, a []byte) float32 {
	var acc [8]float32
	for i := 0; i < n; i++ {
		wv := math.Float32frombits(le32(w[4*i:]))
		av := math.Float32frombits(le32(a[4*i:]))
		acc[i&7] += float32(wv * av)
	}
	return sum8(&acc)
}

// dotF16Go: Σ fp16(w[i])·fp16(a[i]) in float32 lanes.
func dotF16Go(n int, w, a []byte) float32 {
	var acc [8]float32
	for i := 0; i < n; i++ {
		acc[i&7] += float32(fp16At(w[2*i:]) * fp16At(a[2*i:]))
	}
	return sum8(&acc)
}

// dotBF16Go: Σ bf16(w[i])·bf16(a[i]) in float32 lanes.
func dotBF16Go(n int, w, a []byte) float32 {
	var acc [8]float32
	for i := 0; i < n; i++ {
		acc[i&7] += float32(bf16(le16(w[2*i:])) * bf16(le16(a[2*i:])))
	}
	return sum8(&acc)
}

func sum8(acc *[8]float32) float32 {
	return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

// dotQ4_0Go: per block of 32, Σ_j ((qs[j]&15)−8)·y[j] + ((qs[j]>>4)−8)·y[j+16],
// times d_w·d_a.
func dotQ4_0Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[18*ib:18*ib+18], a[34*ib:34*ib+34]
		qs, ys := x[2:18], y[2:34]
		s := int32(0)
		for j := 0; j < 16; j++ {
			s += (int32(qs[j]&15) - 8) * int32(int8(ys[j]))
			s += (int32(qs[j]>>4) - 8) * int32(int8(ys[j+16]))
		}
		sum += float32(s) * fp16At(x) * fp16At(y)
	}
	return sum
}

// dotQ4_1Go: Σ d_w·d_a·Σq·y + m_w·s_a per block (Q8_1 activations).
func dotQ4_1Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[20*ib:20*ib+20], a[36*ib:36*ib+36]
		qs, ys := x[4:20], y[4:36]
		s := int32(0)
		for j := 0; j < 16; j++ {
			s += int32(qs[j]&15) * int32(int8(ys[j]))
			s += int32(qs[j]>>4) * int32(int8(ys[j+16]))
		}
		sum += float32(fp16At(x)*fp16At(y))*float32(s) + float32(fp16At(x[2:])*fp16At(y[2:]))
	}
	return sum
}

// dotQ5_0Go: 5-bit values (low nibble | bit j of qh << 4) − 16.
func dotQ5_0Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[22*ib:22*ib+22], a[34*ib:34*ib+34]
		qh := le32(x[2:])
		qs, ys := x[6:22], y[2:34]
		s := int32(0)
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			s += (int32(qs[j]&15) | h0 - 16) * int32(int8(ys[j]))
			s += (int32(qs[j]>>4) | h1 - 16) * int32(int8(ys[j+16]))
		}
		sum += float32(fp16At(x)*fp16At(y)) * float32(s)
	}
	return sum
}

// dotQ5_1Go: 5-bit unsigned values with a min (Q8_1 activations).
func dotQ5_1Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[24*ib:24*ib+24], a[36*ib:36*ib+36]
		qh := le32(x[4:])
		qs, ys := x[8:24], y[4:36]
		s := int32(0)
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			s += (int32(qs[j]&15) | h0) * int32(int8(ys[j]))
			s += (int32(qs[j]>>4) | h1) * int32(int8(ys[j+16]))
		}
		sum += float32(fp16At(x)*fp16At(y))*float32(s) + float32(fp16At(x[2:])*fp16At(y[2:]))
	}
	return sum
}

// dotQ8_0Go: Σ_j q_w[j]·q_a[j] per block of 32, times d_w·d_a.
func dotQ8_0Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[34*ib:34*ib+34], a[34*ib:34*ib+34]
		xs, ys := x[2:34], y[2:34]
		s := int32(0)
		for j := 0; j < 32; j++ {
			s += int32(int8(xs[j])) * int32(int8(ys[j]))
		}
		sum += float32(s) * float32(fp16At(x)*fp16At(y))
	}
	return sum
}

// dotMXFP4Go: per block of 32, Σ kvalues_mxfp4[nibble]·y, times
// fp16(d_a)·2^(e−128).
func dotMXFP4Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[17*ib:17*ib+17], a[34*ib:34*ib+34]
		d := float32(fp16At(y) * e8m0Half(x[0]))
		qs, ys := x[1:17], y[2:34]
		s := int32(0)
		for j := 0; j < 16; j++ {
			s += int32(kvaluesMXFP4[qs[j]&15]) * int32(int8(ys[j]))
			s += int32(kvaluesMXFP4[qs[j]>>4]) * int32(int8(ys[j+16]))
		}
		sum += d * float32(s)
	}
	return sum
}

// dotNVFP4Go: per block of 64, four sub-blocks of 16 with their own UE4M3
// scale; sub-block s pairs with half (s%2) of Q8_0 block 2·ib + s/2.
func dotNVFP4Go(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/64; ib++ {
		x := w[36*ib : 36*ib+36]
		for s := 0; s < 4; s++ {
			d := ue4m3Half(x[s])
			y := a[34*(2*ib+s/2) : 34*(2*ib+s/2)+34]
			dy := fp16At(y)
			ys := y[2+16*(s%2):]
			qs := x[4+8*s : 4+8*s+8]
			si := int32(0)
			for j := 0; j < 8; j++ {
				si += int32(kvaluesMXFP4[qs[j]&15]) * int32(int8(ys[j]))
				si += int32(kvaluesMXFP4[qs[j]>>4]) * int32(int8(ys[j+8]))
			}
			sum += float32(dy*d) * float32(si)
		}
	}
	return sum
}

// dotIQ4NLGo: per block of 32, Σ kvalues_iq4nl[nibble]·y, times d_w·d_a.
func dotIQ4NLGo(n int, w, a []byte) float32 {
	var sum float32
	for ib := 0; ib < n/32; ib++ {
		x, y := w[18*ib:18*ib+18], a[34*ib:34*ib+34]
		qs, ys := x[2:18], y[2:34]
		s := int32(0)
		for j := 0; j < 16; j++ {
			s += int32(kvaluesIQ4NL[qs[j]&15]) * int32(int8(ys[j]))
			s += int32(kvaluesIQ4NL[qs[j]>>4]) * int32(int8(ys[j+16]))
		}
		sum += float32(fp16At(y)*fp16At(x)) * float32(s)
	}
	return sum
}

// dotQ1_0Go: per block of 128 (four Q8_0 blocks), bit set → +y, clear → −y;
// Σ_k d_a[k]·sumi_k in float32, times d_w.
func dotQ1_0Go(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/128; i++ {
		x := w[18*i : 18*i+18]
		var si float32
		for k := 0; k < 4; k++ {
			y := a[34*(4*i+k) : 34*(4*i+k)+34]
			bits := x[2+4*k : 2+4*k+4]
			ys := y[2:34]
			s := int32(0)
			for j := 0; j < 32; j++ {
				v := int32(int8(ys[j]))
				if bits[j/8]>>(j%8)&1 == 0 {
					v = -v
				}
				s += v
			}
			si += fp16At(y) * float32(s)
		}
		sum += fp16At(x) * si
	}
	return sum
}

// dotQ2_0Go: per block of 64 (two Q8_0 blocks), 2-bit values q−1 ∈ {−1,0,1,2},
// four per byte in order.
func dotQ2_0Go(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/64; i++ {
		x := w[18*i : 18*i+18]
		var si float32
		for k := 0; k < 2; k++ {
			y := a[34*(2*i+k) : 34*(2*i+k)+34]
			qs, ys := x[2+8*k:2+8*k+8], y[2:34]
			s := int32(0)
			for b := 0; b < 8; b++ {
				for l := 0; l < 4; l++ {
					s += (int32(qs[b]>>(2*l)&3) - 1) * int32(int8(ys[4*b+l]))
				}
			}
			si += fp16At(y) * float32(s)
		}
		sum += fp16At(x) * si
	}
	return sum
}

// dotQ2_KGo: Q2_K · Q8_K. Sixteen sub-blocks of 16 with a 4-bit scale and a
// 4-bit min; Σ d_all·Σ_sb sc·Σq·y − d_min·Σ_sb m·bsum.
func dotQ2_KGo(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[84*i : 84*i+84]
		yd, q8, bs := q8K(a[292*i : 292*i+292])
		sc, q2 := x[0:16], x[16:80]
		summs := int32(0)
		for j := 0; j < 16; j++ {
			summs += bsum(bs, j) * int32(sc[j]>>4)
		}
		dall := yd * fp16At(x[80:])
		dmin := yd * fp16At(x[82:])
		isum := int32(0)
		is := 0
		for k := 0; k < 2; k++ {
			q := q2[32*k : 32*k+32]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				y := q8[128*k+32*j:]
				for h := 0; h < 2; h++ {
					d := int32(sc[is] & 15)
					is++
					s := int32(0)
					for l := 16 * h; l < 16*h+16; l++ {
						s += int32(int8(y[l])) * int32(q[l]>>shift&3)
					}
					isum += d * s
				}
			}
		}
		sum += float32(dall*float32(isum)) - float32(dmin*float32(summs))
	}
	return sum
}

// q3KScales decodes the sixteen 6-bit Q3_K scales (minus 32).
func q3KScales(s []byte) [16]int32 {
	var out [16]int32
	for j := 0; j < 16; j++ {
		var lo, hi byte
		if j < 8 {
			lo = s[j] & 15
		} else {
			lo = s[j-8] >> 4
		}
		hi = s[8+j%4] >> (2 * (j / 4)) & 3
		out[j] = int32(lo|hi<<4) - 32
	}
	return out
}

// dotQ3_KGo: Q3_K · Q8_K. 3-bit values (2 low bits, high bit from hmask:
// clear means −4) in sixteen sub-blocks of 16 with signed 6-bit scales.
func dotQ3_KGo(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[110*i : 110*i+110]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		hm, q3 := x[0:32], x[32:96]
		sc := q3KScales(x[96:108])
		isum := int32(0)
		for v := 0; v < 256; v += 16 {
			half, grp := v/128, (v%128)/32
			s := int32(0)
			for t := v; t < v+16; t++ {
				l := t % 32
				q := int32(q3[32*half+l] >> (2 * grp) & 3)
				if hm[l]>>(4*half+grp)&1 == 0 {
					q -= 4
				}
				s += q * int32(int8(q8[t]))
			}
			isum += sc[v/16] * s
		}
		sum += float32(fp16At(x[108:])*yd) * float32(isum)
	}
	return sum
}

// kScaleMin decodes sub-block j's 6-bit scale and min of a Q4_K/Q5_K block
// (ggml's get_scale_min_k4).
func kScaleMin(j int, q []byte) (int32, int32) {
	if j < 4 {
		return int32(q[j] & 63), int32(q[j+4] & 63)
	}
	return int32(q[j+4]&15 | q[j-4]>>6<<4), int32(q[j+4]>>4 | q[j]>>6<<4)
}

// dotQ4_KGo: Q4_K · Q8_K. Eight sub-blocks of 32 with 6-bit scale and min:
// d·yd·Σ_sb sc·Σq·y − dmin·yd·Σ_sb m·(bsum[2sb]+bsum[2sb+1]).
func dotQ4_KGo(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[144*i : 144*i+144]
		yd, q8, bs := q8K(a[292*i : 292*i+292])
		scales, qs := x[4:16], x[16:144]
		isum, msum := int32(0), int32(0)
		for sb := 0; sb < 8; sb++ {
			sc, m := kScaleMin(sb, scales)
			q := qs[32*(sb/2) : 32*(sb/2)+32]
			y := q8[32*sb : 32*sb+32]
			shift := uint(4 * (sb % 2))
			s := int32(0)
			for l := 0; l < 32; l++ {
				s += int32(q[l]>>shift&15) * int32(int8(y[l]))
			}
			isum += sc * s
			msum += m * (bsum(bs, 2*sb) + bsum(bs, 2*sb+1))
		}
		sum += float32(fp16At(x)*yd)*float32(isum) - float32(fp16At(x[2:])*yd)*float32(msum)
	}
	return sum
}

// dotQ5_KGo: Q5_K · Q8_K: Q4_K plus a fifth bit per value from qh.
func dotQ5_KGo(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[176*i : 176*i+176]
		yd, q8, bs := q8K(a[292*i : 292*i+292])
		scales, qh, qs := x[4:16], x[16:48], x[48:176]
		isum, msum := int32(0), int32(0)
		for sb := 0; sb < 8; sb++ {
			sc, m := kScaleMin(sb, scales)
			q := qs[32*(sb/2) : 32*(sb/2)+32]
			y := q8[32*sb : 32*sb+32]
			shift := uint(4 * (sb % 2))
			s := int32(0)
			for l := 0; l < 32; l++ {
				v := int32(q[l]>>shift&15) | int32(qh[l]>>sb&1)<<4
				s += v * int32(int8(y[l]))
			}
			isum += sc * s
			msum += m * (bsum(bs, 2*sb) + bsum(bs, 2*sb+1))
		}
		sum += float32(fp16At(x)*yd)*float32(isum) - float32(fp16At(x[2:])*yd)*float32(msum)
	}
	return sum
}

// dotQ6_KGo: Q6_K · Q8_K. 6-bit values (4 low bits in ql, 2 high in qh) − 32
// in sixteen sub-blocks of 16 with signed 8-bit scales.
func dotQ6_KGo(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[210*i : 210*i+210]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		ql, qh, sc := x[0:128], x[128:192], x[192:208]
		isum := int32(0)
		for v := 0; v < 256; v += 16 {
			half, grp := v/128, (v%128)/32
			s := int32(0)
			for t := v; t < v+16; t++ {
				l := t % 32
				lo := ql[64*half+l+32*(grp&1)] >> (4 * (grp / 2)) & 15
				hi := qh[32*half+l] >> (2 * grp) & 3
				s += (int32(lo|hi<<4) - 32) * int32(int8(q8[t]))
			}
			isum += int32(int8(sc[v/16])) * s
		}
		sum += float32(fp16At(x[208:])*yd) * float32(isum)
	}
	return sum
}

// dotIQ4XSGo: IQ4_XS · Q8_K. Eight sub-blocks of 32 with 6-bit scales
// (ls−32) over the IQ4_NL codebook.
func dotIQ4XSGo(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[136*i : 136*i+136]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		d4d8 := fp16At(x) * yd
		h := le16(x[2:])
		sl, qs := x[4:8], x[8:136]
		for ib := 0; ib < 8; ib++ {
			ls := int32(sl[ib/2]>>(4*(ib%2))&15) | int32(h>>(2*ib)&3)<<4
			q, y := qs[16*ib:16*ib+16], q8[32*ib:32*ib+32]
			s := int32(0)
			for j := 0; j < 16; j++ {
				s += int32(kvaluesIQ4NL[q[j]&15]) * int32(int8(y[j]))
				s += int32(kvaluesIQ4NL[q[j]>>4]) * int32(int8(y[j+16]))
			}
			sum += float32(d4d8*float32(ls-32)) * float32(s)
		}
	}
	return sum
}

// dotTQ1_0Go: TQ1_0 · Q8_K. Ternary values packed five per byte in base 3
// (qs) and four per byte (qh), decoded with ggml's multiply-by-3 trick.
func dotTQ1_0Go(n int, w, a []byte) float32 {
	pow3 := [6]uint8{1, 3, 9, 27, 81, 243}
	trit := func(b uint8, l int) int32 {
		q := b * pow3[l]
		return int32(uint16(q)*3>>8) - 1
	}
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[54*i : 54*i+54]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		qs, qh := x[0:48], x[48:52]
		s := int32(0)
		for l := 0; l < 5; l++ {
			for m := 0; m < 32; m++ {
				s += trit(qs[m], l) * int32(int8(q8[l*32+m]))
			}
		}
		for l := 0; l < 5; l++ {
			for m := 0; m < 16; m++ {
				s += trit(qs[32+m], l) * int32(int8(q8[160+l*16+m]))
			}
		}
		for l := 0; l < 4; l++ {
			for j := 0; j < 4; j++ {
				s += trit(qh[j], l) * int32(int8(q8[240+4*l+j]))
			}
		}
		sum += float32(s) * float32(fp16At(x[52:])*yd)
	}
	return sum
}

// dotTQ2_0Go: TQ2_0 · Q8_K. 2-bit values q−1 ∈ {−1,0,1,2}, four planes of 32
// per 32 bytes.
func dotTQ2_0Go(n int, w, a []byte) float32 {
	var sum float32
	for i := 0; i < n/256; i++ {
		x := w[66*i : 66*i+66]
		yd, q8, _ := q8K(a[292*i : 292*i+292])
		qs := x[0:64]
		s := int32(0)
		for j := 0; j < 64; j += 32 {
			for l := 0; l < 4; l++ {
				for k := 0; k < 32; k++ {
					s += int32(int8(q8[4*j+32*l+k])) * (int32(qs[j+k]>>(2*l)&3) - 1)
				}
			}
		}
		sum += float32(s) * float32(yd*fp16At(x[64:]))
	}
	return sum
}
