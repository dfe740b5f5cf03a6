package contracts_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

func TestEmbedded(t *testing.T) {
	s, err := contracts.Embedded()
	if err != nil {
		t.Fatalf("Embedded(): %v", err)
	}
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe"} {
		if _, ok := s.Model(arch); !ok {
			t.Errorf("Embedded(): no model contract for %s", arch)
		}
	}
	// One kernel contract per ggml type an engine stores weights in.
	for _, name := range []string{"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
		"Q5_K", "Q6_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS",
		"TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0"} {
		typ, err := quant.ParseType(name)
		if err != nil {
			t.Fatal(err)
		}
		k, ok := s.Kernel(typ)
		if !ok {
			t.Errorf("Embedded(): no kernel contract for %s", name)
			continue
		}
		for _, op := range []string{"dequant", "matvec", "matmul"} {
			if _, ok := k.Ops[op]; !ok {
				t.Errorf("kernel contract %s has no op %s", k.ID, op)
			}
		}
	}
	for _, v := range []string{"inspect", "tensors", "tokenize", "run", "logits"} {
		if _, ok := s.Verb(v); !ok {
			t.Errorf("Embedded(): no contract for verb %s", v)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(s.Digest()) {
		t.Errorf("Embedded().Digest = %q, want 64 hex digits", s.Digest())
	}
	for _, e := range s.List() {
		if !strings.HasPrefix(e.Pos, "contracts/") {
			t.Errorf("contract %s position %q is not in contracts/", e.ID, e.Pos)
		}
	}
	if p := s.Pos("run.timing"); !strings.HasPrefix(p, "contracts/verbs.cue:") {
		t.Errorf("Pos(run.timing) = %q, want a position in contracts/verbs.cue", p)
	}
	f, ok := s.Falsifier("llama.tensor_contract")
	if !ok || f.Binds != "model.llama" || f.Code != "tensor_contract" {
		t.Errorf("Falsifier(llama.tensor_contract) = %+v, %v; want code tensor_contract binding model.llama", f, ok)
	}
	text, ok := s.Show("kernel.q8_0")
	if !ok || !regexp.MustCompile(`type:\s+"Q8_0"`).MatchString(text) {
		t.Errorf("Show(kernel.q8_0) = %q, %v; want the contract's CUE", text, ok)
	}
}

func TestLoadDirMatchesEmbedded(t *testing.T) {
	emb, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	dir := writeContracts(t, nil)
	s, err := contracts.LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir(copy of the embedded contracts): %v", err)
	}
	if s.Digest() != emb.Digest() {
		t.Errorf("LoadDir digest %s, embedded %s: the same contracts must digest the same", s.Digest(), emb.Digest())
	}
	if !strings.HasPrefix(s.Pos("model.llama"), filepath.Join(dir, "model_llama.cue")+":") {
		t.Errorf("LoadDir position %q does not name the file on disk", s.Pos("model.llama"))
	}
}

func TestDigest(t *testing.T) {
	emb, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(t *testing.T, files map[string]string)
		same bool
	}{
		{"comment added", func(t *testing.T, f map[string]string) {
			f["verbs.cue"] = "// a new comment\n" + f["verbs.cue"]
		}, true},
		{"contract moved to another file", func(t *testing.T, f map[string]string) {
			f["zz_llama.cue"] = f["model_llama.cue"]
			f["model_llama.cue"] = ""
		}, true},
		{"threshold changed", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", "tolerance_ms:  30", "tolerance_ms:  31")
		}, false},
		{"tensor shape changed", func(t *testing.T, f map[string]string) {
			replace(t, f, "model_qwen2.cue", `"blk.{i}.ffn_norm.weight", shape: ["n_embd"]`, `"blk.{i}.ffn_norm.weight", shape: ["n_embd", "1"]`)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := contracts.LoadDir(writeContracts(t, func(f map[string]string) { tt.edit(t, f) }))
			if err != nil {
				t.Fatalf("LoadDir: %v", err)
			}
			if got := s.Digest() == emb.Digest(); got != tt.same {
				t.Errorf("digest after %s: same = %v, want %v", tt.name, got, tt.same)
			}
		})
	}
}

// TestBrokenContracts feeds Load each class of broken contract the
// contracts package catches itself and checks the message names the rule,
// the contract and a position.
func TestBrokenContracts(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, f map[string]string)
		rule string
		want string // substring of the problem's text
	}{
		{"syntax error", func(t *testing.T, f map[string]string) {
			f["verbs.cue"] += "\nverb: broken: {"
		}, "cue", "verbs.cue"},
		{"does not validate: unknown kind", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `kind:    "timing"`, `kind:    "vibes"`)
		}, "cue", "kind"},
		{"does not validate: missing failure", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `failure: "apr logits --json does not print what its contract promises"`, ``)
		}, "cue", "failure"},
		{"does not validate: unknown field", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `summary: "every position's logits`, `colour: "blue"
	summary: "every position's logits`)
		}, "cue", "colour"},
		{"threshold missing", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `params: args: ["logits", "{model}", "--tokens", "1,2,3", "--json"]
		thresholds: violations: {op: "==", value: 0}`, `params: args: ["logits", "{model}", "--tokens", "1,2,3", "--json"]
		thresholds: {}`)
		}, "cue", "thresholds"},
		{"threshold with a bad op", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `thresholds: violations: {op: "==", value: 0}
		failure: "apr logits`, `thresholds: violations: {op: "about", value: 0}
		failure: "apr logits`)
		}, "cue", "op"},
		{"two contracts share an id (two files)", func(t *testing.T, f map[string]string) {
			f["extra.cue"] = "package contracts\n\nverb: logits: json: true\n"
		}, "duplicate", "verb.logits is declared again"},
		{"two falsifiers share an id", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `id:      "logits.fields"`, `id:      "tensors.fields"`)
		}, "duplicate", "tensors.fields"},
		{"binds a contract that does not exist", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `id:      "logits.fields"`, `id:      "logits.fields"
		binds:   "verb.nonesuch"`)
		}, "binds", "verb.nonesuch"},
		{"shape names an unknown hyper-parameter", func(t *testing.T, f map[string]string) {
			replace(t, f, "model_qwen2.cue", `shape: ["n_embd", "n_ff"]`, `shape: ["n_embd", "n_fff"]`)
		}, "expr", "n_fff"},
		{"shape does not parse", func(t *testing.T, f map[string]string) {
			replace(t, f, "model_qwen2.cue", `shape: ["n_embd", "n_ff"]`, `shape: ["n_embd", "n_ff *"]`)
		}, "expr", "n_ff *"},
		{"float in an expression", func(t *testing.T, f map[string]string) {
			replace(t, f, "model_qwen2.cue", `shape: ["n_embd", "n_ff"]`, `shape: ["n_embd", "rms_eps"]`)
		}, "expr", "rms_eps"},
		{"derived cycle", func(t *testing.T, f map[string]string) {
			replace(t, f, "model_qwen35.cue", `key_dim:    "ssm_d_state * ssm_n_group"`, `key_dim:    "conv_ch - 1"`)
		}, "expr", "cycle"},
		{"kernel layout disagrees with ggml", func(t *testing.T, f map[string]string) {
			replace(t, f, "kernels.cue", "block_bytes: 34", "block_bytes: 36")
		}, "kernel", "34 bytes"},
		{"timing stage names no field", func(t *testing.T, f map[string]string) {
			replace(t, f, "verbs.cue", `decode:  "decode_ms"`, `decode:  "decode_s"`)
		}, "verb", "decode_s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeContracts(t, func(f map[string]string) { tt.edit(t, f) })
			_, err := contracts.LoadDir(dir)
			if err == nil {
				t.Fatalf("LoadDir(%s): no error", tt.name)
			}
			var ce *contracts.Error
			if !errors.As(err, &ce) || !errors.Is(err, contracts.ErrInvalid) {
				t.Fatalf("LoadDir(%s): error %v is not a *contracts.Error", tt.name, err)
			}
			for _, p := range ce.Problems {
				if p.Rule == tt.rule && strings.Contains(p.String(), tt.want) {
					if p.Pos == "" && tt.rule != "cue" {
						t.Errorf("problem %q has no position", p)
					}
					return
				}
			}
			t.Errorf("LoadDir(%s) problems:\n%v\nwant one of rule %q mentioning %q", tt.name, err, tt.rule, tt.want)
		})
	}
}

func TestResolveKernel(t *testing.T) {
	s, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id, contract, op string
		err              bool
	}{
		{"kernel.q4_k", "kernel.q4_k", "", false},
		{"kernel.matvec.Q4_K.cpu.avx2", "kernel.q4_k", "matvec", false},
		{"kernel.matmul.IQ2_XXS.cpu.go", "kernel.iq2_xxs", "matmul", false},
		{"kernel.matvec.Q4_K", "kernel.q4_k", "matvec", false},
		{"kernel.softmax.Q4_K.cpu.go", "", "", true},
		{"kernel.matvec.Q9_K.cpu.go", "", "", true},
		{"kernel.matvec.Q8_K.cpu.go", "", "", true}, // Q8_K is an activation format: no matvec
		{"model.llama", "", "", true},
	}
	for _, tt := range tests {
		k, op, err := s.ResolveKernel(tt.id)
		if tt.err {
			if err == nil {
				t.Errorf("ResolveKernel(%q) = %s %s, want an error", tt.id, k.ID, op)
			}
			continue
		}
		if err != nil || k.ID != tt.contract || op != tt.op {
			t.Errorf("ResolveKernel(%q) = %v %q %v, want %s %q", tt.id, k, op, err, tt.contract, tt.op)
		}
	}
}

// fixtureModels returns every shared fixture model.
func fixtureModels(t *testing.T) []string {
	dir := testutil.Fixtures(t)
	var out []string
	for _, g := range []string{"models/*.gguf", "models/synth/*.gguf", "qwen35moe/models/*.gguf"} {
		m, _ := filepath.Glob(filepath.Join(dir, g))
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Fatalf("no fixture models under %s", dir)
	}
	return out
}

func TestModelContractsAcceptEveryFixture(t *testing.T) {
	s, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	archs := map[string]int{}
	for _, path := range fixtureModels(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, ok := s.Model(f.Architecture())
			if !ok {
				t.Fatalf("no model contract for %s", f.Architecture())
			}
			archs[m.Arch]++
			r, err := contracts.CheckModel(m, f)
			if err != nil {
				t.Fatalf("CheckModel: %v", err)
			}
			if len(r.Violations) > 0 {
				t.Errorf("CheckModel(%s, %s) violations:\n%v", m.ID, path, r.Violations)
			}
			if r.TensorsChecked != len(f.Tensors) {
				t.Errorf("CheckModel checked %d tensors, the file has %d", r.TensorsChecked, len(f.Tensors))
			}
		})
	}
	if diff := cmp.Diff(6, len(archs)); diff != "" {
		t.Errorf("fixtures covered architectures %v (-want +got count):\n%s", archs, diff)
	}
}

// TestModelContractRefuses writes variants of real fixtures with one thing
// broken, using apr's GGUF writer, and checks the contract names exactly it.
func TestModelContractRefuses(t *testing.T) {
	s, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	stories := testutil.Fixture(t, "models/stories260K.gguf")
	qwen35 := testutil.Fixture(t, "models/synth/qwen35-tiny-F32.gguf")
	type tensorEdit = func(t *gguf.TensorInfo, data []byte) (quant.Type, []int64, []byte, bool)
	keep := func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
		return t.Type, t.Shape, d, true
	}
	only := func(name string, fn tensorEdit) tensorEdit {
		return func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
			if t.Name != name {
				return keep(t, d)
			}
			return fn(t, d)
		}
	}
	tests := []struct {
		name    string
		src     string
		kv      func(b *gguf.Builder)
		edit    tensorEdit
		rule    string
		subject string
		want    string
	}{
		{"one tensor's shape changed", stories, nil,
			only("blk.2.ffn_up.weight", func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
				// [64 172] → [64 171]: one row fewer.
				return t.Type, []int64{64, 171}, d[:64*171*4], true
			}), contracts.RuleShape, "blk.2.ffn_up.weight", "[64 171], the contract wants [64 172]"},
		{"required tensor missing", stories, nil,
			only("blk.4.attn_norm.weight", func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
				return 0, nil, nil, false
			}), contracts.RuleMissing, "blk.4.attn_norm.weight", "required, absent"},
		{"norm stored quantized", stories, nil,
			only("output_norm.weight", func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
				return quant.Q8_0, t.Shape, make([]byte, 2*34), true
			}), contracts.RuleType, "output_norm.weight", "Q8_0 is not allowed"},
		{"extra tensor", stories, nil,
			func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
				if t.Name == "output_norm.weight" {
					return t.Type, t.Shape, d, true
				}
				return keep(t, d)
			}, "", "", ""}, // baseline: the rewrite alone changes nothing
		{"hyper-parameter missing", stories, func(b *gguf.Builder) { b.Delete("llama.embedding_length") },
			keep, contracts.RuleHParam, "llama.embedding_length", "required, absent"},
		{"hyper-parameter of the wrong type", stories, func(b *gguf.Builder) { b.Set("llama.block_count", gguf.V("five")) },
			keep, contracts.RuleHParam, "llama.block_count", "the contract wants uint"},
		{"hyper-parameter out of range", stories, func(b *gguf.Builder) {
			b.Set("llama.attention.layer_norm_rms_epsilon", gguf.V(float32(0.5)))
		}, keep, contracts.RuleHParam, "llama.attention.layer_norm_rms_epsilon", "above the maximum"},
		{"constraint broken", stories, func(b *gguf.Builder) { b.Set("llama.attention.head_count_kv", gguf.V(uint32(3))) },
			keep, contracts.RuleConstraint, "n_head % n_head_kv == 0", "n_head=8 n_head_kv=3"},
		{"wrong architecture", stories, func(b *gguf.Builder) { b.Set("general.architecture", gguf.V("qwen2")) },
			keep, contracts.RuleArch, "general.architecture", `is "qwen2"`},
		{"hybrid layer of the wrong kind", qwen35, nil,
			only("blk.1.attn_gate.weight", func(t *gguf.TensorInfo, d []byte) (quant.Type, []int64, []byte, bool) {
				return 0, nil, nil, false
			}), contracts.RuleMissing, "blk.1.attn_gate.weight", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := rewriteModel(t, tt.src, tt.kv, tt.edit)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			arch := "llama"
			if tt.src == qwen35 {
				arch = "qwen35"
			}
			m, _ := s.Model(arch)
			r, err := contracts.CheckModel(m, f)
			if err != nil {
				t.Fatalf("CheckModel: %v", err)
			}
			if tt.rule == "" {
				if len(r.Violations) != 0 {
					t.Errorf("CheckModel of an unchanged rewrite: %v", r.Violations)
				}
				return
			}
			if len(r.Violations) == 0 {
				t.Fatalf("CheckModel(%s): no violation, want %s on %s", tt.name, tt.rule, tt.subject)
			}
			v := r.Violations[0]
			if v.Rule != tt.rule || v.Subject != tt.subject || !strings.Contains(v.Msg, tt.want) {
				t.Errorf("CheckModel(%s) first violation %q, want rule %s subject %s mentioning %q (all: %v)", tt.name, v, tt.rule, tt.subject, tt.want, r.Violations)
			}
		})
	}
	t.Run("extra tensor in a layer of the other kind", func(t *testing.T) {
		// Give full-attention layer 3 a DeltaNet tensor.
		path := rewriteModel(t, qwen35, nil, keep)
		src, _ := gguf.Open(path)
		defer src.Close()
		b := gguf.NewBuilder()
		for _, e := range src.KV {
			b.Set(e.Key, e.Value)
		}
		for i := range src.Tensors {
			ti := &src.Tensors[i]
			if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, src.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.AddTensor("blk.3.ssm_a", quant.F32, []int64{4}, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "extra.gguf")
		if err := b.WriteFile(out); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, _ := s.Model("qwen35")
		r, err := contracts.CheckModel(m, f)
		if err != nil {
			t.Fatal(err)
		}
		want := []contracts.Violation{{Rule: contracts.RuleUnexpected, Subject: "blk.3.ssm_a",
			Msg: "is not a tensor the qwen35 contract describes (not in layer 3: (i + 1) % full_attn_interval != 0 is false)"}}
		if diff := cmp.Diff(want, r.Violations); diff != "" {
			t.Errorf("CheckModel violations mismatch (-want +got):\n%s", diff)
		}
	})
	_ = os.Remove
}

// TestQwen35MoEContractViolations: the qwen35moe contract names a missing
// shared-expert gate and a shared expert of another width than the header
// says, on variants of the real fixture.
func TestQwen35MoEContractViolations(t *testing.T) {
	s, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.Model("qwen35moe")
	src := testutil.Fixture(t, "qwen35moe/models/qwen35moe-tiny-Q8_0.gguf")
	for _, tt := range []struct {
		name string
		kv   func(b *gguf.Builder)
		drop string
		want contracts.Violation
	}{
		{"no shared gate", nil, "blk.2.ffn_gate_inp_shexp.weight",
			contracts.Violation{Rule: contracts.RuleMissing, Subject: "blk.2.ffn_gate_inp_shexp.weight"}},
		{"shared width", func(b *gguf.Builder) { b.Set("qwen35moe.expert_shared_feed_forward_length", gguf.V(uint32(128))) }, "",
			contracts.Violation{Rule: contracts.RuleShape, Subject: "blk.0.ffn_gate_shexp.weight"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := rewriteModel(t, src, tt.kv, func(ti *gguf.TensorInfo, data []byte) (quant.Type, []int64, []byte, bool) {
				return ti.Type, ti.Shape, data, ti.Name != tt.drop
			})
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := contracts.CheckModel(m, f)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range r.Violations {
				found = found || (v.Rule == tt.want.Rule && v.Subject == tt.want.Subject)
			}
			if !found {
				t.Errorf("CheckModel: violations %v, want one %s at %s", r.Violations, tt.want.Rule, tt.want.Subject)
			}
		})
	}
}
