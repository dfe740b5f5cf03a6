package quant

import "math"

// Non-linear (IQ4_NL, IQ4_XS), micro-scaled float (MXFP4, NVFP4) and ternary
// (TQ1_0, TQ2_0) quantizers, following ggml-quants.c.

// bestIndexInt8 returns the index of the codebook value nearest to x in the
// sorted 16-entry table val, ties going to the larger value (ggml's
// best_index_int8: compare 2x with the sum of neighbours, both exact).
func bestIndexInt8(val *[16]int8, x float32) int {
	x2 := x + x
	idx := 0
	for step := 8; step > 0; step >>= 1 {
		j := idx + step
		if x2 >= float32(int32(val[j-1])+int32(val[j])) {
			idx = j
		}
	}
	return idx
}

// iq4Scale is the per-32-value scale search of ggml's quantize_row_iq4_nl_impl
// with no importance matrix (weights x^2) and ntry = 7, as ggml_quantize_chunk
// runs it for IQ4_NL and IQ4_XS. It returns 0 for a group whose max |x| is
// below GROUP_MAX_EPS.
func iq4Scale(xb []float32) float32 {
	const ntry = 7
	var maxv, amax float32
	for _, v := range xb {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	v0 := float32(kvaluesIQ4NL[0])
	d := -maxv / v0
	id := 1 / d
	var sumqx, sumq2 float32
	for _, v := range xb {
		q := float32(kvaluesIQ4NL[bestIndexInt8(&kvaluesIQ4NL, id*v)])
		w := float32(v * v)
		sumqx += float32(w * q * v)
		sumq2 += float32(w * q * q)
	}
	d = 0
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	best := d * sumqx
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(itry+int(kvaluesIQ4NL[0])) / maxv
		sumqx, sumq2 = 0, 0
		for _, v := range xb {
			q := float32(kvaluesIQ4NL[bestIndexInt8(&kvaluesIQ4NL, id*v)])
			w := float32(v * v)
			sumqx += float32(w * q * v)
			sumq2 += float32(w * q * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = d * sumqx
		}
	}
	return d
}

// quantIQ4_NL is ggml's quantize_iq4_nl (imatrix NULL): one fp16 scale per
// 32 values, codes re-picked with 1/d.
func quantIQ4_NL(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:18]
		d := iq4Scale(x)
		putHalf(y, 0, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j := range 16 {
			l0 := bestIndexInt8(&kvaluesIQ4NL, id*x[j])
			l1 := bestIndexInt8(&kvaluesIQ4NL, id*x[16+j])
			y[2+j] = uint8(l0) | uint8(l1)<<4
		}
		src, dst = src[32:], dst[18:]
	}
}

// quantIQ4_XS is ggml's quantize_iq4_xs (imatrix NULL): per-32 scales as for
// IQ4_NL, then 6-bit signed multiples of the fp16 super-block scale
// d = -max_scale/32, codes re-picked with each stored sub-block scale.
func quantIQ4_XS(src []float32, dst []byte) {
	var scales [8]float32
	for len(src) > 0 {
		x, y := src[:256], dst[:136]
		var maxScale, amaxScale float32
		for ib := range 8 {
			scales[ib] = iq4Scale(x[32*ib : 32*ib+32])
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		putHalf(y, 0, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sh uint16
		sl, qs := y[4:8], y[8:136]
		for ib := range 8 {
			l := nearestInt(id * scales[ib])
			l = max(-32, min(31, l))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			xb, q := x[32*ib:32*ib+32], qs[16*ib:16*ib+16]
			for j := range 16 {
				l0 := bestIndexInt8(&kvaluesIQ4NL, idl*xb[j])
				l1 := bestIndexInt8(&kvaluesIQ4NL, idl*xb[16+j])
				q[j] = uint8(l0) | uint8(l1)<<4
			}
			l += 32
			if ib%2 == 0 {
				sl[ib/2] = uint8(l) & 0xf
			} else {
				sl[ib/2] |= (uint8(l) & 0xf) << 4
			}
			sh |= uint16(l>>4) << (2 * (ib % 8))
		}
		put16(y, 2, sh)
		src, dst = src[256:], dst[136:]
	}
}

// bestIndexMXFP4 returns the first index of kvalues_mxfp4 whose value times
// e is nearest to x (ggml best_index_mxfp4).
func bestIndexMXFP4(x, e float32) uint8 {
	best := 0
	bestErr := abs32(float32(float32(kvaluesMXFP4[0])*e) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(kvaluesMXFP4[i])*e) - x); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// log2f stands in for C's log2f: log2 in float64, rounded to float32.
func log2f(x float32) float32 { return float32(math.Log2(float64(x))) }

// quantMXFP4 is quantize_row_mxfp4_ref: E8M0 exponent floor(log2(amax)) - 2
// + 127, each value the nearest doubled E2M1 level times 2^(e-128).
func quantMXFP4(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:32], dst[:17]
		var amax float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax = a
			}
		}
		var e uint8
		if amax > 0 {
			f := float32(math.Floor(float64(log2f(amax)))) - 2 + 127
			e = uint8(truncI32(f)) // (uint8_t) of a float, as x86-64 C does it
		}
		d := e8m0Half(e)
		y[0] = e
		for j := range 16 {
			y[1+j] = bestIndexMXFP4(x[j], d) | bestIndexMXFP4(x[16+j], d)<<4
		}
		src, dst = src[32:], dst[17:]
	}
}

// quantNVFP4 is quantize_row_nvfp4_ref: per 16 values a UE4M3 scale
// amax/6, each value the nearest doubled E2M1 level times that scale / 2.
func quantNVFP4(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:64], dst[:36]
		for s := range 4 {
			xb := x[16*s : 16*s+16]
			var amax float32
			for _, v := range xb {
				if a := abs32(v); amax < a {
					amax = a
				}
			}
			ue := fp32ToUE4M3(amax / 6)
			y[s] = ue
			d := ue4m3ToFP32(ue)
			for j := range 8 {
				y[4+8*s+j] = bestIndexMXFP4(xb[j], d) | bestIndexMXFP4(xb[8+j], d)<<4
			}
		}
		src, dst = src[64:], dst[36:]
	}
}

// ternaryScale returns d = max|x| and 1/d (0 for an all-zero block).
func ternaryScale(x []float32) (d, id float32) {
	d = amaxOf(x)
	if d != 0 {
		id = 1 / d
	}
	return d, id
}

// trit returns round(x*id)+1 in 0..2 (for |x*id| <= 1).
func trit(x, id float32) uint8 { return uint8(int32(roundf(x*id)) + 1) }

// quantTQ1_0 is quantize_row_tq1_0_ref: trits packed 5 per byte (3^5 = 243)
// as a fixed-point fraction (ceil(q*256/243)), 4 per byte in qh.
func quantTQ1_0(src []float32, dst []byte) {
	pack := func(q uint8) uint8 { return uint8((uint16(q)*256 + 242) / 243) }
	for len(src) > 0 {
		x, y := src[:256], dst[:54]
		d, id := ternaryScale(x)
		putHalf(y, 52, d)
		for m := range 32 {
			var q uint8
			for n := range 5 {
				q = q*3 + trit(x[m+32*n], id)
			}
			y[m] = pack(q)
		}
		x = x[160:]
		for m := range 16 {
			var q uint8
			for n := range 5 {
				q = q*3 + trit(x[m+16*n], id)
			}
			y[32+m] = pack(q)
		}
		x = x[80:]
		for j := range 4 {
			var q uint8
			for m := range 4 {
				q = q*3 + trit(x[j+4*m], id)
			}
			y[48+j] = pack(q * 3)
		}
		src, dst = src[256:], dst[54:]
	}
}

// quantTQ2_0 is quantize_row_tq2_0_ref: trits as 2-bit codes, byte m of each
// 32-byte group holding values m, m+32, m+64, m+96 of that 128.
func quantTQ2_0(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:256], dst[:66]
		d, id := ternaryScale(x)
		putHalf(y, 64, d)
		for j := 0; j < 64; j += 32 {
			for m := range 32 {
				var q uint8
				for n := range 4 {
					q |= (trit(x[m+32*n], id) & 3) << (2 * n)
				}
				y[j+m] = q
			}
			x = x[128:]
		}
		src, dst = src[256:], dst[66:]
	}
}
