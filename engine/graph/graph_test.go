package graph_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/cpu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/refuse"
)

// recorder is a graph.Backend that forwards every op to the CPU backend
// and records its name: the graph's description of an architecture, as a
// backend sees it.
type recorder struct {
	graph.Backend
	ops []string
}

func (r *recorder) rec(op string) { r.ops = append(r.ops, op) }

func (r *recorder) GetRows(d graph.Buf, w graph.Weight, ids []int32) error {
	r.rec("GetRows")
	return r.Backend.GetRows(d, w, ids)
}
func (r *recorder) MatMul(d graph.Buf, w graph.Weight, x graph.Buf) error {
	r.rec("MatMul")
	return r.Backend.MatMul(d, w, x)
}
func (r *recorder) MatMuls(x graph.Buf, d []graph.Buf, w []graph.Weight) error {
	r.rec("MatMuls" + strings.Repeat("+", len(w)-1))
	return r.Backend.MatMuls(x, d, w)
}
func (r *recorder) MatMulID(d graph.Buf, w graph.Weight, x graph.Buf, ids []int32, k int) error {
	r.rec("MatMulID")
	return r.Backend.MatMulID(d, w, x, ids, k)
}
func (r *recorder) AddVec(d graph.Buf, v graph.Weight) { r.rec("AddVec"); r.Backend.AddVec(d, v) }
func (r *recorder) Add(d, x graph.Buf)                 { r.rec("Add"); r.Backend.Add(d, x) }
func (r *recorder) RMSNorm(d, x graph.Buf, w graph.Weight, g int, eps float32) {
	r.rec("RMSNorm")
	r.Backend.RMSNorm(d, x, w, g, eps)
}
func (r *recorder) Rope(x graph.Buf, pos int, rp *graph.Rope) {
	r.rec("Rope/" + rp.Mode.String())
	r.Backend.Rope(x, pos, rp)
}
func (r *recorder) Store(kv graph.KV, k, v graph.Buf, pos int) error {
	r.rec("Store")
	return r.Backend.Store(kv, k, v, pos)
}
func (r *recorder) Attend(o, q graph.Buf, kv graph.KV, pos int) error {
	r.rec("Attend")
	return r.Backend.Attend(o, q, kv, pos)
}
func (r *recorder) SwiGLU(d, g, u graph.Buf) { r.rec("SwiGLU"); r.Backend.SwiGLU(d, g, u) }
func (r *recorder) Softmax(x graph.Buf)      { r.rec("Softmax"); r.Backend.Softmax(x) }
func (r *recorder) TopK(x graph.Buf, k int, ids []int32, v []float32) {
	r.rec("TopK")
	r.Backend.TopK(x, k, ids, v)
}
func (r *recorder) WeightedSum(d, y graph.Buf, w []float32, k int) {
	r.rec("WeightedSum")
	r.Backend.WeightedSum(d, y, w, k)
}
func (r *recorder) Deinterleave(s graph.Buf, w int, d ...graph.Buf) {
	r.rec("Deinterleave")
	r.Backend.Deinterleave(s, w, d...)
}
func (r *recorder) Sigmoid(x graph.Buf)       { r.rec("Sigmoid"); r.Backend.Sigmoid(x) }
func (r *recorder) SiLU(x graph.Buf)          { r.rec("SiLU"); r.Backend.SiLU(x) }
func (r *recorder) MulSigmoid(x, g graph.Buf) { r.rec("MulSigmoid"); r.Backend.MulSigmoid(x, g) }
func (r *recorder) SoftplusMul(g graph.Buf, b, a graph.Weight) {
	r.rec("SoftplusMul")
	r.Backend.SoftplusMul(g, b, a)
}
func (r *recorder) Conv(o, x, s graph.Buf, w graph.Weight) { r.rec("Conv"); r.Backend.Conv(o, x, s, w) }
func (r *recorder) L2Norm(x graph.Buf, g int, eps float32) {
	r.rec("L2Norm")
	r.Backend.L2Norm(x, g, eps)
}
func (r *recorder) DeltaRule(o, q, k, v, g, b, s graph.Buf, hk int) {
	r.rec("DeltaRule")
	r.Backend.DeltaRule(o, q, k, v, g, b, s, hk)
}
func (r *recorder) GatedNorm(o, z graph.Buf, w graph.Weight, g int, eps float32) {
	r.rec("GatedNorm")
	r.Backend.GatedNorm(o, z, w, g, eps)
}

func load(t *testing.T, name string) (*gguf.File, *model.Spec) {
	t.Helper()
	return enginetest.Model(t, filepath.Join(testutil.Fixtures(t), "models", "synth", name+".gguf"))
}

// TestDescriptions pins, per architecture, the ops one layer asks of its
// backend: the one description the CPU engine (and a CUDA engine) run.
func TestDescriptions(t *testing.T) {
	attnTail := []string{"Store", "Attend", "MatMul", "Add", "RMSNorm"}
	dense := []string{"MatMuls+", "SwiGLU", "MatMul", "Add"}
	cases := []struct {
		model string
		layer int
		want  []string
	}{
		{"qwen2-tiny-F32", 0, cat([]string{"RMSNorm", "MatMuls++", "AddVec", "AddVec", "AddVec", "Rope/neox", "Rope/neox"}, attnTail, dense)},
		{"llama-tiny-F16", 0, cat([]string{"RMSNorm", "MatMuls++", "Rope/norm", "Rope/norm"}, attnTail, dense)},
		{"qwen3-tiny-F16", 0, cat([]string{"RMSNorm", "MatMuls++", "RMSNorm", "RMSNorm", "Rope/neox", "Rope/neox"}, attnTail, dense)},
		{"qwen3moe-tiny-Q8_0", 0, cat([]string{"RMSNorm", "MatMuls++", "RMSNorm", "RMSNorm", "Rope/neox", "Rope/neox"}, attnTail,
			[]string{"MatMul", "Softmax", "TopK", "MatMulID", "MatMulID", "SwiGLU", "MatMulID", "WeightedSum", "Add"})},
		{"qwen35-tiny-F32", 0, cat([]string{"RMSNorm", "MatMuls+++", "Sigmoid", "SoftplusMul", "Conv", "SiLU", "L2Norm",
			"DeltaRule", "GatedNorm", "MatMul", "Add", "RMSNorm"}, dense)},
		{"qwen35-tiny-F32", 3, cat([]string{"RMSNorm", "MatMuls++", "Deinterleave", "RMSNorm", "RMSNorm", "Rope/imrope", "Rope/imrope",
			"Store", "Attend", "MulSigmoid", "MatMul", "Add", "RMSNorm"}, dense)},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			_, spec := load(t, c.model)
			be, stop, err := cpu.NewBackend(1)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			r := &recorder{Backend: be}
			m, err := graph.Build(spec, r)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s, err := m.NewSession(4)
			if err != nil {
				t.Fatal(err)
			}
			// Layer boundaries: each layer starts with its attn_norm, the
			// RMSNorm right after the previous layer's last Add.
			var layers [][]string
			s.SetTrace(func(layer int, op string, pos int, v []float32) {
				if op == model.OpAttnNorm && pos == 0 {
					layers = append(layers, nil)
					r.ops = r.ops[len(r.ops)-1:] // the attn_norm RMSNorm
				}
				if op == model.OpLayerOut && pos == 0 {
					layers[len(layers)-1] = append([]string(nil), r.ops...)
				}
			})
			if _, err := s.Eval([]int32{1, 2}, false); err != nil {
				t.Fatal(err)
			}
			if c.layer >= len(layers) {
				t.Fatalf("%d layers traced", len(layers))
			}
			// The next layer's attn_norm RMSNorm is not part of this one.
			if diff := cmp.Diff(c.want, layers[c.layer]); diff != "" {
				t.Errorf("ops of %s layer %d (-want +got):\n%s", c.model, c.layer, diff)
			}
		})
	}
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestBuildRefusesByName: a layer or feed-forward kind without a description
// is refused naming the kind and the known ones.
func TestBuildRefusesByName(t *testing.T) {
	_, spec := load(t, "qwen2-tiny-F32")
	be, stop, err := cpu.NewBackend(1)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	spec.Layers[0].Kind = "rwkv7"
	_, err = graph.Build(spec, be)
	if err == nil || !strings.Contains(err.Error(), `"rwkv7"`) || !strings.Contains(err.Error(), "gated_deltanet") {
		t.Errorf("Build with kind rwkv7: %v", err)
	}
	if !errors.Is(err, refuse.ErrRefused) {
		t.Errorf("Build with kind rwkv7: %T is not a refusal", err)
	}
}
