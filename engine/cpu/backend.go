package cpu

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/aprqa/apr/engine/cpu/internal/kern"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// backend is the CPU implementation of graph.Backend. Matrix products go
// through the kernel registry (kern.Select); the weights stay in the file's
// mapping, but those of packed kernels (kern.Kernel.Packs), which are
// repacked at load (pack). Element-wise ops run on the same worker pool as
// the kernels. RowExact: every product kernel gives a row the bits it gets
// alone (the tiles keep the one-row kernel's accumulation order, the packed
// kernels one chain per pair whatever the batch; TestEvalBatch and
// TestEvalPiecesEqualTokenByToken hold them to it), so graph.EvalBatch's
// rows equal the sessions' own Evals.
func (b *backend) RowExact() bool { return true }

type backend struct {
	pool    *kern.Pool
	threads int
	scratch kern.Scratch // for top-level products (ops run one at a time)
	acts    kern.Acts    // the input of the current products, converted
	workers chan *worker // per-thread resources for nested work (attention)

	f32mv, f32mm *kern.Kernel // attention's products on the F32 cache
	plant        *kern.Plant  // a planted defect (Options.Plant); nil: none

	stageX, stageD []float32   // contiguous copies of strided operands
	stageDs        [][]float32 // MatMuls' stand-ins for strided destinations
	jobs           []kern.Job  // MatMuls' products of one activation format
	staged         []stagedDst
	doneMM         []bool

	mu   sync.Mutex
	used map[string]int  // contract id → tensors prepared with it
	work map[*buf]func() // buffers from Work and their release
	// packs release the packed copies of weights (kern.Kernel.Pack) that
	// the packed kernels read instead of the file's mapping.
	set    kernelSet // Options.Kernels: the kernels Matrix may choose
	packs  []func()
	shared sharedRange              // the file's mapping, for dropShared
	ubatch int                      // UBatch(): the tokens one pass takes (0: graph.UBatch)
	packed map[packKey]kern.Weights // one packed copy per tensor and kernel (token_embd is also the output)
}

// packKey names one packed copy: the packed kernel and the weights' bytes.
type packKey struct {
	contract string
	data     *byte
	n        int
}

// worker is one thread's resources for work nested inside a parallel loop:
// a pool of one (so kernels run inline) and its own scratch.
type worker struct {
	pool    *kern.Pool
	scratch kern.Scratch
	acts    kern.Acts // a view of F32 values as activations (attention)
	f       [4][]float32
}

// grow returns w.f[i] with at least n values.
func (w *worker) grow(i, n int) []float32 {
	if cap(w.f[i]) < n {
		w.f[i] = make([]float32, n)
	}
	return w.f[i][:n]
}

func newBackend(threads int) (*backend, error) { return newBackendSet(threads, kernelSet{}) }

// newBackendSet is newBackend on the kernel set set.
func newBackendSet(threads int, set kernelSet) (*backend, error) {
	for _, isa := range set.isas {
		if !kern.Runnable(isa) {
			return nil, refuse.New(By, "kernel set on %v: this CPU lacks the %s instruction set", set.isas, isa)
		}
	}
	be := &backend{pool: kern.NewPool(threads), used: map[string]int{}, work: map[*buf]func(){}, set: set}
	be.threads = be.pool.Threads()
	be.workers = make(chan *worker, be.threads)
	for i := 0; i < be.threads; i++ {
		be.workers <- &worker{pool: kern.NewPool(1)}
	}
	// Attention's "weights" are cache tiles, a new one each product: its
	// kernels read them unpacked (the packed F32 kernels are the weight
	// matrices').
	var err error
	if be.f32mv, err = kern.SelectOn(kern.OpMatVec, quant.F32, be.set.isas, true); err != nil {
		be.pool.Close()
		return nil, err
	}
	if be.f32mm, err = kern.SelectOn(kern.OpMatMul, quant.F32, be.set.isas, true); err != nil {
		be.pool.Close()
		return nil, err
	}
	be.note(be.f32mv)
	be.note(be.f32mm)
	return be, nil
}

// close stops the threads and releases the work buffers still held.
func (be *backend) close() {
	be.pool.Close()
	be.mu.Lock()
	defer be.mu.Unlock()
	for _, free := range be.packs {
		free()
	}
	be.packs, be.packed = nil, nil
	for b, free := range be.work {
		free()
		*b = buf{}
		delete(be.work, b)
	}
}

func (be *backend) note(k *kern.Kernel) {
	be.mu.Lock()
	be.used[k.Contract]++
	be.mu.Unlock()
}

// kernels lists the contract ids of the kernels in use, sorted.
func (be *backend) kernels() []string {
	be.mu.Lock()
	defer be.mu.Unlock()
	out := make([]string, 0, len(be.used))
	for k := range be.used {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (be *backend) Name() string { return Name }

// buf is a CPU activation buffer or a view: row i is d[i·stride:][:cols].
type buf struct {
	d                  []float32
	rows, cols, stride int
	// mem is the off-heap memory of a buffer from AllocState; keep is the
	// AllocState buffer a view's storage belongs to (so that the view
	// keeps it from being released while in use).
	mem  *mapping
	keep *buf
}

func (b *buf) Rows() int { return b.rows }
func (b *buf) Cols() int { return b.cols }

func (b *buf) row(i int) []float32 {
	o := i * b.stride
	return b.d[o : o+b.cols : o+b.cols]
}

// flat returns the values as one slice when rows are contiguous.
func (b *buf) flat() ([]float32, bool) {
	if b.stride == b.cols || b.rows <= 1 {
		return b.d[:b.rows*b.cols], true
	}
	return nil, false
}

func asBuf(b graph.Buf) *buf {
	x, ok := b.(*buf)
	if !ok {
		panic(fmt.Sprintf("cpu: buffer of another backend (%T)", b))
	}
	return x
}

func (be *backend) Alloc(rows, cols int) graph.Buf {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpu: Alloc(%d, %d)", rows, cols))
	}
	return &buf{d: make([]float32, rows*cols), rows: rows, cols: cols, stride: cols}
}

// AllocState returns a zeroed buffer outside the Go heap (see mapF32) for a
// session's recurrent state: FreeState unmaps it at once, and a state never
// freed is unmapped once no longer referenced. On the Go heap, every closed
// session's states stayed until a collection, and their live bytes doubled
// the collector's heap goal (qwen3.5-0.8b: 19 MiB per session).
func (be *backend) AllocState(rows, cols int) graph.Buf {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpu: AllocState(%d, %d)", rows, cols))
	}
	d, free, err := mapF32(rows * cols)
	if err != nil {
		// Out of address space or mappings: the Go heap, as Alloc.
		return be.Alloc(rows, cols)
	}
	m := &mapping{free: free}
	b := &buf{d: d, rows: rows, cols: cols, stride: cols, mem: m}
	runtime.AddCleanup(b, (*mapping).release, m)
	return b
}

// FreeState releases a buffer from AllocState (one that fell back to the
// Go heap is left to the collector).
func (be *backend) FreeState(g graph.Buf) {
	b := asBuf(g)
	if b.keep != nil {
		panic("cpu: FreeState of a view")
	}
	if b.mem != nil {
		b.mem.release()
	}
	*b = buf{} // a later use panics instead of reading unmapped memory
}

// Work returns a buffer outside the Go heap (see mapF32), released by
// Release or when the backend closes.
func (be *backend) Work(rows, cols int) graph.Buf {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpu: Work(%d, %d)", rows, cols))
	}
	d, free, err := mapF32(rows * cols)
	if err != nil {
		// Out of address space or mappings: fall back to the Go heap,
		// which fails loudly if memory is really exhausted.
		d, free = make([]float32, rows*cols), func() {}
	}
	b := &buf{d: d, rows: rows, cols: cols, stride: cols}
	be.mu.Lock()
	be.work[b] = free
	be.mu.Unlock()
	return b
}

func (be *backend) Release(g graph.Buf) {
	b := asBuf(g)
	be.mu.Lock()
	free, ok := be.work[b]
	delete(be.work, b)
	be.mu.Unlock()
	if !ok {
		panic("cpu: Release of a buffer not from Work")
	}
	free()
	*b = buf{} // a later use panics instead of reading unmapped memory
}

func (be *backend) Zero(g graph.Buf) {
	b := asBuf(g)
	for r := 0; r < b.rows; r++ {
		clear(b.row(r))
	}
}

func (be *backend) View(g graph.Buf, r0, r1, c0, c1 int) graph.Buf {
	b := asBuf(g)
	if r0 < 0 || r0 > r1 || r1 > b.rows || c0 < 0 || c0 > c1 || c1 > b.cols {
		panic(fmt.Sprintf("cpu: View [%d:%d, %d:%d] of %d×%d", r0, r1, c0, c1, b.rows, b.cols))
	}
	if r1 == r0 {
		return &buf{rows: 0, cols: c1 - c0, stride: b.stride}
	}
	start := r0*b.stride + c0
	end := (r1-1)*b.stride + c1
	keep := b.keep
	if b.mem != nil {
		keep = b
	}
	return &buf{d: b.d[start:end:end], rows: r1 - r0, cols: c1 - c0, stride: b.stride, keep: keep}
}

func (be *backend) Read(g graph.Buf, r int, dst []float32) {
	b := asBuf(g)
	if len(dst) != b.cols {
		panic("cpu: Read: dst length")
	}
	copy(dst, b.row(r))
}

// matrix is a prepared weight matrix: its kernels and kern views of the
// file's bytes (one per expert for a 3-D tensor).
type matrix struct {
	t      *model.Tensor
	mv, mm *kern.Kernel
	w      []kern.Weights
}

func (m *matrix) Tensor() *model.Tensor { return m.t }

// vector is a small tensor dequantized once.
type vector struct {
	t *model.Tensor
	v []float32
}

func (v *vector) Tensor() *model.Tensor { return v.t }

func (be *backend) Matrix(t *model.Tensor) (graph.Weight, error) {
	if t == nil {
		return nil, refuse.New(By, "no tensor to prepare")
	}
	if len(t.Shape) < 2 || len(t.Shape) > 3 {
		return nil, refuse.New(By, "tensor %q has %d dimensions; a matrix needs 2 or 3", t.Name, len(t.Shape))
	}
	sel := be.selectKernel
	if be.plant != nil && be.plant.Type == t.Type {
		sel = func(op kern.Op, _ quant.Type) (*kern.Kernel, error) { return be.plant.Kernel(op) }
	}
	mv, err := sel(kern.OpMatVec, t.Type)
	if err != nil {
		return nil, fmt.Errorf("cpu: tensor %q: %w", t.Name, err) // the kernel contract refused
	}
	mm, err := sel(kern.OpMatMul, t.Type)
	if err != nil {
		return nil, fmt.Errorf("cpu: tensor %q: %w", t.Name, err) // the kernel contract refused
	}
	m := &matrix{t: t, mv: mv, mm: mm}
	if len(t.Shape) == 2 {
		m.w = []kern.Weights{{Type: t.Type, Rows: t.Rows(), Cols: t.Cols(), Data: t.Data}}
	} else {
		for e := 0; e < int(t.Shape[2]); e++ {
			x := t.Matrix(e)
			m.w = append(m.w, kern.Weights{Type: x.Type, Rows: x.Rows(), Cols: x.Cols(), Data: x.Data})
		}
	}
	if mv.Packs() != mm.Packs() {
		return nil, refuse.New(By, "tensor %q: %s and %s disagree on packing", t.Name, mv.Contract, mm.Contract)
	}
	if mm.Packs() {
		for i := range m.w {
			if m.w[i], err = be.pack(mm, m.w[i]); err != nil {
				return nil, fmt.Errorf("cpu: tensor %q: %w", t.Name, err)
			}
		}
	}
	be.note(mv)
	be.note(mm)
	return m, nil
}

func (be *backend) Vector(t *model.Tensor) (graph.Weight, error) {
	v, err := graph.VectorValues(By, t)
	if err != nil {
		return nil, err
	}
	return &vector{t: t, v: v}, nil
}

func asMatrix(w graph.Weight) *matrix {
	m, ok := w.(*matrix)
	if !ok {
		panic(fmt.Sprintf("cpu: %T is not a matrix of this backend", w))
	}
	return m
}

func asVector(w graph.Weight) []float32 {
	if w == nil {
		return nil
	}
	v, ok := w.(*vector)
	if !ok {
		panic(fmt.Sprintf("cpu: %T is not a vector of this backend", w))
	}
	return v.v
}

func (be *backend) GetRows(dst graph.Buf, w graph.Weight, ids []int32) error {
	d, m := asBuf(dst), asMatrix(w)
	t := m.t
	if len(t.Shape) != 2 || d.rows != len(ids) || d.cols != t.Cols() {
		panic(fmt.Sprintf("cpu: GetRows of %d ids from %q into %d×%d", len(ids), t.Name, d.rows, d.cols))
	}
	// A packed matrix (a tied embedding that is also the output) is read
	// from its packed copy: the file's pages it replaced stay out of memory.
	var row []byte
	if m.mm.Packs() {
		row = make([]byte, len(t.Row(0)))
	}
	for r, id := range ids {
		if id < 0 || int(id) >= t.Rows() {
			return fmt.Errorf("cpu: GetRows: row %d of %q with %d rows", id, t.Name, t.Rows())
		}
		src := t.Row(int(id))
		if row != nil {
			if err := m.mm.UnpackRow(m.w[0], int(id), row); err != nil {
				return fmt.Errorf("cpu: GetRows %q: %w", t.Name, err)
			}
			src = row
		}
		if err := quant.Dequantize(t.Type, src, d.row(r)); err != nil {
			return fmt.Errorf("cpu: GetRows %q: %w", t.Name, err)
		}
	}
	return nil
}

func (be *backend) MatMul(dst graph.Buf, w graph.Weight, x graph.Buf) error {
	return be.MatMuls(x, []graph.Buf{dst}, []graph.Weight{w})
}

// MatMuls converts x once per activation format and multiplies it by every
// weight (q, k and v of one input, say): the weights sharing a format go to
// the pool as one dispatch (kern.MulActsMany), each computed exactly as
// alone.
func (be *backend) MatMuls(x graph.Buf, dst []graph.Buf, w []graph.Weight) error {
	xb := asBuf(x)
	if len(dst) != len(w) {
		panic("cpu: MatMuls: as many dst as weights")
	}
	if xb.rows == 0 {
		return nil
	}
	xs, ok := xb.flat()
	if !ok {
		xs = grow(&be.stageX, xb.rows*xb.cols)
		for r := 0; r < xb.rows; r++ {
			copy(xs[r*xb.cols:], xb.row(r))
		}
	}
	// Check every product first, then run them grouped by activation format.
	done := be.doneMM[:0]
	for i := range w {
		d, m := asBuf(dst[i]), asMatrix(w[i])
		if len(m.w) != 1 {
			panic(fmt.Sprintf("cpu: MatMul with the 3-D tensor %q", m.t.Name))
		}
		wt := m.w[0]
		if xb.cols != wt.Cols || d.cols != wt.Rows || d.rows != xb.rows {
			panic(fmt.Sprintf("cpu: MatMul %d×%d = %q (%d×%d) · %d×%d", d.rows, d.cols, m.t.Name, wt.Rows, wt.Cols, xb.rows, xb.cols))
		}
		done = append(done, false)
	}
	for i := range w {
		if done[i] {
			continue
		}
		k := asMatrix(w[i]).kernel(xb.rows)
		if err := k.Convert(be.pool, &be.scratch, &be.acts, xs, xb.rows, xb.cols); err != nil {
			return fmt.Errorf("cpu: %q: %w", asMatrix(w[i]).t.Name, err)
		}
		jobs, staged := be.jobs[:0], be.staged[:0]
		for j := i; j < len(w); j++ {
			m := asMatrix(w[j])
			kj := m.kernel(xb.rows)
			if done[j] || kj.Act != k.Act {
				continue
			}
			done[j] = true
			d := asBuf(dst[j])
			ds, direct := d.flat()
			if !direct {
				for len(be.stageDs) <= len(staged) {
					be.stageDs = append(be.stageDs, nil)
				}
				ds = grow(&be.stageDs[len(staged)], d.rows*d.cols)
				staged = append(staged, stagedDst{d, ds})
			}
			jobs = append(jobs, kern.Job{K: kj, W: m.w[0], Dst: ds})
		}
		err := kern.MulActsMany(be.pool, &be.scratch, &be.acts, jobs)
		clear(jobs) // drop the references to the weights and buffers
		be.jobs = jobs[:0]
		if err != nil {
			return fmt.Errorf("cpu: %q and the other products of its input: %w", asMatrix(w[i]).t.Name, err)
		}
		for _, st := range staged {
			for r := 0; r < st.d.rows; r++ {
				copy(st.d.row(r), st.ds[r*st.d.cols:(r+1)*st.d.cols])
			}
		}
		clear(staged)
		be.staged = staged[:0]
	}
	be.doneMM = done[:0]
	return nil
}

// stagedDst is a strided product destination and its contiguous stand-in.
type stagedDst struct {
	d  *buf
	ds []float32
}

// kernel returns the matrix's kernel for m activation rows.
func (m *matrix) kernel(rows int) *kern.Kernel {
	if rows == 1 {
		return m.mv
	}
	return m.mm
}

func grow(p *[]float32, n int) []float32 {
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	return (*p)[:n]
}

func (be *backend) MatMulID(dst graph.Buf, w graph.Weight, x graph.Buf, ids []int32, k int) error {
	d, m, xb := asBuf(dst), asMatrix(w), asBuf(x)
	if k < 1 || len(ids)%k != 0 || d.rows != len(ids) {
		panic(fmt.Sprintf("cpu: MatMulID: %d ids, k %d, dst %d rows", len(ids), k, d.rows))
	}
	perSlot := xb.rows == len(ids)
	if !perSlot && xb.rows*k != len(ids) {
		panic(fmt.Sprintf("cpu: MatMulID: x has %d rows for %d ids with k %d", xb.rows, len(ids), k))
	}
	if len(m.w) < 1 || xb.cols != m.w[0].Cols || d.cols != m.w[0].Rows {
		panic(fmt.Sprintf("cpu: MatMulID %d×%d from %q · %d×%d", d.rows, d.cols, m.t.Name, xb.rows, xb.cols))
	}
	// Group the rows by expert; run each chosen expert once over its rows.
	byExp := make([][]int, len(m.w))
	for r, e := range ids {
		if e < 0 || int(e) >= len(m.w) {
			return fmt.Errorf("cpu: MatMulID: expert %d of %q with %d experts", e, m.t.Name, len(m.w))
		}
		byExp[e] = append(byExp[e], r)
	}
	for e, rows := range byExp {
		if len(rows) == 0 {
			continue
		}
		wt := m.w[e]
		xs := grow(&be.stageX, len(rows)*xb.cols)
		for i, r := range rows {
			src := r
			if !perSlot {
				src = r / k
			}
			copy(xs[i*xb.cols:], xb.row(src))
		}
		ds := grow(&be.stageD, len(rows)*d.cols)
		kn := m.mm
		if len(rows) == 1 {
			kn = m.mv
		}
		if err := kn.Mul(be.pool, &be.scratch, ds, wt, xs, len(rows)); err != nil {
			return fmt.Errorf("cpu: %q expert %d: %w", m.t.Name, e, err)
		}
		for i, r := range rows {
			copy(d.row(r), ds[i*d.cols:(i+1)*d.cols])
		}
	}
	return nil
}

// bytesOf views float32 values as the little-endian bytes kern reads.
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// forRows runs fn over [0, n) on the pool when the work (n·cost values) is
// worth spreading, else inline: waking a parked helper costs tens of
// microseconds on a VM, more than a few thousand values of an element-wise
// op take.
func (be *backend) forRows(n, cost int, fn func(lo, hi int)) {
	if be.threads == 1 || n < 2 || n*cost < 1<<16 {
		fn(0, n)
		return
	}
	be.pool.For(n, max(1, n/(4*be.threads)), fn)
}

// pack packs w for the packed kernel k (both its matvec and matmul read
// the packed copy) into memory outside the Go heap, over the pool, and
// drops the pages of w's bytes from this process's resident set where
// they lie in the file's shared mapping (dropShared: read once here, the
// packed copy takes their place; the page cache keeps them).
func (be *backend) pack(k *kern.Kernel, w kern.Weights) (kern.Weights, error) {
	key := packKey{k.Contract, unsafe.SliceData(w.Data), len(w.Data)}
	be.mu.Lock()
	p, ok := be.packed[key]
	be.mu.Unlock()
	if ok {
		return p, nil
	}
	size, err := k.PackedBytes(w.Rows, w.Cols)
	if err != nil {
		return w, err
	}
	b, free, err := mapBytes(size, !packedFloat(k))
	if err != nil {
		return w, err
	}
	p, err = k.Pack(be.pool, w, b)
	if err != nil {
		free()
		return w, err
	}
	be.shared.dropShared(w.Data)
	be.mu.Lock()
	be.packs = append(be.packs, free)
	if be.packed == nil {
		be.packed = map[packKey]kern.Weights{}
	}
	be.packed[key] = p
	be.mu.Unlock()
	return p, nil
}

// floatUBatch is the tokens one pass takes (graph's UBatch) when the
// model's feed-forward weights go through the packed float kernels
// (avx512r16): llama.cpp's n_ubatch. Those kernels reach their speed with
// the weights in L2 whatever the pass, so that a pass of 128 tokens
// (graph.UBatch) spends its time on streaming each weight once more from
// memory: qwen2.5-0.5b F16, apr bench pp512 on 2 threads, 311–312 tok/s in
// passes of 128, 326–332 in passes of 512 (alternated), peak RSS 1014 and
// 1050 MiB (the file and KV cache 958).
const floatUBatch = 512

// UBatch is the most tokens one pass through the layers takes on this
// backend (graph.UBatch when 0).
func (be *backend) UBatch() int { return be.ubatch }

// chooseUBatch returns floatUBatch when the first layer's feed-forward
// down matrix takes a packed float kernel, else 0 (graph.UBatch).
func (be *backend) chooseUBatch(spec *model.Spec) int {
	for _, l := range spec.Layers {
		t := l.FFNDown
		if t == nil {
			continue
		}
		if k, err := be.selectKernel(kern.OpMatMul, t.Type); err == nil && packedFloat(k) {
			return floatUBatch
		}
		return 0
	}
	return 0
}

// packedFloat reports whether k is a packed float kernel (avx512r16,
// avx512bf16), whose packed copies are mapped without huge pages: with
// them (transparent_hugepage/defrag "madvise", compaction at the fault),
// qwen2.5-0.5b F16's load took 469–2504 ms over four runs against 322–626
// without, alternated, and apr qa's timing gate failed on the load's
// variance (max_leak_ms 696.8, want ≤ 42) where without it passed (4.9).
func packedFloat(k *kern.Kernel) bool {
	t := k.Key.Type
	return k.Packs() && (t == quant.F16 || t == quant.BF16 || t == quant.F32)
}
