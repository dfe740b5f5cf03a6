package kern

import (
	"encoding/binary"
	"math"
)

// Float prefill tiles (F32, F16, BF16 weights): the weight rows of a pool
// task are converted to float32 once per task (expand), the activation rows
// once per MulActsMany, in groups of tileFActs rows laid out two rows per
// 16-lane register, and the tile kernel multiplies four weight rows by a
// group of twelve activation rows: 48 dot products, each one eight-lane
// float32 fma chain over the values in order, reduced by hsum_float_8. That
// is, lane for lane, the single-row AVX2 kernel (tinyBLAS's order), so a
// tile row is bit for bit the matvec of that activation row; what changes is
// that no value is converted twice in the hot loop and one weight vector
// load serves twelve activation rows (the eight-row kernels convert every
// activation value once per weight row).

// tileFActs is the activation rows of one group of the float tile kernels,
// and tileFRows the weight rows of one call.
const (
	tileFActs = 12
	tileFRows = 4
	// tileFStep is the bytes of one step (eight values) of a repacked group:
	// six pairs of rows, 16 float32 each.
	tileFStep = tileFActs / 2 * 64
	// tileFAcc is the float32 accumulator state of one call: four weight rows
	// by six pairs of activation rows, 16 lanes each (= 4·tileAccFloats).
	tileFAcc = tileFRows * tileFActs * 8
	// tileFPiece is the steps of a group taken in one call (24 KiB of
	// repacked activations), so that the piece stays in L1 while a task's
	// weight rows pass over it.
	tileFPiece = 64
	// tileFMinActs: fewer activation rows than this take the eight-, four-
	// and single-row kernels (a padded group would be mostly padding).
	tileFMinActs = 8
)

// tileFFunc is the float tile kernel: steps n8 (eight values each) of four
// weight rows, already float32, row j at w[j·wstride:] (step s at 32s),
// against one group of twelve activation rows repacked by expand (step s,
// pair p at a[384s + 64p]: row 2p's eight values, then row 2p+1's). Its
// accumulators (48 eight-lane chains, tileFAcc floats in acc, laid out as
// the kernel likes: the AVX-512 kernel and the Go twin keep weight row j and
// pair p at acc[16·(6j + p):], row 2p in lanes 0–7 and row 2p+1 in 8–15)
// start at zero when flags&tileFirst, else are read from acc; when
// flags&tileLast they are
// reduced, each eight lanes by hsum_float_8, into out[r·ostride + j] for
// activation row r, else written back to acc. A row taken in several calls
// (consecutive steps) gets the operations of one call.
type tileFFunc func(n8 int, w []byte, wstride int, a []byte, acc []float32, flags int, out []float32, ostride int)

// expandFunc converts n8·8 values of a weight or activation row at src to
// float32 (exactly: F16 and BF16 are subsets of float32), eight values per
// step, step s at dst[s·dstride:].
type expandFunc func(n8 int, src []byte, dst []byte, dstride int)

// tileF4x12Go is the float tile kernel in Go: the twin of the assembly,
// computing the same float32 operations (fma32 rounds once, as VFMADD231PS
// does), so the two agree bit for bit.
func tileF4x12Go(n8 int, w []byte, wstride int, a []byte, acc []float32, flags int, out []float32, ostride int) {
	var c [tileFRows][tileFActs][8]float32
	if flags&tileFirst == 0 {
		for j := range c {
			for r := range c[j] {
				copy(c[j][r][:], acc[16*(6*j+r/2)+8*(r%2):])
			}
		}
	}
	for s := 0; s < n8; s++ {
		for j := 0; j < tileFRows; j++ {
			wr := w[j*wstride+32*s:]
			for r := 0; r < tileFActs; r++ {
				ar := a[tileFStep*s+64*(r/2)+32*(r%2):]
				for l := 0; l < 8; l++ {
					wv := math.Float32frombits(le32(wr[4*l:]))
					av := math.Float32frombits(le32(ar[4*l:]))
					c[j][r][l] = fma32(wv, av, c[j][r][l])
				}
			}
		}
	}
	for j := range c {
		for r := range c[j] {
			if flags&tileLast != 0 {
				out[r*ostride+j] = hsum8(&c[j][r])
			} else {
				copy(acc[16*(6*j+r/2)+8*(r%2):], c[j][r][:])
			}
		}
	}
}

// prefetch asks for b's cache lines in L2; the amd64 build sets it (the Go
// form does nothing).
var prefetch = func(b []byte) {}

// hsum8 is ggml's hsum_float_8 (the AVX2 kernels' HSUMX): lanes i and i+4
// added, then lanes 0+2 and 1+3, then those two. (sum8, the Go kernels'
// reduction, pairs them differently.)
func hsum8(x *[8]float32) float32 {
	return ((x[0] + x[4]) + (x[2] + x[6])) + ((x[1] + x[5]) + (x[3] + x[7]))
}

// expandF32Go, expandF16Go and expandBF16Go are the Go expanders.
func expandF32Go(n8 int, src, dst []byte, dstride int) {
	for s := 0; s < n8; s++ {
		copy(dst[s*dstride:s*dstride+32], src[32*s:32*s+32])
	}
}

func expandF16Go(n8 int, src, dst []byte, dstride int) {
	for s := 0; s < n8; s++ {
		d := dst[s*dstride : s*dstride+32]
		for l := 0; l < 8; l++ {
			binary.LittleEndian.PutUint32(d[4*l:], math.Float32bits(fp16At(src[16*s+2*l:])))
		}
	}
}

func expandBF16Go(n8 int, src, dst []byte, dstride int) {
	for s := 0; s < n8; s++ {
		d := dst[s*dstride : s*dstride+32]
		for l := 0; l < 8; l++ {
			binary.LittleEndian.PutUint32(d[4*l:], uint32(le16(src[16*s+2*l:]))<<16)
		}
	}
}

// prepF expands groups [lo, hi) of tileFActs activation rows into st.af
// (rows past the last are zero).
func (st *mulState) prepF(lo, hi int) {
	a := st.a
	n8 := a.Cols / 8
	gb := n8 * tileFStep
	for g := lo; g < hi; g++ {
		grp := st.af[g*gb : (g+1)*gb]
		for r := 0; r < tileFActs; r++ {
			dst := grp[64*(r/2)+32*(r%2):]
			if i := g*tileFActs + r; i < a.Rows {
				st.fexpand(n8, a.Data[i*st.arb:(i+1)*st.arb], dst, tileFStep)
				continue
			}
			for s := 0; s < n8; s++ {
				clear(dst[s*tileFStep : s*tileFStep+32])
			}
		}
	}
}

// tileFJob runs weight rows [lo, hi) of one job over every activation row
// with the job's float tile kernel: the rows are expanded to float32 into
// the worker's buffer (padded with zero rows to a multiple of four), then
// each group of twelve activation rows is taken in pieces of tileFPiece
// steps, each piece passed over all of the task's weight rows. Whole tiles
// are written straight into dst; tiles with padding go through the worker's
// out buffer.
func (st *mulState) tileFJob(worker int, jb *Job, wrb, lo, hi int) {
	k, n, m, rows, dst := jb.K, st.n, st.a.Rows, jb.W.Rows, jb.Dst
	n8 := n / 8
	rb := n8 * 32 // bytes of one expanded weight row
	nr := hi - lo
	nq := (nr + tileFRows - 1) / tileFRows
	wf := grow(st.wf[worker], nq*tileFRows*rb)
	st.wf[worker] = wf
	for j := 0; j < nr; j++ {
		k.expand(n8, jb.W.Data[(lo+j)*wrb:(lo+j+1)*wrb], wf[j*rb:], 32)
	}
	clear(wf[nr*rb:])
	acc := st.kacc[worker][:nq*tileFAcc]
	tile := st.fout[worker][:tileFActs*tileFRows]
	gb := n8 * tileFStep
	tail, sz := n-8*n8, wrb/n // sz: bytes per value
	groups := len(st.af) / gb
	// While the groups pass, the rows after this task's (the next task's,
	// on one thread) are fetched into L2 a slice per group, so that their
	// expansion does not wait on memory.
	next := jb.W.Data[min(len(jb.W.Data), hi*wrb):min(len(jb.W.Data), (hi+nr)*wrb)]
	pf := (len(next)/groups + 63) &^ 63
	for g := 0; g < groups; g++ {
		prefetch(next[min(len(next), g*pf):min(len(next), (g+1)*pf)])
		grp := st.af[g*gb : (g+1)*gb]
		i0 := g * tileFActs
		ni := min(tileFActs, m-i0)
		for b0 := 0; b0 < n8; b0 += tileFPiece {
			b1 := min(n8, b0+tileFPiece)
			flags := 0
			if b0 == 0 {
				flags |= tileFirst
			}
			if b1 == n8 {
				flags |= tileLast
			}
			for q := 0; q < nq; q++ {
				w := wf[q*tileFRows*rb+b0*32 : (q*tileFRows+tileFRows-1)*rb+b1*32]
				out, ostride := tile, tileFRows
				j0 := lo + q*tileFRows
				whole := ni == tileFActs && j0+tileFRows <= hi
				if whole {
					out, ostride = dst[i0*rows+j0:(i0+tileFActs-1)*rows+j0+tileFRows], rows
				}
				k.tileF(b1-b0, w, rb, grp[b0*tileFStep:b1*tileFStep], acc[q*tileFAcc:(q+1)*tileFAcc], flags, out, ostride)
				if flags&tileLast != 0 && !whole {
					for r := 0; r < ni; r++ {
						copy(dst[(i0+r)*rows+j0:(i0+r)*rows+hi], tile[r*tileFRows:(r+1)*tileFRows])
					}
				}
			}
		}
		if tail == 0 {
			continue
		}
		for r := 0; r < ni; r++ {
			arow := st.a.Data[(i0+r)*st.arb : (i0+r+1)*st.arb]
			for j := lo; j < hi; j++ {
				wrow := jb.W.Data[j*wrb : (j+1)*wrb]
				dst[(i0+r)*rows+j] += k.ftail(tail, wrow[sz*8*n8:], arow[sz*8*n8:])
			}
		}
	}
}
