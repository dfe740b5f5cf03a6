package falsify

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/quant"
)

// refDequant decodes src (whole blocks of type t) into dst from the format's
// definition, written out independently of engine/quant: the
// oracle dequant_exact holds quant.Dequantize to. Float operations are
// rounded one at a time (explicit float32 conversions), as ggml's C does.
func refDequant(t quant.Type, src []byte, dst []float32) error {
	le16 := func(i int) uint16 { return binary.LittleEndian.Uint16(src[i:]) }
	switch t {
	case quant.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case quant.F16:
		for i := range dst {
			dst[i] = refHalf(le16(2 * i))
		}
	case quant.BF16:
		for i := range dst {
			dst[i] = refBF16(le16(2 * i))
		}
	case quant.Q8_0: // {d f16, qs [32]int8}: d·q
		for b := 0; b < len(dst)/32; b++ {
			blk := src[34*b:]
			d := refHalf(binary.LittleEndian.Uint16(blk))
			for j := 0; j < 32; j++ {
				dst[32*b+j] = float32(int8(blk[2+j])) * d
			}
		}
	case quant.Q4_0: // {d, qs [16]}: low nibbles are values 0..15, high 16..31; (q−8)·d
		for b := 0; b < len(dst)/32; b++ {
			blk := src[18*b:]
			d := refHalf(binary.LittleEndian.Uint16(blk))
			for j := 0; j < 16; j++ {
				dst[32*b+j] = float32(int(blk[2+j]&0xf)-8) * d
				dst[32*b+j+16] = float32(int(blk[2+j]>>4)-8) * d
			}
		}
	case quant.Q4_1: // {d, m, qs [16]}: q·d + m
		for b := 0; b < len(dst)/32; b++ {
			blk := src[20*b:]
			d := refHalf(binary.LittleEndian.Uint16(blk))
			m := refHalf(binary.LittleEndian.Uint16(blk[2:]))
			for j := 0; j < 16; j++ {
				dst[32*b+j] = float32(float32(blk[4+j]&0xf)*d) + m
				dst[32*b+j+16] = float32(float32(blk[4+j]>>4)*d) + m
			}
		}
	case quant.Q5_0: // {d, qh uint32, qs [16]}: bit j of qh is the 5th bit of value j; (q−16)·d
		for b := 0; b < len(dst)/32; b++ {
			blk := src[22*b:]
			d := refHalf(binary.LittleEndian.Uint16(blk))
			qh := binary.LittleEndian.Uint32(blk[2:])
			for j := 0; j < 16; j++ {
				lo := int(blk[6+j]&0xf) | int(qh>>uint(j)&1)<<4
				hi := int(blk[6+j]>>4) | int(qh>>uint(j+16)&1)<<4
				dst[32*b+j] = float32(lo-16) * d
				dst[32*b+j+16] = float32(hi-16) * d
			}
		}
	case quant.Q5_1: // {d, m, qh, qs}: q·d + m
		for b := 0; b < len(dst)/32; b++ {
			blk := src[24*b:]
			d := refHalf(binary.LittleEndian.Uint16(blk))
			m := refHalf(binary.LittleEndian.Uint16(blk[2:]))
			qh := binary.LittleEndian.Uint32(blk[4:])
			for j := 0; j < 16; j++ {
				lo := int(blk[8+j]&0xf) | int(qh>>uint(j)&1)<<4
				hi := int(blk[8+j]>>4) | int(qh>>uint(j+16)&1)<<4
				dst[32*b+j] = float32(float32(lo)*d) + m
				dst[32*b+j+16] = float32(float32(hi)*d) + m
			}
		}
	default:
		return fmt.Errorf("no independent reference for %s", t)
	}
	return nil
}

// refExact lists the types refDequant defines.
var refExact = map[quant.Type]bool{quant.F32: true, quant.F16: true, quant.BF16: true,
	quant.Q8_0: true, quant.Q4_0: true, quant.Q4_1: true, quant.Q5_0: true, quant.Q5_1: true}

// refHalf is IEEE 754 binary16 by its definition: (−1)^s · 2^(e−15) · 1.m,
// subnormals 2^−14 · 0.m, e = 31 infinities and NaNs (NaN payload kept in
// the top mantissa bits, as a hardware conversion does).
func refHalf(h uint16) float32 {
	s, e, m := h>>15, int(h>>10&0x1f), int(h&0x3ff)
	var v float64
	switch {
	case e == 0:
		v = math.Ldexp(float64(m), -24)
	case e == 31 && m == 0:
		v = math.Inf(1)
	case e == 31:
		return math.Float32frombits(uint32(s)<<31 | 0xff<<23 | uint32(m)<<13)
	default:
		v = math.Ldexp(float64(1024+m), e-25)
	}
	if s == 1 {
		v = -v
	}
	return float32(v)
}

// refBF16 is bfloat16 by its definition: the top half of a binary32.
func refBF16(h uint16) float32 {
	s, e, m := h>>15, int(h>>7&0xff), int(h&0x7f)
	var v float64
	switch {
	case e == 0:
		v = math.Ldexp(float64(m), -133)
	case e == 255 && m == 0:
		v = math.Inf(1)
	case e == 255:
		return math.Float32frombits(uint32(h) << 16)
	default:
		v = math.Ldexp(float64(128+m), e-134)
	}
	if s == 1 {
		v = -v
	}
	return float32(v)
}
