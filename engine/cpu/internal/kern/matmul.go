package kern

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aprqa/apr/engine/quant"
)

// Weights is a 2-D weight tensor as ggml stores it: Rows rows of Cols values
// of Type, each row a contiguous run of blocks (ne0 = Cols). Data is usually
// a zero-copy view of the mapped GGUF file.
type Weights struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	// Packed is the weights repacked for a packed kernel (Kernel.Pack),
	// which reads them instead of Data; nil for the other kernels.
	Packed []byte
}

// Acts is a batch of activation rows converted to one activation format
// (a kernel's Act). Converting once serves every kernel with the same
// activation format: the q, k and v projections of one input, say.
type Acts struct {
	Type       quant.Type // the activation format: Q8_0, Q8_1, Q8_K, F16, BF16 or F32
	Rows, Cols int
	Data       []byte // Rows rows of Cols values in Type's blocks
}

// Scratch holds converted activations and the per-call state of Mul between
// calls, so that steady-state calls do not allocate. A Scratch is used by one
// caller at a time.
type Scratch struct {
	acts Acts
	st   mulState
	one  [1]Job
	// Bound once to &st, so that handing them to the pool allocates nothing.
	convFn, vecFn, prepFn, prepFFn, prepRFn, prepRKFn func(lo, hi int)
	prepR16FFn                                        func(lo, hi int)
	matFn, vecWFn                                     func(w, lo, hi int)
}

// Job is one weight matrix of a MulActsMany call: its kernel, its weights
// and where its outputs go (m rows of W.Rows values, row-major).
type Job struct {
	K   *Kernel
	W   Weights
	Dst []float32
}

// mulState is one call's operands, read by the pool's workers.
type mulState struct {
	k       *Kernel // Convert's kernel
	x       []float32
	a       *Acts
	n       int // values per row
	arb     int // bytes per activation row
	tile    int // activation rows per tile
	jobs    []Job
	wrb     []int       // bytes per weight row, per job
	starts  []int       // first global row of each job, then the total
	asc     []float32   // activation block scales of whole groups of 8 rows, transposed (actScales); nil: none
	aq      []byte      // Q8_0 activation quants of whole groups of 8 rows, repacked (repackQ8Group); nil: none
	corr8   []byte      // 8·Σ₄a lanes in aq's layout, for tile8r kernels with corrBias 8; nil: none
	corr16  []byte      // the same with 16
	kacc    [][]float32 // per pool worker: the tile8r and tileF accumulator state of a task's weight rows (mmMaxRows·tileAccFloats)
	af      []byte      // float activations expanded by prepF in groups of tileFActs rows; nil: none
	fexpand expandFunc  // the expander prepF uses
	wf      [][]byte    // per pool worker: a task's weight rows expanded to float32 (tileFJob)
	fout    [][]float32 // per pool worker: a padded tile's results (tileFActs·tileFRows)
	r16     bool        // a job's kernel is packed (r16): rows are dealt in groups of sixteen
	aux1    []byte      // r16: per activation row and block, −128·Σq and d (auxQ8_0)
	ainit   []int32     // r16: −128·Σq of whole groups of eight rows, transposed as asc
	r16out  [][]float32 // per pool worker: a padded r16 group's results (r16fOut floats)
	afr     []byte      // r16f: the activation rows widened to float32 (F16, BF16)
	afa     []byte      // r16f: the float32 activation rows (afr, or a.Data for F32)
}

// job returns the job holding global row r and r's row within it.
func (st *mulState) job(r int) (int, int) {
	j := 0
	for r >= st.starts[j+1] {
		j++
	}
	return j, r - st.starts[j]
}

func (s *Scratch) bind() {
	if s.convFn == nil {
		st := &s.st
		s.convFn, s.vecFn, s.matFn, s.prepFn, s.prepFFn, s.prepRFn = st.convert, st.vec, st.mat, st.prep, st.prepF, st.prepR16
		s.vecWFn, s.prepRKFn, s.prepR16FFn = st.vecW, st.prepR16K, st.prepR16F
	}
}

// Tiling of the matrix-matrix product: each task takes a chunk of weight
// rows (about mmChunkBytes, 4 to 16 rows) and runs it over the activation
// rows in tiles of about mmTileBytes (at least 8 rows, a multiple of 8), so
// that a weight row is read from memory once per tile and from cache for
// every activation row in it, and the tile itself stays in a 512 KiB L2.
const (
	mmTileBytes  = 256 << 10
	mmChunkBytes = 64 << 10
	mmMaxRows    = 16       // weight rows per task at most
	mmPieceBytes = 16 << 10 // repacked activations of a group per tile8r piece
)

// rowBytes returns the bytes of one weight row and one activation row of
// cols values, or an error naming the problem.
func (k *Kernel) rowBytes(cols int) (w, a int, err error) {
	if cols <= 0 || cols%k.block != 0 || cols%k.actBlock != 0 {
		return 0, 0, fmt.Errorf("kern: %s: %d columns is not a positive multiple of the block size %d", k.Contract, cols, max(k.block, k.actBlock))
	}
	return cols / k.block * k.wBytes, cols / k.actBlock * k.aBytes, nil
}

// Convert converts m activation rows of cols values (x, row-major) to the
// kernel's activation format into a, reusing a.Data's storage when it is
// large enough. Rows are spread over the pool.
func (k *Kernel) Convert(p *Pool, s *Scratch, a *Acts, x []float32, m, cols int) error {
	_, arb, err := k.rowBytes(cols)
	if err != nil {
		return err
	}
	if m < 1 || len(x) != m*cols {
		return fmt.Errorf("kern: %s: %d activation rows of %d need %d values, got %d", k.Contract, m, cols, m*cols, len(x))
	}
	if cap(a.Data) < m*arb {
		a.Data = make([]byte, m*arb)
	}
	*a = Acts{Type: k.Act, Rows: m, Cols: cols, Data: a.Data[:m*arb]}
	if m == 1 {
		k.convert(x, a.Data)
		return nil
	}
	s.bind()
	s.st.k, s.st.x, s.st.a, s.st.n, s.st.arb = k, x, a, cols, arb
	p.For(m, max(1, m/(4*p.Threads())), s.convFn)
	s.st.k, s.st.x, s.st.a = nil, nil, nil
	return nil
}

func (st *mulState) convert(lo, hi int) {
	st.k.convert(st.x[lo*st.n:hi*st.n], st.a.Data[lo*st.arb:hi*st.arb])
}

// Mul computes dst = x·Wᵀ: for each of the m activation rows
// x[i·Cols:(i+1)·Cols], dst[i·Rows + r] = Σ_c W[r,c]·x[i·Cols+c], with every
// row of x first converted to the kernel's activation format (ggml's
// vec_dot_type) and every dot product computed on the quantized blocks. The
// work is spread over the pool's threads. A matvec kernel takes m = 1 only.
func (k *Kernel) Mul(p *Pool, s *Scratch, dst []float32, w Weights, x []float32, m int) error {
	if k.Key.Op == OpMatVec && m != 1 {
		return fmt.Errorf("kern: %s: a matvec kernel takes one activation row, got %d", k.Contract, m)
	}
	if err := k.Convert(p, s, &s.acts, x, m, w.Cols); err != nil {
		return err
	}
	return k.MulActs(p, s, dst, w, &s.acts)
}

// MulActs is Mul on activations already converted by Convert (with this
// kernel or another of the same activation format).
func (k *Kernel) MulActs(p *Pool, s *Scratch, dst []float32, w Weights, a *Acts) error {
	s.one[0] = Job{K: k, W: w, Dst: dst}
	err := MulActsMany(p, s, a, s.one[:])
	s.one[0] = Job{}
	return err
}

// MulActsMany runs several weight matrices against the same converted
// activations in one dispatch over the pool, their rows spread over the
// threads as one range (small matrices such as k and v projections keep
// every thread busy). Every job's kernel must take a's activation format and
// every matrix a.Cols columns; each job's results are exactly those of
// MulActs on it alone.
func MulActsMany(p *Pool, s *Scratch, a *Acts, jobs []Job) error {
	m := a.Rows
	if len(jobs) == 0 {
		return fmt.Errorf("kern: MulActsMany: no jobs")
	}
	st := &s.st
	st.wrb, st.starts = st.wrb[:0], append(st.starts[:0], 0)
	for _, jb := range jobs {
		k, w, dst := jb.K, jb.W, jb.Dst
		if k == nil {
			return fmt.Errorf("kern: MulActsMany: a job has no kernel")
		}
		if w.Type != k.Key.Type {
			return fmt.Errorf("kern: %s: weights are %s", k.Contract, w.Type)
		}
		if a.Type != k.Act {
			return fmt.Errorf("kern: %s: activations are %s, want %s", k.Contract, a.Type, k.Act)
		}
		if k.Key.Op == OpMatVec && m != 1 {
			return fmt.Errorf("kern: %s: a matvec kernel takes one activation row, got %d", k.Contract, m)
		}
		if m < 1 || w.Rows < 1 {
			return fmt.Errorf("kern: %s: %d activation rows against %d weight rows", k.Contract, m, w.Rows)
		}
		if a.Cols != w.Cols {
			return fmt.Errorf("kern: %s: activation rows of %d against weight rows of %d", k.Contract, a.Cols, w.Cols)
		}
		wrb, arb, err := k.rowBytes(w.Cols)
		if err != nil {
			return err
		}
		if len(w.Data) != w.Rows*wrb {
			return fmt.Errorf("kern: %s: %d×%d weights need %d bytes, got %d", k.Contract, w.Rows, w.Cols, w.Rows*wrb, len(w.Data))
		}
		if len(a.Data) != m*arb {
			return fmt.Errorf("kern: %s: %d activation rows need %d bytes, got %d", k.Contract, m, m*arb, len(a.Data))
		}
		if len(dst) != m*w.Rows {
			return fmt.Errorf("kern: %s: dst needs %d values, got %d", k.Contract, m*w.Rows, len(dst))
		}
		if k.pack != nil {
			if pb, _ := k.PackedBytes(w.Rows, w.Cols); len(w.Packed) != pb {
				return fmt.Errorf("kern: %s: the weights are not packed for this kernel (%d packed bytes, want %d: Kernel.Pack)", k.Contract, len(w.Packed), pb)
			}
		}
		st.arb = arb
		st.wrb = append(st.wrb, wrb)
	}
	st.r16 = false
	for _, jb := range jobs {
		st.r16 = st.r16 || jb.K.pack != nil
	}
	for _, jb := range jobs {
		// With a packed job every job's rows take a multiple of sixteen
		// global rows (the rows past a job's end are skipped), so that the
		// pool's ranges, multiples of sixteen, start packed jobs at a group.
		n := jb.W.Rows
		if st.r16 {
			n = (n + r16Rows - 1) &^ (r16Rows - 1)
		}
		st.starts = append(st.starts, st.starts[len(st.starts)-1]+n)
	}
	s.bind()
	st.jobs, st.a, st.n = jobs, a, a.Cols
	st.tile = max(8, mmTileBytes/st.arb&^7)
	st.prepare(p, s)
	rows := st.starts[len(jobs)]
	if st.r16 {
		for len(st.r16out) < p.Threads() {
			st.r16out = append(st.r16out, make([]float32, max(r16fOut, r16Acts*r16Rows)))
		}
	}
	if m == 1 {
		grain := max(4, rows/(8*p.Threads())) &^ 3
		if st.r16 {
			grain = max(r16Rows, rows/(8*p.Threads())) &^ (r16Rows - 1)
		}
		if st.r16 {
			p.forW(rows, grain, s.vecWFn)
		} else {
			p.For(rows, grain, s.vecFn)
		}
	} else {
		wrb := 0
		for _, b := range st.wrb {
			wrb = max(wrb, b)
		}
		chunk := min(mmMaxRows, max(4, mmChunkBytes/wrb))
		if len(st.aq) > 0 || len(st.af) > 0 {
			for len(st.kacc) < p.Threads() {
				st.kacc = append(st.kacc, make([]float32, mmMaxRows*tileAccFloats))
			}
		}
		if len(st.af) > 0 {
			// The float tiles take whole tasks of mmMaxRows weight rows
			// (their float32 copy stays in L2), so that each group piece
			// loaded into L1 serves sixteen weight rows.
			chunk = mmMaxRows
			for len(st.wf) < p.Threads() {
				st.wf = append(st.wf, nil)
				st.fout = append(st.fout, make([]float32, tileFActs*tileFRows))
			}
		}
		if st.r16 {
			chunk = r16Rows
			if floatSize(a.Type) != 0 {
				chunk = 2 * r16Rows // r16f: two groups a call
			}
		}
		p.forW(rows, chunk, s.matFn)
	}
	st.jobs, st.a = nil, nil
	return nil
}

// prepare builds, for whole groups of eight activation rows, what the jobs'
// eight-row kernels read besides the activations: the transposed float32
// scales (tile8, tile8r), the repacked Q8_0 quants (tile8r) and the
// corrections of the biases they subtract, over the pool, one group a task.
func (st *mulState) prepare(p *Pool, s *Scratch) {
	st.asc, st.aq, st.corr8, st.corr16 = st.asc[:0], st.aq[:0], st.corr8[:0], st.corr16[:0]
	st.af, st.fexpand = st.af[:0], nil
	st.aux1, st.ainit, st.afa = st.aux1[:0], st.ainit[:0], nil
	a := st.a
	if st.r16 && a.Type == quant.Q8_K {
		st.aux1 = grow(st.aux1, a.Rows*a.Cols/256*r16KAuxBytes)
		p.For(a.Rows, max(1, a.Rows/(4*p.Threads())), s.prepRKFn)
	} else if st.r16 && floatSize(a.Type) != 0 {
		st.afa = a.Data
		if a.Type != quant.F32 && !st.jobs[0].K.r16fPairs {
			for _, jb := range st.jobs {
				st.fexpand = jb.K.expand
			}
			st.afr = grow(st.afr, a.Rows*a.Cols*4)
			st.afa = st.afr
			p.For(a.Rows, max(1, a.Rows/(4*p.Threads())), s.prepR16FFn)
			st.fexpand = nil
		}
		return
	} else if st.r16 {
		nb := a.Cols / 32
		st.aux1 = grow(st.aux1, a.Rows*nb*r16AuxBytes)
		st.ainit = grow(st.ainit, a.Rows&^7*nb)
		p.For(a.Rows, max(1, a.Rows/(4*p.Threads())), s.prepRFn)
	}
	if a.Rows >= tileFMinActs && a.Cols >= 8 {
		for _, jb := range st.jobs {
			if jb.K.tileF != nil {
				st.fexpand = jb.K.expand
			}
		}
		if st.fexpand != nil {
			fg := (a.Rows + tileFActs - 1) / tileFActs
			st.af = grow(st.af, fg*(a.Cols/8)*tileFStep)
			p.For(fg, 1, s.prepFFn)
		}
	}
	groups := a.Rows / 8
	if groups == 0 {
		return
	}
	var scales, rep, c8, c16 bool
	for _, jb := range st.jobs {
		k := jb.K
		scales = scales || k.tile8 != nil || k.tile8r != nil || k.r16x8 != nil
		if k.tile8r != nil || k.r16x8 != nil {
			rep = true
			c8 = c8 || k.corrBias == 8
			c16 = c16 || k.corrBias == 16
		}
	}
	if !scales {
		return
	}
	gbb := repackedBlockBytes(a.Type)
	if gbb == 0 {
		return
	}
	nb := len(a.Data) / a.Rows / actBlockBytes(a.Type)
	st.asc = grow(st.asc, groups*8*nb)
	if rep {
		st.aq = grow(st.aq, groups*nb*gbb)
		if c8 {
			st.corr8 = grow(st.corr8, groups*nb*gbb)
		}
		if c16 {
			st.corr16 = grow(st.corr16, groups*nb*gbb)
		}
	}
	p.For(groups, 1, s.prepFn)
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// prep prepares groups [lo, hi) of eight activation rows (see prepare).
func (st *mulState) prep(lo, hi int) {
	a := st.a
	arb := len(a.Data) / a.Rows
	nb := len(st.asc) / (a.Rows &^ 7)
	gb := nb * repackedBlockBytes(a.Type)
	for g := lo; g < hi; g++ {
		actScalesGroup(a, g, nb, st.asc[g*nb*8:(g+1)*nb*8])
		if len(st.aq) == 0 {
			continue
		}
		src := a.Data[8*g*arb : 8*(g+1)*arb]
		aq := st.aq[g*gb : (g+1)*gb]
		if a.Type == quant.Q8_K {
			repackQ8KGroup(nb, src, arb, aq)
			continue
		}
		if len(st.corr8) > 0 {
			repackQ8(nb, src, arb, aq, st.corr8[g*gb:(g+1)*gb], 8)
		}
		if len(st.corr16) > 0 {
			repackQ8(nb, src, arb, aq, st.corr16[g*gb:(g+1)*gb], 16)
		}
		if len(st.corr8) == 0 && len(st.corr16) == 0 {
			repackQ8(nb, src, arb, aq, nil, 0)
		}
	}
}

// repackedBlockBytes is the bytes one activation block of a group of
// eight rows takes once repacked (repackQ8Go, repackQ8KGroup), or 0 for a
// format the tile kernels do not take.
func repackedBlockBytes(t quant.Type) int {
	switch t {
	case quant.Q8_0:
		return 256
	case quant.Q8_K:
		return q8KGroupBytes
	}
	return 0
}

func actBlockBytes(t quant.Type) int {
	if t == quant.Q8_K {
		return q8KBytes
	}
	return q80Bytes
}

// q8KGroupBytes is one super-block of a group of eight Q8_K rows repacked
// by repackQ8KGroup.
const q8KGroupBytes = 8*256 + 4*32 + 4*32

// repackQ8KGroup lays out the eight Q8_K rows at a (row r at a[r·stride:])
// for the Q8_K tile8r kernels, super-block b at aq[2304b]: the rows' 256
// quants (row r at 256r); at 2048 + 32p, p = 0..3, the eight int16
// pair sums bsums[2i] + bsums[2i+1] of row 2p then of row 2p+1 (VPHADDW's
// lanes, wrapping as it wraps); at 2176 + 32p the scale d of row 2p four
// times, then of row 2p+1 four times.
func repackQ8KGroup(nb int, a []byte, stride int, aq []byte) {
	for b := 0; b < nb; b++ {
		o := b * q8KGroupBytes
		for r := 0; r < 8; r++ {
			blk := a[r*stride+b*q8KBytes : r*stride+(b+1)*q8KBytes]
			copy(aq[o+256*r:o+256*r+256], blk[4:260])
			h := aq[o+2048+32*(r/2)+16*(r%2):]
			for i := 0; i < 8; i++ {
				s := int16(le16(blk[260+4*i:])) + int16(le16(blk[262+4*i:]))
				binary.LittleEndian.PutUint16(h[2*i:], uint16(s))
			}
			d := aq[o+2176+32*(r/2)+16*(r%2):]
			for l := 0; l < 4; l++ {
				copy(d[4*l:4*l+4], blk[0:4])
			}
		}
	}
}

func (st *mulState) vec(lo, hi int) { st.vecW(0, lo, hi) }

// vecW is vec on pool worker w (whose buffers a packed job's padded group
// uses).
func (st *mulState) vecW(worker, lo, hi int) {
	n, act := st.n, st.a.Data
	for lo < hi {
		j, r0 := st.job(lo)
		jb, wrb := &st.jobs[j], st.wrb[j]
		end := min(hi, st.starts[j+1])
		r, r1 := r0, min(r0+end-lo, jb.W.Rows)
		if jb.K.pack != nil {
			if r < r1 && jb.K.r16f != nil {
				st.r16fJob(worker, jb, r, r1)
			} else if r < r1 && jb.K.r16k1 != nil {
				st.r16kJob(worker, jb, r, r1)
			} else if r < r1 {
				st.r16Job(worker, jb, r, r1)
			}
			lo = end
			continue
		}
		if f := jb.K.rows4; f != nil {
			for ; r+4 <= r1; r += 4 {
				f(n, jb.W.Data[r*wrb:(r+4)*wrb], wrb, act, jb.Dst[r:r+4])
			}
		}
		for ; r < r1; r++ {
			jb.Dst[r] = jb.K.dot(n, jb.W.Data[r*wrb:(r+1)*wrb], act)
		}
		lo = end
	}
}

func (st *mulState) mat(w, lo, hi int) {
	for lo < hi {
		j, r0 := st.job(lo)
		end := min(hi, st.starts[j+1])
		if r1 := min(r0+end-lo, st.jobs[j].W.Rows); r0 < r1 {
			st.matJob(w, &st.jobs[j], st.wrb[j], r0, r1)
		}
		lo = end
	}
}

// matJob runs weight rows [lo, hi) of one job over all activation rows, in
// tiles of st.tile activation rows. With an eight-row tile kernel, each group
// of eight activation rows (a few KiB) stays in L1 while the chunk's weight
// rows pass over it; otherwise each weight row stays in L1 while the tile's
// activation rows pass over it.
func (st *mulState) matJob(worker int, jb *Job, wrb, lo, hi int) {
	k, n, arb, act := jb.K, st.n, st.arb, st.a.Data
	m, rows, dst := st.a.Rows, jb.W.Rows, jb.Dst
	if k.r16f != nil {
		st.r16fJob(worker, jb, lo, hi)
		return
	}
	if k.pack != nil && k.r16k1 != nil {
		st.r16kJob(worker, jb, lo, hi)
		return
	}
	if k.pack != nil {
		st.r16Job(worker, jb, lo, hi)
		return
	}
	if k.tileF != nil && len(st.af) > 0 {
		st.tileFJob(worker, jb, wrb, lo, hi)
		return
	}
	for i0 := 0; i0 < m; i0 += st.tile {
		i1 := min(i0+st.tile, m)
		start := i0
		if k.tile8r != nil && len(st.aq) > 0 {
			st.tileR(worker, jb, wrb, lo, hi, start, i1)
			start += (i1 - start) &^ 7
		} else if k.tile8 != nil && len(st.asc) > 0 {
			nb := len(st.asc) / (m &^ 7)
			for ; start+8 <= i1; start += 8 {
				a8, sc := act[start*arb:(start+8)*arb], st.asc[start*nb:(start+8)*nb]
				for r := lo; r < hi; r++ {
					k.tile8(n, jb.W.Data[r*wrb:(r+1)*wrb], a8, arb, sc, dst[start*rows+r:(start+7)*rows+r+1], rows)
				}
			}
		}
		for r := lo; r < hi; r++ {
			wr := jb.W.Data[r*wrb : (r+1)*wrb]
			i := start
			if k.dot8 != nil {
				for ; i+8 <= i1; i += 8 {
					k.dot8(n, wr, act[i*arb:(i+8)*arb], arb, dst[i*rows+r:(i+7)*rows+r+1], rows)
				}
			}
			if k.dot4 != nil {
				for ; i+4 <= i1; i += 4 {
					k.dot4(n, wr, act[i*arb:(i+4)*arb], arb, dst[i*rows+r:(i+3)*rows+r+1], rows)
				}
			}
			for ; i < i1; i++ {
				dst[i*rows+r] = k.dot(n, wr, act[i*arb:(i+1)*arb])
			}
		}
	}
}

// tileR runs weight rows [lo, hi) of one job over the whole groups of eight
// activation rows in [start, i1) with its tile8r kernel. A group's row is
// taken in pieces of at most mmPieceBytes of repacked activations, each
// piece passed over every weight row before the next, so that it stays in
// L1 however long the rows (the kernels carry the accumulators from piece to
// piece, in the worker's state buffer, with the same operations as one
// call).
func (st *mulState) tileR(worker int, jb *Job, wrb, lo, hi, start, i1 int) {
	k, n, rows, dst := jb.K, st.n, jb.W.Rows, jb.Dst
	nb := n / k.actBlock
	bb := repackedBlockBytes(k.Act)
	var corr []byte
	switch k.corrBias {
	case 8:
		corr = st.corr8
	case 16:
		corr = st.corr16
	}
	piece := mmPieceBytes / bb
	if corr != nil {
		piece /= 2
	}
	piece = max(1, piece)
	acc := st.kacc[worker]
	for ; start+8 <= i1; start += 8 {
		g := start / 8
		aq, sc := st.aq[g*nb*bb:(g+1)*nb*bb], st.asc[start*nb:(start+8)*nb]
		var cg []byte
		if corr != nil {
			cg = corr[g*nb*bb : (g+1)*nb*bb]
		}
		for b0 := 0; b0 < nb; b0 += piece {
			b1 := min(nb, b0+piece)
			flags := 0
			if b0 == 0 {
				flags |= tileFirst
			}
			if b1 == nb {
				flags |= tileLast
			}
			var cp []byte
			if cg != nil {
				cp = cg[b0*bb : b1*bb]
			}
			w := jb.W.Data[lo*wrb+b0*k.wBytes : (hi-1)*wrb+b1*k.wBytes]
			k.tile8r((b1-b0)*k.actBlock, w, wrb, hi-lo, aq[b0*bb:b1*bb], cp, sc[8*b0:8*b1], acc[:(hi-lo)*tileAccFloats], flags, dst[start*rows+lo:(start+7)*rows+hi], rows)
		}
	}
}

// actScalesGroup writes group g's transposed scales (nb blocks per row) to
// out (8·nb values); a is Q8_0 or Q8_K.
func actScalesGroup(a *Acts, g, nb int, out []float32) {
	arb := len(a.Data) / a.Rows
	bbytes := arb / nb
	for r := 0; r < 8; r++ {
		row := a.Data[(8*g+r)*arb : (8*g+r+1)*arb]
		for b := 0; b < nb; b++ {
			blk := row[b*bbytes:]
			if a.Type == quant.Q8_0 {
				out[8*b+r] = fp16At(blk)
			} else {
				out[8*b+r] = math.Float32frombits(le32(blk))
			}
		}
	}
}

// repackQ8Go is repackQ8_0AVX2's Go twin: it lays out the eight Q8_0 rows
// at a (row r at a[r·stride:]) as the tile8r kernels read them, the 32
// quants of block b of row r at aq[256b + 32r] and, when corr is not nil,
// the eight int32 lanes bias·Σ₄a of that block at corr[256b + 32r] (lane k
// sums quants 4k..4k+3).
func repackQ8Go(nb int, a []byte, stride int, aq, corr []byte, bias int) {
	for b := 0; b < nb; b++ {
		for r := 0; r < 8; r++ {
			q := a[r*stride+b*q80Bytes+2 : r*stride+(b+1)*q80Bytes]
			o := 256*b + 32*r
			copy(aq[o:o+32], q)
			if corr == nil {
				continue
			}
			for k := 0; k < 8; k++ {
				s := int32(0)
				for j := 0; j < 4; j++ {
					s += int32(int8(q[4*k+j]))
				}
				binary.LittleEndian.PutUint32(corr[o+4*k:], uint32(int32(bias)*s))
			}
		}
	}
}

// repackQ8 is the repacking in use: the amd64 build replaces it with
// assembly when the CPU has AVX2 (tested bit-exact against the Go twin).
var repackQ8 = repackQ8Go

// actScales returns the block scales of a's activation rows as float32,
// in dst's storage when it is large enough, for whole groups of eight rows
// (a.Rows &^ 7 rows), transposed within each group: for group g, block b and
// row r of the group, the scale is at (g·nb + b)·8 + r, nb blocks per row.
// Only Q8_0 (fp16 scales) and Q8_K (float32 scales) have tile kernels;
// other formats give dst[:0]. (MulActsMany builds the same per group, over
// the pool.)
func actScales(a *Acts, dst []float32) []float32 {
	var bsize int
	switch a.Type {
	case quant.Q8_0:
		bsize = 32
	case quant.Q8_K:
		bsize = 256
	default:
		return dst[:0]
	}
	nb, rows := a.Cols/bsize, a.Rows&^7
	dst = grow(dst, rows*nb)
	for g := 0; g < rows/8; g++ {
		actScalesGroup(a, g, nb, dst[g*nb*8:(g+1)*nb*8])
	}
	return dst
}
