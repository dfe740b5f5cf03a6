// Package enginetest holds what the optimized engines' parity tests share:
// opening a fixture model on a backend, evaluating a sequence with the
// router near-ties recorded, and the small metrics the tests judge by.
package enginetest

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
)

// Loaded is one fixture model opened on a backend.
type Loaded struct {
	F    *gguf.File
	Spec *model.Spec
	Eng  model.Engine
}

// Open opens path on backend (threads: 0 for the backend's choice) and
// closes it when the test ends.
func Open(tb testing.TB, path, backend string, threads int) *Loaded {
	tb.Helper()
	f, spec := Model(tb, path)
	eng, err := model.OpenBackend(backend, f, spec, model.OpenOptions{Threads: threads})
	if err != nil {
		tb.Fatalf("OpenBackend(%q, %s): %v", backend, filepath.Base(path), err)
	}
	tb.Cleanup(func() { eng.Close() })
	return &Loaded{F: f, Spec: spec, Eng: eng}
}

// Model opens the GGUF file at path (closed when the test ends) and reads
// its model description.
func Model(tb testing.TB, path string) (*gguf.File, *model.Spec) {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	spec, err := model.Load(f)
	if err != nil {
		tb.Fatalf("model.Load(%s): %v", filepath.Base(path), err)
	}
	return f, spec
}

// NearTieTrace returns a trace hook that records in nearTie every position
// where some layer's k-th and (k+1)-th router probabilities are within
// 1e-3 (routing there may legitimately differ between engines), or nil for
// a model without experts or a nil map.
func NearTieTrace(spec *model.Spec, nearTie map[int]bool) model.Trace {
	if nearTie == nil || spec.NExpert == 0 {
		return nil
	}
	k := spec.NExpertUsed
	return func(layer int, op string, pos int, v []float32) {
		if op != model.OpRouter {
			return
		}
		p := append([]float32(nil), v...)
		sort.Slice(p, func(i, j int) bool { return p[i] > p[j] })
		if k < len(p) && float64(p[k-1]-p[k]) < 1e-3 {
			nearTie[pos] = true
		}
	}
}

// EvalAll feeds tokens in one Eval and returns every position's logits;
// with nearTie non-nil it also records the router's near-ties.
func EvalAll(tb testing.TB, m *Loaded, tokens []int32, nearTie map[int]bool) [][]float32 {
	tb.Helper()
	s, err := m.Eng.NewSession(len(tokens))
	if err != nil {
		tb.Fatal(err)
	}
	if tr := NearTieTrace(m.Spec, nearTie); tr != nil {
		s.SetTrace(tr)
	}
	rows, err := s.Eval(tokens, true)
	if err != nil {
		tb.Fatalf("%s Eval: %v", m.Eng.Backend(), err)
	}
	return rows
}

// ReadJSON decodes the file p into v; false when it does not exist.
func ReadJSON(tb testing.TB, p string, v any) bool {
	tb.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", p, err)
	}
	return true
}

// Cosine is the cosine similarity of a and b, in float64.
func Cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		x := float64(a[i])
		ab += x * b[i]
		aa += x * x
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

// F64 widens v.
func F64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Argmax is the index of v's largest value (the first of equals).
func Argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// Top2 returns the best index and its margin over the second best.
func Top2(v []float32) (int, float64) {
	b1, b2 := 0, -1
	for i := 1; i < len(v); i++ {
		switch {
		case v[i] > v[b1]:
			b1, b2 = i, b1
		case b2 < 0 || v[i] > v[b2]:
			b2 = i
		}
	}
	return b1, float64(v[b1] - v[b2])
}

// Quantized reports whether some tensor of f has a quantized type.
func Quantized(f *gguf.File) bool {
	for _, t := range f.Tensors {
		if info, err := quant.Lookup(t.Type); err == nil && info.Quantized {
			return true
		}
	}
	return false
}

// EvalLastMatchesEval feeds the same tokens to two sessions of eng, one
// with Eval and one with model.EvalLast (a prompt of promptLen tokens, then
// steps decode tokens), and fails unless every last row is the same, bit for
// bit; a dst of the wrong length must be refused. It fails when eng's
// sessions are not model.LastEvaluators.
func EvalLastMatchesEval(tb testing.TB, eng model.Engine, promptLen, steps int) {
	tb.Helper()
	nv := eng.NVocab()
	a, err := eng.NewSession(promptLen + steps + 1)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := eng.NewSession(promptLen + steps + 1)
	if err != nil {
		tb.Fatal(err)
	}
	le, ok := b.(model.LastEvaluator)
	if !ok {
		tb.Fatalf("%s sessions (%T) are not model.LastEvaluators", eng.Backend(), b)
	}
	if err := le.EvalLast([]int32{1}, make([]float32, nv-1)); err == nil {
		tb.Fatal("EvalLast took a dst one value short of the vocabulary")
	}
	feed := make([]int32, promptLen)
	for i := range feed {
		feed[i] = int32((7 + 31*i) % nv)
	}
	// The row a decode loop takes (model.LogitsRow: the session's own where
	// it allocates rows, cuda's in pinned host memory).
	dst, err := model.LogitsRow(b, nv)
	if err != nil {
		tb.Fatal(err)
	}
	for step := 0; step <= steps; step++ {
		rows, err := a.Eval(feed, false)
		if err != nil {
			tb.Fatal(err)
		}
		if err := le.EvalLast(feed, dst); err != nil {
			tb.Fatal(err)
		}
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(rows[0][i]) {
				tb.Fatalf("step %d (%d tokens fed): EvalLast's logit %d is %v, Eval's %v", step, len(feed), i, dst[i], rows[0][i])
			}
		}
		feed = []int32{int32(Argmax(dst))}
	}
}
