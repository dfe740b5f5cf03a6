package falsify_test

// One planted-defect test per kind: each plants the defect its kind hunts
// and asserts the verdict is fail (or refused), never pass.

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/verdict"
)

func notPass(t *testing.T, r falsify.Result, want verdict.Verdict, reason string) {
	t.Helper()
	if r.Verdict != want || !strings.Contains(r.Reason, reason) {
		t.Errorf("%s: verdict %s (%s), want %s mentioning %q", r.ID, r.Verdict, r.Reason, want, reason)
	}
}

// property: a Q8_0 kernel with its scale's sign flipped.
func TestPlantedPropertyFlippedScale(t *testing.T) {
	flipped := func(typ quant.Type, src []byte, dst []float32) error {
		if err := quant.Dequantize(typ, src, dst); err != nil {
			return err
		}
		for i := range dst {
			dst[i] = -dst[i] // -d·q: the scale's sign bit flipped
		}
		return nil
	}
	reg := falsify.NewRegistry()
	reg.Register("dequant_exact", falsify.KindProperty, falsify.DequantExact(flipped),
		falsify.Thresholds("mismatches"), falsify.Refs("independent dequantizer"))
	r := runOne(t, reg, embedded(t), "q8_0.dequant_exact", "", "")
	notPass(t, r, verdict.Fail, "mismatches = 1")
	if r.Seed == nil || *r.Seed != 1 {
		t.Errorf("property result seed = %v, want 1 recorded so that the failure reproduces", r.Seed)
	}
	if len(r.Details) == 0 || !strings.Contains(strings.Join(r.Details, "\n"), "failing case") {
		t.Errorf("property result details %q do not name the failing case", r.Details)
	}
	// The real dequantizer passes the same check with the same seed.
	if r := runOne(t, fullRegistry(), embedded(t), "q8_0.dequant_exact", "", ""); r.Verdict != verdict.Pass {
		t.Errorf("q8_0.dequant_exact on quant.Dequantize: %s (%s)", r.Verdict, r.Reason)
	}
}

// property: a layout defect (a dequantizer that reads one block too few).
func TestPlantedPropertyShortRead(t *testing.T) {
	short := func(typ quant.Type, src []byte, dst []float32) error {
		if len(dst) <= 32 {
			return quant.Dequantize(typ, src, dst)
		}
		return quant.Dequantize(typ, src[:len(src)-34], dst[:len(dst)-32]) // last block never written
	}
	reg := falsify.NewRegistry()
	reg.Register("dequant_layout", falsify.KindProperty, falsify.DequantLayout(short), falsify.Thresholds("failures"))
	r := runOne(t, reg, embedded(t), "q8_0.dequant_layout", "", "")
	notPass(t, r, verdict.Fail, "failures = 1")
}

// property: a quantizer whose scale is off by a factor of two.
func TestPlantedPropertyQuantizerScale(t *testing.T) {
	half := func(typ quant.Type, src []float32, dst []byte) error {
		if err := quant.Quantize(typ, src, dst); err != nil {
			return err
		}
		for b := 0; b+34 <= len(dst); b += 34 { // Q8_0 blocks: halve d
			d := quant.FP16ToFP32(binary.LittleEndian.Uint16(dst[b:]))
			binary.LittleEndian.PutUint16(dst[b:], quant.FP32ToFP16(d/2))
		}
		return nil
	}
	reg := falsify.NewRegistry()
	reg.Register("quant_roundtrip", falsify.KindProperty, falsify.QuantRoundtrip(half, quant.Dequantize), falsify.Thresholds("max_nmse"))
	r := runOne(t, reg, embedded(t), "q8_0.quant_roundtrip", "", "")
	notPass(t, r, verdict.Fail, "max_nmse")
}

// timing: a pipeline that sleeps prefill's planted delay inside decode.
func TestPlantedTimingWrongStage(t *testing.T) {
	stages := []string{"load", "h2d", "f2", "prefill", "decode"}
	fake := func(misplace, twice bool) falsify.TimedRun {
		return func(ctx context.Context, plant map[string]time.Duration) (map[string]float64, error) {
			out := map[string]float64{}
			for _, s := range stages {
				d := plant[s]
				if misplace && s == "prefill" {
					d = 0
				}
				if misplace && s == "decode" {
					d += plant["prefill"]
				}
				if twice && s == "load" {
					d *= 2 // the load stage's timer also covers its planted sleep twice
				}
				out[s+"_ms"] = 10 + float64(d)/float64(time.Millisecond)
			}
			return out, nil
		}
	}
	for _, tt := range []struct {
		name            string
		misplace, twice bool
		want            verdict.Verdict
	}{
		{"honest pipeline", false, false, verdict.Pass},
		{"delay in the wrong stage", true, false, verdict.Fail},
		{"delay counted twice", false, true, verdict.Fail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := falsify.NewRegistry()
			reg.Register("timing", falsify.KindTiming, func(ctx context.Context, c *falsify.Check) error {
				return falsify.CheckTiming(ctx, c, fake(tt.misplace, tt.twice),
					map[string]string{"load": "load_ms", "h2d": "h2d_ms", "f2": "f2_ms", "prefill": "prefill_ms", "decode": "decode_ms"},
					100*time.Millisecond, 3, 2)
			}, falsify.Thresholds("max_leak_ms", "max_shortfall_ms", "max_excess_ms"))
			r := runOne(t, reg, embedded(t), "run.timing", "", "")
			if r.Verdict != tt.want {
				t.Fatalf("run.timing on a %s: %s (%s), want %s", tt.name, r.Verdict, r.Reason, tt.want)
			}
			if tt.misplace && (r.Measured["max_leak_ms"] != 100 || r.Measured["max_shortfall_ms"] != 100) {
				t.Errorf("misplaced delay measured leak %v shortfall %v, want 100 and 100", r.Measured["max_leak_ms"], r.Measured["max_shortfall_ms"])
			}
			if tt.twice && r.Measured["max_excess_ms"] != 100 {
				t.Errorf("doubled delay measured excess %v, want 100", r.Measured["max_excess_ms"])
			}
		})
	}
}

// timing: a stall that recurs in one configuration's runs (a background
// hash of a large file landing in the load stage of every run planted in
// decode, over the first two attempts) is noise, not a leak: the third
// attempt's eight samples find its fastest runs. Without the escalation
// (two samples an attempt) it would fail; a misplaced delay, which is in
// every run, still fails with it (TestPlantedTimingWrongStage).
func TestTimingRecurringStall(t *testing.T) {
	stages := []string{"decode", "f2", "h2d", "load", "prefill"} // CheckTiming's order: sorted
	calls := 0
	run := func(ctx context.Context, plant map[string]time.Duration) (map[string]float64, error) {
		n := calls
		calls++
		out := map[string]float64{}
		for _, s := range stages {
			out[s+"_ms"] = 10 + float64(plant[s])/float64(time.Millisecond)
		}
		// Configurations in turn: baseline, then decode, f2, h2d, load,
		// prefill planted; attempts 1 and 2 take 2·6 + 4·6 = 36 runs.
		if n%6 == 1 && n < 36 {
			out["load_ms"] += 200
		}
		return out, nil
	}
	reg := falsify.NewRegistry()
	reg.Register("timing", falsify.KindTiming, func(ctx context.Context, c *falsify.Check) error {
		return falsify.CheckTiming(ctx, c, run,
			map[string]string{"load": "load_ms", "h2d": "h2d_ms", "f2": "f2_ms", "prefill": "prefill_ms", "decode": "decode_ms"},
			100*time.Millisecond, 3, 2)
	}, falsify.Thresholds("max_leak_ms", "max_shortfall_ms", "max_excess_ms"))
	r := runOne(t, reg, embedded(t), "run.timing", "", "")
	if r.Verdict != verdict.Pass {
		t.Fatalf("run.timing with a stall in two attempts' decode runs: %s (%s), want pass", r.Verdict, r.Reason)
	}
	if r.Measured["attempts"] != 3 || r.Measured["samples"] != 8 || r.Measured["max_leak_ms"] != 0 {
		t.Errorf("measured attempts %v samples %v leak %v, want 3, 8 and 0", r.Measured["attempts"], r.Measured["samples"], r.Measured["max_leak_ms"])
	}
	if calls != 2*6+4*6+8*6 {
		t.Errorf("%d runs, want %d", calls, 2*6+4*6+8*6)
	}
}

// timing: the real pipeline (engine/generate on the reference engine).
func TestTimingRealPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (not a pass): runs the model a dozen times; not in -short")
	}
	model := testutil.Fixture(t, "models/stories260K.gguf")
	r := runOne(t, fullRegistry(), embedded(t), "run.timing", model, "")
	if r.Verdict != verdict.Pass {
		t.Errorf("run.timing on stories260K: %s (%s) %v", r.Verdict, r.Reason, r.Details)
	}
}

// cosine: an engine whose logits are wrong at one position, NaN, or zero.
func TestPlantedCosine(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	want := make([][]float32, 6)
	for p := range want {
		want[p] = make([]float32, 50)
		for i := range want[p] {
			want[p][i] = float32(rng.NormFloat64())
		}
	}
	clone := func() [][]float32 {
		out := make([][]float32, len(want))
		for p := range want {
			out[p] = append([]float32(nil), want[p]...)
		}
		return out
	}
	tests := []struct {
		name   string
		got    func() [][]float32
		want   verdict.Verdict
		reason string
	}{
		{"same logits", clone, verdict.Pass, ""},
		{"one position reversed", func() [][]float32 {
			g := clone()
			for i, j := 0, len(g[4])-1; i < j; i, j = i+1, j-1 {
				g[4][i], g[4][j] = g[4][j], g[4][i]
			}
			return g
		}, verdict.Fail, "min_cosine"},
		{"a NaN", func() [][]float32 { g := clone(); g[2][7] = float32(math.NaN()); return g }, verdict.Fail, "NaN"},
		{"a zero row", func() [][]float32 { g := clone(); g[1] = make([]float32, 50); return g }, verdict.Fail, "zero vector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := falsify.NewRegistry()
			reg.Register("logits_parity", falsify.KindCosine, func(ctx context.Context, c *falsify.Check) error {
				return falsify.CompareLogits(c, tt.got(), want, nil)
			}, falsify.Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"))
			r := runOne(t, reg, embedded(t), "llama.logits_parity", testutil.Fixture(t, "models/stories260K.gguf"), "")
			if r.Verdict != tt.want || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("llama.logits_parity with %s: %s (%s), want %s mentioning %q", tt.name, r.Verdict, r.Reason, tt.want, tt.reason)
			}
		})
	}
}

// cosine, on real data: the reference engine's logits with one position
// sign-flipped, against llama.cpp's recorded logits.
func TestPlantedCosineRealLogits(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	model := filepath.Join(fixtures, "models", "stories260K.gguf")
	reg := falsify.NewRegistry()
	reg.Register("logits_parity", falsify.KindCosine, falsify.LogitsParity(func(ctx context.Context, m, b string, toks []int32) ([][]float32, error) {
		lg, err := realLogits(ctx, m, b, toks)
		if err == nil {
			for i := range lg[10] {
				lg[10][i] = -lg[10][i]
			}
		}
		return lg, err
	}, nil), falsify.Needs(falsify.NeedModel, falsify.NeedFixtures), falsify.Thresholds("min_cosine", "mean_cosine"), falsify.Refs("llama.cpp logits"))
	r := runOne(t, reg, embedded(t), "llama.logits_parity", model, fixtures)
	notPass(t, r, verdict.Fail, "min_cosine")
	if !strings.Contains(strings.Join(r.Details, "\n"), "worst position 10") {
		t.Errorf("details %q do not name the worst position 10", r.Details)
	}
	// And unplanted it passes.
	if r := runOne(t, fullRegistry(), embedded(t), "llama.logits_parity", model, fixtures); r.Verdict != verdict.Pass {
		t.Errorf("llama.logits_parity on the reference engine: %s (%s)", r.Verdict, r.Reason)
	}
}

// failclosed: a check that ignores its reference's failure and passes anyway.
func TestPlantedFailClosed(t *testing.T) {
	careless := func(ctx context.Context, c *falsify.Check) error {
		_ = c.CallRef("independent dequantizer", func() error { return nil }) // error ignored
		c.Measure("mismatches", 0)
		return nil
	}
	reg := fullRegistry()
	reg2 := falsify.NewRegistry()
	for _, code := range reg.Codes() {
		if code.ID == "dequant_exact" {
			reg2.Register(code.ID, code.Kind, careless, falsify.Thresholds("mismatches"), falsify.Refs("independent dequantizer"))
			continue
		}
		reg2.Register(code.ID, code.Kind, code.Run, falsify.Thresholds(code.Thresholds...), falsify.Params(code.Params...),
			falsify.Refs(code.Refs...), falsify.Needs(code.Needs...), falsify.AppliesWhen(code.Applies))
	}
	r := runOne(t, reg2, embedded(t), "f32.dequant_exact.failclosed", "", "")
	notPass(t, r, verdict.Fail, "non_refusals = 2")
	// The real check refuses when its reference is withdrawn, so its
	// failclosed falsifier passes; the target itself, run normally, passes.
	if r := runOne(t, reg, embedded(t), "f32.dequant_exact.failclosed", "", ""); r.Verdict != verdict.Pass {
		t.Errorf("f32.dequant_exact.failclosed on the real code: %s (%s) %v", r.Verdict, r.Reason, r.Details)
	}
}

// A model object without a reviewed golden: the golden falsifier does not
// apply, and named explicitly it is refused, never passed.
func TestGoldenMissingRefuses(t *testing.T) {
	model := testutil.Fixture(t, "models/llama-2-tiny-random.gguf")
	r := runOne(t, fullRegistry(), embedded(t), "llama.greedy_golden", model, "")
	notPass(t, r, verdict.Refused, "no reviewed golden")
	// With the store withdrawn, the check itself refuses: its failclosed twin passes.
	stories := testutil.Fixture(t, "models/stories260K.gguf")
	if r := runOne(t, fullRegistry(), embedded(t), "llama.greedy_golden.failclosed", stories, ""); r.Verdict != verdict.Pass {
		t.Errorf("llama.greedy_golden.failclosed: %s (%s) %v", r.Verdict, r.Reason, r.Details)
	}
}

// golden: a golden that differs from what the engine generates.
func TestPlantedGoldenDiffers(t *testing.T) {
	model := testutil.Fixture(t, "models/stories260K.gguf")
	altered := func(sha string) (*golden.File, bool, error) {
		g, ok, err := golden.Lookup(sha)
		if !ok || err != nil {
			return g, ok, err
		}
		c := *g
		c.Cases = append([]golden.Case(nil), g.Cases...)
		c.Cases[0].TokenIDs = append([]int32(nil), g.Cases[0].TokenIDs...)
		c.Cases[0].TokenIDs[1]++
		return &c, true, nil
	}
	gen := func(ctx context.Context, m, b, prompt string, n int) ([]int32, error) {
		res, err := generate.Run(ctx, generate.Options{Model: m, Backend: b, Prompt: prompt, Raw: true, MaxTokens: n, IgnoreEOS: true})
		return res.TokenIDs, err
	}
	for _, tt := range []struct {
		name   string
		lookup falsify.GoldenLookup
		want   verdict.Verdict
	}{{"reviewed golden", golden.Lookup, verdict.Pass}, {"golden differs", altered, verdict.Fail}} {
		t.Run(tt.name, func(t *testing.T) {
			reg := falsify.NewRegistry()
			reg.Register("greedy_golden", falsify.KindGolden, falsify.GreedyGoldenCheck(gen, tt.lookup),
				falsify.Thresholds("mismatched_cases"), falsify.Refs("golden store"))
			r := runOne(t, reg, embedded(t), "llama.greedy_golden", model, "")
			if r.Verdict != tt.want {
				t.Fatalf("llama.greedy_golden with the %s: %s (%s)", tt.name, r.Verdict, r.Reason)
			}
			if tt.want == verdict.Fail && !strings.Contains(strings.Join(r.Details, "\n"), "case 0 (\"Once upon a time\"): step 1") {
				t.Errorf("details %q do not name the first differing step", r.Details)
			}
		})
	}
}

// golden: ggml's dequantized values with one value changed.
func TestPlantedDequantGolden(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	off := func(typ quant.Type, src []byte, dst []float32) error {
		err := quant.Dequantize(typ, src, dst)
		dst[777] = math.Nextafter32(dst[777], 1e9) // one ulp off
		return err
	}
	reg := falsify.NewRegistry()
	reg.Register("dequant_golden", falsify.KindGolden, falsify.DequantGolden(off),
		falsify.Needs(falsify.NeedFixtures), falsify.Thresholds("mismatches"), falsify.Refs("golden file"))
	r := runOne(t, reg, embedded(t), "q4_k.dequant_golden", "", fixtures)
	notPass(t, r, verdict.Fail, "mismatches = 1")
}

// shape: a model with one tensor's shape changed, written with apr's writer.
func TestPlantedShape(t *testing.T) {
	src := testutil.Fixture(t, "models/stories260K.gguf")
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	for _, kv := range f.KV {
		b.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		shape, data := ti.Shape, f.Data(ti)
		if ti.Name == "blk.1.attn_k.weight" { // [64 32] → [64 31]
			shape, data = []int64{64, 31}, data[:64*31*4]
		}
		if err := b.AddTensor(ti.Name, ti.Type, shape, data); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := b.WriteFile(bad); err != nil {
		t.Fatal(err)
	}
	r := runOne(t, fullRegistry(), embedded(t), "llama.tensor_contract", bad, "")
	notPass(t, r, verdict.Fail, "blk.1.attn_k.weight: shape [64 31]")
	// Metadata is intact: the other shape falsifier still passes.
	if r := runOne(t, fullRegistry(), embedded(t), "llama.metadata_plausibility", bad, ""); r.Verdict != verdict.Pass {
		t.Errorf("llama.metadata_plausibility: %s (%s)", r.Verdict, r.Reason)
	}
	_ = errors.New
}

// property: an optimized kernel whose first block's scale has the wrong sign.
func TestPlantedKernelDot(t *testing.T) {
	planted := func(flip bool) falsify.KernelFunc {
		return func(id string, w []byte, rows, cols int, x []float32, m int) ([]float32, string, []byte, error) {
			acts := make([]byte, m*cols/32*34)
			if err := quant.Quantize(quant.Q8_0, x, acts); err != nil {
				return nil, "", nil, err
			}
			wf, af := make([]float32, rows*cols), make([]float32, m*cols)
			if err := quant.Dequantize(quant.Q8_0, w, wf); err != nil {
				return nil, "", nil, err
			}
			if err := quant.Dequantize(quant.Q8_0, acts, af); err != nil {
				return nil, "", nil, err
			}
			out := make([]float32, m*rows)
			for i := 0; i < m; i++ {
				for r := 0; r < rows; r++ {
					var s float64
					for j := 0; j < cols; j++ {
						p := float64(wf[r*cols+j]) * float64(af[i*cols+j])
						if flip && j < 32 {
							p = -p // block 0's d read with the wrong sign
						}
						s += p
					}
					out[i*rows+r] = float32(s)
				}
			}
			return out, "Q8_0", acts, nil
		}
	}
	for _, tt := range []struct {
		name string
		flip bool
		want verdict.Verdict
	}{{"honest kernel", false, verdict.Pass}, {"flipped scale", true, verdict.Fail}} {
		t.Run(tt.name, func(t *testing.T) {
			reg := fullRegistry()
			reg.RegisterKernels("planted", func() []string {
				return []string{"kernel.matvec.Q8_0.planted.go", "kernel.matmul.Q8_0.planted.go"}
			}, planted(tt.flip))
			r := runOne(t, reg, embedded(t), "q8_0.kernel_dot", "", "")
			if r.Verdict != tt.want || r.Measured["kernels_checked"] != 2 {
				t.Errorf("q8_0.kernel_dot on a %s: %s (%s), %v kernels checked; want %s over 2", tt.name, r.Verdict, r.Reason, r.Measured["kernels_checked"], tt.want)
			}
		})
	}
}
