package ladder_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/buildinfo"
	"github.com/aprqa/apr/internal/hostinfo"
	"github.com/aprqa/apr/ladder"
)

// writeModel writes a tiny GGUF model into dir/name: one layer-weight matrix
// of type typ (F32, F16 or Q8_0 need a block-aligned ne0), a F32 norm and a
// F32 embedding. seed varies the bytes so two models hash differently.
func writeModel(tb testing.TB, dir, name, arch string, typ quant.Type, seed byte) string {
	tb.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V(arch))
	b.Set("general.name", gguf.V(strings.TrimSuffix(name, filepath.Ext(name))))
	add := func(tname string, t quant.Type, shape []int64) {
		info, err := quant.Lookup(t)
		if err != nil {
			tb.Fatal(err)
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		size, _ := info.RowBytes(n)
		data := make([]byte, size)
		for i := range data {
			data[i] = seed + byte(i%7)
		}
		if t == quant.F16 || t == quant.Q8_0 {
			clear(data) // keep F16 and block scales finite
		}
		if err := b.AddTensor(tname, t, shape, data); err != nil {
			tb.Fatal(err)
		}
	}
	add("token_embd.weight", quant.F32, []int64{32, 8})
	add("blk.0.attn_norm.weight", quant.F32, []int64{32})
	add("blk.0.attn_q.weight", typ, []int64{64, 32})
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := b.WriteFile(p); err != nil {
		tb.Fatal(err)
	}
	return p
}

// modelTree writes n distinct models of growing size under a fresh root
// named "zoo" and returns the root.
func modelTree(tb testing.TB, n int) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "zoo")
	types := []quant.Type{quant.F32, quant.F16, quant.Q8_0}
	for i := range n {
		sub := ""
		if i%2 == 1 {
			sub = "sub/"
		}
		writeModel(tb, root, fmt.Sprintf("%sm%02d.gguf", sub, i), "llama", types[i%len(types)], byte(i))
	}
	return root
}

// fixedBinary and fixedHost keep tests independent of the machine.
var (
	fixedBinary = buildinfo.Identity{Module: "github.com/aprqa/apr", Version: "(devel)", Revision: "test",
		RevisionSource: buildinfo.SourceLdflags, Dirty: "false", GoVersion: "go-test",
		SHA256: strings.Repeat("ab", 32), Tags: []string{}}
	fixedHost = hostinfo.Host{Hostname: "test", OS: "linux", Arch: "amd64", CPUModel: "test cpu",
		CPUFeatures: []string{}, Cores: 2, MemoryBytes: 1 << 30, GPUs: []hostinfo.GPU{}}
)

func baseConfig(roots ...string) ladder.Config {
	b, h := fixedBinary, fixedHost
	return ladder.Config{Roots: roots, Binary: &b, Host: &h, Timeout: 5 * time.Second, Grace: 50 * time.Millisecond}
}

// counter counts executions per cell id.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) hit(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, v := range c.n {
		t += v
	}
	return t
}

// deterministicExecutors return verdicts that depend only on the cell: run
// passes with a measured value, logits fails on Q8_0 models, and cuda is
// refused by a named component. Every call is counted; after stopAfter calls
// (if > 0) cancel is called, to interrupt the run.
func deterministicExecutors(cnt *counter, stopAfter int64, cancel func()) *ladder.Executors {
	var calls atomic.Int64
	wrap := func(verb string, fn ladder.CellFunc) ladder.CellFunc {
		return func(ctx context.Context, m *ladder.Model, backend string) ladder.Result {
			cnt.hit(ladder.CellID(m.Key, verb, backend))
			if n := calls.Add(1); stopAfter > 0 && n == stopAfter+1 {
				cancel()
				<-ctx.Done()
				return ladder.Failed("cancelled")
			}
			return fn(ctx, m, backend)
		}
	}
	e := &ladder.Executors{}
	e.Register("run", wrap("run", func(ctx context.Context, m *ladder.Model, backend string) ladder.Result {
		f, err := m.File()
		if err != nil {
			return ladder.FromError(err)
		}
		r := ladder.Passed(ladder.Value{Name: "tensors", Value: float64(len(f.Tensors))})
		r.Phases = map[string]float64{"load": 0.001}
		return r
	}), "ref", "cpu")
	e.Register("logits", wrap("logits", func(ctx context.Context, m *ladder.Model, backend string) ladder.Result {
		if m.Header.DominantType == "Q8_0" {
			return ladder.Failed("logits of %s on %s are not finite (planted)", m.Header.DominantType, backend)
		}
		return ladder.Passed()
	}), "ref", "cpu")
	e.Register("logits", wrap("logits", func(ctx context.Context, m *ladder.Model, backend string) ladder.Result {
		return ladder.RefusedBy("engine/cuda", "no CUDA device")
	}), "cuda")
	return e
}

func nanValue() float64 { return math.NaN() }
