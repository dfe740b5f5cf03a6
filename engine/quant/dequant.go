package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize decodes len(dst) values of type t from src, exactly as ggml's
// to_float does. src must hold exactly the blocks of len(dst) values.
func Dequantize(t Type, src []byte, dst []float32) error {
	info, err := Lookup(t)
	if err != nil {
		return err
	}
	want, ok := info.RowBytes(int64(len(dst)))
	if !ok {
		return fmt.Errorf("quant: %s: %d values is not a multiple of the block size %d", info.Name, len(dst), info.BlockSize)
	}
	if int64(len(src)) != want {
		return fmt.Errorf("quant: %s: %d values need %d bytes, got %d", info.Name, len(dst), want, len(src))
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = FP16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	default:
		return fmt.Errorf("quant: %s: no dequantizer yet", info.Name)
	}
	return nil
}

// FP16ToFP32 converts an IEEE half-precision value to float32 exactly.
func FP16ToFP32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
