package qa_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/qa"
	"github.com/aprqa/apr/qa/qatest"
	"github.com/aprqa/apr/verdict"
)

// TestStories260K is the acceptance run: every gate on ref and cpu. The
// model has no chat template (template is refused-optional) and no baseline
// exists (throughput is refused-optional); everything else passes.
func TestStories260K(t *testing.T) {
	path := testutil.Fixture(t, "models/stories260K.gguf")
	rep := gateRun(t, qa.Options{Model: path, Backends: []string{"ref", "cpu"}})
	optional := map[string]string{"template": qa.CodeNoTemplate, "throughput": qa.CodeNoBaseline}
	for _, g := range rep.Gates() {
		if code, ok := optional[g.Name]; ok {
			if g.Status != qa.StatusRefusedOptional || g.Code != code {
				t.Errorf("%s[%s] = %s %s (%s), want refused-optional %s", g.Name, g.Backend, g.Status, g.Code, g.Reason, code)
			}
			continue
		}
		if g.Status != "pass" {
			t.Errorf("%s[%s] = %s: %s", g.Name, g.Backend, g.Status, g.Reason)
		}
	}
	if !rep.Passed || rep.Executed != 11 { // serving on ref and cpu included
		t.Errorf("report passed=%v executed=%d (%s), want passed with 11 executed", rep.Passed, rep.Executed, rep.Summary)
	}
	for _, b := range []string{"ref", "cpu"} {
		if g := gate(t, rep, qa.GateServing, b); value(t, g, "max_batch").Value < 2 {
			t.Errorf("serving[%s]: the requests never shared a step: %+v", b, g.Values)
		}
	}
	if g := gate(t, rep, qa.GateGolden, "cpu"); value(t, g, "compared_tokens").Value < 64 {
		t.Errorf("golden_output[cpu] compared %v tokens of the stories260K golden, want at least 64", value(t, g, "compared_tokens").Value)
	}
}

// TestEveryGateOrderAndBackends: the gates come in the fixed order, the
// per-backend ones for each backend (parity and failclosed only for
// non-reference backends), and each carries the falsifier it was held to.
func TestEveryGateOrderAndBackends(t *testing.T) {
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"cpu", "ref"},
		Gates: []string{qa.GateTensorContract, qa.GateGolden, qa.GateParity, qa.GateFailClosed}})
	var got []string
	for _, g := range rep.Gates() {
		got = append(got, g.Name+"["+g.Backend+"]")
		if g.Falsifier == "" || !strings.HasPrefix(g.Falsifier, "llama.") {
			t.Errorf("%s[%s] falsifier %q, want llama.*", g.Name, g.Backend, g.Falsifier)
		}
		if g.Status != "pass" {
			t.Errorf("%s[%s] = %s: %s", g.Name, g.Backend, g.Status, g.Reason)
		}
	}
	want := "tensor_contract[] golden_output[ref] golden_output[cpu] parity[cpu] failclosed[cpu]"
	if strings.Join(got, " ") != want {
		t.Errorf("gates %v, want %s", got, want)
	}
}

func TestTensorContractPlanted(t *testing.T) {
	src := qatest.Synth(t, "llama")
	tests := []struct {
		name   string
		tensor string
		plant  func(d []byte) []byte
		want   string
	}{
		{"NaN", "blk.1.ffn_up.weight", func(d []byte) []byte { qatest.SetF32(d, 77, float32(math.NaN())); return d }, "is NaN"},
		{"+Inf", "token_embd.weight", func(d []byte) []byte { qatest.SetF32(d, 5, float32(math.Inf(1))); return d }, "is +Inf"},
		{"all zero", "blk.0.attn_norm.weight", func(d []byte) []byte { clear(d); return d }, "values are zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := qatest.Rewrite(t, src, nil, func(ti *gguf.TensorInfo, d []byte) []byte {
				if ti.Name == tt.tensor {
					return tt.plant(d)
				}
				return d
			})
			rep := gateRun(t, qa.Options{Model: path, Gates: []string{qa.GateTensorContract}})
			g := gate(t, rep, qa.GateTensorContract, "")
			wantStatus(t, g, "fail")
			if !strings.Contains(g.Reason, tt.tensor) || !strings.Contains(g.Reason, tt.want) {
				t.Errorf("tensor_contract reason %q, want it to name %s and %q", g.Reason, tt.tensor, tt.want)
			}
			if value(t, g, "bad_tensors").Value != 1 {
				t.Errorf("bad_tensors = %v, want 1", value(t, g, "bad_tensors").Value)
			}
			if rep.Passed {
				t.Errorf("report passed with a planted %s", tt.name)
			}
		})
	}
}

// TestScanTensorsReadsTheMapping: scanning a model allocates a small
// fraction of its size (the values are read through the mapping, a few rows
// at a time), and finds nothing in a clean file.
func TestScanTensorsReadsTheMapping(t *testing.T) {
	p, err := synth.FindPreset("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	p.NEmbd, p.NFF, p.HeadDim, p.NLayer = 256, 1024, 64, 4
	path := filepath.Join(t.TempDir(), "wide.gguf")
	if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.F32, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := os.Stat(path)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := falsify.ScanTensors(f)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > uint64(st.Size())/8 {
		t.Errorf("falsify.ScanTensors allocated %d bytes for a %d-byte file: it copies the data", alloc, st.Size())
	}
	if len(r.Findings) != 0 || r.Bytes == 0 || r.Tensors != len(f.Tensors) {
		t.Errorf("ScanTensors(clean) = %d tensors, %d bytes, findings %v", r.Tensors, r.Bytes, r.Findings)
	}
	t.Logf("scanned %d bytes, allocated %d", r.Bytes, alloc)
}

func TestMetadataPlanted(t *testing.T) {
	src := qatest.Synth(t, "llama")
	tests := []struct {
		name, key string
		val       gguf.Value
	}{
		{"rope base 1e15", "llama.rope.freq_base", gguf.V(float32(1e15))},
		{"rope base 0.5", "llama.rope.freq_base", gguf.V(float32(0.5))},
		{"norm epsilon 0.5", "llama.attention.layer_norm_rms_epsilon", gguf.V(float32(0.5))},
		{"context length 0", "llama.context_length", gguf.V(uint32(0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := qatest.Rewrite(t, src, func(b *gguf.Builder) { b.Set(tt.key, tt.val) }, nil)
			rep := gateRun(t, qa.Options{Model: path, Gates: []string{qa.GateMetadata}})
			g := gate(t, rep, qa.GateMetadata, "")
			wantStatus(t, g, "fail")
			if !strings.Contains(g.Reason, tt.key) {
				t.Errorf("metadata_plausibility reason %q does not name %s", g.Reason, tt.key)
			}
		})
	}
}

// setTokenType rewrites the type of the token spelled text.
func setTokenType(t *testing.T, src, text string, typ int32) string {
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := mustGet(t, f, "tokenizer.ggml.tokens").Strings()
	typesV := mustGet(t, f, "tokenizer.ggml.token_type")
	f.Close()
	types := make([]int32, typesV.Len())
	for i := range types {
		v, _ := typesV.Index(i).Int()
		types[i] = int32(v)
	}
	found := false
	for i, s := range toks {
		if s == text {
			types[i], found = typ, true
		}
	}
	if !found {
		t.Fatalf("no token %q", text)
	}
	return qatest.Rewrite(t, src, func(b *gguf.Builder) { b.Set("tokenizer.ggml.token_type", gguf.V(types)) }, nil)
}

func mustGet(t *testing.T, f *gguf.File, key string) gguf.Value {
	t.Helper()
	v, ok := f.Get(key)
	if !ok {
		t.Fatalf("no %s", key)
	}
	return v
}

// TestTokenizerPlanted: a GGUF that types <|im_start|> as a normal token
// splits it in every chat prompt: the tokenizer and template gates fail.
func TestTokenizerPlanted(t *testing.T) {
	path := setTokenType(t, qatest.Synth(t, "qwen2"), "<|im_start|>", 1)
	rep := gateRun(t, qa.Options{Model: path, Gates: []string{qa.GateTokenizer, qa.GateTemplate}})
	for _, name := range []string{qa.GateTokenizer, qa.GateTemplate} {
		g := gate(t, rep, name, "")
		wantStatus(t, g, "fail")
		if value(t, g, "split_control_tokens").Value < 1 || !strings.Contains(g.Reason, "<|im_start|>") {
			t.Errorf("%s: split_control_tokens %v, reason %q; want the split <|im_start|> named", name, value(t, g, "split_control_tokens").Value, g.Reason)
		}
	}
}

// TestTokenizerVocabularies: the tokenizer gate passes on real
// vocabularies (no false alarm on their markers and scripts).
func TestTokenizerVocabularies(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf",
		"ggml-vocab-starcoder.gguf", "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-falcon.gguf", "qwen3-tokenizer.gguf"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, "vocab", name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			set, err := contracts.Embedded()
			if err != nil {
				t.Fatal(err)
			}
			fz, ok := set.Falsifier("llama.tokenizer")
			if !ok {
				t.Fatal("no llama.tokenizer falsifier")
			}
			g, err := qa.TokenizerGate(f, fz)
			if err != nil {
				t.Skipf("SKIP (not a pass): %v", err)
			}
			if g.Verdict != verdict.Pass {
				t.Errorf("tokenizer gate on %s = %s: %s", name, g.Status, g.Reason)
			}
			t.Logf("%s: %v", name, g.Values)
		})
	}
}

const noSystemTemplate = `{%- for message in messages -%}{%- if message['role'] != 'system' -%}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endif -%}{%- endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}`

func TestTemplateDropsSystemPrompt(t *testing.T) {
	path := qatest.Rewrite(t, qatest.Synth(t, "qwen3"), func(b *gguf.Builder) {
		b.Set("tokenizer.chat_template", gguf.V(noSystemTemplate))
	}, nil)
	rep := gateRun(t, qa.Options{Model: path, Gates: []string{qa.GateTemplate}})
	g := gate(t, rep, qa.GateTemplate, "")
	wantStatus(t, g, "fail")
	if value(t, g, "missing_messages").Value != 1 || !strings.Contains(g.Reason, "system") {
		t.Errorf("missing_messages %v, reason %q; want the system message named", value(t, g, "missing_messages").Value, g.Reason)
	}
}

// TestGoldenDiffers: a golden whose token differs at one confident step
// fails golden_output on every backend.
func TestGoldenDiffers(t *testing.T) {
	path := qatest.Synth(t, "llama")
	o := qa.Options{Model: path, Backends: []string{"ref", "cpu"}, Gates: []string{qa.GateGolden}}
	qa.WithGolden(&o, func(sha string) (*golden.File, bool, error) {
		g, ok, err := golden.Lookup(sha)
		if !ok || err != nil {
			t.Fatalf("no golden for the default llama (%s): %v", sha, err)
		}
		c := *g
		c.Cases = append([]golden.Case(nil), g.Cases...)
		k := &c.Cases[1]
		k.TokenIDs = append([]int32(nil), k.TokenIDs...)
		k.TokenIDs[1]++ // margin 0.117: a confident step
		return &c, true, nil
	})
	rep := gateRun(t, o)
	for _, b := range []string{"ref", "cpu"} {
		g := gate(t, rep, qa.GateGolden, b)
		wantStatus(t, g, "fail")
		if !strings.Contains(g.Reason, "step 1") {
			t.Errorf("golden_output[%s] reason %q, want the differing step named", b, g.Reason)
		}
	}
}

func TestParityPerturbedEngine(t *testing.T) {
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"ref", qatest.Perturbed},
		Gates: []string{qa.GateParity}})
	g := gate(t, rep, qa.GateParity, qatest.Perturbed)
	wantStatus(t, g, "fail")
	if c := value(t, g, "min_cosine").Value; c >= 0.99999 || c < 0.99 {
		t.Errorf("min_cosine %v: the perturbation should give about 0.999", c)
	}
	if rep.Passed {
		t.Error("the report passed with a perturbed engine")
	}
}

// TestReferenceCannotRun: with a reference that fails, parity refuses
// (never passes) and failclosed refuses (nothing can be proven).
func TestReferenceCannotRun(t *testing.T) {
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"cpu"}, Reference: qatest.Broken,
		Gates: []string{qa.GateParity, qa.GateFailClosed}})
	for _, name := range []string{qa.GateParity, qa.GateFailClosed} {
		g := gate(t, rep, name, "cpu")
		wantStatus(t, g, "refused")
		if g.Code != qa.CodeReference {
			t.Errorf("%s code %q (%s), want %s", name, g.Code, g.Reason, qa.CodeReference)
		}
	}
	if rep.Passed {
		t.Error("the report passed without a reference")
	}
}

// TestFailClosedCatchesFallback: a parity gate that falls back to the
// backend itself when the reference fails passes with the real reference,
// and failclosed catches it.
func TestFailClosedCatchesFallback(t *testing.T) {
	o := qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"cpu"}, Gates: []string{qa.GateParity, qa.GateFailClosed}}
	qa.WithSloppyParity(&o)
	rep := gateRun(t, o)
	wantStatus(t, gate(t, rep, qa.GateParity, "cpu"), "pass")
	g := gate(t, rep, qa.GateFailClosed, "cpu")
	wantStatus(t, g, "fail")
	if n := value(t, g, "non_refusals").Value; n != 5 {
		t.Errorf("non_refusals = %v, want 5 (every probe passed)", n)
	}
}

// TestTimingDelayInWrongStage: a pipeline that reports the decode stage's
// time in the prefill field fails the timing gate (the contract's run.timing
// falsifier, run by falsify's timing kind over a planted pipeline).
func TestTimingDelayInWrongStage(t *testing.T) {
	reg := falsify.NewRegistry()
	model := qatest.Synth(t, "llama")
	reg.Register("timing", falsify.KindTiming, func(ctx context.Context, c *falsify.Check) error {
		v, _ := c.Set.Verb("run")
		run := func(ctx context.Context, plant map[string]time.Duration) (map[string]float64, error) {
			pd := map[generate.Stage]time.Duration{}
			for st, d := range plant {
				if st == string(generate.StageDecode) {
					st = string(generate.StagePrefill) // the planted defect
				}
				pd[generate.Stage(st)] = d
			}
			r, err := generate.Run(ctx, generate.Options{Model: model, Backend: "ref", Prompt: "Once upon a time", Raw: true,
				MaxTokens: 4, IgnoreEOS: true, PlantDelay: pd})
			return map[string]float64{"load_ms": r.LoadMS, "h2d_ms": r.H2DMS, "f2_ms": r.F2MS, "prefill_ms": r.PrefillMS, "decode_ms": r.DecodeMS}, err
		}
		return falsify.CheckTiming(ctx, c, run, v.Timing.Stages, 120*time.Millisecond, 2, 1)
	}, falsify.Needs(falsify.NeedModel))
	rep := gateRun(t, qa.Options{Model: model, Backends: []string{"ref"}, Gates: []string{qa.GateTiming}, Registry: reg})
	g := gate(t, rep, qa.GateTiming, "ref")
	wantStatus(t, g, "fail")
	if value(t, g, "max_leak_ms").Value < 100 || value(t, g, "max_shortfall_ms").Value < 100 {
		t.Errorf("timing values %+v: want the 120 ms delay as both a leak and a shortfall", g.Values)
	}
}

// TestThroughputRatchet: no baseline is refused-optional; --accept-baseline
// records one (refused-optional: nothing compared); the same speed passes; a
// three times slower engine fails and does not lower the baseline. The runs
// are planted (WithRun) with exact stage times, so the test decides the same
// way on a loaded CI machine; the real measurement path and its noise are
// covered by TestThroughputNoisy and apr qa's own runs.
func TestThroughputRatchet(t *testing.T) {
	file := filepath.Join(t.TempDir(), "b.json")
	o := qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"cpu"}, Gates: []string{qa.GateThroughput},
		BaselineFile: file}
	slow := 1.0 // how many times slower than the first recorded speed
	qa.WithRun(&o, func(ctx context.Context, g generate.Options) (generate.Result, error) {
		time.Sleep(time.Millisecond) // keep min_run_ms from spinning
		return generate.Result{Backend: g.Backend, PromptTokens: 20, TokensOut: g.MaxTokens,
			PrefillMS: 4 * slow, DecodeMS: float64(g.MaxTokens-1) * 2 * slow}, nil
	})

	// No baseline: refused-optional, and nothing written.
	g := gate(t, gateRun(t, o), qa.GateThroughput, "cpu")
	wantStatus(t, g, qa.StatusRefusedOptional)
	if _, err := os.Stat(file); err == nil {
		t.Fatal("a baseline was written without --accept-baseline")
	}
	// --accept-baseline records one: recorded, not passed — nothing was compared.
	o.AcceptBaseline = true
	g = gate(t, gateRun(t, o), qa.GateThroughput, "cpu")
	wantStatus(t, g, qa.StatusRefusedOptional)
	if g.Code != qa.CodeRecorded {
		t.Fatalf("throughput with --accept-baseline and no baseline: code %q (%s), want %s", g.Code, g.Reason, qa.CodeRecorded)
	}
	// The same speed again: pass.
	o.AcceptBaseline = false
	g = gate(t, gateRun(t, o), qa.GateThroughput, "cpu")
	wantStatus(t, g, "pass")
	bl, err := falsify.LoadBaselines(file)
	if err != nil || len(bl.Entries) != 1 {
		t.Fatalf("baselines after --accept-baseline: %v, %v", bl, err)
	}
	recorded, _ := os.ReadFile(file)

	// Three times slower: fail, and the baseline does not move down even
	// with --accept-baseline.
	slow = 3
	o.AcceptBaseline = true
	g = gate(t, gateRun(t, o), qa.GateThroughput, "cpu")
	wantStatus(t, g, "fail")
	if r := value(t, g, "decode_ratio_point").Value; math.Abs(r-1.0/3) > 1e-9 {
		t.Errorf("decode_ratio %v, want 1/3", r)
	}
	if now, _ := os.ReadFile(file); string(now) != string(recorded) {
		t.Error("a slower run changed the baseline")
	}
}

// TestThroughputNoisy: runs whose speed swings with the machine's load are
// refused as too noisy, and no baseline is recorded from them.
func TestThroughputNoisy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "b.json")
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{qatest.Noisy},
		Gates: []string{qa.GateThroughput}, BaselineFile: file, AcceptBaseline: true})
	g := gate(t, rep, qa.GateThroughput, qatest.Noisy)
	wantStatus(t, g, "refused")
	if g.Code != qa.CodeTooNoisy {
		t.Errorf("throughput code %q (%s), want %s", g.Code, g.Reason, qa.CodeTooNoisy)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("a baseline was recorded from noisy runs")
	}
}

func TestThroughputBaselineFileUnreadable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"cpu"},
		Gates: []string{qa.GateThroughput}, BaselineFile: file, AcceptBaseline: true})
	g := gate(t, rep, qa.GateThroughput, "cpu")
	wantStatus(t, g, "refused")
	if b, _ := os.ReadFile(file); string(b) != "{not json" {
		t.Error("--accept-baseline overwrote an unreadable baseline file")
	}
}

func TestBackendUnavailable(t *testing.T) {
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"ref", "nonesuch"},
		Gates: []string{qa.GateGolden, qa.GateParity}})
	for _, name := range []string{qa.GateGolden, qa.GateParity} {
		g := gate(t, rep, name, "nonesuch")
		wantStatus(t, g, "refused")
		if g.Code != qa.CodeBackend || !strings.Contains(g.Reason, `"nonesuch" is not available`) {
			t.Errorf("%s[nonesuch] = %s %q, want refused %s naming the backend", name, g.Code, g.Reason, qa.CodeBackend)
		}
	}
	if rep.Passed {
		t.Error("the report passed with a forced backend that is not available")
	}
}

// TestNoContractRefuses: a model whose architecture has no contract has
// every gate refused by name, never passed.
func TestNoContractRefuses(t *testing.T) {
	path := qatest.Rewrite(t, qatest.Synth(t, "llama"), func(b *gguf.Builder) {
		b.Set("general.architecture", gguf.V("nonesuch"))
	}, nil)
	rep := gateRun(t, qa.Options{Model: path, Backends: []string{"ref"},
		Gates: []string{qa.GateTensorContract, qa.GateTokenizer, qa.GateGolden}})
	for _, g := range rep.Gates() {
		wantStatus(t, g, "refused")
		if g.Code != qa.CodeNoContract || !strings.Contains(g.Reason, `"nonesuch"`) {
			t.Errorf("%s: code %q reason %q, want %s naming the architecture", g.Name, g.Code, g.Reason, qa.CodeNoContract)
		}
	}
	if rep.Passed || rep.Executed != 0 {
		t.Errorf("report %s: want not passed, nothing executed", rep.Summary)
	}
}

func TestMinGates(t *testing.T) {
	path := qatest.Synth(t, "llama")
	for _, tt := range []struct {
		min  int
		pass bool
	}{{1, true}, {2, true}, {3, false}} {
		rep := gateRun(t, qa.Options{Model: path, Gates: []string{qa.GateTensorContract, qa.GateMetadata}, MinGates: tt.min})
		if rep.Passed != tt.pass || rep.Executed != 2 {
			t.Errorf("--min-gates %d: passed %v executed %d (%s), want passed %v", tt.min, rep.Passed, rep.Executed, rep.Summary, tt.pass)
		}
	}
}

// TestDefaultModels: with no model, qa gates the tiny model of every
// architecture.
func TestDefaultModels(t *testing.T) {
	rep := gateRun(t, qa.Options{Gates: []string{qa.GateMetadata, qa.GateGolden}, Backends: []string{"ref"}})
	var archs []string
	for _, m := range rep.Models {
		archs = append(archs, m.Arch)
		if m.Synth == "" {
			t.Errorf("model %s: no record of how it was synthesized", m.Path)
		}
	}
	if strings.Join(archs, " ") != strings.Join(qa.DefaultArchs, " ") {
		t.Errorf("default models %v, want %v", archs, qa.DefaultArchs)
	}
	if want := 2 * len(qa.DefaultArchs); !rep.Passed || rep.Counts.Pass != want {
		t.Errorf("default models: %s; want %d passes (golden_output[ref] against the embedded goldens)", rep.Summary, want)
	}
}

func TestReportOutcome(t *testing.T) {
	path := qatest.Synth(t, "llama")
	tests := []struct {
		name string
		o    qa.Options
		want verdict.Verdict
	}{
		{"passes", qa.Options{Model: path, Backends: []string{"ref"}, Gates: []string{qa.GateTensorContract}}, verdict.Pass},
		{"a failing gate", qa.Options{Model: path, Backends: []string{"ref", qatest.Perturbed}, Gates: []string{qa.GateParity}}, verdict.Fail},
		{"a refusal that counts", qa.Options{Model: path, Backends: []string{"nonesuch"}, Gates: []string{qa.GateGolden}}, verdict.Refused},
		{"too few executed", qa.Options{Model: path, Gates: []string{qa.GateTensorContract}, MinGates: 5}, verdict.Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := gateRun(t, tt.o)
			o := rep.Outcome()
			if o.Verdict != tt.want || (o.Verdict == verdict.Refused) != (o.RemovedBy != "") || (o.Verdict != verdict.Pass && o.Reason == "") {
				t.Errorf("Outcome() = %s, %q, %q; want %s (a refuser exactly when refused, a reason unless passed)", o.Verdict, o.RemovedBy, o.Reason, tt.want)
			}
		})
	}
}

// TestGPUCPUJudge: the gpu_cpu gate holds its backend to the engine its
// contract names in params.against, not to the reference (qa sets
// params.reference on every falsifier, which once made gpu_cpu a second
// parity gate). Planted: a contract whose gpu_cpu holds cpu against the
// perturbed engine must fail where parity (cpu against ref) passes, even
// judged beyond the numerics' gap (the engines' numerics differ there).
func TestGPUCPUJudge(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(testutil.RepoRoot(t), "contracts")
	files, err := filepath.Glob(filepath.Join(src, "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no contracts under %s: %v", src, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if filepath.Base(f) == "common.cue" {
			if !strings.Contains(s, `backend: "cuda", against: "cpu"`) {
				t.Fatal(`common.cue no longer holds gpu_cpu's backend: "cuda", against: "cpu"`)
			}
			s = strings.ReplaceAll(s, `backend: "cuda", against: "cpu"`, `backend: "cpu", against: "`+qatest.Perturbed+`"`)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := contracts.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := gateRun(t, qa.Options{Model: qatest.Synth(t, "llama"), Backends: []string{"cpu"}, Contracts: set,
		Gates: []string{qa.GateParity, qa.GateGPUCPU}})
	wantStatus(t, gate(t, rep, qa.GateParity, "cpu"), "pass")
	g := gate(t, rep, qa.GateGPUCPU, "cpu")
	wantStatus(t, g, "fail")
	if c := value(t, g, "min_cosine").Value; c >= 0.99999 {
		t.Errorf("gpu_cpu min_cosine %v: cpu against the perturbed engine should be about 0.999", c)
	}
	// The contract gives the two engines different numerics (cpu: ggml;
	// the perturbed engine, unnamed there: plain), so the gate judged them
	// beyond the reference's own gap between those numerics, and says so.
	if !strings.Contains(strings.Join(g.Details, "\n"), "judged beyond the numerics' own gap: the reference in ggml numerics against the reference in plain numerics") {
		t.Errorf("gpu_cpu's details do not report the numerics' gap it judged beyond:\n%s", strings.Join(g.Details, "\n"))
	}
}
