package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

// feed evaluates tokens in pieces of the given sizes (the last piece takes
// what is left) and returns every position's logits.
func feed(tb testing.TB, m *loaded, tokens []int32, pieces []int) [][]float32 {
	tb.Helper()
	return feedTies(tb, m, tokens, pieces, nil)
}

// feedTies is feed that also records, when nearTie is not nil, the
// positions where some layer's k-th and (k+1)-th router probabilities are
// within 1e-3 (routing there may legitimately differ between engines).
func feedTies(tb testing.TB, m *loaded, tokens []int32, pieces []int, nearTie map[int]bool) [][]float32 {
	tb.Helper()
	s, err := m.eng.NewSession(len(tokens))
	if err != nil {
		tb.Fatal(err)
	}
	if tr := enginetest.NearTieTrace(m.spec, nearTie); tr != nil {
		s.SetTrace(tr)
	}
	var rows [][]float32
	for i := 0; len(rows) < len(tokens); i++ {
		n := len(tokens) - len(rows)
		if i < len(pieces) {
			n = min(n, pieces[i])
		}
		got, err := s.Eval(tokens[len(rows):len(rows)+n], true)
		if err != nil {
			tb.Fatalf("Eval piece %d: %v", i, err)
		}
		rows = append(rows, got...)
	}
	if s.Pos() != len(tokens) {
		tb.Fatalf("Pos() = %d after %d tokens", s.Pos(), len(tokens))
	}
	return rows
}

func ones(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 1
	}
	return p
}

// TestPrefillThenDecode checks, on every fixture model, that feeding the
// tokens as one batch, as a prefill followed by single tokens, one token at
// a time, and in uneven pieces gives bit-identical logits. Nothing in the
// engine depends on how tokens are grouped: each row of a product is
// computed as the single-row kernel computes it (kern's four-row kernels do
// each row's operations in the single-row order), every row-wise op works on
// its row alone, attention adds a padded tile's zero probabilities as exact
// zeros, and the recurrences run token by token. (llama.cpp itself is not
// batch-invariant: its fixtures README measures up to 2e-5 for F32 weights.)
func TestPrefillThenDecode(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, path := range fixtureModels(t, dir) {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			m := open(t, path, "cpu", 0)
			tokens := fixtureTokens(m.spec.NVocab)
			if ex := readExpect(t, dir, filepath.Base(path)); ex != nil {
				tokens = ex.Tokens
			}
			batch := feed(t, m, tokens, []int{len(tokens)})
			for _, c := range []struct {
				name   string
				pieces []int
			}{
				{"prefill 16 then decode", append([]int{16}, ones(8)...)},
				{"token by token", ones(len(tokens))},
				{"pieces 1,5,2,9", []int{1, 5, 2, 9}},
			} {
				got := feed(t, m, tokens, c.pieces)
				diffs, first := 0, ""
				for pos := range batch {
					for i := range batch[pos] {
						if got[pos][i] != batch[pos][i] {
							if diffs == 0 {
								first = fmt.Sprintf("position %d logit %d: %g, batch %g (1−cosine of the row %.3g)",
									pos, i, got[pos][i], batch[pos][i], 1-cosine(got[pos], f64(batch[pos])))
							}
							diffs++
						}
					}
				}
				if diffs > 0 {
					t.Errorf("%s: %d logits differ from the one-batch evaluation; first at %s", c.name, diffs, first)
				}
			}
		})
	}
}

// TestLastRowOnly checks that an Eval asking for the last row's logits only
// (which skips the other rows after the last layer's mixer, as llama.cpp
// does) returns exactly the last row of the Eval returning every row, for
// a first batch and for a batch after earlier positions, on every fixture.
func TestLastRowOnly(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, path := range fixtureModels(t, dir) {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			m := open(t, path, "cpu", 0)
			tokens := fixtureTokens(m.spec.NVocab)
			all := feed(t, m, tokens, []int{9, len(tokens) - 9})
			s, err := m.eng.NewSession(len(tokens))
			if err != nil {
				t.Fatal(err)
			}
			for _, piece := range [][2]int{{0, 9}, {9, len(tokens)}} {
				got, err := s.Eval(tokens[piece[0]:piece[1]], false)
				if err != nil {
					t.Fatal(err)
				}
				want := all[piece[1]-1]
				if len(got) != 1 {
					t.Fatalf("Eval(tokens[%d:%d], false) returned %d rows, want 1", piece[0], piece[1], len(got))
				}
				for i := range want {
					if got[0][i] != want[i] {
						t.Errorf("Eval(tokens[%d:%d], false): logit %d = %g, the all-rows Eval gives %g", piece[0], piece[1], i, got[0][i], want[i])
						break
					}
				}
			}
		})
	}
}

// TestTraceMatchesReference checks that cpu reports the same (layer, op,
// position) set as the reference and that each traced vector is close to
// the reference's, on the F32 models (where both engines compute the same
// function and differ by rounding only).
func TestTraceMatchesReference(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"qwen2-tiny-F32", "qwen35-tiny-F32", "stories260K"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "models", "synth", name+".gguf")
			if name == "stories260K" {
				path = filepath.Join(dir, "models", name+".gguf")
			}
			type key struct {
				layer int
				op    string
				pos   int
			}
			collect := func(m *loaded) map[key][]float32 {
				got := map[key][]float32{}
				s, err := m.eng.NewSession(8)
				if err != nil {
					t.Fatal(err)
				}
				s.SetTrace(func(layer int, op string, pos int, v []float32) {
					got[key{layer, op, pos}] = append([]float32(nil), v...)
				})
				tokens := fixtureTokens(m.spec.NVocab)[:8]
				if _, err := s.Eval(tokens[:5], true); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Eval(tokens[5:], false); err != nil {
					t.Fatal(err)
				}
				return got
			}
			ref := collect(open(t, path, "ref", 0))
			cpu := collect(open(t, path, "cpu", 0))
			var missing, extra []string
			for k := range ref {
				if _, ok := cpu[k]; !ok {
					missing = append(missing, fmt.Sprint(k))
				}
			}
			for k := range cpu {
				if _, ok := ref[k]; !ok {
					extra = append(extra, fmt.Sprint(k))
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			if len(missing) > 0 || len(extra) > 0 {
				t.Errorf("trace sets differ: %d missing from cpu (first %v), %d only in cpu (first %v)",
					len(missing), first(missing), len(extra), first(extra))
			}
			worst, at := 0.0, key{}
			for k, rv := range ref {
				cv, ok := cpu[k]
				if !ok || len(cv) != len(rv) {
					continue
				}
				if d := 1 - cosine(cv, f64(rv)); d > worst {
					worst, at = d, k
				}
			}
			if worst > 1e-6 {
				t.Errorf("trace %v: 1−cosine %.3g against the reference", at, worst)
			}
			t.Logf("%d traced vectors, largest 1−cosine %.2e at %v", len(ref), worst, at)
		})
	}
}

func first(s []string) []string { return s[:min(3, len(s))] }

// TestRefusals checks that a layer kind without a graph description and a
// weight type without a kernel are refused by name, never run some other
// way.
func TestRefusals(t *testing.T) {
	dir := testutil.Fixtures(t)
	path := filepath.Join(dir, "models", "synth", "qwen2-tiny-F32.gguf")
	cases := []struct {
		name   string
		modify func(s *model.Spec)
		want   string
	}{
		{"unknown layer kind", func(s *model.Spec) { s.Layers[1].Kind = "mamba2" }, `"mamba2"`},
		{"unknown feed-forward kind", func(s *model.Spec) { s.Layers[0].FFN = "sparse" }, `"sparse"`},
		{"weight type without a kernel", func(s *model.Spec) {
			t := *s.Layers[0].FFNUp
			t.Type = quant.Q8_K // an activation format, never a weight type with a kernel
			s.Layers[0].FFNUp = &t
		}, "Q8_K"},
		{"rope mode not implemented", func(s *model.Spec) { s.RopeType = model.RopeMRope }, "mrope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := open(t, path, "ref", 1) // for its file and a fresh spec
			spec, err := model.Load(m.f)
			if err != nil {
				t.Fatal(err)
			}
			c.modify(spec)
			eng, err := cpu.New(m.f, spec, cpu.Options{Threads: 1})
			if err == nil {
				eng.Close()
				t.Fatalf("cpu.New with %s succeeded", c.name)
			}
			if !errors.Is(err, refuse.ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("cpu.New with %s: %v; want a refusal naming %s", c.name, err, c.want)
			}
		})
	}
}

// TestWeightsStayMapped checks that building the engine copies no matrix:
// the heap grows by far less than the file's size (only norm weights and
// biases are dequantized).
func TestWeightsStayMapped(t *testing.T) {
	dir := testutil.Fixtures(t)
	path := filepath.Join(dir, "models", "synth", "qwen2-tiny-F32.gguf")
	ref := open(t, path, "ref", 1)
	size := ref.f.Size
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	eng, err := cpu.New(ref.f, ref.spec, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	runtime.ReadMemStats(&after)
	grew := int64(after.TotalAlloc - before.TotalAlloc)
	if grew > size/20 {
		t.Errorf("cpu.New allocated %d bytes for a %d-byte file (want < 5%%)", grew, size)
	}
	t.Logf("cpu.New allocated %d bytes for a %d-byte file (%.2f%%)", grew, size, 100*float64(grew)/float64(size))
}

// TestResetAndClose checks that an emptied session computes what a fresh
// one does, and that closed sessions and engines refuse to evaluate.
func TestResetAndClose(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"qwen2-tiny-Q8_0", "qwen35-tiny-F32"} {
		t.Run(name, func(t *testing.T) {
			m := open(t, filepath.Join(dir, "models", "synth", name+".gguf"), "cpu", 0)
			toks := fixtureTokens(m.spec.NVocab)[:10]
			fresh := feed(t, m, toks, []int{4, 6})
			s, err := m.eng.NewSession(len(toks))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Eval(toks[:7], false); err != nil {
				t.Fatal(err)
			}
			r, ok := s.(interface {
				Reset() error
				Close() error
			})
			if !ok {
				t.Fatalf("cpu sessions have no Reset/Close (%T)", s)
			}
			if err := r.Reset(); err != nil {
				t.Fatal(err)
			}
			if s.Pos() != 0 {
				t.Fatalf("Pos() = %d after Reset", s.Pos())
			}
			a, err := s.Eval(toks[:4], true)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Eval(toks[4:], true)
			if err != nil {
				t.Fatal(err)
			}
			for pos, row := range append(a, b...) {
				for i := range row {
					if row[i] != fresh[pos][i] {
						t.Fatalf("after Reset, position %d logit %d = %g, a fresh session gives %g", pos, i, row[i], fresh[pos][i])
					}
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := s.Eval(toks[:1], false); err == nil {
				t.Errorf("Eval after Close succeeded")
			}
		})
	}
	m := open(t, filepath.Join(dir, "models", "synth", "qwen2-tiny-Q8_0.gguf"), "cpu", 1)
	s, err := m.eng.NewSession(4)
	if err != nil {
		t.Fatal(err)
	}
	m.eng.Close()
	if _, err := s.Eval([]int32{1}, false); !errors.Is(err, graph.ErrClosed) {
		t.Errorf("Eval after the engine's Close: %v, want graph.ErrClosed", err)
	}
}

// TestLongContext runs sequences long enough to cross several KV tiles
// and attention blocks (the fixtures' 24 tokens stay inside the first) on
// cpu and on the reference: a prefill of 150 tokens, then 60 single tokens.
// MoE models are left out: over 210 positions of a quantized MoE, some
// router choice is always close enough for activation quantization to flip
// it, and a flipped choice reaches every later position through the cache
// (the parity test covers MoE, with near-ties excluded).
func TestLongContext(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"qwen2-tiny-F32", "qwen35-tiny-F32", "llama-tiny-F16", "qwen2-tiny-Q4_K_M"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "models", "synth", name+".gguf")
			ref, cpuM := open(t, path, "ref", 0), open(t, path, "cpu", 0)
			toks := make([]int32, 210)
			for i := range toks {
				toks[i] = int32((7 + i*104729) % ref.spec.NVocab)
			}
			nearTie := map[int]bool{}
			want := feedTies(t, ref, toks, []int{150, 60}, nearTie)
			got := feed(t, cpuM, toks, append([]int{150}, ones(60)...))
			tol := 1e-6
			if quantized(ref.f) {
				tol = 2e-3 // the brief's minimum cosine for quantized models, 0.998
			}
			worst, at := 0.0, 0
			for pos := range want {
				d := 1 - cosine(got[pos], f64(want[pos]))
				if nearTie[pos] {
					t.Logf("position %d excluded: router near-tie in the reference; 1−cosine %.3g", pos, d)
					continue
				}
				if d > worst {
					worst, at = d, pos
				}
			}
			if worst > tol {
				t.Errorf("1−cosine against the reference %.3g at position %d (tolerance %g)", worst, at, tol)
			}
			t.Logf("largest 1−cosine against the reference over 210 positions: %.2e at %d", worst, at)
		})
	}
}

// TestEvalPiecesEqualTokenByToken: an Eval longer than graph.UBatch goes
// through in pieces; its logits equal, bit for bit, those of the same tokens
// fed one at a time (and the session's position and the next token's logits
// continue from it), with and without every row asked for.
func TestEvalPiecesEqualTokenByToken(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"qwen2-tiny-Q4_K_M", "qwen35-tiny-Q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := open(t, filepath.Join(dir, "models", "synth", name+".gguf"), "cpu", 0)
			n := 2*graph.UBatch + 7
			toks := make([]int32, n+1)
			for i := range toks {
				toks[i] = int32((3 + i*7919) % m.spec.NVocab)
			}
			want := feed(t, m, toks, ones(n+1))
			got := feed(t, m, toks, []int{n, 1})
			for pos := range want {
				for i := range want[pos] {
					if math.Float32bits(got[pos][i]) != math.Float32bits(want[pos][i]) {
						t.Fatalf("position %d logit %d: %v in pieces of %d, %v token by token", pos, i, got[pos][i], graph.UBatch, want[pos][i])
					}
				}
			}
			s, err := m.eng.NewSession(n + 1)
			if err != nil {
				t.Fatal(err)
			}
			last, err := s.Eval(toks[:n], false)
			if err != nil {
				t.Fatal(err)
			}
			if len(last) != 1 || s.Pos() != n {
				t.Fatalf("Eval(%d tokens, last only): %d rows, Pos %d", n, len(last), s.Pos())
			}
			for i := range last[0] {
				if math.Float32bits(last[0][i]) != math.Float32bits(want[n-1][i]) {
					t.Fatalf("last-only logit %d: %v, token by token %v", i, last[0][i], want[n-1][i])
				}
			}
		})
	}
}
