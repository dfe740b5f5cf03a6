package cuda

import (
	"os"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
)

// EnvGraphs set to "0" turns the graph cache off: every kernel is launched
// on its own (a developer bisecting whether replay changes anything; it
// must not: a replay runs exactly the recorded launches).
const EnvGraphs = "APR_CUDA_GRAPHS"

// EnvFuse set to "0" keeps every op its own kernel (no bias or residual
// folded into the product before it): for bisecting; results must not
// change (TestFusion).
const EnvFuse = "APR_CUDA_FUSE"

// EnvEarly set to "0" launches every kernel of a tape only once the one
// before it has finished (no programmatic dependent launch): for bisecting
// and for measuring what early launch gains; results must not change
// (TestEarlyLaunch runs both).
const EnvEarly = "APR_CUDA_EARLY"

// EnvChunk set to "0" runs a held Eval's tape only at its first read or
// its end, in one part, instead of in parts as it is recorded (push): for
// measuring what starting the device early gains and for bisecting;
// results must not change (TestChunks runs both).
const EnvChunk = "APR_CUDA_CHUNK"

// EnvAttg set to "0" sends a decode row's attention to the per-head split
// kernel (k_attn) instead of the per-group one (k_attg); set to "norope",
// k_attg leaves the row's rotation and KV store to their own kernel
// (k_rope) instead of doing them too (k_attgr): for bisecting and for
// measuring one against the other (TestAttendKernels and TestAttendRope
// check each; results must not change); set to "group", a decode row over
// a short context takes k_attg as longer ones do, instead of the
// block-per-head k_attw.
const EnvAttg = "APR_CUDA_ATTG"

// EnvMQ set to "0" sends a prompt's products with Q4_0, Q5_0, Q8_0, Q4_K,
// Q5_K and Q6_K weights through the float tensor-core kernel (mm_<type>, x
// rounded by k_round) instead of the int8 one (mq_<type>, x rounded by
// k_round): for bisecting and for measuring one against the other. Both
// compute in ggml numerics; only the order of the float additions differs
// (TestProducts checks each). Q4_1 and Q5_1 stay on mq_<type>: only it
// takes their mins in ggml numerics (times the activations' stored sums).
const EnvMQ = "APR_CUDA_MQ"

// maxKernelArgs is the most arguments a kernel of apr.cu takes (k_rope: 28).
const maxKernelArgs = 32

// tapeOp is one recorded kernel launch with its arguments packed as the
// driver reads them (cu.Pack).
type tapeOp struct {
	f           cu.Func
	grid, block cu.Dim
	shared      uint32
	n           uint8
	kind        uint8 // what fuse may fold into the op: kindMV, kindNorm, kindRope
	pos         int   // kindRope: the position its pos0 argument holds
	args        [maxKernelArgs]uint64
}

// The kinds of op that later ops fold into (backend.go, fuse).
const (
	kindMV   = 1 // a one-token product (mv_<type>)
	kindNorm = 2 // an RMSNorm of one row in one group (k_rmsnorm)
	kindRope = 3 // a rotation (k_rope)
	kindConv = 4 // a convolution (k_conv): a SiLU of its output folds in
	kindSigm = 5 // a sigmoid (k_sigmoid): folds into the SoftplusMul after it
)

// k_conv's arguments.
const (
	convOut, convOS, convN, convCh, convSiLU = 0, 1, 7, 8, 10
)

// k_sigmoid's arguments.
const (
	sigmD, sigmDS, sigmRows, sigmCols = 0, 1, 2, 3
)

// The one-token product's arguments (mv_<type> in apr.cu).
const (
	mvW     = 0
	mvCols  = 3
	mvX     = 4
	mvY     = 5
	mvNR    = 6
	mvTPR   = 7
	mvBias  = 8
	mvRes   = 9
	mvW1    = 10 // the second matrix: W1, Y1, nr1, bias1
	mvW2    = 14 // the third
	mvNW    = 18
	mvEps   = 19
	mvNOut  = 20
	mvFlags = 21
	mvGLU   = 22
	mvW3    = 23 // the fourth (after the rest: W3, Y3, nr3, bias3)
	mvArgs  = 27
	mvMats  = 4 // the most matrices one launch takes
)

// mvKey is the first argument (W) of matrix i of a one-token product; its
// output, row count and bias follow.
func mvKey(i int) int {
	switch i {
	case 0:
		return mvW
	case 3:
		return mvW3
	}
	return mvW1 + 4*(i-1)
}

// k_rmsnorm's arguments.
const (
	normD, normX, normW, normCols, normGroup, normEps = 0, 2, 4, 5, 6, 7
)

// k_rope's arguments: the first buffer, the shared parameters
// (ropeParams…ropeX2), the second buffer and the store.
const (
	ropeX, ropeRows, ropeCols, ropePos, ropeParams = 0, 2, 3, 4, 5
	ropeHeadDim, ropeNRot                          = 7, 6
	ropeX2, ropeX2S, ropeCols2                     = 20, 21, 22
	ropeKc, ropeVc, ropeV, ropeVS, ropeVDim        = 23, 24, 25, 26, 27
	ropeArgs                                       = 28
)

// graphCache replays tapes as CUDA graphs. A decode step launches hundreds
// of small kernels; through purego each launch costs microseconds of host
// time, inside a graph a fraction of one. Every position-dependent value a
// kernel reads comes from staged device memory (putInt), so consecutive
// decode steps of a session record identical tapes: the second sighting of
// a tape is captured (cuStreamBeginCapture … cuGraphInstantiate), later ones
// replay it with one cuGraphLaunch. A replay runs exactly the launches the
// tape recorded — same kernels, grids and argument bytes, compared in full,
// not by hash alone — so results are bit-identical to launching them one by
// one (TestGraphReplay checks that).
type graphCache struct {
	entries map[uint64]*graphEntry
	tick    uint64
	// counters for tests and bench: tapes run directly, captured, replayed
	direct, captured, replayed int
}

type graphEntry struct {
	tape []tapeOp
	exec cu.GraphExec
	last uint64
}

// maxGraphs bounds the cache (a MoE decode step is one tape per layer
// between its router reads; served sequences each have their own).
const maxGraphs = 128

func newGraphCache() *graphCache {
	if os.Getenv(EnvGraphs) == "0" {
		return nil
	}
	return &graphCache{entries: map[uint64]*graphEntry{}}
}

func hashTape(tape []tapeOp) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		h ^= v
		h *= 1099511628211
	}
	for i := range tape {
		op := &tape[i]
		mix(uint64(op.f))
		mix(uint64(op.grid.X) | uint64(op.grid.Y)<<32)
		mix(uint64(op.grid.Z) | uint64(op.block.X)<<32)
		mix(uint64(op.block.Y) | uint64(op.block.Z)<<32)
		mix(uint64(op.shared) | uint64(op.n)<<32)
		for _, a := range op.args[:op.n] {
			mix(a)
		}
	}
	return h
}

func sameTape(a, b []tapeOp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.f != y.f || x.grid != y.grid || x.block != y.block || x.shared != y.shared || x.n != y.n || x.args != y.args {
			return false
		}
	}
	return true
}

// run launches tape on be's stream: replayed when captured before,
// captured on its second sighting, launched directly on its first.
func (g *graphCache) run(be *backend, tape []tapeOp) error {
	g.tick++
	h := hashTape(tape)
	e := g.entries[h]
	if e != nil && !sameTape(e.tape, tape) {
		g.drop(be.d, h) // a hash collision: the newer tape takes the slot
		e = nil
	}
	if e == nil {
		if len(g.entries) >= maxGraphs {
			g.evict(be.d)
		}
		g.entries[h] = &graphEntry{tape: append([]tapeOp(nil), tape...), last: g.tick}
		g.direct++
		return be.direct(tape)
	}
	e.last = g.tick
	if e.exec == 0 {
		if err := be.d.BeginCapture(be.stream); err != nil {
			return err
		}
		err := be.direct(tape)
		exec, cerr := be.d.EndCapture(be.stream)
		if err == nil {
			err = cerr
		}
		if err != nil {
			if exec != 0 {
				_ = be.d.GraphExecDestroy(exec)
			}
			return err
		}
		e.exec = exec
		g.captured++
	} else {
		g.replayed++
		if be.steps != nil {
			return be.steps.around(be, func() error { return be.d.GraphLaunch(e.exec, be.stream) })
		}
	}
	return be.d.GraphLaunch(e.exec, be.stream)
}

func (g *graphCache) drop(d *cu.Driver, h uint64) {
	if e := g.entries[h]; e != nil && e.exec != 0 {
		_ = d.GraphExecDestroy(e.exec)
	}
	delete(g.entries, h)
}

// evict drops the least recently run entry.
func (g *graphCache) evict(d *cu.Driver) {
	var oldest uint64
	first := true
	var key uint64
	for h, e := range g.entries {
		if first || e.last < oldest {
			oldest, key, first = e.last, h, false
		}
	}
	if !first {
		g.drop(d, key)
	}
}

func (g *graphCache) close(d *cu.Driver) {
	for h := range g.entries {
		g.drop(d, h)
	}
}
