package cuda

import (
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
	"golang.org/x/sync/errgroup"
)

// backend is the CUDA implementation of graph.Backend. Every buffer lives
// in device memory; ops queue kernels on the backend's stream, in order, and
// Read copies a row back (waiting for the work before it). Weights are
// described when prepared and copied to the device by upload (the engine's
// Upload, timed as the h2d stage).
//
// Ops without an error result record the first driver failure; every later
// op is skipped and the next op that returns an error returns it (the
// graph's products do), so a failed launch ends the Eval with the driver's
// error instead of wrong logits.
type backend struct {
	d   *cu.Driver
	mod cu.Module
	fn  map[string]cu.Func
	// resident: the blocks of each one-token product kernel (mv_<type>) a
	// multiprocessor holds at once, read from the driver at load.
	resident map[cu.Func]int
	sms      int // the device's multiprocessors
	agL      int // k_attg's positions per split (AG_L), read from the kernels

	mu   sync.Mutex
	rows []unsafe.Pointer // sessions' logits rows in pinned host memory (LogitsRow), freed at close
	err  error            // first failure
	used map[string]int
	mats []*matrix
	vecs []*vector
	done bool // weights uploaded

	// scratch: attention scores (k_attend), the split attention's partial
	// results and its counters (k_attn; zero between launches).
	scores, attnP, attnCnt devArea
	mmP                    devArea // the prompt product's split partials
	// The prompt products' activations in ggml numerics (k_round): codes,
	// scales and sums for mq_<type>, values for mm_<type> and mmid_<type>.
	mqQ, mqX devArea
	plant    *Plant

	// held is true while a session's Eval holds the driver on its thread
	// (cu.Driver.Hold): ops then call the driver directly.
	held bool

	// The launch path (see flush): ops append their kernels to tape and
	// the host data they read (ids, positions, weights) to stage, pinned
	// host memory as large as stageDev; flush queues the copy of what
	// stage gained since the last flush to stageDev and runs the tape on
	// stream, as a CUDA graph when the same tape ran before. Offsets only
	// grow until the stream is known to have passed every copy (resetStage):
	// a queued copy still reads stage.
	stream     cu.Stream
	tape       []tapeOp
	stage      []byte // len: staged bytes; cap: stageDev.cap
	stageSent  int    // stage[:stageSent] is queued for copying
	stageDev   devArea
	chunkAt    int      // a held Eval's tape runs in part at this length (push)
	pending    []cu.Ptr // frees that wait for the tape that may still read them
	graphs     *graphCache
	prof       *profiler     // APR_CUDA_PROFILE=1
	steps      *stepProfiler // APR_CUDA_PROFILE=steps
	noFuse     bool          // APR_CUDA_FUSE=0
	noMQ       bool          // APR_CUDA_MQ=0: prompt products of MqForm types take mm_<type>
	noChunk    bool          // APR_CUDA_CHUNK=0
	noAttg     bool          // APR_CUDA_ATTG=0: decode rows take k_attn
	noAttgRope bool          // APR_CUDA_ATTG=norope: k_attg leaves the rotation and store to k_rope
	noAttw     bool          // APR_CUDA_ATTG=group: short contexts take k_attg too, not k_attw
	early      bool          // launch a tape's kernels early (PDL; APR_CUDA_EARLY=0: off)
	ropeTheta  ropeTheta     // Rope's thetaScale for the last base and rotated width
	earlyN     int           // kernels launched early (directly or into a captured graph)
	fused      int           // ops folded into a product (fuseBias, fuseResidual)
	// roundedAgain counts prompt products that took the rounded x of the
	// product before them (MatMuls, sameRounding) instead of a k_round.
	roundedAgain int
	uploadPaged  bool // upload copied from pageable memory (copyIn had no pinned buffers)
}

// devArea is a growable device allocation.
type devArea struct {
	p   cu.Ptr
	cap uint64
}

// ensure makes a hold n bytes; inside Do.
func (be *backend) ensure(a *devArea, n uint64) error {
	if a.cap >= n {
		return nil
	}
	if a.p != 0 {
		if err := be.free(a.p); err != nil {
			return err
		}
		a.p, a.cap = 0, 0
	}
	n = max(n, 4096)
	p, err := be.d.Alloc(n)
	if err != nil {
		return err
	}
	a.p, a.cap = p, n
	return nil
}

// ensureZero is ensure for an area whose bytes must start zero (the
// counters of k_attn, which each launch leaves zero again); inside do.
func (be *backend) ensureZero(a *devArea, n uint64) error {
	if a.cap >= n {
		return nil
	}
	if err := be.ensure(a, n); err != nil {
		return err
	}
	words := int(a.cap / 4)
	return be.launch("k_zero", grid1(words), cu.Dim{X: 256}, 0, a.p, words, 1, words)
}

// The split attention's positions per block and widest value head
// (ATT_L, ATT_HV in apr.cu).
const attnL, attnMaxHV = 64, 256

// The grouped decode attention (k_attg<HC> in apr.cu): AG_T threads, and
// its limits AG_MAXG heads per group, AG_QS query values and AG_AS value
// columns of a group, AG_WS weights (heads × splits) in its combine. Its
// positions per split (AG_L, a build parameter: 32, 64, 128 or 256) the
// backend reads from the kernels themselves (k_attgcfg, be.agL), so that
// a fatbin built with another AG_L is launched with its own splits.
const attgThreads, attgMaxG, attgQS, attgAS, attgWS = 256, 8, 2048, 1024, 4096

// readAttgL reads k_attg's positions per split from the kernels
// (k_attgcfg writes AG_L) and refuses a value the backend cannot size
// splits for: a context cap (a multiple of 256) must hold whole splits.
func (be *backend) readAttgL() error {
	out := be.Work(1, 1).(*buf)
	defer be.Release(out)
	if err := be.do(func() error { return be.launch("k_attgcfg", cu.Dim{X: 1}, cu.Dim{X: 1}, 0, out.p) }); err != nil {
		return err
	}
	var v [1]float32
	be.Read(out, 0, v[:])
	if be.err != nil {
		return be.err // the read failed: the driver's error, not a NaN read as AG_L
	}
	l := int(int32(math.Float32bits(v[0])))
	if l <= 0 || 256%l != 0 || l%32 != 0 {
		return fmt.Errorf("cuda: the kernels' k_attg takes %d positions per split (AG_L); the backend takes 32, 64, 128 or 256", l)
	}
	be.agL = l
	return nil
}

// headClass is the kernels' HC for heads of w values: the index of the
// smallest of 32, 64, 128 and 256 values (HC 1, 2, 4, 8) that holds them,
// or -1 past 256.
func headClass(w int) int {
	for i, lim := range [...]int{32, 64, 128, 256} {
		if w <= lim {
			return i
		}
	}
	return -1
}

// attnKernel names a decode attention instance and its twin that also
// rotates the row and stores it (foldRope).
type attnKernel struct{ name, rope string }

// The instances by headClass: names fixed once, not built per launch.
var (
	attgKernels = [4]attnKernel{{"k_attg1", "k_attgr1"}, {"k_attg2", "k_attgr2"}, {"k_attg4", "k_attgr4"}, {"k_attg8", "k_attgr8"}}
	attwKernels = [4]attnKernel{{"k_attw1", "k_attwr1"}, {"k_attw2", "k_attwr2"}, {"k_attw4", "k_attwr4"}, {"k_attw8", "k_attwr8"}}
	flashNames  = [3]string{"k_flash1", "k_flash2", "k_flash4"}
)

// attgKernel is the k_attg instance (by the value heads' width) for n
// query rows of a over a context sized ctxCap, if it takes them: one row
// (a decode step), unless APR_CUDA_ATTG=0, within its limits.
func (be *backend) attgKernel(n int, a graph.Attn, ctxCap int) (attnKernel, bool) {
	g, hc := a.NHead/a.NKV, headClass(a.HV)
	if be.noAttg || n != 1 || hc < 0 || g > attgMaxG || g*a.HK > attgQS || g*a.HV > attgAS || a.HK%4 != 0 || a.HV%4 != 0 || g*(ctxCap/be.agL) > attgWS {
		return attnKernel{}, false
	}
	return attgKernels[hc], true
}

// launchDecodeAttn launches k (k_attw or k_attg) with args, or its twin
// k.rope (k_attwr, k_attgr) with the row's rotation and KV store appended
// when they fold into it (foldRope).
func (be *backend) launchDecodeAttn(k attnKernel, grid cu.Dim, threads uint32, ob, qb *buf, c *kvCache, pos0 int, args ...any) error {
	rope, folded := be.foldRope(ob, qb, c, pos0)
	name := k.name
	if folded {
		name = k.rope
	}
	// Packed here rather than through launch with the rope's values
	// appended: args stays the caller's (not grown), so that neither it
	// nor its boxed values escape to the heap, once per layer and step.
	op, err := be.packOp(name, grid, cu.Dim{X: threads}, 0, args)
	if err != nil {
		return err
	}
	if folded {
		if int(op.n)+len(rope) > maxKernelArgs {
			return fmt.Errorf("cuda: %s with %d arguments (at most %d)", name, int(op.n)+len(rope), maxKernelArgs)
		}
		op.n += uint8(copy(op.args[op.n:], rope[:]))
	}
	return be.push(op)
}

// The block-per-head decode attention (k_attw<HC> in apr.cu): contexts of
// at most awMaxP positions (AW_MAXP), heads of at most 256 values, awThreads
// threads (AW_T).
const awMaxP, awThreads = 256, 128

// attwKernel is the k_attw instance (by the wider of the key and value
// heads) for n query rows of a over a context sized ctxCap, if it takes
// them: one row (a decode step) over a short context, unless APR_CUDA_ATTG
// is 0 or group.
func (be *backend) attwKernel(n int, a graph.Attn, ctxCap int) (attnKernel, bool) {
	hc := headClass(max(a.HK, a.HV))
	if be.noAttg || be.noAttw || n != 1 || hc < 0 || ctxCap > awMaxP || a.HK%4 != 0 || a.HV%4 != 0 {
		return attnKernel{}, false
	}
	return attwKernels[hc], true
}

// k_flash's tile (apr.cu FL_Q query rows × FL_K positions) and widest head
// (FL_HV): wider heads take k_attn.
const flashQ, flashK, flashMaxH = 16, 32, 128

// flashKernel is the k_flash instance for heads of hk and hv values (at
// most flashMaxH): k_flash<HC> with 32·HC ≥ both, HC in {1, 2, 4}.
func flashKernel(hk, hv int) string { return flashNames[headClass(max(hk, hv))] }

// flashSmem is k_flash's dynamic shared memory in bytes: Q, the keys (rows
// of an odd number of float4s), the values and the weights.
func flashSmem(hk, hv int) int {
	kq4 := hk/4 + 1
	if (hk/4)%2 == 1 {
		kq4++
	}
	return 4 * (flashQ*hk + flashK*4*kq4 + flashK*hv + flashQ*flashK)
}

// do runs fn with the context current unless an earlier op failed; the
// first failure sticks. Outside a held Eval the op's kernels run at once
// (flush); inside one they wait on the tape for the next Read or the end
// of the Eval.
func (be *backend) do(fn func() error) error {
	if be.err != nil {
		return be.err
	}
	run := func() error {
		if err := fn(); err != nil {
			return err
		}
		if !be.held {
			return be.flush()
		}
		return nil
	}
	var err error
	if be.held {
		err = run()
	} else {
		err = be.d.Do(run)
	}
	if err != nil {
		be.dropTape()
		be.err = err
	}
	return be.err
}

// dropTape forgets the kernels on the tape and the staged bytes not yet
// queued for copying (a failed op or Eval): what was queued may still be
// read by the stream, so its bytes stay.
func (be *backend) dropTape() {
	be.tape, be.stage = be.tape[:0], be.stage[:be.stageSent]
}

// u32 packs a kernel's int argument as cu.Pack does (the low half of its
// slot); the products' counts and dimensions always fit.
func u32(v int) uint64 { return uint64(uint32(int32(v))) }

// grid1 is the grid of a 1-D grid-stride kernel over n threads' worth of
// work, 256 threads per block (at most 65535 blocks).
func grid1(n int) cu.Dim { return cu.Dim{X: uint32(min((n+255)/256, 65535))} }

// launch1 queues kernel name as a 1-D grid-stride loop over n (grid1).
func (be *backend) launch1(name string, n int, args ...any) {
	if n <= 0 {
		return
	}
	be.do(func() error { return be.launch(name, grid1(n), cu.Dim{X: 256}, 0, args...) })
}

// launch appends a kernel to the tape; inside do.
func (be *backend) launch(name string, grid, block cu.Dim, shared uint32, args ...any) error {
	op, err := be.packOp(name, grid, block, shared, args)
	if err != nil {
		return err
	}
	return be.push(op)
}

// packOp is the tape op that launches the kernel called name with args,
// each packed by cu.Pack.
func (be *backend) packOp(name string, grid, block cu.Dim, shared uint32, args []any) (tapeOp, error) {
	f, ok := be.fn[name]
	if !ok {
		return tapeOp{}, fmt.Errorf("cuda: the module has no kernel %s", name)
	}
	if len(args) > maxKernelArgs {
		return tapeOp{}, fmt.Errorf("cuda: %s with %d arguments (at most %d)", name, len(args), maxKernelArgs)
	}
	op := tapeOp{f: f, grid: grid, block: block, shared: shared, n: uint8(len(args))}
	for i, a := range args {
		v, err := cu.Pack(a)
		if err != nil {
			return tapeOp{}, fmt.Errorf("cuda: %s argument %d: %w", name, i, err)
		}
		op.args[i] = v
	}
	return op, nil
}

// A held Eval's tape (a decode step: a hundred kernels and more) runs in
// parts as it is recorded, so that the device starts on its first kernels
// while the host records the rest, instead of idling until the Eval's
// first read: push runs the tape but its last chunkKeep ops once it holds
// chunkAt ops, chunkFirst at first, twice as many each time after. The
// ops kept are the ones a later op may still fold into (fuseBias looks
// back the furthest, four); each part is a tape of its own for the graph
// cache, the same parts at every step. Only with the graph cache: it is
// what makes launching the parts cheap.
const chunkFirst, chunkKeep = 16, 8

// push appends op to the tape, first running the tape's earlier part
// when it is long enough; inside do.
func (be *backend) push(op tapeOp) error {
	if be.held && be.graphs != nil && !be.noChunk && len(be.tape) >= be.chunkAt+chunkKeep {
		if err := be.run(len(be.tape) - chunkKeep); err != nil {
			return err
		}
		be.chunkAt *= 2
	}
	be.tape = append(be.tape, op)
	return nil
}

// stageBytes appends n bytes at src to the host data of the tape and
// returns the device address the tape's kernels read them at (valid once
// flush has queued their copy); inside do.
func (be *backend) stageBytes(src unsafe.Pointer, n int) (cu.Ptr, error) {
	off := (len(be.stage) + 15) &^ 15
	if off+n > cap(be.stage) {
		// The queued kernels and copies read the current areas: run them
		// and wait for them, then start again at offset 0, in larger
		// areas if n needs them.
		if err := be.flush(); err != nil {
			return 0, err
		}
		if err := be.d.Sync(); err != nil {
			return 0, err
		}
		be.resetStage()
		off = 0
		if n > cap(be.stage) {
			if err := be.growStage(max(uint64(2*n), 256<<10)); err != nil {
				return 0, err
			}
		}
	}
	be.stage = be.stage[:off+n]
	copy(be.stage[off:], unsafe.Slice((*byte)(src), n))
	return be.stageDev.p + cu.Ptr(off), nil
}

// growStage replaces the staging areas with ones of n bytes; inside do,
// with nothing queued that reads them.
func (be *backend) growStage(n uint64) error {
	if be.stage != nil {
		if err := be.d.FreeHost(unsafe.Pointer(unsafe.SliceData(be.stage))); err != nil {
			return err
		}
		be.stage = nil
	}
	if err := be.ensure(&be.stageDev, n); err != nil {
		return err
	}
	h, err := be.d.AllocHost(be.stageDev.cap)
	if err != nil {
		return err
	}
	be.stage = unsafe.Slice((*byte)(h), be.stageDev.cap)[:0]
	return nil
}

// resetStage starts the staging areas again at offset 0, once the stream
// has passed every copy queued from them and every kernel that read them
// (after a synchronous read or a Sync).
func (be *backend) resetStage() {
	be.stage, be.stageSent = be.stage[:0], 0
}

// putInts stages ids; inside do.
func (be *backend) putInts(ids []int32) (cu.Ptr, error) {
	return be.stageBytes(unsafe.Pointer(unsafe.SliceData(ids)), 4*len(ids))
}

// putInt stages one int (a position the kernels read from device memory,
// so that a captured graph replays at the next position); inside do.
func (be *backend) putInt(v int) (cu.Ptr, error) {
	x := int32(v)
	return be.stageBytes(unsafe.Pointer(&x), 4)
}

// free releases device memory once no queued kernel can read it: after
// the tape has run and the device has finished it; inside do.
func (be *backend) free(p cu.Ptr) error {
	if p == 0 {
		return nil
	}
	if len(be.tape) > 0 {
		be.pending = append(be.pending, p)
		return nil
	}
	if err := be.d.Sync(); err != nil {
		return err
	}
	return be.d.Free(p)
}

// flush runs what is left of the tape (run): the staged bytes not yet
// copied are queued for copying on the stream, then the kernels —
// inside a held Eval through the graph cache (a tape seen before replays
// as one CUDA graph launch), otherwise one launch per kernel. Pending
// frees follow, after a Sync. Inside do.
func (be *backend) flush() error {
	if err := be.run(len(be.tape)); err != nil {
		return err
	}
	if len(be.pending) > 0 {
		if err := be.d.Sync(); err != nil {
			return err
		}
		be.resetStage()
		for _, p := range be.pending {
			if err := be.d.Free(p); err != nil {
				return err
			}
		}
		be.pending = be.pending[:0]
	}
	return nil
}

// run queues the copy of the bytes staged since the last run, then the
// tape's first n kernels, which leave the tape; inside do.
func (be *backend) run(n int) error {
	if be.steps != nil && be.held {
		defer be.steps.flushing()()
	}
	if s := be.stageSent; len(be.stage) > s {
		if err := be.d.HtoDAsync(be.stageDev.p+cu.Ptr(s), unsafe.Pointer(&be.stage[s]), uint64(len(be.stage)-s), be.stream); err != nil {
			return err
		}
		be.stageSent = len(be.stage)
	}
	if n == 0 {
		return nil
	}
	var err error
	if be.held && be.graphs != nil {
		err = be.graphs.run(be, be.tape[:n])
	} else {
		err = be.direct(be.tape[:n])
	}
	be.tape = be.tape[:copy(be.tape, be.tape[n:])]
	return err
}

// direct launches every kernel of tape on the stream.
func (be *backend) direct(tape []tapeOp) error {
	if be.prof != nil {
		for i := range tape {
			if err := be.prof.launch(be, &tape[i]); err != nil {
				return err
			}
		}
		return be.prof.collect(be)
	}
	for i := range tape {
		op := &tape[i]
		var err error
		if be.early && i > 0 {
			// Each kernel of apr.cu waits for the one before it (pdl);
			// the tape's first follows the staged values' copy.
			err = be.d.LaunchPackedEarly(op.f, op.grid, op.block, op.shared, be.stream, op.args[:op.n])
			be.earlyN++
		} else {
			err = be.d.LaunchPacked(op.f, op.grid, op.block, op.shared, be.stream, op.args[:op.n])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (be *backend) Name() string { return Name }

func (be *backend) note(id string) {
	be.mu.Lock()
	be.used[id]++
	be.mu.Unlock()
}

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

// ---- buffers ------------------------------------------------------------------

// alloc is one device allocation; views share it.
type alloc struct {
	p     cu.Ptr
	bytes uint64
	freed bool
}

// buf is a device buffer or a view: row i starts at p + 4·i·stride.
type buf struct {
	a                  *alloc
	p                  cu.Ptr
	rows, cols, stride int
}

func (b *buf) Rows() int { return b.rows }
func (b *buf) Cols() int { return b.cols }

func asBuf(g graph.Buf) *buf {
	b, ok := g.(*buf)
	if !ok {
		panic(fmt.Sprintf("cuda: buffer of another backend (%T)", g))
	}
	if b.a != nil && b.a.freed {
		panic("cuda: use of a released buffer")
	}
	return b
}

func (be *backend) newBuf(rows, cols int, work bool) *buf {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cuda: buffer %d×%d", rows, cols))
	}
	a := &alloc{bytes: uint64(rows*cols) * 4}
	be.do(func() error {
		p, err := be.d.Alloc(a.bytes)
		if err != nil {
			return fmt.Errorf("cuda: a %d×%d work buffer (%d bytes): %w", rows, cols, a.bytes, err)
		}
		a.p = p
		return nil
	})
	b := &buf{a: a, p: a.p, rows: rows, cols: cols, stride: cols}
	be.Zero(b)
	if !work {
		d := be.d
		runtime.AddCleanup(a, func(p cu.Ptr) {
			_ = d.Do(func() error {
				if err := d.Sync(); err != nil {
					return err
				}
				return d.Free(p)
			})
		}, a.p)
	}
	return b
}

func (be *backend) Alloc(rows, cols int) graph.Buf { return be.newBuf(rows, cols, false) }
func (be *backend) Work(rows, cols int) graph.Buf  { return be.newBuf(rows, cols, true) }

func (be *backend) Release(g graph.Buf) {
	b := asBuf(g)
	if b.a == nil || b.a.freed {
		panic("cuda: Release of a buffer not from Work")
	}
	b.a.freed = true
	p := b.a.p
	_ = be.do(func() error { return be.free(p) })
}

func (be *backend) Zero(g graph.Buf) {
	b := asBuf(g)
	be.launch1("k_zero", b.rows*b.cols, b.p, b.stride, b.rows, b.cols)
}

func (be *backend) View(g graph.Buf, r0, r1, c0, c1 int) graph.Buf {
	b := asBuf(g)
	if r0 < 0 || r0 > r1 || r1 > b.rows || c0 < 0 || c0 > c1 || c1 > b.cols {
		panic(fmt.Sprintf("cuda: View [%d:%d, %d:%d] of %d×%d", r0, r1, c0, c1, b.rows, b.cols))
	}
	return &buf{a: b.a, p: b.p + cu.Ptr(4*(r0*b.stride+c0)), rows: r1 - r0, cols: c1 - c0, stride: b.stride}
}

func (be *backend) Read(g graph.Buf, r int, dst []float32) {
	b := asBuf(g)
	if len(dst) != b.cols || r < 0 || r >= b.rows {
		panic("cuda: Read: row or dst length")
	}
	err := be.do(func() error {
		if err := be.flush(); err != nil {
			return err
		}
		if be.steps != nil && be.held {
			defer func(t time.Time) { be.steps.read(time.Since(t)) }(time.Now())
		}
		if err := be.d.DtoH(unsafe.Pointer(&dst[0]), b.p+cu.Ptr(4*r*b.stride), uint64(4*len(dst))); err != nil {
			return err
		}
		// The synchronous copy waited for everything queued before it.
		be.resetStage()
		return nil
	})
	if err != nil {
		for i := range dst {
			dst[i] = float32(math.NaN()) // never a plausible row after a failure
		}
	}
}

// readAll copies every row of b to the host.
func (be *backend) readAll(b *buf) []float32 {
	out := make([]float32, b.rows*b.cols)
	for r := 0; r < b.rows; r++ {
		be.Read(b, r, out[r*b.cols:(r+1)*b.cols])
	}
	return out
}

// ---- weights ---------------------------------------------------------------------

// matrix is a prepared weight matrix (2-D, or 3-D with one matrix per
// expert), its bytes uploaded as they are in the file.
type matrix struct {
	t      *model.Tensor
	name   string  // kernel suffix: the ggml type name
	mv     cu.Func // mv_<name>, looked up once
	mq     cu.Func // mq_<name> for mqTypes, else 0
	mqName string
	// mqOnly: Q4_1 and Q5_1, whose prompt products only mq_<type> computes
	// in ggml numerics (the min times the activations' stored sum s, not
	// times Σ x̂ as mm_<type> would): APR_CUDA_MQ=0 leaves them there.
	mqOnly             bool
	act                int // the activation format its products round x to (actFormat)
	rows, cols         int // of one expert
	experts            int
	rowBytes, expBytes int64
	p                  cu.Ptr
}

func (m *matrix) Tensor() *model.Tensor { return m.t }

// vector is a small tensor dequantized to F32 on the host and uploaded.
type vector struct {
	t *model.Tensor
	v []float32
	p cu.Ptr
}

func (v *vector) Tensor() *model.Tensor { return v.t }

// Types lists the weight types the CUDA kernels implement: every type the
// contracts allow for a weight matrix (Q8_K, an activation format, has a
// decoder in the kernels but is no weight type).
func Types() []quant.Type {
	return []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ2_XXS, quant.IQ2_XS,
		quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S, quant.IQ1_M, quant.IQ4_NL, quant.IQ4_XS,
		quant.TQ1_0, quant.TQ2_0, quant.MXFP4, quant.NVFP4, quant.Q1_0, quant.Q2_0}
}

func supported(t quant.Type) bool {
	for _, s := range Types() {
		if s == t {
			return true
		}
	}
	return false
}

// ContractID is the kernel contract id of op ("matvec", "matmul") on
// weight type t for this backend.
func ContractID(op string, t quant.Type) string {
	return "kernel." + op + "." + t.String() + ".cuda.sm90"
}

func (be *backend) Matrix(t *model.Tensor) (graph.Weight, error) {
	if t == nil {
		return nil, refuse.New(By, "no tensor to prepare")
	}
	if len(t.Shape) < 2 || len(t.Shape) > 3 {
		return nil, refuse.New(By, "tensor %q has %d dimensions; a matrix needs 2 or 3", t.Name, len(t.Shape))
	}
	if !supported(t.Type) {
		return nil, refuse.New(ContractID("matvec", t.Type), "tensor %q: no CUDA kernel for weight type %s", t.Name, t.Type)
	}
	if info, err := quant.Lookup(t.Type); err != nil || (info.BlockSize > 1 && t.Cols()%32 != 0) {
		return nil, refuse.New(ContractID("matvec", t.Type), "tensor %q: rows of %d values are not whole 32-value chunks", t.Name, t.Cols())
	}
	act, err := actFormat(t.Type)
	if err != nil {
		return nil, refuse.New(ContractID("matvec", t.Type), "tensor %q: %v", t.Name, err)
	}
	m := &matrix{t: t, name: t.Type.String(), cols: t.Cols(), rows: int(t.Shape[1]), experts: 1, rowBytes: int64(t.RowBytes), act: act}
	m.mv = be.fn["mv_"+m.name]
	if slices.Contains(mqTypes, t.Type) {
		m.mqName = "mq_" + m.name
		m.mq = be.fn[m.mqName]
		m.mqOnly = t.Type == quant.Q4_1 || t.Type == quant.Q5_1
	}
	if len(t.Shape) == 3 {
		m.experts = int(t.Shape[2])
	}
	m.expBytes = m.rowBytes * int64(m.rows)
	if int64(len(t.Data)) != m.expBytes*int64(m.experts) {
		return nil, refuse.New(By, "tensor %q: %d bytes for %d×%d×%d of %s", t.Name, len(t.Data), m.experts, m.rows, m.cols, t.Type)
	}
	be.note(ContractID("matvec", t.Type))
	be.note(ContractID("matmul", t.Type))
	be.mu.Lock()
	be.mats = append(be.mats, m)
	be.mu.Unlock()
	return m, nil
}

func (be *backend) Vector(t *model.Tensor) (graph.Weight, error) {
	v, err := graph.VectorValues(By, t)
	if err != nil {
		return nil, err
	}
	w := &vector{t: t, v: v}
	be.mu.Lock()
	be.vecs = append(be.vecs, w)
	be.mu.Unlock()
	return w, nil
}

// weightBytes is what upload allocates for the weights (their bytes, and
// each matrix's weightPad).
func (be *backend) weightBytes() uint64 {
	var n uint64
	for _, m := range be.mats {
		n += uint64(len(m.t.Data)) + weightPad
	}
	for _, v := range be.vecs {
		n += uint64(4 * len(v.v))
	}
	return n
}

// upload copies every prepared weight to the device, once.
func (be *backend) upload() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.done {
		return be.err
	}
	be.done = true
	return be.do(func() error {
		var pieces []hostPiece
		for _, m := range be.mats {
			p, err := be.d.Alloc(uint64(len(m.t.Data)) + weightPad)
			if err != nil {
				return fmt.Errorf("cuda: tensor %q (%d bytes): %w", m.t.Name, len(m.t.Data), err)
			}
			m.p = p
			pieces = append(pieces, hostPiece{m.t.Name, p, m.t.Data})
		}
		for _, v := range be.vecs {
			p, err := be.d.Alloc(uint64(4 * len(v.v)))
			if err != nil {
				return fmt.Errorf("cuda: tensor %q: %w", v.t.Name, err)
			}
			v.p = p
			pieces = append(pieces, hostPiece{v.t.Name, p, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v.v))), 4*len(v.v))})
		}
		if err := be.copyIn(pieces); err != nil {
			return err
		}
		return be.d.Sync()
	})
}

// weightPad is the bytes each matrix's allocation has past its data: the
// kernels may read a few bytes past a block's end (quant.cuh's ld_hw, 2
// past a Q4_0, Q5_0 or Q8_0 block's), which must lie in the allocation.
const weightPad = 16

// hostPiece is a tensor's bytes in host memory (the model's mapping, or
// the heap) and where they go on the device.
type hostPiece struct {
	name string
	dst  cu.Ptr
	src  []byte
}

// uploadStage is the size of each of copyIn's two pinned buffers (a
// variable for TestUpload, which makes pieces span several).
var uploadStage = 32 << 20

// copyIn copies pieces to the device through two pinned buffers in turn:
// the host fills one (parallel copies out of the mapping: a
// page-cache-to-pinned copy of tens of megabytes runs at one core's
// memory bandwidth otherwise) while the device reads the other by DMA,
// instead of each HtoD from pageable memory going through the driver's
// own staging, one copy after another. Where pinned memory cannot be had
// it copies as before, and says so.
func (be *backend) copyIn(pieces []hostPiece) error {
	var stage [2][]byte
	for i := range stage {
		p, err := be.d.AllocHost(uint64(uploadStage))
		if err != nil {
			for _, b := range stage[:i] {
				_ = be.d.FreeHost(unsafe.Pointer(unsafe.SliceData(b)))
			}
			slog.Warn("cuda: the weights are copied from pageable memory (slower): no pinned staging buffer", "bytes", uploadStage, "err", err)
			be.uploadPaged = true
			for _, pc := range pieces {
				if err := be.d.HtoD(pc.dst, unsafe.Pointer(unsafe.SliceData(pc.src)), uint64(len(pc.src))); err != nil {
					return fmt.Errorf("cuda: tensor %q: %w", pc.name, err)
				}
			}
			return nil
		}
		stage[i] = unsafe.Slice((*byte)(p), uploadStage)
	}
	defer func() {
		// A failure may leave copies queued from the buffers: they must be
		// done before the buffers are freed.
		_ = be.d.StreamSync(be.stream)
		for _, b := range stage {
			_ = be.d.FreeHost(unsafe.Pointer(unsafe.SliceData(b)))
		}
	}()
	// A fill is a stage's worth of (piece, offset) segments; after each
	// fill the stream is synchronized (the copy of the stage before, from
	// the other buffer, is done: this buffer's last copy, two fills ago,
	// was done before it) and the fill's copies are queued.
	type seg struct {
		pc     *hostPiece
		off, n int // bytes [off, off+n) of pc.src, at the stage's at
		at     int
	}
	var segs []seg
	k, used := 0, 0
	flush := func() error {
		if len(segs) == 0 {
			return nil
		}
		buf := stage[k]
		var g errgroup.Group // the fill's copies, 1 MiB apiece, on up to eight goroutines
		g.SetLimit(min(runtime.GOMAXPROCS(0), 8))
		for _, s := range segs {
			for o := 0; o < s.n; o += 1 << 20 {
				d, src := buf[s.at+o:s.at+min(o+1<<20, s.n)], s.pc.src[s.off+o:]
				g.Go(func() error {
					copy(d, src)
					return nil
				})
			}
		}
		_ = g.Wait() // copies return no error
		if err := be.d.StreamSync(be.stream); err != nil {
			return err
		}
		for _, s := range segs {
			if err := be.d.HtoDAsync(s.pc.dst+cu.Ptr(s.off), unsafe.Pointer(&buf[s.at]), uint64(s.n), be.stream); err != nil {
				return fmt.Errorf("cuda: tensor %q: %w", s.pc.name, err)
			}
		}
		segs, used, k = segs[:0], 0, 1-k
		return nil
	}
	for i := range pieces {
		pc := &pieces[i]
		for off := 0; off < len(pc.src); {
			if used == uploadStage {
				if err := flush(); err != nil {
					return err
				}
			}
			n := min(len(pc.src)-off, uploadStage-used)
			segs = append(segs, seg{pc, off, n, used})
			off, used = off+n, used+n
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return be.d.StreamSync(be.stream)
}

func (be *backend) ready() error {
	if !be.done {
		if err := be.upload(); err != nil {
			return err
		}
	}
	return be.err
}

func asMatrix(w graph.Weight) *matrix {
	m, ok := w.(*matrix)
	if !ok {
		panic(fmt.Sprintf("cuda: %T is not a matrix of this backend", w))
	}
	return m
}

func vecPtr(w graph.Weight) cu.Ptr {
	if w == nil {
		return 0
	}
	v, ok := w.(*vector)
	if !ok {
		panic(fmt.Sprintf("cuda: %T is not a vector of this backend", w))
	}
	return v.p
}

func vecLen(w graph.Weight) int {
	if w == nil {
		return 0
	}
	return len(w.(*vector).v)
}

// ---- products ----------------------------------------------------------------------

func (be *backend) GetRows(dst graph.Buf, w graph.Weight, ids []int32) error {
	d, m := asBuf(dst), asMatrix(w)
	if m.experts != 1 || d.rows != len(ids) || d.cols != m.cols {
		panic(fmt.Sprintf("cuda: GetRows of %d ids from %q into %d×%d", len(ids), m.t.Name, d.rows, d.cols))
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.rows {
			return fmt.Errorf("cuda: GetRows: row %d of %q with %d rows", id, m.t.Name, m.rows)
		}
	}
	if err := be.ready(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	nc := (m.cols + 31) / 32
	return be.do(func() error {
		p, err := be.putInts(ids)
		if err != nil {
			return err
		}
		return be.launch("getrows_"+m.name, cu.Dim{X: uint32((nc + 127) / 128), Y: uint32(len(ids))}, cu.Dim{X: 128}, 0,
			m.p, m.rowBytes, nc, m.cols, p, d.p, d.stride)
	})
}

func (be *backend) MatMul(dst graph.Buf, w graph.Weight, x graph.Buf) error {
	return be.MatMuls(x, []graph.Buf{dst}, []graph.Weight{w})
}

// checkProduct panics on a product whose shapes do not fit; it returns the
// matrix and the two buffers.
func checkProduct(dst graph.Buf, w graph.Weight, x graph.Buf) (*buf, *matrix, *buf) {
	d, m, xb := asBuf(dst), asMatrix(w), asBuf(x)
	if m.experts != 1 {
		panic(fmt.Sprintf("cuda: MatMul with the 3-D tensor %q", m.t.Name))
	}
	if xb.cols != m.cols || d.cols != m.rows || d.rows != xb.rows {
		panic(fmt.Sprintf("cuda: MatMul %d×%d = %q (%d×%d) · %d×%d", d.rows, d.cols, m.t.Name, m.rows, m.cols, xb.rows, xb.cols))
	}
	return d, m, xb
}

// mvThreads is the threads per row of a one-token product over nc chunks
// (1, 2 or 4 warps): one warp while a lane takes at most two chunks, two up
// to twelve (measured on the H200 with kernels/bench/mvbench.cu: ffn_down of
// 152 chunks took 8.0 µs with two warps per row, 8.7 with one, 11.4 with
// four).
func mvThreads(nc int) int {
	switch {
	case nc >= 384:
		return 128
	case nc > 64:
		return 64
	}
	return 32
}

// MatMuls multiplies x by each weight. One token's products of one type
// and width go in one launch (the q, k, v or gate and up of a decode step),
// each matrix's rows its own blocks; a prompt's go one tiled launch each.
func (be *backend) MatMuls(x graph.Buf, dst []graph.Buf, w []graph.Weight) error {
	if len(dst) != len(w) {
		panic("cuda: MatMuls: as many dst as weights")
	}
	ds := make([]*buf, len(w))
	ms := make([]*matrix, len(w))
	var xb *buf
	for i := range w {
		ds[i], ms[i], xb = checkProduct(dst[i], w[i], x)
	}
	if err := be.ready(); err != nil {
		return err
	}
	if xb.rows == 0 || len(w) == 0 {
		return nil
	}
	for i := 0; i < len(ms); {
		j := i + 1
		if xb.rows == 1 {
			for j < len(ms) && j-i < mvMats && ms[j].name == ms[i].name && ms[j].rowBytes == ms[i].rowBytes && !be.noFuse {
				j++
			}
		}
		// A prompt's products after the first take the x that k_round
		// left for the one before when they round it alike (q, k and v;
		// gate and up): nothing runs between them.
		again := i > 0 && xb.rows > 1 && !be.noFuse && be.sameRounding(ms[i-1], ms[i])
		if again {
			be.roundedAgain++
		}
		if err := be.product(xb, ds[i:j], ms[i:j], again); err != nil {
			return err
		}
		i = j
	}
	return be.err
}

// usesMQ is whether a prompt's product with m runs on mq_<type>.
func (be *backend) usesMQ(m *matrix) bool { return m.mq != 0 && (!be.noMQ || m.mqOnly) }

// sameRounding is whether prompt products with a and b read the same
// rounded x: the same kernel family and activation format (one that
// rounds: F32 weights take x itself) over rows of the same width
// (k_round's output depends on nothing else).
func (be *backend) sameRounding(a, b *matrix) bool {
	return a.act != actNone && be.usesMQ(a) == be.usesMQ(b) && a.act == b.act && a.cols == b.cols
}

// product launches one product kernel for the matrices ms (one type and
// width; several only for one token). again (a prompt): the rounded x of
// the product just before is this one's (sameRounding), and k_round is not
// launched again.
func (be *backend) product(xb *buf, ds []*buf, ms []*matrix, again bool) error {
	m := ms[0]
	nc := (m.cols + 31) / 32
	err := be.do(func() error {
		if xb.rows > 1 {
			if be.usesMQ(m) {
				return be.mqProduct(xb, ds[0], m, again)
			}
			x, err := be.rounded(xb, m, again)
			if err != nil {
				return err
			}
			grid := cu.Dim{X: uint32((m.rows + mmBM - 1) / mmBM), Y: uint32((xb.rows + mmBN - 1) / mmBN), Z: 1}
			grid.Z = uint32(productSplits(int(grid.X*grid.Y), nc, be.sms, mmBK))
			if grid.Z == 1 {
				return be.launch("mm_"+m.name, grid, cu.Dim{X: 128}, 0,
					m.p, m.rowBytes, nc, m.cols, x.p, x.stride, ds[0].p, ds[0].stride, m.rows, xb.rows, cu.Ptr(0))
			}
			if err := be.ensure(&be.mmP, uint64(4*int(grid.Z)*xb.rows*m.rows)); err != nil {
				return err
			}
			if err := be.launch("mm_"+m.name, grid, cu.Dim{X: 128}, 0,
				m.p, m.rowBytes, nc, m.cols, x.p, x.stride, ds[0].p, ds[0].stride, m.rows, xb.rows, be.mmP.p); err != nil {
				return err
			}
			return be.sumSplits(ds[0], int(grid.Z), xb.rows, m.rows)
		}
		tpr := mvThreads(nc)
		rpb := 128 / tpr
		rows := 0
		for _, mi := range ms {
			rows += mi.rows
		}
		wave := be.wave(m.mv)
		g := mvRowsPerSlot(wave, rows, rpb)
		// The arguments packed as the kernel reads them (cu.Pack's layout:
		// pointers and long long 8 bytes, int and float 4), without boxing
		// 23 values per launch: absent pointers, biases, eps and counts 0.
		if m.mv == 0 {
			return fmt.Errorf("cuda: the module has no kernel mv_%s", m.name)
		}
		op := tapeOp{f: m.mv, block: cu.Dim{X: 128}, n: mvArgs, kind: kindMV}
		args := op.args[:mvArgs]
		args[1], args[2], args[3], args[4], args[mvTPR] = uint64(m.rowBytes), u32(nc), u32(m.cols), uint64(xb.p), u32(tpr)
		args[mvFlags] = u32(g << 4)
		blocks := 0
		for i, mi := range ms {
			k := mvKey(i)
			args[k] = uint64(mi.p)
			if i == 0 {
				args[mvY], args[mvNR] = uint64(ds[0].p), u32(mi.rows)
			} else {
				args[k+1], args[k+2] = uint64(ds[i].p), u32(mi.rows)
			}
			blocks += (mi.rows + rpb*g - 1) / (rpb * g)
		}
		op.grid = cu.Dim{X: uint32(mvGrid(wave, blocks, nc))}
		if err := be.push(op); err != nil {
			return err
		}
		be.fuseNorm()
		return nil
	})
	if err == nil && be.plant != nil {
		for i, mi := range ms {
			be.plant.after(be, "matmul:"+mi.t.Name, ds[i])
		}
	}
	return be.err
}

// sumSplits adds the prompt product's grid.z partials (be.mmP) into d.
func (be *backend) sumSplits(d *buf, splits, ntok, nrows int) error {
	return be.launch("k_sumk", grid1(ntok*nrows), cu.Dim{X: 256}, 0, d.p, d.stride, be.mmP.p, splits, ntok, nrows)
}

// The activation formats of apr.cu (ACT_*, quant.cuh's ActOf): what a
// product with weights of each type rounds x to in ggml numerics.
const (
	actNone = iota
	actF16
	actBF16
	actQ8_0
	actQ8_1
	actQ8_K
)

// actFormat is the activation format of products with weights of type t:
// quant.VecDotType's, as apr.cu's ActOf gives it (TestActivationFormats); an
// error for a type no product takes.
func actFormat(t quant.Type) (int, error) {
	a, err := quant.VecDotType(t)
	if err != nil {
		return 0, err
	}
	switch a {
	case quant.F16:
		return actF16, nil
	case quant.BF16:
		return actBF16, nil
	case quant.Q8_0:
		return actQ8_0, nil
	case quant.Q8_1:
		return actQ8_1, nil
	case quant.Q8_K:
		return actQ8_K, nil
	}
	return actNone, nil
}

// roundGrid is k_round's grid for ntok rows of cols values
// (nc chunks) in format f: 256 threads per block, a warp per chunk (Q8_0,
// Q8_1) or per 256 values (Q8_K), a thread per value (F16, BF16).
func roundGrid(f, ntok, cols, nc int) cu.Dim {
	x := (nc + 7) / 8
	switch f {
	case actQ8_K:
		x = (nc + 63) / 64
	case actF16, actBF16:
		x = (cols + 255) / 256
	}
	return cu.Dim{X: uint32(x), Y: uint32(ntok)}
}

// rounded returns x as a prompt product with m's weights multiplies it in
// ggml numerics: x itself for F32 weights, else k_round's copy (be.mqX,
// rows 16-byte aligned), valid until the next product's.
func (be *backend) rounded(xb *buf, m *matrix, again bool) (*buf, error) {
	f := m.act
	if f == actNone {
		return xb, nil
	}
	nc := (m.cols + 31) / 32
	rs := (m.cols + 3) &^ 3
	if err := be.ensure(&be.mqX, uint64(4*xb.rows*rs)); err != nil {
		return nil, err
	}
	r := &buf{p: be.mqX.p, rows: xb.rows, cols: m.cols, stride: rs}
	if again {
		return r, nil
	}
	return r, be.launch("k_round", roundGrid(f, xb.rows, m.cols, nc), cu.Dim{X: 256}, 0,
		xb.p, xb.stride, xb.rows, m.cols, nc, f, r.p, rs, cu.Ptr(0), 0, cu.Ptr(0), cu.Ptr(0))
}

// mqTypes are the weight types with a prompt product on the int8 tensor
// cores (mq_<type>; apr.cu's APR_MQ_TYPES).
var mqTypes = []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K}

// mqProduct is a prompt's product with an MqForm matrix: k_round rounds x
// (Q8_0, Q8_1 or Q8_K codes, each chunk's d and sum, in be.mqQ), then mq_<type>
// multiplies the integers (split over grid.z as mm_<type> is).
func (be *backend) mqProduct(xb, d *buf, m *matrix, again bool) error {
	nc := (m.cols + 31) / 32
	f := m.act
	qs := 32 * nc // bytes per token: 16-byte aligned rows
	codes := uint64(xb.rows * qs)
	if err := be.ensure(&be.mqQ, codes+uint64(8*xb.rows*nc)); err != nil {
		return err
	}
	q := be.mqQ.p
	dp := q + cu.Ptr(codes)
	sp := dp + cu.Ptr(4*xb.rows*nc)
	if !again {
		if err := be.launch("k_round", roundGrid(f, xb.rows, m.cols, nc), cu.Dim{X: 256}, 0,
			xb.p, xb.stride, xb.rows, m.cols, nc, f, cu.Ptr(0), 0, q, qs, dp, sp); err != nil {
			return err
		}
	}
	grid := cu.Dim{X: uint32((m.rows + mmBM - 1) / mmBM), Y: uint32((xb.rows + mmBN - 1) / mmBN), Z: 1}
	grid.Z = uint32(productSplits(int(grid.X*grid.Y), nc, be.sms, mqBK))
	p := cu.Ptr(0)
	if grid.Z > 1 {
		if err := be.ensure(&be.mmP, uint64(4*int(grid.Z)*xb.rows*m.rows)); err != nil {
			return err
		}
		p = be.mmP.p
	}
	if err := be.launch(m.mqName, grid, cu.Dim{X: 128}, 0,
		m.p, m.rowBytes, nc, q, qs, dp, sp, d.p, d.stride, m.rows, xb.rows, p); err != nil {
		return err
	}
	if grid.Z > 1 {
		return be.sumSplits(d, int(grid.Z), xb.rows, m.rows)
	}
	return nil
}

// mqBK is apr.cu's MQ_BK: the chunks of a stage of mq_<type>.
const mqBK = 8

// mvRowsPerSlot is how many rows each row slot of a one-token product
// takes (G in apr.cu's mv_body: 1, 2 or 4): the fewest whose slots the
// device runs in one wave (wave blocks: be.wave), else the most. A slot of
// more rows keeps more weight loads in flight, but a block stages and
// rounds x, its fixed cost, once for all its rows: a second wave pays that
// cost again after the first. mvbench on an H100 (2026-12-07, mv_Q5_0: 128
// registers, 4 blocks resident, 528 a wave), qwen2.5-0.5b's gate/up (4,864
// rows, paired): 608 slots at G 2 took 13.33 µs, 304 at G 4 9.19; Q8_0
// 14.93 and 11.15, F16 16.39 and 12.63. The rule before (the most rows
// that still left three slots per multiprocessor) chose G 2 there; where a
// product fits one wave it chooses as that rule did (session 9's
// measurements: qwen3.5-0.8b's gate/up G 2, its DeltaNet in-projection G
// 4). G does not change results (apr.cu).
func mvRowsPerSlot(wave, rows, rpb int) int {
	for g := 1; g < mvMaxG; g *= 2 {
		if (rows+rpb*g-1)/(rpb*g) <= wave {
			return g
		}
	}
	return mvMaxG
}

// mvMaxG is apr.cu's MV_G: the most rows a row slot takes.
const mvMaxG = 4

// wave is how many blocks of the one-token product kernel f the device
// runs at once: its resident blocks per multiprocessor (read at load)
// times the multiprocessors.
func (be *backend) wave(f cu.Func) int {
	return max(be.resident[f], 1) * max(be.sms, 1)
}

// mvGrid is the grid of a one-token product of slots row slots over nc
// chunks, for a device that runs wave of its blocks at once: when x fits
// one tile, a block stages it once and takes slot after slot (apr.cu's
// mv_body), so that the big products (the output projection) stage and
// normalise x once per block of one wave instead of once per slot. mvbench on an H100 (2026-12-07), the output
// projection at G 4: 70.49 µs with a wave of blocks (4 per multiprocessor)
// against 73.76 with 8 per multiprocessor (Q5_0), 81.95 and 84.01 (Q8_0),
// 134.96 and 139.63 (qwen3.5-0.8b Q4_K).
func mvGrid(wave, slots, nc int) int {
	if nc <= mvTile {
		return min(slots, wave)
	}
	return slots
}

// mvTile is apr.cu's MV_TILE (the chunks of x a block of mv stages at a
// time).
const mvTile = 160

// The prompt product's tile (mm_<type> in apr.cu: MM_BM × MM_BN) and
// chunks per stage (MM_BK).
const mmBM, mmBN, mmBK = 64, 64, 2

// productSplits is how many parts a prompt product's chunks are split
// into (grid.z; k_sumk adds the parts), for mm_<type> (stages of mmBK
// chunks) and mq_<type> (mqBK): enough for about four blocks per
// multiprocessor (at least three are resident at a time: apr.cu's MM_MINB)
// when the tiles alone are fewer, each part at least four stages, at most 8.
// (Eight per multiprocessor, the rule before MM_MINB, spent more in k_sumk.)
func productSplits(tiles, nchunk, sms, stage int) int {
	want := (4*max(sms, 1) + tiles - 1) / tiles
	return max(1, min(want, 8, nchunk/(4*stage)))
}

// UBatch is the most tokens one pass of the graph takes on this backend
// (graph.UBatch is the CPU's 128): the prompt product's grid grows with the
// tokens, and at 128 the smaller matrices left most multiprocessors idle.
func (be *backend) UBatch() int { return 512 }

func (be *backend) MatMulID(dst graph.Buf, w graph.Weight, x graph.Buf, ids []int32, k int) error {
	d, m, xb := asBuf(dst), asMatrix(w), asBuf(x)
	if k < 1 || len(ids)%k != 0 || d.rows != len(ids) {
		panic(fmt.Sprintf("cuda: MatMulID: %d ids, k %d, dst %d rows", len(ids), k, d.rows))
	}
	xdiv := k
	if xb.rows == len(ids) {
		xdiv = 1
	} else if xb.rows*k != len(ids) {
		panic(fmt.Sprintf("cuda: MatMulID: x has %d rows for %d ids with k %d", xb.rows, len(ids), k))
	}
	if xb.cols != m.cols || d.cols != m.rows {
		panic(fmt.Sprintf("cuda: MatMulID %d×%d from %q · %d×%d", d.rows, d.cols, m.t.Name, xb.rows, xb.cols))
	}
	for _, e := range ids {
		if e < 0 || int(e) >= m.experts {
			return fmt.Errorf("cuda: MatMulID: expert %d of %q with %d experts", e, m.t.Name, m.experts)
		}
	}
	if err := be.ready(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	nc := (m.cols + 31) / 32
	return be.do(func() error {
		p, err := be.putInts(ids)
		if err != nil {
			return err
		}
		x, err := be.rounded(xb, m, false)
		if err != nil {
			return err
		}
		return be.launch("mmid_"+m.name, cu.Dim{X: uint32((m.rows + 3) / 4), Y: uint32(len(ids))}, cu.Dim{X: 128}, 0,
			m.p, m.expBytes, m.rowBytes, nc, m.cols, p, xdiv, x.p, x.stride, d.p, d.stride, m.rows)
	})
}

// ---- element-wise ---------------------------------------------------------------------

func sameShape(op string, a, b *buf) {
	if a.rows != b.rows || a.cols != b.cols {
		panic(fmt.Sprintf("cuda: %s: %d×%d and %d×%d", op, a.rows, a.cols, b.rows, b.cols))
	}
}

func (be *backend) AddVec(dst graph.Buf, v graph.Weight) {
	d := asBuf(dst)
	if vecLen(v) != d.cols {
		panic(fmt.Sprintf("cuda: AddVec of %d values to %d columns", vecLen(v), d.cols))
	}
	if be.fuseBias(d, vecPtr(v)) {
		return
	}
	be.launch1("k_addvec", d.rows*d.cols, d.p, d.stride, vecPtr(v), d.rows, d.cols)
}

func (be *backend) Add(dst, x graph.Buf) {
	d, s := asBuf(dst), asBuf(x)
	sameShape("Add", d, s)
	if be.fuseResidual(d, s) {
		return
	}
	be.launch1("k_add", d.rows*d.cols, d.p, d.stride, s.p, s.stride, d.rows, d.cols)
}

// Folding ops into the kernel before them saves launches in a decode step:
// the RMSNorm before a layer's products, the q/k/v and gate/up products of
// one X (MatMuls), their biases, the SwiGLU of gate and up, the two
// residual adds, the key rotation and the KV store after the query
// rotation. Only ops still on the tape fold, only one-row ops, and each
// kernel does the same float arithmetic the separate kernels would (apr.cu,
// mv_body and k_rope): results do not change (TestFusion).

// fusing reports whether ops may fold now.
func (be *backend) fusing() bool { return !be.noFuse && be.held && be.err == nil }

// mvReads is the memory a one-token product reads (address, floats): X,
// and with a folded norm the norm's output row too: the first n of r.
func mvReads(op *tapeOp) (r [2][2]uint64, n int) {
	cols := op.args[mvCols]
	r = [2][2]uint64{{op.args[mvX], cols}, {op.args[mvNOut], cols}}
	if op.args[mvFlags]&1 != 0 {
		return r, 2
	}
	return r, 1
}

// mvTouches reports whether the product op reads or writes n floats at p.
func mvTouches(op *tapeOp, p cu.Ptr, n int) bool {
	rs, nr := mvReads(op)
	for _, r := range rs[:nr] {
		if overlap(cu.Ptr(r[0]), int(r[1]), p, n) {
			return true
		}
	}
	for i := 0; i < mvMats; i++ {
		y, nr := mvSlot(op, i)
		if y != 0 && overlap(y, nr, p, n) {
			return true
		}
	}
	if op.args[mvGLU] != 0 && overlap(cu.Ptr(op.args[mvGLU]), int(op.args[mvNR]), p, n) {
		return true
	}
	return op.args[mvRes] != 0 && overlap(cu.Ptr(op.args[mvRes]), int(op.args[mvNR]), p, n)
}

// mvSlot returns matrix i's output and row count (0 when absent).
func mvSlot(op *tapeOp, i int) (cu.Ptr, int) {
	if i == 0 {
		return cu.Ptr(op.args[mvY]), int(op.args[mvNR])
	}
	k := mvKey(i)
	if op.args[k] == 0 {
		return 0, 0
	}
	return cu.Ptr(op.args[k+1]), int(op.args[k+2])
}

// fuseNorm folds the RMSNorm just before the product on the tape's end
// into it when the norm wrote the product's X: one row, one group, in
// place never (every block reads the norm's input while block 0 writes its
// output).
func (be *backend) fuseNorm() {
	n := len(be.tape)
	if !be.fusing() || n < 2 {
		return
	}
	op, nm := &be.tape[n-1], &be.tape[n-2]
	if nm.kind != kindNorm || nm.args[normD] != op.args[mvX] || nm.args[normCols] != nm.args[normGroup] || nm.grid.X != 1 ||
		nm.args[normCols] != op.args[mvCols] {
		return
	}
	cols := int(nm.args[normCols])
	src, dst := cu.Ptr(nm.args[normX]), cu.Ptr(nm.args[normD])
	if overlap(src, cols, dst, cols) {
		return
	}
	for i := 0; i < mvMats; i++ {
		if y, nr := mvSlot(op, i); y != 0 && (overlap(y, nr, src, cols) || overlap(y, nr, dst, cols)) {
			return
		}
	}
	op.args[mvX] = uint64(src)
	op.args[mvNW] = nm.args[normW]
	op.args[mvEps] = nm.args[normEps]
	op.args[mvNOut] = uint64(dst)
	op.args[mvFlags] |= 1
	be.tape[n-2] = *op
	be.tape = be.tape[:n-1]
	be.fused++
}

// fuseBias folds AddVec(d, v) into the product that wrote d, looking back
// over products that neither read nor wrote d (the biases of q, k, v).
func (be *backend) fuseBias(d *buf, v cu.Ptr) bool {
	if !be.fusing() || d.rows != 1 {
		return false
	}
	for i, k := len(be.tape)-1, 0; i >= 0 && k < 4; i, k = i-1, k+1 {
		op := &be.tape[i]
		if op.kind != kindMV {
			return false
		}
		for s := 0; s < mvMats; s++ {
			y, nr := mvSlot(op, s)
			if y != d.p || nr != d.cols {
				continue
			}
			b := mvBias
			if s > 0 {
				b = mvKey(s) + 3
			}
			if op.args[b] != 0 || op.args[mvRes] != 0 || op.args[mvGLU] != 0 {
				return false
			}
			op.args[b] = uint64(v)
			be.fused++
			return true
		}
		if mvTouches(op, d.p, d.cols) {
			return false
		}
	}
	return false
}

// fuseResidual folds Add(d, s) (d += s) into the one-matrix product that
// just wrote s, when the product does not read d (its blocks would race
// the writes).
func (be *backend) fuseResidual(d, s *buf) bool {
	if !be.fusing() || d.rows != 1 || len(be.tape) == 0 {
		return false
	}
	op := &be.tape[len(be.tape)-1]
	if op.kind != kindMV || op.args[mvW1] != 0 || cu.Ptr(op.args[mvY]) != s.p || op.args[mvRes] != 0 || op.args[mvGLU] != 0 ||
		int(op.args[mvNR]) != s.cols || mvTouches(op, d.p, d.cols) {
		return false
	}
	op.args[mvRes] = uint64(d.p)
	be.fused++
	return true
}

// fuseGLU folds SwiGLU(d, g, u) into the two-matrix product that just
// wrote g and u (gate and up): the product then pairs their rows.
func (be *backend) fuseGLU(d, g, u *buf) bool {
	if !be.fusing() || d.rows != 1 || len(be.tape) == 0 {
		return false
	}
	op := &be.tape[len(be.tape)-1]
	if op.kind != kindMV || op.args[mvW1] == 0 || op.args[mvW2] != 0 || op.args[mvRes] != 0 || op.args[mvGLU] != 0 {
		return false
	}
	y0, n0 := mvSlot(op, 0)
	y1, n1 := mvSlot(op, 1)
	if y0 != g.p || y1 != u.p || n0 != d.cols || n1 != d.cols {
		return false
	}
	// d may be g itself (SwiGLU in place); it must not be anything the
	// product reads, nor u.
	rs, nr := mvReads(op)
	for _, r := range rs[:nr] {
		if overlap(cu.Ptr(r[0]), int(r[1]), d.p, d.cols) {
			return false
		}
	}
	if overlap(u.p, u.cols, d.p, d.cols) || (d.p != g.p && overlap(g.p, g.cols, d.p, d.cols)) {
		return false
	}
	op.args[mvGLU] = uint64(d.p)
	// The slots are now the rows of one matrix (each with its pair): G and
	// the grid for that many.
	rpb := 128 / int(op.args[mvTPR])
	wave := be.wave(op.f)
	rg := mvRowsPerSlot(wave, n0, rpb)
	op.args[mvFlags] = op.args[mvFlags]&^(15<<4) | uint64(rg)<<4
	op.grid.X = uint32(mvGrid(wave, (n0+rpb*rg-1)/(rpb*rg), int(op.args[2])))
	be.fused++
	return true
}

// overlap reports whether n floats at a and m floats at b share memory.
func overlap(a cu.Ptr, n int, b cu.Ptr, m int) bool {
	return a < b+cu.Ptr(4*m) && b < a+cu.Ptr(4*n)
}

// rowBlocks launches a one-block-per-(row, group) kernel.
func (be *backend) rowBlocks(name string, rows, groups int, args ...any) {
	if rows*groups == 0 {
		return
	}
	be.do(func() error {
		return be.launch(name, cu.Dim{X: uint32(rows * groups)}, cu.Dim{X: 128}, 0, args...)
	})
}

func (be *backend) RMSNorm(dst, x graph.Buf, w graph.Weight, group int, eps float32) {
	d, s := asBuf(dst), asBuf(x)
	sameShape("RMSNorm", d, s)
	if group <= 0 || d.cols%group != 0 || (w != nil && vecLen(w) != group) {
		panic(fmt.Sprintf("cuda: RMSNorm: group %d of %d columns, %d weights", group, d.cols, vecLen(w)))
	}
	be.rowBlocks("k_rmsnorm", d.rows, d.cols/group, d.p, d.stride, s.p, s.stride, vecPtr(w), d.cols, group, eps)
	if n := len(be.tape); be.held && be.err == nil && n > 0 && be.tape[n-1].f == be.fn["k_rmsnorm"] && cu.Ptr(be.tape[n-1].args[normD]) == d.p {
		be.tape[n-1].kind = kindNorm
	}
	if be.plant != nil {
		be.plant.after(be, "rmsnorm", d)
	}
}

func (be *backend) SwiGLU(dst, gate, up graph.Buf) {
	d, g, u := asBuf(dst), asBuf(gate), asBuf(up)
	sameShape("SwiGLU", d, g)
	sameShape("SwiGLU", d, u)
	if be.fuseGLU(d, g, u) {
		return
	}
	be.launch1("k_swiglu", d.rows*d.cols, d.p, d.stride, g.p, g.stride, u.p, u.stride, d.rows, d.cols)
}

func (be *backend) Softmax(x graph.Buf) {
	b := asBuf(x)
	be.rowBlocks("k_softmax", b.rows, 1, b.p, b.stride, b.cols)
}

func (be *backend) TopK(x graph.Buf, k int, ids []int32, vals []float32) {
	b := asBuf(x)
	if k < 1 || k > b.cols || len(ids) != b.rows*k || len(vals) != b.rows*k {
		panic(fmt.Sprintf("cuda: TopK %d of %d×%d into %d/%d", k, b.rows, b.cols, len(ids), len(vals)))
	}
	row := make([]float32, b.cols)
	for r := 0; r < b.rows; r++ {
		be.Read(b, r, row)
		graph.TopKRow(row, ids[r*k:(r+1)*k], vals[r*k:(r+1)*k])
	}
}

func (be *backend) WeightedSum(dst, y graph.Buf, w []float32, k int) {
	d, yb := asBuf(dst), asBuf(y)
	if k < 1 || yb.rows != d.rows*k || yb.cols != d.cols || len(w) != yb.rows {
		panic(fmt.Sprintf("cuda: WeightedSum %d×%d from %d×%d, k %d, %d weights", d.rows, d.cols, yb.rows, yb.cols, k, len(w)))
	}
	if d.rows == 0 {
		return
	}
	be.do(func() error {
		wp, err := be.stageBytes(unsafe.Pointer(unsafe.SliceData(w)), 4*len(w))
		if err != nil {
			return err
		}
		return be.launch("k_wsum", grid1(d.rows*d.cols), cu.Dim{X: 256}, 0, d.p, d.stride, yb.p, yb.stride, wp, k, d.rows, d.cols)
	})
}

func (be *backend) Deinterleave(src graph.Buf, width int, dst ...graph.Buf) {
	s := asBuf(src)
	if len(dst) < 1 || len(dst) > 4 {
		panic(fmt.Sprintf("cuda: Deinterleave into %d buffers (1 to 4)", len(dst)))
	}
	args := []any{s.p, s.stride, s.rows, s.cols, width, len(dst)}
	for i := 0; i < 4; i++ {
		if i < len(dst) {
			d := asBuf(dst[i])
			if d.rows != s.rows || d.cols*len(dst) != s.cols || d.cols%width != 0 {
				panic(fmt.Sprintf("cuda: Deinterleave %d×%d into %d buffers of %d×%d", s.rows, s.cols, len(dst), d.rows, d.cols))
			}
			args = append(args, d.p, d.stride)
		} else {
			args = append(args, cu.Ptr(0), 0)
		}
	}
	be.launch1("k_deinterleave", s.rows*s.cols, args...)
}

func (be *backend) Sigmoid(x graph.Buf) {
	b := asBuf(x)
	if b.rows*b.cols == 0 {
		return
	}
	be.do(func() error {
		err := be.launch("k_sigmoid", grid1(b.rows*b.cols), cu.Dim{X: 256}, 0, b.p, b.stride, b.rows, b.cols)
		if err == nil {
			be.tape[len(be.tape)-1].kind = kindSigm
		}
		return err
	})
}

func (be *backend) SiLU(x graph.Buf) {
	b := asBuf(x)
	if b.rows*b.cols == 0 {
		return
	}
	be.do(func() error {
		if be.fuseSiLU(b) {
			return nil
		}
		return be.launch("k_silu", grid1(b.rows*b.cols), cu.Dim{X: 256}, 0, b.p, b.stride, b.rows, b.cols)
	})
}

// fuseSiLU folds a SiLU of the rows the convolution just before it on the
// tape wrote (all of them, nothing else) into it (k_conv's silu_);
// inside do.
func (be *backend) fuseSiLU(b *buf) bool {
	if !be.fusing() || len(be.tape) == 0 {
		return false
	}
	op := &be.tape[len(be.tape)-1]
	if op.kind != kindConv || cu.Ptr(op.args[convOut]) != b.p || int(int32(op.args[convOS])) != b.stride ||
		int(int32(op.args[convN])) != b.rows || int(int32(op.args[convCh])) != b.cols || op.args[convSiLU] != 0 {
		return false
	}
	op.args[convSiLU] = u32(1)
	op.kind = 0
	be.fused++
	return true
}

func (be *backend) MulSigmoid(x, gate graph.Buf) {
	b, g := asBuf(x), asBuf(gate)
	sameShape("MulSigmoid", b, g)
	be.launch1("k_mulsigmoid", b.rows*b.cols, b.p, b.stride, g.p, g.stride, b.rows, b.cols)
}

func (be *backend) SoftplusMul(g graph.Buf, bias, a graph.Weight) {
	b := asBuf(g)
	if vecLen(bias) != b.cols || vecLen(a) != b.cols {
		panic(fmt.Sprintf("cuda: SoftplusMul of %d columns with %d biases and %d factors", b.cols, vecLen(bias), vecLen(a)))
	}
	if b.rows*b.cols == 0 {
		return
	}
	be.do(func() error {
		// A sigmoid just before it on the tape of other rows folds in
		// (qwen35's beta and g): one launch, each value's arithmetic as
		// the two kernels do it.
		if be.fusing() && len(be.tape) > 0 {
			op := &be.tape[len(be.tape)-1]
			sp, sr, sc := cu.Ptr(op.args[sigmD]), int(int32(op.args[sigmRows])), int(int32(op.args[sigmCols]))
			if op.kind == kindSigm && sr == b.rows && !overlap(sp, (sr-1)*int(int32(op.args[sigmDS]))+sc, b.p, (b.rows-1)*b.stride+b.cols) {
				sgs := int(int32(op.args[sigmDS]))
				be.tape = be.tape[:len(be.tape)-1]
				be.fused++
				return be.launch("k_softplusmul", grid1(b.rows*(b.cols+sc)), cu.Dim{X: 256}, 0, b.p, b.stride, vecPtr(bias), vecPtr(a), b.rows, b.cols, sp, sgs, sc)
			}
		}
		return be.launch("k_softplusmul", grid1(b.rows*b.cols), cu.Dim{X: 256}, 0, b.p, b.stride, vecPtr(bias), vecPtr(a), b.rows, b.cols, cu.Ptr(0), 0, 0)
	})
}

func (be *backend) L2Norm(x graph.Buf, group int, eps float32) {
	b := asBuf(x)
	if group <= 0 || b.cols%group != 0 {
		panic(fmt.Sprintf("cuda: L2Norm: group %d of %d columns", group, b.cols))
	}
	be.rowBlocks("k_l2norm", b.rows, b.cols/group, b.p, b.stride, b.cols, group, eps)
}

func (be *backend) GatedNorm(o, z graph.Buf, w graph.Weight, group int, eps float32) {
	ob, zb := asBuf(o), asBuf(z)
	sameShape("GatedNorm", ob, zb)
	if group <= 0 || ob.cols%group != 0 || vecLen(w) != group {
		panic(fmt.Sprintf("cuda: GatedNorm: group %d of %d columns, %d weights", group, ob.cols, vecLen(w)))
	}
	be.rowBlocks("k_gatednorm", ob.rows, ob.cols/group, ob.p, ob.stride, zb.p, zb.stride, vecPtr(w), ob.cols, group, eps)
}

// ---- RoPE -------------------------------------------------------------------------------

// ropeTheta is Rope's thetaScale v for base and nrot (nrot 0: none yet).
type ropeTheta struct {
	base float32
	nrot int
	v    float32
}

func (be *backend) Rope(x graph.Buf, pos0 int, r *graph.Rope) {
	b := asBuf(x)
	if r.HeadDim <= 0 || b.cols%r.HeadDim != 0 || r.NRot > r.HeadDim || r.NRot%2 != 0 {
		panic(fmt.Sprintf("cuda: Rope of %d columns with head %d, %d rotated", b.cols, r.HeadDim, r.NRot))
	}
	if r.Mode == model.RopeNone || r.NRot == 0 {
		return
	}
	if r.Factors != nil && vecLen(r.Factors) < r.NRot/2 {
		panic("cuda: Rope: too few frequency factors")
	}
	// base^(−2/nrot), kept for the last (base, nrot): math.Pow twice per
	// layer was a seventh of a decode step's recording on the host.
	if m := &be.ropeTheta; m.nrot != r.NRot || m.base != r.Base {
		*m = ropeTheta{base: r.Base, nrot: r.NRot,
			v: float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(r.NRot))))}
	}
	thetaScale := be.ropeTheta.v
	var corr [2]float32
	if r.ExtFactor != 0 {
		corrDim := func(nRot float32) float32 {
			return float32(r.NRot) * float32(math.Log(float64(float32(r.OrigCtx)/(nRot*2*math.Pi)))) / (2 * float32(math.Log(float64(r.Base))))
		}
		corr = [2]float32{max(0, float32(math.Floor(float64(corrDim(r.BetaFast))))), min(float32(r.NRot-1), float32(math.Ceil(float64(corrDim(r.BetaSlow)))))}
	}
	mode := 0
	if r.Mode != model.RopeNorm {
		mode = 1
	}
	imrope := 0
	if r.Mode == model.RopeIMRope {
		imrope = 1
	}
	heads := b.cols / r.HeadDim
	var ff cu.Ptr
	if r.Factors != nil {
		ff = vecPtr(r.Factors)
	}
	n := b.rows * heads * (r.NRot / 2)
	if n == 0 {
		return
	}
	be.do(func() error {
		if be.fuseRope(b, pos0, mode, r.NRot, r.HeadDim, thetaScale, r.FreqScale, r.ExtFactor, r.AttnFactor, corr, ff, imrope, r.Sections) {
			return nil
		}
		pp, err := be.putInt(pos0)
		if err != nil {
			return err
		}
		err = be.launch("k_rope", grid1(n), cu.Dim{X: 256}, 0, b.p, b.stride, b.rows, b.cols,
			pp, mode, r.NRot, r.HeadDim, thetaScale, r.FreqScale, r.ExtFactor, r.AttnFactor, corr[0], corr[1], ff, imrope,
			r.Sections[0], r.Sections[1], r.Sections[2], r.Sections[3], cu.Ptr(0), 0, 0, cu.Ptr(0), cu.Ptr(0), cu.Ptr(0), 0, 0)
		if err == nil {
			op := &be.tape[len(be.tape)-1]
			op.kind, op.pos = kindRope, pos0
		}
		return err
	})
}

// fuseRope folds a rotation into the one just before it on the tape (the
// keys after the queries of a decode step) when both rotate the same rows
// at the same position with the same parameters; inside do.
func (be *backend) fuseRope(b *buf, pos0, mode, nrot, headDim int, thetaScale, freqScale, extFactor, attnFactor float32,
	corr [2]float32, ff cu.Ptr, imrope int, sec [4]int) bool {
	if !be.fusing() || b.rows != 1 || len(be.tape) == 0 {
		return false
	}
	op := &be.tape[len(be.tape)-1]
	if op.kind != kindRope || op.pos != pos0 || op.args[ropeX2] != 0 || int(op.args[ropeRows]) != b.rows {
		return false
	}
	// The shared parameters must be the same values, packed the same way.
	want := []any{mode, nrot, headDim, thetaScale, freqScale, extFactor, attnFactor, corr[0], corr[1], ff, imrope, sec[0], sec[1], sec[2], sec[3]}
	for i, a := range want {
		v, err := cu.Pack(a)
		if err != nil || v != op.args[ropeParams+i] {
			return false
		}
	}
	if overlap(cu.Ptr(op.args[ropeX]), int(op.args[ropeCols]), b.p, b.cols) {
		return false
	}
	pack := func(a any) uint64 { v, _ := cu.Pack(a); return v }
	op.args[ropeX2], op.args[ropeX2S], op.args[ropeCols2] = uint64(b.p), pack(b.stride), pack(b.cols)
	op.grid = grid1(ropeWork(op))
	be.fused++
	return true
}

// ropeWork is the number of work items of a k_rope launch (apr.cu).
func ropeWork(op *tapeOp) int {
	rows, hd, pairs := int(int32(op.args[ropeRows])), int(int32(op.args[ropeHeadDim])), int(int32(op.args[ropeNRot]))/2
	n := rows * (int(int32(op.args[ropeCols]))/hd + int(int32(op.args[ropeCols2]))/hd) * pairs
	if op.args[ropeKc] != 0 {
		n += rows * max(int(int32(op.args[ropeCols2])), int(int32(op.args[ropeVDim])))
	}
	return n
}

// fuseStore folds the store of k and v into the rotation just before it
// on the tape that rotated k as its second buffer, at the same position;
// inside do.
func (be *backend) fuseStore(c *kvCache, kb, vb *buf, pos0 int) bool {
	if !be.fusing() || kb.rows != 1 || len(be.tape) == 0 {
		return false
	}
	op := &be.tape[len(be.tape)-1]
	if op.kind != kindRope || op.pos != pos0 || cu.Ptr(op.args[ropeX2]) != kb.p || int(int32(op.args[ropeCols2])) != kb.cols ||
		op.args[ropeKc] != 0 || int(int32(op.args[ropeRows])) != kb.rows {
		return false
	}
	if overlap(cu.Ptr(op.args[ropeX]), int(int32(op.args[ropeCols])), vb.p, vb.cols) || overlap(kb.p, kb.cols, vb.p, vb.cols) {
		return false
	}
	pack := func(a any) uint64 { v, _ := cu.Pack(a); return v }
	op.args[ropeKc], op.args[ropeVc], op.args[ropeV] = uint64(c.k.p), uint64(c.v.p), uint64(vb.p)
	op.args[ropeVS], op.args[ropeVDim] = pack(vb.stride), pack(vb.cols)
	op.grid = grid1(ropeWork(op))
	be.fused++
	return true
}

// foldRope takes off the tape the k_rope launch just before a decode
// row's grouped attention when k_attgr can do its work (apr.cu, attg_body):
// it rotated this attention's query row and, as its second buffer, the
// row's keys, stored keys and values into this cache at pos0 (fuseRope,
// fuseStore), with hk as its head width, and out overlaps none of what it
// read. It returns what k_attgr takes after k_attg's arguments: the keys,
// the values, then k_rope's parameters but the head width; inside do.
func (be *backend) foldRope(ob, qb *buf, c *kvCache, pos0 int) ([16]uint64, bool) {
	var r [16]uint64
	if !be.fusing() || be.noAttgRope || len(be.tape) == 0 {
		return r, false
	}
	op := &be.tape[len(be.tape)-1]
	a, i32 := c.a, func(k int) int { return int(int32(op.args[k])) }
	if op.kind != kindRope || op.pos != pos0 || i32(ropeRows) != 1 || cu.Ptr(op.args[ropeX]) != qb.p || i32(ropeCols) != qb.cols ||
		i32(ropeHeadDim) != a.HK || op.args[ropeX2] == 0 || i32(ropeCols2) != a.NKV*a.HK ||
		cu.Ptr(op.args[ropeKc]) != c.k.p || cu.Ptr(op.args[ropeVc]) != c.v.p || i32(ropeVDim) != a.NKV*a.HV {
		return r, false
	}
	for _, in := range [][2]uint64{{op.args[ropeX], op.args[ropeCols]}, {op.args[ropeX2], op.args[ropeCols2]}, {op.args[ropeV], op.args[ropeVDim]}} {
		if overlap(cu.Ptr(in[0]), int(int32(in[1])), ob.p, ob.cols) {
			return r, false
		}
	}
	r[0], r[1], r[2], r[3] = op.args[ropeX2], op.args[ropeV], op.args[ropeParams], op.args[ropeNRot]
	copy(r[4:], op.args[ropeHeadDim+1:ropeX2])
	be.tape = be.tape[:len(be.tape)-1]
	be.fused++
	return r, true
}

// ---- attention ------------------------------------------------------------------------------

// kvCache is one layer's F32 cache on the device: K [maxCtx][NKV·HK], V
// [maxCtx][NKV·HV].
type kvCache struct {
	a      graph.Attn
	maxCtx int
	n      int
	k, v   *alloc
}

func asKV(kv graph.KV) *kvCache {
	c, ok := kv.(*kvCache)
	if !ok || c.k == nil {
		panic(fmt.Sprintf("cuda: %T is not a live KV cache of this backend", kv))
	}
	return c
}

func (be *backend) NewKV(maxCtx int, a graph.Attn) (graph.KV, error) {
	if maxCtx <= 0 || a.NHead <= 0 || a.NKV <= 0 || a.NHead%a.NKV != 0 || a.HK <= 0 || a.HV <= 0 {
		return nil, fmt.Errorf("cuda: KV cache for %d positions, %d heads over %d kv heads of %d/%d", maxCtx, a.NHead, a.NKV, a.HK, a.HV)
	}
	c := &kvCache{a: a, maxCtx: maxCtx, k: &alloc{bytes: uint64(maxCtx*a.NKV*a.HK) * 4}, v: &alloc{bytes: uint64(maxCtx*a.NKV*a.HV) * 4}}
	err := be.d.Do(func() error {
		for _, x := range []*alloc{c.k, c.v} {
			p, err := be.d.Alloc(x.bytes)
			if err != nil {
				in, _ := be.d.Info()
				return refuse.New(By, "the KV cache of %d positions needs %d bytes more; the device has %d bytes free: %v", maxCtx, x.bytes, in.FreeBytes, err)
			}
			x.p = p
		}
		return nil
	})
	if err != nil {
		be.freeKV(c)
		return nil, err
	}
	return c, nil
}

func (be *backend) ClearKV(kv graph.KV) { asKV(kv).n = 0 }

func (be *backend) freeKV(c *kvCache) {
	_ = be.d.Do(func() error {
		for _, x := range []*alloc{c.k, c.v} {
			if x != nil && x.p != 0 && !x.freed {
				x.freed = true
				_ = be.free(x.p)
			}
		}
		return nil
	})
}

func (be *backend) FreeKV(kv graph.KV) {
	c := asKV(kv)
	be.freeKV(c)
	c.k, c.v = nil, nil
}

func (be *backend) Store(kv graph.KV, k, v graph.Buf, pos0 int) error {
	c, kb, vb := asKV(kv), asBuf(k), asBuf(v)
	a := c.a
	if kb.cols != a.NKV*a.HK || vb.cols != a.NKV*a.HV || kb.rows != vb.rows {
		panic(fmt.Sprintf("cuda: Store of %d×%d keys and %d×%d values", kb.rows, kb.cols, vb.rows, vb.cols))
	}
	if pos0 != c.n {
		return fmt.Errorf("cuda: KV store at position %d but the cache holds %d", pos0, c.n)
	}
	if pos0+kb.rows > c.maxCtx {
		return fmt.Errorf("cuda: %d positions exceed the KV cache of %d", pos0+kb.rows, c.maxCtx)
	}
	if n := kb.rows * max(kb.cols, vb.cols); n > 0 {
		be.do(func() error {
			if be.fuseStore(c, kb, vb, pos0) {
				return nil
			}
			pp, err := be.putInt(pos0)
			if err != nil {
				return err
			}
			return be.launch("k_store", grid1(n), cu.Dim{X: 256}, 0,
				c.k.p, c.v.p, kb.p, kb.stride, vb.p, vb.stride, kb.rows, pp, kb.cols, vb.cols)
		})
	}
	c.n += kb.rows
	return be.err
}

func (be *backend) Attend(out, q graph.Buf, kv graph.KV, pos0 int) error {
	c, qb, ob := asKV(kv), asBuf(q), asBuf(out)
	a := c.a
	n := qb.rows
	if qb.cols != a.NHead*a.HK || ob.cols != a.NHead*a.HV || ob.rows != n {
		panic(fmt.Sprintf("cuda: Attend %d×%d from %d×%d queries", ob.rows, ob.cols, qb.rows, qb.cols))
	}
	if pos0+n > c.n {
		return fmt.Errorf("cuda: attention up to position %d but the cache holds %d", pos0+n, c.n)
	}
	if n == 0 {
		return be.err
	}
	// The context the kernels are sized for grows in steps of 256
	// positions, so that consecutive decode steps launch the same kernel
	// arguments (and replay one captured graph).
	ctxCap := (pos0 + n + 255) &^ 255
	scale := a.Scale
	err := be.do(func() error {
		pp, err := be.putInt(pos0)
		if err != nil {
			return err
		}
		if n > 1 && a.HK <= flashMaxH && a.HV <= flashMaxH && a.HK%4 == 0 && a.HV%4 == 0 {
			// A prompt: flash-style (k_flash), a block per flashQ query
			// rows and head.
			return be.launch(flashKernel(a.HK, a.HV), cu.Dim{X: uint32((n + flashQ - 1) / flashQ), Y: uint32(a.NHead)}, cu.Dim{X: 128}, uint32(flashSmem(a.HK, a.HV)),
				ob.p, ob.stride, qb.p, qb.stride, c.k.p, c.v.p, pp, a.NHead, a.NKV, a.HK, a.HV, scale, n)
		}
		if k, ok := be.attwKernel(n, a, ctxCap); ok {
			// A decode row over a short context: a block per head (k_attw).
			if err := be.ensureZero(&be.attnCnt, uint64(4*max(a.NKV, n*a.NHead))); err != nil {
				return err
			}
			return be.launchDecodeAttn(k, cu.Dim{X: uint32(a.NHead)}, awThreads, ob, qb, c, pos0,
				ob.p, qb.p, c.k.p, c.v.p, pp, a.NHead, a.NKV, a.HK, a.HV, scale, be.attnCnt.p)
		}
		if k, ok := be.attgKernel(n, a, ctxCap); ok {
			// A decode row: a block per KV group and split (k_attg), all
			// the group's heads together, combined by the group's last.
			// PA (each split's and head's a, 16-byte aligned), then PM.
			nsplit := ctxCap / be.agL
			pa := uint64(4 * a.NHead * nsplit * a.HV)
			if err := be.ensure(&be.attnP, pa+uint64(8*a.NHead*nsplit)); err != nil {
				return err
			}
			if err := be.ensureZero(&be.attnCnt, uint64(4*max(a.NKV, n*a.NHead))); err != nil {
				return err
			}
			return be.launchDecodeAttn(k, cu.Dim{X: uint32(a.NKV), Y: uint32(nsplit)}, attgThreads, ob, qb, c, pos0,
				ob.p, qb.p, c.k.p, c.v.p, pp, a.NHead, a.NKV, a.HK, a.HV, scale, be.attnP.p+cu.Ptr(pa), be.attnP.p, be.attnCnt.p)
		}
		if a.HV <= attnMaxHV {
			// Split over positions (k_attn): ctxCap/attnL blocks per query
			// row and head, combined by the last to finish.
			nsplit := ctxCap / attnL
			if err := be.ensure(&be.attnP, uint64(4*n*a.NHead*nsplit*(a.HV+2))); err != nil {
				return err
			}
			if err := be.ensureZero(&be.attnCnt, uint64(4*n*a.NHead)); err != nil {
				return err
			}
			return be.launch("k_attn", cu.Dim{X: uint32(n * a.NHead), Y: uint32(nsplit)}, cu.Dim{X: 128}, 0, ob.p, ob.stride, qb.p, qb.stride,
				c.k.p, c.v.p, pp, a.NHead, a.NKV, a.HK, a.HV, scale, be.attnP.p, be.attnCnt.p)
		}
		if err := be.ensure(&be.scores, uint64(4*n*a.NHead*ctxCap)); err != nil {
			return err
		}
		return be.launch("k_attend", cu.Dim{X: uint32(n * a.NHead)}, cu.Dim{X: 128}, 0, ob.p, ob.stride, qb.p, qb.stride,
			c.k.p, c.v.p, pp, a.NHead, a.NKV, a.HK, a.HV, scale, be.scores.p, ctxCap)
	})
	if err == nil && be.plant != nil {
		be.plant.after(be, "attend", ob)
	}
	return be.err
}

// ---- Gated DeltaNet --------------------------------------------------------------------------

// maxConvKernel is the widest convolution the engine takes (the models use 4).
const maxConvKernel = 16

func (be *backend) Conv(out, x, state graph.Buf, w graph.Weight) {
	ob, xb, sb := asBuf(out), asBuf(x), asBuf(state)
	sh := w.Tensor().Shape
	if len(sh) != 2 {
		panic(fmt.Sprintf("cuda: Conv kernel of shape %v", sh))
	}
	K, ch := int(sh[0]), int(sh[1])
	sameShape("Conv", ob, xb)
	if xb.cols != ch || sb.cols != ch || sb.rows != K-1 || K > maxConvKernel {
		panic(fmt.Sprintf("cuda: Conv of %d channels with kernel [%d, %d] (at most %d wide) and state %d×%d", xb.cols, K, ch, maxConvKernel, sb.rows, sb.cols))
	}
	stride := sb.stride
	if sb.rows == 0 {
		stride = ch
	}
	be.do(func() error {
		err := be.launch("k_conv", cu.Dim{X: uint32((ch + 31) / 32)}, cu.Dim{X: 256}, 0, ob.p, ob.stride, xb.p, xb.stride,
			sb.p, stride, vecPtr(w), xb.rows, ch, K, 0)
		if err == nil {
			be.tape[len(be.tape)-1].kind = kindConv
		}
		return err
	})
}

// k_deltaw's state rows per block (4 warps × DL_R); key heads over 256
// take k_delta.
const deltaRows = 16

// deltaKernel is the k_deltaw instance whose lanes hold 32·C ≥ hk key
// columns each state row (C in {2, 4, 8}).
func deltaKernel(hk int) string {
	switch {
	case hk <= 64:
		return "k_deltaw2"
	case hk <= 128:
		return "k_deltaw4"
	}
	return "k_deltaw8"
}

var deltaMaxHK = 256 // a variable for TestDeltaRuleKernels, which also runs k_delta

func (be *backend) DeltaRule(out, q, k, v, g, beta, state graph.Buf, hk int) {
	ob, qb, kb, vb := asBuf(out), asBuf(q), asBuf(k), asBuf(v)
	gb, bb, sb := asBuf(g), asBuf(beta), asBuf(state)
	n := qb.rows
	nK, nV, hv := graph.DeltaRuleShapes("cuda", ob, qb, kb, vb, gb, bb, sb, hk)
	if sb.stride != sb.cols {
		panic(fmt.Sprintf("cuda: DeltaRule: a state view with stride %d for %d columns", sb.stride, sb.cols))
	}
	if n == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(float64(hk)))
	be.do(func() error {
		if hk <= deltaMaxHK {
			// The state in registers (k_deltaw): a block per value head
			// and 16 state rows.
			return be.launch(deltaKernel(hk), cu.Dim{X: uint32(nV), Y: uint32((hv + deltaRows - 1) / deltaRows)}, cu.Dim{X: 128}, 0,
				ob.p, ob.stride, qb.p, qb.stride, kb.p, kb.stride, vb.p, vb.stride, gb.p, gb.stride, bb.p, bb.stride, sb.p, n, nK, hk, hv, scale)
		}
		return be.launch("k_delta", cu.Dim{X: uint32(nV)}, cu.Dim{X: 128}, uint32(8*hk), ob.p, ob.stride, qb.p, qb.stride,
			kb.p, kb.stride, vb.p, vb.stride, gb.p, gb.stride, bb.p, bb.stride, sb.p, n, nK, hk, hv, scale)
	})
}

// close releases the device memory of the weights and scratch areas.
func (be *backend) close() {
	_ = be.d.Do(func() error {
		for _, m := range be.mats {
			_ = be.d.Free(m.p)
			m.p = 0
		}
		for _, v := range be.vecs {
			_ = be.d.Free(v.p)
			v.p = 0
		}
		if be.stage != nil {
			_ = be.d.FreeHost(unsafe.Pointer(unsafe.SliceData(be.stage)))
			be.stage = nil
		}
		be.mu.Lock()
		for _, p := range be.rows {
			_ = be.d.FreeHost(p)
		}
		be.rows = nil
		be.mu.Unlock()
		for _, a := range []*devArea{&be.stageDev, &be.scores, &be.attnP, &be.attnCnt, &be.mmP, &be.mqQ, &be.mqX} {
			_ = be.d.Free(a.p)
			*a = devArea{}
		}
		if be.graphs != nil {
			be.graphs.close(be.d)
		}
		return nil
	})
}

func unsafePtr(x []float32) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(x)) }
