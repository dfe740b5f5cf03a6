package kern

import (
	"fmt"

	"github.com/aprqa/apr/engine/quant"
)

// UnpackRow writes row r of w in ggml's layout (the bytes w.Data holds
// there) to dst, read from the packed copy w.Packed: so that a packed
// tensor's rows can be read (an embedding lookup of a tied output matrix)
// without touching the file's pages that the packed copy replaced. Every
// packing keeps all of ggml's bits, so the bytes are the file's.
func (k *Kernel) UnpackRow(w Weights, r int, dst []byte) error {
	wrb, _, err := k.rowBytes(w.Cols)
	if err != nil {
		return err
	}
	if k.pack == nil {
		return fmt.Errorf("kern: %s does not pack its weights", k.Contract)
	}
	if pb, _ := k.PackedBytes(w.Rows, w.Cols); len(w.Packed) != pb || r < 0 || r >= w.Rows || len(dst) != wrb {
		return fmt.Errorf("kern: %s: UnpackRow(%d) of %d×%d weights (%d packed bytes) into %d bytes", k.Contract, r, w.Rows, w.Cols, len(w.Packed), len(dst))
	}
	nb := (w.Cols + k.r16.unit - 1) / k.r16.unit // the BF16 pairs: an odd row's last pair is padded
	g, i := r/r16Rows, r%r16Rows
	grp := w.Packed[g*nb*k.r16.block : (g+1)*nb*k.r16.block]
	switch k.Key.Type {
	case quant.Q8_0:
		for b := 0; b < nb; b++ {
			o := dst[b*q80Bytes:]
			o[0], o[1] = grp[512*nb+32*b+2*i], grp[512*nb+32*b+2*i+1]
			for v := 0; v < 32; v++ {
				o[2+v] = grp[512*b+64*(v/4)+4*i+v%4] ^ 0x80
			}
		}
	case quant.Q5_0:
		for b := 0; b < nb; b++ {
			o, q := dst[b*22:], grp[320*b:]
			o[0], o[1] = grp[320*nb+32*b+2*i], grp[320*nb+32*b+2*i+1]
			var qh uint32
			for k := 0; k < 8; k++ {
				qh |= uint32(q[256+8*k+i/2]>>(4*(i%2))&15) << (4 * k)
			}
			o[2], o[3], o[4], o[5] = byte(qh), byte(qh>>8), byte(qh>>16), byte(qh>>24)
			for k := 0; k < 4; k++ {
				copy(o[6+4*k:10+4*k], q[64*k+4*i:64*k+4*i+4])
			}
		}
	case quant.Q4_K:
		for b := 0; b < nb; b++ {
			o, p := dst[144*b:144*b+144], grp[r16KBlock*b:]
			copy(o[0:2], p[2304+2*i:])
			copy(o[2:4], p[2336+2*i:])
			var sc, m [8]byte
			for s := 0; s < 8; s++ {
				sc[s], m[s] = p[2048+16*s+i], p[2176+32*(s/2)+2*i+s%2]
			}
			for j := 0; j < 4; j++ {
				o[4+j] = sc[j] | sc[j+4]>>4<<6
				o[8+j] = m[j] | m[j+4]>>4<<6
				o[12+j] = sc[j+4]&15 | m[j+4]&15<<4
			}
			for j := 0; j < 4; j++ {
				for k := 0; k < 8; k++ {
					copy(o[16+32*j+4*k:20+32*j+4*k], p[512*j+64*k+4*i:])
				}
			}
		}
	case quant.Q6_K:
		for b := 0; b < nb; b++ {
			o, p := dst[210*b:210*b+210], grp[r16K6Block*b:]
			clear(o[0:192])
			for t := 0; t < 256; t++ {
				half, gp, l := t/128, (t%128)/32, t%32
				q6 := p[512*(t/32)+64*(l/4)+4*i+l%4] - 96
				o[64*half+l+32*(gp&1)] |= q6 & 15 << (4 * (gp / 2))
				o[128+32*half+l] |= q6 >> 4 << (2 * gp)
			}
			for s := 0; s < 16; s++ {
				o[192+s] = p[4096+16*s+i]
			}
			copy(o[208:210], p[4352+2*i:])
		}
	case quant.BF16, quant.F32, quant.F16:
		if k.r16fPairs {
			for v := 0; v < w.Cols; v++ {
				copy(dst[2*v:2*v+2], grp[64*(v/2)+4*i+2*(v%2):])
			}
			break
		}
		sz := floatSize(k.Key.Type)
		for v := 0; v < nb; v++ {
			copy(dst[v*sz:(v+1)*sz], grp[(v*r16Rows+i)*sz:])
		}
	default:
		return fmt.Errorf("kern: %s: no unpacking", k.Contract)
	}
	return nil
}
