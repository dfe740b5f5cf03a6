//go:build amd64 && !noasm

package kern

import (
	"encoding/binary"
)

// Tables for the assembly i-quant kernels: grid points as whole words (so a
// grid point is one 8- or 4-byte load), and sign bytes expanded to eight
// bytes of +1 (0x01) or −1 (0xff) for VPSIGNB. All are built from
// iqGrids (engine/quant's grids) at initialisation.
var (
	iq2xxsGrid64 [256]uint64
	iq2xsGrid64  [512]uint64
	iq2sGrid64   [1024]uint64
	iq1sGrid64   [2048]uint64 // int8 −1, 0, +1
	iq3xxsGrid32 [256]uint32
	iq3sGrid32   [512]uint32
	signs7       [128]uint64  // ksigns_iq2xs[i], expanded
	signs8       [256]uint64  // byte i's bits, expanded
	iq1mDelta    [16][32]byte // 4 shift-sign bits → ±1 per 8 values
	ue4m3HalfTab [256]float32
	q2_0Rep      = [32]byte{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7}
	q2_0Tab      = [16]byte{0, 1, 2, 3, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}
)

func expandSigns(s uint8) uint64 {
	var b [8]byte
	for j := range b {
		b[j] = 1
		if s>>j&1 != 0 {
			b[j] = 0xff
		}
	}
	return binary.LittleEndian.Uint64(b[:])
}

func init() {
	g := iqGrids
	for i := range g.IQ2XXS {
		iq2xxsGrid64[i] = binary.LittleEndian.Uint64(g.IQ2XXS[i][:])
	}
	for i := range g.IQ2XS {
		iq2xsGrid64[i] = binary.LittleEndian.Uint64(g.IQ2XS[i][:])
	}
	for i := range g.IQ2S {
		iq2sGrid64[i] = binary.LittleEndian.Uint64(g.IQ2S[i][:])
	}
	for i := range g.IQ1S {
		var b [8]byte
		for j, v := range g.IQ1S[i] {
			b[j] = byte(v)
		}
		iq1sGrid64[i] = binary.LittleEndian.Uint64(b[:])
	}
	for i := range g.IQ3XXS {
		iq3xxsGrid32[i] = binary.LittleEndian.Uint32(g.IQ3XXS[i][:])
	}
	for i := range g.IQ3S {
		iq3sGrid32[i] = binary.LittleEndian.Uint32(g.IQ3S[i][:])
	}
	for i := range signs7 {
		signs7[i] = expandSigns(g.KSigns[i])
	}
	for i := range signs8 {
		signs8[i] = expandSigns(uint8(i))
	}
	for bits := range iq1mDelta {
		for l := 0; l < 4; l++ {
			for j := 0; j < 8; j++ {
				v := byte(1)
				if bits>>l&1 != 0 {
					v = 0xff
				}
				iq1mDelta[bits][8*l+j] = v
			}
		}
	}
	for i := range ue4m3HalfTab {
		ue4m3HalfTab[i] = ue4m3Half(uint8(i))
	}
}
