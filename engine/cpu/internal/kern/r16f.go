package kern

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/quant"
)

// Packed float kernels ("r16f"): F32, F16 and BF16 weights are repacked
// once, at load, into groups of sixteen rows with value k of the sixteen
// rows side by side (row r's value k at k·16·size + r·size, size the bytes
// of a value; rows past the matrix's last are zero), and every (weight row,
// activation row) pair is computed as
//
//	acc = 0
//	for k = 0 … n−1:  acc = fma(w[k], a[k], acc)
//
// one float32 chain per pair over the values in order, w and a exact
// float32 (F16 and BF16 widen exactly; the activation row is ggml's
// vec_dot_type of the weight type, rounded as the unpacked kernels round
// it). That is not ggml's vec_dot order (eight lanes, hsum_float_8 at the
// end): like the r16 kernels these are held to the kernel contract's bound
// (a chain of n fmas errs by at most about n·2⁻²⁴·Σ|w·a|), not to
// llama.cpp's bits. One lane of a 512-bit register is one pair, so the chain
// is the same whatever the number of activation rows and whichever rows
// share the call: a matmul row is bit for bit the matvec of that activation
// row, and the matvec and matmul keys share the packed weights.
//
// The prefill kernel holds two groups (32 weight rows, two registers) by up
// to r16fActs activation rows in 28 accumulators: per value k two weight
// loads (F16 and BF16 widened to float32 on the way), one broadcast per
// activation row and two fmas per broadcast, no reduction at the end (the
// lanes are the rows, stored straight into dst). The ggml-order kernels it
// replaces (tilef.go) do 24 fmas per ten loads of eight-value pieces and
// reduce every pair at the end; they stay the "exact" kernel set's.

// r16fActs is the most activation rows one r16f call takes.
const r16fActs = 14

// r16fOut is the floats of a worker's buffer for a padded call's results.
const r16fOut = r16fActs * 2 * r16Rows

// r16fFunc multiplies the packed groups w0 (weight rows 0..15) and w1 (rows
// 16..31), n values each, by nt float32 activation rows, row t at
// a[t·astride:] (bytes), writing row t's 32 results to out[t·ostride:]; nt
// is the function's (r16f[nt-1]). w1 may be w0 (one group: results 16..31
// repeat 0..15).
type r16fFunc func(n int, w0, w1, a []byte, astride int, out []float32, ostride int)

// floatSize is the bytes of one value of a float weight type (0: not one).
func floatSize(t quant.Type) int {
	switch t {
	case quant.F32:
		return 4
	case quant.F16, quant.BF16:
		return 2
	}
	return 0
}

// floatAt returns the float32 value of type t at b.
func floatAt(t quant.Type, b []byte) float32 {
	switch t {
	case quant.F16:
		return fp16At(b)
	case quant.BF16:
		return math.Float32frombits(uint32(le16(b)) << 16)
	}
	return math.Float32frombits(le32(b))
}

// packW16 packs one whole group of sixteen rows of 16-bit values (F16,
// BF16), n8 steps of eight values (row r at src[r·wrb:], the step's 256
// bytes at dst[256·s:]); the amd64 build sets it (nil: the Go loop).
var packW16 func(n8 int, src []byte, wrb int, dst []byte)

// packFloatR16 returns the packing of float type t (see the layout above).
func packFloatR16(t quant.Type) packFunc {
	sz := floatSize(t)
	return func(rows, cols int, src, dst []byte, g0, g1 int) {
		wrb, gb := cols*sz, cols*r16Rows*sz
		for g := g0; g < g1; g++ {
			grp := dst[g*gb : (g+1)*gb]
			k0 := 0
			if sz == 2 && packW16 != nil && (g+1)*r16Rows <= rows && cols >= 8 {
				k0 = cols &^ 7
				packW16(k0/8, src[g*r16Rows*wrb:(g+1)*r16Rows*wrb], wrb, grp)
			}
			for r := 0; r < r16Rows; r++ {
				i := g*r16Rows + r
				if i >= rows {
					for k := k0; k < cols; k++ {
						clear(grp[(k*r16Rows+r)*sz : (k*r16Rows+r+1)*sz])
					}
					continue
				}
				row := src[i*wrb : (i+1)*wrb]
				for k := k0; k < cols; k++ {
					copy(grp[(k*r16Rows+r)*sz:(k*r16Rows+r+1)*sz], row[k*sz:])
				}
			}
		}
	}
}

// r16fTwin returns the Go twin of the r16f kernels of type t on nt
// activation rows: the same float32 chains (fma32 rounds once, as
// VFMADD231PS does).
func r16fTwin(t quant.Type, nt int) r16fFunc {
	sz := floatSize(t)
	return r16fRows(nt, func(n int, w []byte, rr int, ar []byte) float32 {
		var acc float32
		for k := 0; k < n; k++ {
			acc = fma32(floatAt(t, w[(k*r16Rows+rr)*sz:]), math.Float32frombits(le32(ar[4*k:])), acc)
		}
		return acc
	})
}

// r16fRows is a Go twin on nt activation rows from its chain: chain(n, w,
// rr, ar) is row rr of the group w (the first 16 rows are w0's, the next
// w1's) against activation row ar, as the kernel computes it.
func r16fRows(nt int, chain func(n int, w []byte, rr int, ar []byte) float32) r16fFunc {
	return func(n int, w0, w1, a []byte, astride int, out []float32, ostride int) {
		for tk := 0; tk < nt; tk++ {
			ar := a[tk*astride:]
			for r := 0; r < 2*r16Rows; r++ {
				w, rr := w0, r
				if r >= r16Rows {
					w, rr = w1, r-r16Rows
				}
				out[tk*ostride+r] = chain(n, w, rr, ar)
			}
		}
	}
}

// r16fTwins returns the Go twins of type t for 1..r16fActs rows.
func r16fTwins(t quant.Type) []r16fFunc {
	fs := make([]r16fFunc, r16fActs)
	for i := range fs {
		fs[i] = r16fTwin(t, i+1)
	}
	return fs
}

// registerR16F registers (t, isa) as a packed float kernel: its matvec and
// matmul take weights packed by packFloatR16 and run fns (fns[nt-1] on nt
// activation rows, nt up to len(fns) ≤ r16fActs); expand widens activation
// rows to float32 (F16, BF16).
// dot (the single-row kernel on ggml's layout) is what the listing and
// RunKernel callers see for unpacked use; Mul refuses unpacked weights.
func registerR16F(t quant.Type, isa ISA, dot dotFunc, expand expandFunc, fns []r16fFunc) {
	sz := floatSize(t)
	if sz == 0 || len(fns) == 0 || len(fns) > r16fActs {
		panic("kern: registerR16F: no packed float kernels for " + t.String())
	}
	register(t, isa, t, dot, nil)
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		k.pack, k.r16f, k.expand = packFloatR16(t), fns, expand
		k.r16 = r16Format{block: r16Rows * sz, quants: r16Rows * sz, unit: 1}
	}
}

// prepR16F widens activation rows [lo, hi) to float32 rows in st.afr.
func (st *mulState) prepR16F(lo, hi int) {
	a, n := st.a, st.n
	n8 := n / 8
	sz := floatSize(a.Type)
	for i := lo; i < hi; i++ {
		src, dst := a.Data[i*st.arb:(i+1)*st.arb], st.afr[4*i*n:4*(i+1)*n]
		st.fexpand(n8, src, dst, 32)
		for k := 8 * n8; k < n; k++ {
			binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(floatAt(a.Type, src[k*sz:])))
		}
	}
}

// r16fJob runs weight rows [lo, hi) of one packed float job (lo a multiple
// of sixteen) over every activation row: the groups two at a time (one when
// one is left) over the activation rows in near-equal pieces of at most
// len(k.r16f) (r16fActs on AVX-512, 6 on AVX2), the pair's weights staying
// in L2 while the pieces pass. Calls
// with a group past the matrix's end or a single group go through the
// worker's buffer.
func (st *mulState) r16fJob(worker int, jb *Job, lo, hi int) {
	k, m, n, rows, dst := jb.K, st.a.Rows, st.n, jb.W.Rows, jb.Dst
	gb := (n + k.r16.unit - 1) / k.r16.unit * k.r16.block
	a, arb := st.afa, 4*n
	odd := false // a BF16 pair kernel's rows end with a padded pair (pairTail)
	if k.r16fPairs {
		a, arb, odd, n = st.a.Data, st.arb, n%2 == 1, n/2
	}
	pieces := (m + len(k.r16f) - 1) / len(k.r16f)
	tmp := st.r16out[worker][:r16fOut]
	for r := lo; r < hi; r += 2 * r16Rows {
		g := r / r16Rows
		w0 := jb.W.Packed[g*gb : (g+1)*gb]
		w1, nr := w0, min(r16Rows, hi-r)
		if hi-r > r16Rows {
			w1, nr = jb.W.Packed[(g+1)*gb:(g+2)*gb], min(2*r16Rows, hi-r)
		}
		for p, t0 := 0, 0; t0 < m; p++ {
			nt := (m - t0 + pieces - p - 1) / (pieces - p)
			f := k.r16f[nt-1]
			if nr == 2*r16Rows {
				out := dst[t0*rows+r : (t0+nt-1)*rows+r+nr]
				f(n, w0, w1, a[t0*arb:], arb, out, rows)
				if odd {
					pairTail(nt, w0[64*n:], w1[64*n:], a[t0*arb+4*n:], arb, out, rows)
				}
			} else {
				f(n, w0, w1, a[t0*arb:], arb, tmp[:nt*2*r16Rows], 2*r16Rows)
				if odd {
					pairTail(nt, w0[64*n:], w1[64*n:], a[t0*arb+4*n:], arb, tmp, 2*r16Rows)
				}
				for t := 0; t < nt; t++ {
					copy(dst[(t0+t)*rows+r:(t0+t)*rows+r+nr], tmp[t*2*r16Rows:t*2*r16Rows+nr])
				}
			}
			t0 += nt
		}
	}
}

// The BF16 kernels on AVX512-BF16 ("avx512bf16", packBF16PairR16,
// r16fPairTwin): the weights packed in pairs of values, pair j of row r of
// a group at 64j + 4r (values 2j, 2j+1; an odd row's last value pairs
// with a zero), and
// every pair of values taken by one VDPBF16PS on the BF16 activation row's
// own pair:
//
//	acc = 0
//	for j = 0 … ⌊n/2⌋−1:  acc = ftz(acc + w[2j+1]·a[2j+1]);  acc = ftz(acc + w[2j]·a[2j])
//	n odd:                acc = ftz(acc + w[n−1]·a[n−1])  (in Go, after the kernel)
//
// with BF16 subnormal inputs read as zero (DAZ) and subnormal results
// flushed to zero (FTZ), each product exact (eight-bit significands) and
// each addition rounded once: one rounding per product, as the fma chain,
// at twice the products per instruction and with no widening of the
// weights. The order within a pair (odd value first) is the instruction's
// (TestR16FPairsEqualChain holds the hardware to it, subnormals included).
// Measured slower than the fma kernels here (see ISAAVX512BF16), these are
// not chosen by Select where avx512r16 runs; Lookup reaches them, and the
// kernel_dot falsifier checks them with the others.

// packBF16PairR16 packs groups [g0, g1) of sixteen BF16 rows in pairs of
// values (see above).
func packBF16PairR16(rows, cols int, src, dst []byte, g0, g1 int) {
	np := (cols + 1) / 2
	wrb, gb := cols*2, np*64
	for g := g0; g < g1; g++ {
		grp := dst[g*gb : (g+1)*gb]
		for r := 0; r < r16Rows; r++ {
			for j := 0; j < np; j++ {
				clear(grp[64*j+4*r : 64*j+4*r+4])
			}
			i := g*r16Rows + r
			if i >= rows {
				continue
			}
			row := src[i*wrb : (i+1)*wrb]
			for j := 0; j < np; j++ {
				copy(grp[64*j+4*r:64*j+4*r+4], row[4*j:min(4*j+4, wrb)])
			}
		}
	}
}

// pairTail adds an odd row's last value (the padded pair's) to the chains
// of nt activation rows by 32 weight rows of one pair call: w0, w1 the
// groups' last pairs, a the activation rows' last values (BF16, astride
// apart).
func pairTail(nt int, w0, w1, a []byte, astride int, out []float32, ostride int) {
	for t := 0; t < nt; t++ {
		av := bf16DAZ(a[t*astride:])
		for r := 0; r < 2*r16Rows; r++ {
			w, rr := w0, r
			if r >= r16Rows {
				w, rr = w1, r-r16Rows
			}
			o := &out[t*ostride+r]
			*o = ftz32(fma32(bf16DAZ(w[4*rr:]), av, *o))
		}
	}
}

// bf16DAZ is the float32 value of a BF16 value, a subnormal read as a zero
// of its sign.
func bf16DAZ(b []byte) float32 {
	v := le16(b)
	if v&0x7f80 == 0 {
		v &= 0x8000
	}
	return math.Float32frombits(uint32(v) << 16)
}

// ftz32 flushes a subnormal float32 to a zero of its sign.
func ftz32(x float32) float32 {
	if b := math.Float32bits(x); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return x
}

// r16fPairTwin returns the Go twin of the pair kernels on nt activation rows
// (BF16 rows; n counts pairs).
func r16fPairTwin(nt int) r16fFunc {
	return r16fRows(nt, func(n2 int, w []byte, rr int, ar []byte) float32 {
		var acc float32
		for j := 0; j < n2; j++ {
			p := w[64*j+4*rr:]
			acc = ftz32(fma32(bf16DAZ(p[2:]), bf16DAZ(ar[4*j+2:]), acc))
			acc = ftz32(fma32(bf16DAZ(p), bf16DAZ(ar[4*j:]), acc))
		}
		return acc
	})
}

// registerR16FPairs registers (BF16, isa) as the pair kernels fns.
func registerR16FPairs(isa ISA, dot dotFunc, fns []r16fFunc) {
	if len(fns) != r16fActs {
		panic("kern: registerR16FPairs: want one kernel for each of 1.." + fmt.Sprint(r16fActs) + " rows")
	}
	register(quant.BF16, isa, quant.BF16, dot, nil)
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k := reg[Key{Op: op, Type: quant.BF16, Backend: Backend, ISA: isa}]
		k.pack, k.r16f, k.r16fPairs = packBF16PairR16, fns, true
		k.r16 = r16Format{block: 64, quants: 64, unit: 2}
	}
}
