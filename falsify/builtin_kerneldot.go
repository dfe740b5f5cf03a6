package falsify

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"
	"sort"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// KernelFunc runs one registered kernel (engine/cpu.RunKernel in apr): the
// products of m activation rows with rows weight rows of cols values, and
// the activation rows as the kernel converted them (act's blocks).
type KernelFunc func(contract string, w []byte, rows, cols int, x []float32, m int) (out []float32, act string, acts []byte, err error)

type kernelSource struct {
	ids func() []string
	run KernelFunc
}

// RegisterKernels adds an engine's runnable kernels.
func (r *Registry) RegisterKernels(source string, ids func() []string, run KernelFunc) {
	r.RegisterKernelIDs(source, ids)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runners == nil {
		r.runners = map[string]kernelSource{}
	}
	r.runners[source] = kernelSource{ids: ids, run: run}
}

// kernelsFor returns, by source, the registered kernel ids that resolve to
// the bound kernel contract, with their op.
func kernelsFor(c *Check) (map[string][][2]string, map[string]KernelFunc) {
	c.run.reg.mu.RLock()
	defer c.run.reg.mu.RUnlock()
	ids := map[string][][2]string{}
	runs := map[string]KernelFunc{}
	for src, ks := range c.run.reg.runners {
		for _, id := range ks.ids() {
			k, op, err := c.Set.ResolveKernel(id)
			if err == nil && k.ID == c.F.Binds && op != "" {
				ids[src] = append(ids[src], [2]string{id, op})
				runs[src] = ks.run
			}
		}
	}
	for _, l := range ids {
		sort.Slice(l, func(i, j int) bool { return l[i][0] < l[j][0] })
	}
	return ids, runs
}

func kernelDotApplies(c *Check) (bool, string) {
	ids, _ := kernelsFor(c)
	if len(ids) == 0 {
		return false, "no engine registers a kernel for this contract"
	}
	k, ok := c.Set.KernelByID(c.F.Binds)
	if !ok {
		return true, ""
	}
	if t, err := quant.ParseType(k.Type); err == nil && !quant.CanQuantize(t) && c.in.fixtures == "" {
		return false, "weights of a type apr cannot quantize come from apr's shared fixtures (--fixtures DIR)"
	}
	return true, ""
}

// kernelDot holds every registered kernel of the bound contract to its
// reference: Σ dequant(w)·dequant(act(x)) in float64 over the activation
// rows as the kernel converted them, within the op's tolerance, where rel
// scales with the blocks summed: |got − want| ≤ abs + (cols/block + 8)·rel·Σ|w·a|
// (plus, for Q8_1 activations against Q4_1/Q5_1 weights, the rounding of
// the activation's stored sum: Σ_blocks |m·s|·2⁻¹⁰). Weights are random
// rows quantized by engine/quant or, for types apr cannot quantize, ggml's
// blocks from the fixtures; activations are N(0, 1) rows of the run's seed.
func kernelDot(ctx context.Context, c *Check) error {
	k, t, info, err := kernelOf(c)
	if err != nil {
		return err
	}
	rows, err := c.ParamInt("rows", 8)
	if err != nil {
		return err
	}
	cols, err := c.ParamInt("cols", 512)
	if err != nil {
		return err
	}
	m, err := c.ParamInt("m", 3)
	if err != nil {
		return err
	}
	if rows < 1 || m < 1 || cols < 256 || cols%256 != 0 || rows*cols > 1<<22 {
		return c.Refuse("params rows %d, cols %d, m %d: want cols a positive multiple of 256", rows, cols, m)
	}
	rng := rand.New(rand.NewSource(c.Seed()))
	var w []byte
	if quant.CanQuantize(t) {
		w = make([]byte, rows*cols/info.BlockSize*info.TypeSize)
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		if err := quant.Quantize(t, x, w); err != nil {
			return refuse.Wrap(c.By(), err)
		}
	} else if w, rows, cols, err = fixtureBlocks(c, t); err != nil {
		return err
	}
	ids, runs := kernelsFor(c)
	checked, bad := 0, 0
	for _, src := range slices.Sorted(maps.Keys(ids)) {
		for _, e := range ids[src] {
			id, op := e[0], e[1]
			mm := m
			if op == "matvec" {
				mm = 1
			}
			x := make([]float32, mm*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			out, act, acts, err := runs[src](id, w, rows, cols, x, mm)
			if err != nil {
				if r, ok := refuse.As(err); ok && r.By == id {
					c.Note("%s: not runnable here (%s)", id, r.Reason)
					continue
				}
				return Fail("%s: %v", id, err)
			}
			checked++
			if want := k.Ops[op].Activation; want != "" && act != want {
				bad++
				c.Note("%s converts activations to %s; the contract says %s", id, act, want)
				continue
			}
			n, first := compareKernel(k, op, t, info, act, w, acts, out, rows, cols, mm)
			if n > 0 {
				bad += n
				c.Note("%s (%s × %s): %d of %d products off; first %s", id, t, act, n, len(out), first)
			}
		}
	}
	if checked == 0 {
		return c.Refuse("no registered kernel of %s can run on this machine", k.ID)
	}
	c.Measure("mismatches", float64(bad))
	c.Measure("kernels_checked", float64(checked))
	return nil
}

// compareKernel returns how many of out disagree with the reference, and
// a description of the first.
func compareKernel(k *schema.Kernel, op string, t quant.Type, info quant.Info, act string, w, acts []byte, out []float32, rows, cols, m int) (int, string) {
	at, err := quant.ParseType(act)
	if err != nil {
		return len(out), fmt.Sprintf("activation format %q: %v", act, err)
	}
	wf := make([]float32, rows*cols)
	af := make([]float32, m*cols)
	if err := quant.Dequantize(t, w, wf); err != nil {
		return len(out), err.Error()
	}
	if err := quant.Dequantize(at, acts, af); err != nil {
		return len(out), err.Error()
	}
	tol := k.Ops[op].Tolerance
	blocks := float64(cols / info.BlockSize)
	bad, first := 0, ""
	for i := 0; i < m; i++ {
		for r := 0; r < rows; r++ {
			var s, sa float64
			for j := 0; j < cols; j++ {
				p := float64(wf[r*cols+j]) * float64(af[i*cols+j])
				s += p
				sa += math.Abs(p)
			}
			bound := tol.Bound((blocks+8)*sa) + 1e-30 // schema.Tolerance: a dot product's scale
			if at == quant.Q8_1 && (t == quant.Q4_1 || t == quant.Q5_1) {
				bound += q81SumRounding(w[r*len(w)/rows:(r+1)*len(w)/rows], acts[i*len(acts)/m:(i+1)*len(acts)/m], info.TypeSize)
			}
			g := float64(out[i*rows+r])
			if d := math.Abs(g - s); !(d <= bound) {
				if bad == 0 {
					first = fmt.Sprintf("at activation row %d, weight row %d: got %g, reference %g (|diff| %.3g > %.3g)", i, r, g, s, d, bound)
				}
				bad++
			}
		}
	}
	return bad, first
}

// q81SumRounding is Σ_b |m_b·s_b|·2⁻¹⁰ over a row: ggml's Q4_1/Q5_1 dot adds
// m·s with s = fp16(d·Σq) rounded, while the reference sums m·d·q exactly.
func q81SumRounding(wrow, arow []byte, wBytes int) float64 {
	var sum float64
	for b := 0; (b+1)*wBytes <= len(wrow) && (b+1)*36 <= len(arow); b++ {
		mw := float64(quant.FP16ToFP32(binary.LittleEndian.Uint16(wrow[b*wBytes+2:])))
		sa := float64(quant.FP16ToFP32(binary.LittleEndian.Uint16(arow[b*36+2:])))
		sum += math.Abs(mw*sa) * 0x1p-10
	}
	return sum
}

// fixtureBlocks returns ggml's quantized rows of t from the shared fixtures
// (dequant/<T>.gguf, tensor q): the weights for types apr cannot quantize.
func fixtureBlocks(c *Check, t quant.Type) ([]byte, int, int, error) {
	path, err := c.Fixture("dequant/" + t.String() + ".gguf")
	if err != nil {
		return nil, 0, 0, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, 0, 0, refuse.Wrap(c.By(), err)
	}
	defer f.Close()
	q, ok := f.Tensor("q")
	if !ok || q.Type != t || len(q.Shape) != 2 {
		return nil, 0, 0, c.Refuse("%s has no 2-D %s tensor q", path, t)
	}
	return append([]byte(nil), f.Data(q)...), int(q.Shape[1]), int(q.Shape[0]), nil
}
