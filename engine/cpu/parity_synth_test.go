package cpu_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/oracle"
)

// TestParitySynthEveryType holds the optimized engine to the reference on
// models the fixtures do not have: every architecture's tiny shape widened
// so that every matrix takes 256-value super-blocks (no fallbacks), written
// by apr synth in every weight type apr can quantize (bit-exact with ggml's
// quantizers). The fixtures are llama.cpp's quantizations of a few
// (architecture, type) pairs; this covers the others, so a kernel that is
// right on the fixtures' types but wrong in another architecture's use of
// it fails here.
//
// llama, qwen2, qwen3: the tiers as they stand (min ≥ 0.998, mean ≥
// 0.999, argmax where the reference's margin is ≥ 0.2).
//
// qwen3moe: the engine quantizes activations as ggml does and the reference
// does not, which moves router probabilities by up to ~6e-3 here (measured:
// ~1e-3 typical), so a top-k set can flip at gaps well above the fixtures'
// 1e-3 near-tie rule. A flip is accepted only where the reference's k-th vs
// (k+1)-th gap is at most twice the two engines' largest router-probability
// difference at that layer and position (noise can explain it; a flip at a
// wider gap fails); the flipped position is excluded, and the positions after
// it are judged in a fresh sequence that starts after it (in the first one,
// a different expert's output reaches them through the next layers'
// attention). At least half the positions must be judged, by the tiers.
//
// qwen35moe (F16, BF16, Q8_0, Q4_K, MXFP4 only, to keep the run short): as
// qwen35, with qwen3moe's routing-flip rule; a quantized
// model whose routing flips beyond the noise tolerance is NOT JUDGED too
// (the gated norms amplify activation rounding into router differences
// beyond it), layer 0 up to the convolution judged instead.
//
// qwen35: F16 by the float tier; quantized types and BF16 (whose activations
// are rounded to bf16, as ggml does) by the quantized-qwen35 tier where they
// meet it. On these random models the Gated DeltaNet recurrence can turn the
// activation rounding into a different output at a position (measured: Q5_0
// layer 1 ssm_delta 1−cos 0.8 from inputs within 1e-2, while F16 agrees to
// 7e-6 and the fixture agrees with llama.cpp to 1e-14), so a missed tier is
// reported as NOT JUDGED with its numbers (the subtest says SKIP, not
// PASS), and what is judged instead is that every op of the first layer up
// to the convolution (the products and their activation rounding) agrees to
// 1e-3.
func TestParitySynthEveryType(t *testing.T) {
	types := []string{"F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
		"Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0"}
	archs := []string{"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe"}
	dir := t.TempDir()
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-9s %-7s %-6s %-9s %-9s %-7s %s\n", "arch", "type", "tier", "1-min", "1-mean", "argmax", "note")
	for _, arch := range archs {
		p, err := synth.FindPreset(arch, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		p.NEmbd, p.NFF, p.NFFExpert, p.HeadDim, p.StateSize = 4*p.NEmbd, 4*p.NFF, 4*p.NFFExpert, 4*p.HeadDim, 4*p.StateSize
		p.NFFShexp *= 4
		p.RopeDim *= 4
		for i := range p.RopeSections {
			p.RopeSections[i] *= 4
		}
		for _, ts := range types {
			if arch == "qwen35moe" && !strings.Contains(" F16 BF16 Q8_0 Q4_K MXFP4 ", " "+ts+" ") {
				// The shared expert and the fused block use the kernels the
				// other architectures cover; these types keep the run short.
				continue
			}
			typ, err := quant.ParseType(ts)
			if err != nil {
				t.Fatal(err)
			}
			if !quant.CanQuantize(typ) {
				t.Fatalf("%s: apr has no quantizer", ts)
			}
			name := arch + "-" + ts
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(dir, name+".gguf")
				res, err := synth.Write(path, synth.Options{Preset: p, Type: typ, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Fallbacks) > 0 {
					t.Fatalf("widened shape still falls back: %v", res.Fallbacks[0])
				}
				line, notJudged := synthParity(t, path, ts)
				fmt.Fprintf(&sb, "%-9s %-7s %s\n", arch, ts, line)
				if notJudged {
					// Reads as SKIP, never as a pass; a failed layer-0
					// check above still fails the test.
					t.Skipf("SKIP (not a pass): %s", line)
				}
			})
		}
	}
	t.Log(sb.String())
}

type traceKey struct {
	layer int
	op    string
	pos   int
}

// traced evaluates the fixture tokens in one batch and returns the logits
// and every traced op's values.
func traced(tb testing.TB, m *loaded, tokens []int32) ([][]float32, map[traceKey][]float32) {
	tb.Helper()
	s, err := m.eng.NewSession(len(tokens))
	if err != nil {
		tb.Fatal(err)
	}
	ops := map[traceKey][]float32{}
	s.SetTrace(func(layer int, op string, pos int, v []float32) {
		ops[traceKey{layer, op, pos}] = append([]float32(nil), v...)
	})
	rows, err := s.Eval(tokens, true)
	if err != nil {
		tb.Fatalf("Eval: %v", err)
	}
	return rows, ops
}

// routerFlipNoise is contracts' tolerances.router_flip_noise.
const routerFlipNoise = 2e-2

// routerRecords are the router probabilities among traced ops.
func routerRecords(ops map[traceKey][]float32) []oracle.Record {
	var out []oracle.Record
	for k, v := range ops {
		if k.op == model.OpRouter {
			out = append(out, oracle.Record{Layer: k.layer, Op: k.op, Pos: k.pos, Values: v})
		}
	}
	return out
}

func synthParity(t *testing.T, path, ts string) (line string, notJudged bool) {
	ref := open(t, path, "ref", 0)
	cpu := open(t, path, "cpu", 0)
	spec := ref.spec
	tokens := fixtureTokens(spec.NVocab)
	want, wantOps := traced(t, ref, tokens)
	got, gotOps := traced(t, cpu, tokens)

	hybrid := spec.Arch == "qwen35" || spec.Arch == "qwen35moe"
	tier, minWant, meanWant := "quant", 0.998, 0.999
	switch {
	case ts == "F16":
		tier = "float"
	case hybrid:
		tier, minWant, meanWant = "q-hyb", 0.95, 0.985
	case ts == "BF16":
		tier = "float"
	}

	// MoE: judge the positions before the first routing flip, exclude the
	// flipped one, and start a fresh sequence after it (its later positions
	// would see the other expert's output through attention).
	var notes []string
	flipBeyond := false
	excluded := 0
	minC, sum, n := 1.0, 0.0, 0
	argOK, argN := 0, 0
	for from := 0; from < len(tokens); {
		seg := tokens[from:]
		w, g := want, got
		wo, gops := wantOps, gotOps
		if from > 0 {
			w, wo = traced(t, ref, seg)
			g, gops = traced(t, cpu, seg)
		}
		flip := len(seg)
		if spec.NExpert > 0 {
			// The rule apr qa's parity gate applies (oracle.RoutingFlips).
			fl, err := oracle.RoutingFlips(routerRecords(wo), routerRecords(gops), len(seg), spec.NExpertUsed)
			if err != nil {
				t.Fatal(err)
			}
			if len(fl) > 0 {
				f := fl[0]
				if !f.Excused(routerFlipNoise) && hybrid && tier != "float" {
					// qwen35moe: the gated norms amplify activation rounding
					// into router differences beyond the noise tolerance
					// (measured up to 0.29 on fixtures/qwen35moe Q8_0, where
					// cpu equals llama.cpp to 4e-16); judged as qwen35's
					// missed tier is: NOT JUDGED, layer 0 up to the
					// convolution judged instead.
					flipBeyond = true
				} else if !f.Excused(routerFlipNoise) {
					t.Errorf("position %d layer %d: routing flip beyond noise (gap %.2e, router difference %.2e, noise %g)",
						from+f.Pos, f.Layer, f.Gap, f.Diff, routerFlipNoise)
				}
				notes = append(notes, fmt.Sprintf("flip pos %d L%d gap %.1e diff %.1e", from+f.Pos, f.Layer, f.Gap, f.Diff))
				flip = f.Pos
			}
		}
		for pos := 0; pos < flip; pos++ {
			c := cosine(g[pos], f64(w[pos]))
			minC = min(minC, c)
			sum += c
			n++
			if best, margin := top2(w[pos]); margin >= 0.2 {
				argN++
				if argmax(g[pos]) == best {
					argOK++
				}
			}
		}
		if flip < len(seg) {
			excluded++
		}
		from += flip + 1
	}
	if n < len(tokens)/2 {
		t.Errorf("only %d of %d positions judged after routing flips", n, len(tokens))
	}
	if n == 0 {
		t.Fatal("no position left to judge")
	}
	mean := sum / float64(n)
	line = fmt.Sprintf("%-6s %-9.2e %-9.2e %-7s", tier, 1-minC, 1-mean, fmt.Sprintf("%d/%d", argOK, argN))
	met := minC >= minWant && mean >= meanWant && argOK == argN && !flipBeyond
	if hybrid && tier != "float" {
		// The first layer's products, up to the convolution, carry only the
		// kernels' arithmetic and ggml's activation rounding.
		for _, op := range []string{model.OpAttnNorm, model.OpQ35QKV, model.OpQ35Z, model.OpQ35Beta, model.OpQ35G, model.OpQ35Conv} {
			for pos := range tokens {
				r, c := wantOps[traceKey{0, op, pos}], gotOps[traceKey{0, op, pos}]
				if r == nil || c == nil {
					t.Fatalf("layer 0 %s position %d: no trace", op, pos)
				}
				if cs := cosine(c, f64(r)); cs < 1-1e-3 {
					t.Errorf("layer 0 %s position %d: 1−cos %.2e, want ≤ 1e-3", op, pos, 1-cs)
				}
			}
		}
		if !met {
			notes = append(notes, "tier missed or routing flip beyond noise: NOT JUDGED (not a pass); layer 0 up to ssm_conv judged instead")
			return line + " " + strings.Join(notes, "; "), true
		}
	}
	if !met {
		t.Errorf("%s tier: min cosine %.6f (want ≥ %g), mean %.6f (want ≥ %g), argmax %d/%d", tier, minC, minWant, mean, meanWant, argOK, argN)
	}
	if excluded > 0 {
		notes = append(notes, fmt.Sprintf("%d excluded, %d judged", excluded, n))
	}
	return line + " " + strings.Join(notes, "; "), false
}
