package quant

import "math"

// The k-quant reference quantizers (ggml-quants.c quantize_row_q{2..6,8}_K_ref)
// and their helpers. Every product that ggml adds to something is wrapped in
// float32(...) so that Go cannot fuse it into a multiply-add.

// groupMaxEps is ggml's GROUP_MAX_EPS: groups with max |x| below it are zero.
const groupMaxEps = 1e-15

// nearestInt rounds to the nearest integer (ties to even) with ggml's
// nearest_int trick: adding 1.5*2^23 leaves the rounded integer in the low
// mantissa bits. Like ggml it assumes |f| <= 4194303; outside that range the
// result is garbage, never a panic.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x7fffff) - 0x400000
}

// makeQxQuantsRMSE1 is ggml's make_qx_quants(n, nmax, x, L, rmse_type=1,
// qw=NULL): a symmetric scale search weighted by x^2. L receives codes in
// 0..2*nmax-1.
func makeQxQuantsRMSE1(nmax int32, x []float32, L []int8) float32 {
	var maxv, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	fnmax := float32(nmax)
	iscale := -fnmax / maxv
	var sumlx, suml2 float32
	for i, v := range x {
		l := nearestInt(iscale * v)
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l + nmax)
		w := float32(v * v)
		fl := float32(l)
		sumlx += float32(w * v * fl)
		suml2 += float32(w * fl * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / maxv
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := nearestInt(iscale * v)
			l = max(-nmax, min(nmax-1, l))
			w := float32(v * v)
			fl := float32(l)
			sumlx += float32(w * v * fl)
			suml2 += float32(w * fl * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				l := nearestInt(iscale * v)
				L[i] = int8(nmax + max(-nmax, min(nmax-1, l)))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants is ggml's make_q3_quants(n, nmax, x, L, do_rmse=true): an
// x^2-weighted scale with up to 5 rounds of per-value code refinement. L
// receives codes in 0..2*nmax-1.
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
	var maxv, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	iscale := -float32(nmax) / maxv
	var sumlx, suml2 float32
	for i, v := range x {
		l := nearestInt(iscale * v)
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l)
		w := float32(v * v)
		sumlx += float32(w * v * float32(l))
		suml2 += float32(w * float32(l) * float32(l))
	}
	for range 5 {
		changed := 0
		for i, v := range x {
			w := float32(v * v)
			li := float32(L[i])
			slx := sumlx - float32(w*v*li)
			if slx > 0 {
				sl2 := suml2 - float32(w*li*li)
				newL := nearestInt(v * sl2 / slx)
				newL = max(-nmax, min(nmax-1, newL))
				if newL != int32(L[i]) {
					fn := float32(newL)
					slx += float32(w * v * fn)
					sl2 += float32(w * fn * fn)
					if sl2 > 0 && float32(slx*slx*suml2) > float32(sumlx*sumlx*sl2) {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQKX2Quants is ggml's make_qkx2_quants: an asymmetric (scale, min) fit
// of x with weights, trying nstep+1 scales around nmax/(max-min) and keeping
// the one with the least weighted error (absolute when useMad, else squared).
// L receives codes 0..nmax; Laux is scratch of len(x). It returns the scale
// and the_min (the negated offset, >= 0).
func makeQKX2Quants(nmax int32, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMad bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range n {
			L[i] = 0
		}
		return 0, -lo
	}
	fnmax := float32(nmax)
	iscale := fnmax / (hi - lo)
	scale = 1 / iscale
	errOf := func(diff float32) float32 {
		if useMad {
			return abs32(diff)
		}
		return float32(diff * diff)
	}
	var bestError float32
	for i := range n {
		l := nearestInt(iscale * (x[i] - lo))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(scale*float32(L[i])) + lo - x[i]
		bestError += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + fnmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := nearestInt(iscale * (x[i] - lo))
			l = max(0, min(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(w * fl * fl)
			sumXL += float32(w * fl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := range n {
				diff := float32(thisScale*float32(Laux[i])) + thisMin - x[i]
				curError += float32(weights[i] * errOf(diff))
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

// packQ2Bits stores 256 2-bit codes as ggml's Q2_K/Q3_K do: byte l of each
// 32-byte half holds codes l, l+32, l+64, l+96 of that 128-value half.
func packQ2Bits(L []uint8, qs []byte) {
	for j := 0; j < 256; j += 128 {
		for l := range 32 {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// quantQ2_K is quantize_row_q2_K_ref: per 16 values an |x|-weighted,
// mean-absolute-error (scale, min) fit with 2-bit codes; scales and mins as
// 4-bit multiples of fp16 d and dmin; codes recomputed from the stored scales.
func quantQ2_K(src []float32, dst []byte) {
	const q4scale = 15
	var L [256]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [16]float32
	for len(src) > 0 {
		x, y := src[:256], dst[:84]
		ysc, yqs := y[0:16], y[16:80]
		var maxScale, maxMin float32
		for j := range 16 {
			xb := x[16*j : 16*j+16]
			for l := range 16 {
				weights[l] = abs32(xb[l])
			}
			scales[j], mins[j] = makeQKX2Quants(3, xb, weights[:], L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range 16 {
				ysc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			putHalf(y, 80, maxScale/q4scale)
		} else {
			clear(ysc)
			putHalf(y, 80, 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range 16 {
				ysc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			putHalf(y, 82, maxMin/q4scale)
		} else {
			putHalf(y, 82, 0)
		}
		dAll, dminAll := half(y, 80), half(y, 82)
		for j := range 16 {
			d := dAll * float32(ysc[j]&0xf)
			if d == 0 {
				continue
			}
			dm := dminAll * float32(ysc[j]>>4)
			for ii := range 16 {
				l := nearestInt((x[16*j+ii] + dm) / d)
				L[16*j+ii] = uint8(max(0, min(3, l)))
			}
		}
		packQ2Bits(L[:], yqs)
		src, dst = src[256:], dst[84:]
	}
}

// quantQ3_K is quantize_row_q3_K_ref: per 16 values make_q3_quants with
// nmax 4; sixteen 6-bit signed scales of fp16 d; codes recomputed from the
// stored scales, high bits in hmask, low 2 bits packed as in Q2_K.
func quantQ3_K(src []float32, dst []byte) {
	var L [256]int8
	var scales [16]float32
	var Lu [256]uint8
	for len(src) > 0 {
		x, y := src[:256], dst[:110]
		hmask, qs, ysc := y[0:32], y[32:96], y[96:108]
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		clear(ysc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				l := int8(nearestInt(iscale * scales[j]))
				l = int8(max(-32, min(31, int32(l))) + 32)
				if j < 8 {
					ysc[j] = uint8(l) & 0xf
				} else {
					ysc[j-8] |= (uint8(l) & 0xf) << 4
				}
				l >>= 4
				ysc[j%4+8] |= uint8(l) << (2 * (j / 4))
			}
			putHalf(y, 108, 1/iscale)
		} else {
			putHalf(y, 108, 0)
		}
		dAll := half(y, 108)
		for j := range 16 {
			var sc int8
			if j < 8 {
				sc = int8(ysc[j] & 0xf)
			} else {
				sc = int8(ysc[j-8] >> 4)
			}
			sc = int8(uint8(sc)|((ysc[8+j%4]>>(2*(j/4)))&3)<<4) - 32
			d := dAll * float32(sc)
			if d == 0 {
				continue
			}
			for ii := range 16 {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(max(-4, min(3, l)) + 4)
			}
		}
		clear(hmask)
		m, hm := 0, uint8(1)
		for j := range 256 {
			Lu[j] = uint8(L[j])
			if L[j] > 3 {
				hmask[m] |= hm
				Lu[j] -= 4
			}
			if m++; m == 32 {
				m, hm = 0, hm<<1
			}
		}
		packQ2Bits(Lu[:], qs)
		src, dst = src[256:], dst[110:]
	}
}

// packScalesK4 stores eight 6-bit scales and mins into the 12 scale bytes of
// a Q4_K/Q5_K block (the inverse of scaleMinK4).
func packScalesK4(ls, lm *[8]uint8, sc []byte) {
	for j := range 8 {
		if j < 4 {
			sc[j] = ls[j]
			sc[j+4] = lm[j]
		} else {
			sc[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
			sc[j-4] |= (ls[j] >> 4) << 6
			sc[j] |= (lm[j] >> 4) << 6
		}
	}
}

// quantKX is the shared body of quantize_row_q4_K_ref (nmax 15, search
// -1, 0.1, 20 steps) and quantize_row_q5_K_ref (nmax 31, -0.5, 0.1, 15):
// per 32 values an (av|x| + |x|)-weighted squared-error (scale, min) fit,
// scales and mins as 6-bit multiples of fp16 d and dmin, codes recomputed
// from the stored scales. It returns the codes and writes d, dmin, scales.
func quantKX(x []float32, y []byte, nmax int32, rmin, rdelta float32, nstep int, L *[256]uint8) {
	var Laux [32]uint8
	var weights [32]float32
	var mins, scales [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xb := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xb {
			sumX2 += float32(v * v)
		}
		avX := sqrtf(sumX2 / 32)
		for l, v := range xb {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xb, weights[:], L[32*j:32*j+32], Laux[:], rmin, rdelta, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var ls, lm [8]uint8
	for j := range 8 {
		ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
	}
	packScalesK4(&ls, &lm, y[4:16])
	putHalf(y, 0, maxScale/63)
	putHalf(y, 2, maxMin/63)
	dAll, dminAll := half(y, 0), half(y, 2)
	for j := range 8 {
		sc, m := scaleMinK4(j, y[4:16])
		d := dAll * float32(sc)
		if d == 0 {
			continue
		}
		dm := dminAll * float32(m)
		for ii := range 32 {
			l := nearestInt((x[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
}

// quantQ4_K is quantize_row_q4_K_ref; codes packed two per byte, 64 values
// per 32 bytes (low nibbles first 32, high nibbles next 32).
func quantQ4_K(src []float32, dst []byte) {
	var L [256]uint8
	for len(src) > 0 {
		x, y := src[:256], dst[:144]
		quantKX(x, y, 15, -1, 0.1, 20, &L)
		q := y[16:144]
		for j := 0; j < 256; j += 64 {
			for l := range 32 {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
		src, dst = src[256:], dst[144:]
	}
}

// quantQ5_K is quantize_row_q5_K_ref; low nibbles as Q4_K, fifth bits in qh.
func quantQ5_K(src []float32, dst []byte) {
	var L [256]uint8
	for len(src) > 0 {
		x, y := src[:256], dst[:176]
		quantKX(x, y, 31, -0.5, 0.1, 15, &L)
		qh, ql := y[16:48], y[48:176]
		clear(qh)
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < 256; n += 64 {
			for j := range 32 {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[n/2+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
		src, dst = src[256:], dst[176:]
	}
}

// quantQ6_K is quantize_row_q6_K_ref: per 16 values make_qx_quants with
// nmax 32; sixteen int8 scales of fp16 d; codes recomputed from the stored
// scales; 4 low bits in ql, 2 high bits in qh.
func quantQ6_K(src []float32, dst []byte) {
	var L [256]int8
	var scales [16]float32
	for len(src) > 0 {
		x, y := src[:256], dst[:210]
		var maxScale, maxAbsScale float32
		for ib := range 16 {
			s := makeQxQuantsRMSE1(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(y)
			putHalf(y, 208, 0)
			src, dst = src[256:], dst[210:]
			continue
		}
		iscale := -128 / maxScale
		putHalf(y, 208, 1/iscale)
		ysc := y[192:208]
		for ib := range 16 {
			ysc[ib] = uint8(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		dAll := half(y, 208)
		for j := range 16 {
			d := dAll * float32(int8(ysc[j]))
			if d == 0 {
				continue
			}
			for ii := range 16 {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
			}
		}
		ql, qh := y[0:128], y[128:192]
		for j := 0; j < 256; j += 128 {
			for l := range 32 {
				q1 := uint8(L[j+l]) & 0xf
				q2 := uint8(L[j+l+32]) & 0xf
				q3 := uint8(L[j+l+64]) & 0xf
				q4 := uint8(L[j+l+96]) & 0xf
				ql[j/2+l] = q1 | q3<<4
				ql[j/2+l+32] = q2 | q4<<4
				qh[j/4+l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
			}
		}
		src, dst = src[256:], dst[210:]
	}
}

// quantQ8_K is quantize_row_q8_K_ref: d = max/-127 (float32, not fp16),
// codes nearest_int(-127*x/max) capped at 127, bsums = sums of 16 codes. It
// is ggml's activation quantization for the k-quant, IQ and TQ dot products.
// An all-zero block gets d = 0 and zero codes and sums (ggml leaves the sums
// of such a block unwritten).
func quantQ8_K(src []float32, dst []byte) {
	for len(src) > 0 {
		x, y := src[:256], dst[:292]
		var maxv, amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, maxv = a, v
			}
		}
		if amax == 0 {
			clear(y)
			src, dst = src[256:], dst[292:]
			continue
		}
		iscale := -127 / maxv
		qs := y[4:260]
		for j, v := range x {
			qs[j] = uint8(int8(min(127, nearestInt(iscale*v))))
		}
		for j := range 16 {
			var sum int32
			for _, q := range qs[16*j : 16*j+16] {
				sum += int32(int8(q))
			}
			put16(y, 260+2*j, uint16(int16(sum)))
		}
		put32(y, 0, math.Float32bits(1/iscale))
		src, dst = src[256:], dst[292:]
	}
}
