package ref

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// A test-only qwen35 forward pass over the shared fixtures, built straight
// from the GGUF (no model.Spec), to validate the layer math before the
// reference skeleton exists.

type q35TestModel struct {
	d        q35Dims
	nVocab   int
	nFF      int
	embd     q35Mat // [nVocab][nEmbd], also the tied output
	outNorm  []float32
	attnNorm [][]float32
	postNorm [][]float32
	ffnGate  []q35Mat
	ffnUp    []q35Mat
	ffnDown  []q35Mat
	delta    []*q35DeltaNet // nil on full-attention layers
	attn     []*q35Attn     // nil on DeltaNet layers
}

func q35TestU(tb testing.TB, f *gguf.File, key string) int {
	tb.Helper()
	v, ok := f.Get("qwen35." + key)
	if !ok {
		tb.Fatalf("missing qwen35.%s", key)
	}
	u, ok := v.Uint()
	if !ok {
		tb.Fatalf("qwen35.%s is %s", key, v.TypeName())
	}
	return int(u)
}

func q35TestF(tb testing.TB, f *gguf.File, key string) float64 {
	tb.Helper()
	v, ok := f.Get("qwen35." + key)
	if !ok {
		tb.Fatalf("missing qwen35.%s", key)
	}
	x, ok := v.Float()
	if !ok {
		tb.Fatalf("qwen35.%s is %s", key, v.TypeName())
	}
	return x
}

func q35TestTensor(tb testing.TB, f *gguf.File, name string) ([]float32, []int64) {
	tb.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		tb.Fatalf("missing tensor %s", name)
	}
	out := make([]float32, ti.Elems())
	if err := quant.Dequantize(ti.Type, f.Data(ti), out); err != nil {
		tb.Skipf("SKIP (not a pass): cannot dequantize %s: %v", name, err)
	}
	return out, ti.Shape
}

func q35TestMat(tb testing.TB, f *gguf.File, name string) q35Mat {
	w, shape := q35TestTensor(tb, f, name)
	return q35Mat{in: int(shape[0]), out: int(shape[1]), w: w}
}

func q35TestVec(tb testing.TB, f *gguf.File, name string) []float32 {
	w, _ := q35TestTensor(tb, f, name)
	return w
}

func loadQ35TestModel(tb testing.TB, path string) *q35TestModel {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	secV, _ := f.Get("qwen35.rope.dimension_sections")
	secs, _ := secV.Ints()
	var sec q35RopeSections
	for i := range sec {
		sec[i] = int(secs[i])
	}
	d := q35Dims{
		nEmbd: q35TestU(tb, f, "embedding_length"), eps: float32(q35TestF(tb, f, "attention.layer_norm_rms_epsilon")),
		nHead: q35TestU(tb, f, "attention.head_count"), nHeadKV: q35TestU(tb, f, "attention.head_count_kv"),
		headDim: q35TestU(tb, f, "attention.key_length"), nRot: q35TestU(tb, f, "rope.dimension_count"),
		sections: sec, ropeBase: q35TestF(tb, f, "rope.freq_base"),
		dConv: q35TestU(tb, f, "ssm.conv_kernel"), nKHeads: q35TestU(tb, f, "ssm.group_count"),
		nVHeads: q35TestU(tb, f, "ssm.time_step_rank"), headK: q35TestU(tb, f, "ssm.state_size"),
	}
	d.headV = q35TestU(tb, f, "ssm.inner_size") / d.nVHeads
	nLayer := q35TestU(tb, f, "block_count")
	interval := q35TestU(tb, f, "full_attention_interval")
	m := &q35TestModel{d: d, nFF: q35TestU(tb, f, "feed_forward_length")}
	m.embd = q35TestMat(tb, f, "token_embd.weight")
	m.nVocab = m.embd.out
	m.outNorm = q35TestVec(tb, f, "output_norm.weight")
	for il := 0; il < nLayer; il++ {
		b := fmt.Sprintf("blk.%d.", il)
		m.attnNorm = append(m.attnNorm, q35TestVec(tb, f, b+"attn_norm.weight"))
		m.postNorm = append(m.postNorm, q35TestVec(tb, f, b+"post_attention_norm.weight"))
		m.ffnGate = append(m.ffnGate, q35TestMat(tb, f, b+"ffn_gate.weight"))
		m.ffnUp = append(m.ffnUp, q35TestMat(tb, f, b+"ffn_up.weight"))
		m.ffnDown = append(m.ffnDown, q35TestMat(tb, f, b+"ffn_down.weight"))
		if (il+1)%interval != 0 {
			m.delta = append(m.delta, &q35DeltaNet{
				qkv: q35TestMat(tb, f, b+"attn_qkv.weight"), gate: q35TestMat(tb, f, b+"attn_gate.weight"),
				beta: q35TestMat(tb, f, b+"ssm_beta.weight"), alpha: q35TestMat(tb, f, b+"ssm_alpha.weight"),
				out: q35TestMat(tb, f, b+"ssm_out.weight"), conv: q35TestVec(tb, f, b+"ssm_conv1d.weight"),
				dtBias: q35TestVec(tb, f, b+"ssm_dt.bias"), a: q35TestVec(tb, f, b+"ssm_a"),
				norm: q35TestVec(tb, f, b+"ssm_norm.weight"),
			})
			m.attn = append(m.attn, nil)
		} else {
			m.delta = append(m.delta, nil)
			m.attn = append(m.attn, &q35Attn{
				q: q35TestMat(tb, f, b+"attn_q.weight"), k: q35TestMat(tb, f, b+"attn_k.weight"),
				v: q35TestMat(tb, f, b+"attn_v.weight"), o: q35TestMat(tb, f, b+"attn_output.weight"),
				qNorm: q35TestVec(tb, f, b+"attn_q_norm.weight"), kNorm: q35TestVec(tb, f, b+"attn_k_norm.weight"),
			})
		}
	}
	return m
}

// q35TestSeq is one sequence's state.
type q35TestSeq struct {
	m     *q35TestModel
	delta []*q35DeltaState
	kv    []*q35KV
	pos   int
}

func (m *q35TestModel) newSeq() *q35TestSeq {
	s := &q35TestSeq{m: m}
	for il := range m.delta {
		if m.delta[il] != nil {
			s.delta = append(s.delta, newQ35DeltaState(m.d))
			s.kv = append(s.kv, nil)
		} else {
			s.delta = append(s.delta, nil)
			s.kv = append(s.kv, &q35KV{})
		}
	}
	return s
}

func (s *q35TestSeq) eval(tok int) []float32 {
	m, d := s.m, s.m.d
	x := append([]float32(nil), m.embd.w[tok*d.nEmbd:(tok+1)*d.nEmbd]...)
	h := make([]float32, d.nEmbd)
	a := make([]float32, d.nEmbd)
	for il := range m.delta {
		q35RMSNorm(h, x, m.attnNorm[il], d.eps)
		if m.delta[il] != nil {
			m.delta[il].forward(d, s.delta[il], a, h, il, s.pos, nil)
		} else {
			m.attn[il].forward(d, s.kv[il], a, h, il, s.pos, nil)
		}
		for i := range x {
			x[i] += a[i]
		}
		q35RMSNorm(h, x, m.postNorm[il], d.eps)
		gt := make([]float32, m.nFF)
		up := make([]float32, m.nFF)
		m.ffnGate[il].mulVec(gt, h)
		m.ffnUp[il].mulVec(up, h)
		for i := range gt {
			gt[i] = float32(silu64(float64(gt[i])) * float64(up[i]))
		}
		m.ffnDown[il].mulVec(a, gt)
		for i := range x {
			x[i] += a[i]
		}
	}
	q35RMSNorm(h, x, m.outNorm, d.eps)
	logits := make([]float32, m.nVocab)
	m.embd.mulVec(logits, h)
	s.pos++
	return logits
}

func cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * b[i]
		aa += float64(a[i]) * float64(a[i])
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

func argmax32(v []float32) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

type q35Expect struct {
	Tokens []int       `json:"tokens"`
	Logits [][]float64 `json:"logits"`
}

func TestQwen35FixtureForward(t *testing.T) {
	for _, tc := range []struct {
		name            string
		minCos, meanCos float64
	}{
		{"qwen35-tiny-F32", 0.99999, 0.99999},
		{"qwen35-tiny-Q8_0", 0.95, 0.985},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.Fixtures(t)
			m := loadQ35TestModel(t, filepath.Join(dir, "models", "synth", tc.name+".gguf"))
			raw, err := os.ReadFile(filepath.Join(dir, "expect", tc.name+".logits.json"))
			if err != nil {
				t.Fatal(err)
			}
			var exp q35Expect
			if err := json.Unmarshal(raw, &exp); err != nil {
				t.Fatal(err)
			}
			seq := m.newSeq()
			minC, sum := 1.0, 0.0
			for i, tok := range exp.Tokens {
				lg := seq.eval(tok)
				c := cosine(lg, exp.Logits[i])
				minC = math.Min(minC, c)
				sum += c
				if am := argmax32(lg); am != argmax64(exp.Logits[i]) && margin64(exp.Logits[i]) >= 0.2 {
					t.Errorf("position %d: argmax %d, llama.cpp %d (margin %.3f)", i, am, argmax64(exp.Logits[i]), margin64(exp.Logits[i]))
				}
			}
			mean := sum / float64(len(exp.Tokens))
			t.Logf("%s: min cosine %.12f (1-%.3g), mean %.12f", tc.name, minC, 1-minC, mean)
			if minC < tc.minCos || mean < tc.meanCos {
				t.Errorf("%s: min cosine %.9f (want ≥ %g), mean %.9f (want ≥ %g)", tc.name, minC, tc.minCos, mean, tc.meanCos)
			}
		})
	}
}

func argmax64(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

func margin64(v []float64) float64 {
	b := argmax64(v)
	second := math.Inf(-1)
	for i, x := range v {
		if i != b && x > second {
			second = x
		}
	}
	return v[b] - second
}

type q35Greedy struct {
	NGen    int `json:"n_gen"`
	Results []struct {
		Prompt    string    `json:"prompt"`
		PromptIDs []int     `json:"prompt_ids"`
		Generated []int     `json:"generated_ids"`
		Margins   []float64 `json:"top1_top2_margins"`
	} `json:"results"`
}

func TestQwen35FixtureGreedy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		noise float64 // margins below this may flip legitimately
	}{
		{"qwen35-tiny-F32", 1e-3},
		{"qwen35-tiny-Q8_0", 1.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.Fixtures(t)
			m := loadQ35TestModel(t, filepath.Join(dir, "models", "synth", tc.name+".gguf"))
			raw, err := os.ReadFile(filepath.Join(dir, "expect", tc.name+".greedy.json"))
			if err != nil {
				t.Fatal(err)
			}
			var exp q35Greedy
			if err := json.Unmarshal(raw, &exp); err != nil {
				t.Fatal(err)
			}
			for _, r := range exp.Results {
				seq := m.newSeq()
				var lg []float32
				for _, id := range r.PromptIDs {
					lg = seq.eval(id)
				}
				checked, prefix, noisy := 0, 0, false
				for step, want := range r.Generated {
					got := argmax32(lg)
					if got != want {
						if !noisy {
							t.Errorf("%q step %d: generated %d, llama.cpp %d (margin %.4g)", r.Prompt, step, got, want, r.Margins[step])
						}
						break
					}
					prefix++
					if !noisy {
						checked++
					}
					// Past the first step whose margin is within noise, ids may
					// legitimately diverge: keep following for the log only.
					noisy = noisy || r.Margins[step] < tc.noise
					lg = seq.eval(want)
				}
				t.Logf("%q: %d greedy ids checked (up to the first margin below %g), %d/%d match in all", r.Prompt, checked, tc.noise, prefix, len(r.Generated))
			}
		})
	}
}
