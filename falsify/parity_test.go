package falsify_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/verdict"
)

// moeRegistry registers logits_parity with eval and router planted.
func moeRegistry(eval falsify.LogitsFunc, router falsify.RouterFunc) *falsify.Registry {
	reg := falsify.NewRegistry()
	falsify.RegisterBuiltins(reg)
	reg2 := falsify.NewRegistry()
	for _, code := range reg.Codes() {
		if code.ID != "logits_parity" {
			continue
		}
		reg2.Register(code.ID, code.Kind, falsify.LogitsParity(eval, router), falsify.Needs(code.Needs...),
			falsify.Thresholds(code.Thresholds...), falsify.Params(code.Params...), falsify.Refs(code.Refs...),
			falsify.AppliesWhen(code.Applies))
	}
	return reg2
}

func details(r falsify.Result) string { return strings.Join(r.Details, "\n") }

// TestLogitsParityMoENearTies runs qwen3moe-tiny-Q8_0's logits_parity on the
// reference engine: it passes at the dense quantized tier because its two
// router near-ties (positions 7 and 17, where the reference and llama.cpp
// route differently at 17: cosine 0.955) are excluded and reported; with a
// router that reports no near-tie the same logits fail; without a usable
// router trace it refuses.
func TestLogitsParityMoENearTies(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	model := filepath.Join(fixtures, "models", "synth", "qwen3moe-tiny-Q8_0.gguf")
	const id = "qwen3moe.logits_parity_quantized"

	r := runOne(t, fullRegistry(), embedded(t), id, model, fixtures)
	if r.Verdict != verdict.Pass {
		t.Fatalf("%s: %s (%s)", id, r.Verdict, r.Reason)
	}
	if diff := cmp.Diff([]float64{2, 22}, []float64{r.Measured["excluded_positions"], r.Measured["compared_positions"]}); diff != "" {
		t.Errorf("%s excluded and compared positions (-want +got):\n%s", id, diff)
	}
	if c := r.Measured["excluded_min_cosine"]; c > 0.96 {
		t.Errorf("%s excluded_min_cosine %v, want the 0.955 of position 17 reported", id, c)
	}
	for _, p := range []string{"position 7 excluded: router near-tie", "position 17 excluded: router near-tie at layer 1"} {
		if !strings.Contains(details(r), p) {
			t.Errorf("%s details do not report %q:\n%s", id, p, details(r))
		}
	}

	// The same logits without the exclusion: position 17 fails the tier.
	noTies := func(ctx context.Context, m, b string, toks []int32) ([]oracle.Record, int, error) {
		recs, k, err := falsify.RouterProbs(ctx, m, b, toks)
		for i := range recs {
			for j := range recs[i].Values {
				recs[i].Values[j] = float32(j) / 64 // decided: every gap 1/64
			}
		}
		return recs, k, err
	}
	r = runOne(t, moeRegistry(realLogits, noTies), embedded(t), id, model, fixtures)
	notPass(t, r, verdict.Fail, "min_cosine")
	if r.Measured["excluded_positions"] != 0 {
		t.Errorf("%s with a router without near-ties excluded %v positions", id, r.Measured["excluded_positions"])
	}

	// A defect away from the near-ties is not excused.
	flip := func(ctx context.Context, m, b string, toks []int32) ([][]float32, error) {
		lg, err := realLogits(ctx, m, b, toks)
		if err == nil {
			for i := range lg[3] {
				lg[3][i] = -lg[3][i]
			}
		}
		return lg, err
	}
	r = runOne(t, moeRegistry(flip, nil), embedded(t), id, model, fixtures)
	notPass(t, r, verdict.Fail, "min_cosine")
	// A NaN at an excluded position is still a fail.
	poison := func(ctx context.Context, m, b string, toks []int32) ([][]float32, error) {
		lg, err := realLogits(ctx, m, b, toks)
		if err == nil {
			lg[17][5] = float32(math.NaN())
		}
		return lg, err
	}
	r = runOne(t, moeRegistry(poison, nil), embedded(t), id, model, fixtures)
	notPass(t, r, verdict.Fail, "position 17")

	// A router that fails, or reports a trace with a position missing, refuses.
	broken := func(ctx context.Context, m, b string, toks []int32) ([]oracle.Record, int, error) {
		return nil, 0, errors.New("planted: the router trace is unavailable")
	}
	r = runOne(t, moeRegistry(realLogits, broken), embedded(t), id, model, fixtures)
	notPass(t, r, verdict.Refused, "planted: the router trace is unavailable")
	short := func(ctx context.Context, m, b string, toks []int32) ([]oracle.Record, int, error) {
		recs, k, err := falsify.RouterProbs(ctx, m, b, toks)
		return recs[1:], k, err
	}
	r = runOne(t, moeRegistry(realLogits, short), embedded(t), id, model, fixtures)
	notPass(t, r, verdict.Refused, "incomplete or malformed trace")
}

// TestCompareLogitsExcludes: CompareLogits leaves the near-ties' positions
// out of the minimum and mean, reports each, and never passes a sequence
// whose every position is excluded.
func TestCompareLogitsExcludes(t *testing.T) {
	want := [][]float32{{1, 2, 3, 4}, {4, 3, 2, 1}, {1, 3, 2, 0}}
	got := [][]float32{{1, 2, 3, 4}, {4, 3, 2, 1}, {0, 2, 3, 1}}
	tests := []struct {
		name     string
		ties     []oracle.NearTie
		verdict  verdict.Verdict
		reason   string
		excluded float64
	}{
		{"no near-tie", nil, verdict.Fail, "min_cosine", 0},
		{"the bad position a near-tie", []oracle.NearTie{{Pos: 2, Layer: 1, Gap: 4e-4}}, verdict.Pass, "", 1},
		{"another position a near-tie", []oracle.NearTie{{Pos: 0, Layer: 0, Gap: 4e-4}}, verdict.Fail, "min_cosine", 1},
		{"every position a near-tie", []oracle.NearTie{{Pos: 0}, {Pos: 1}, {Pos: 2}}, verdict.Fail, "none is left to compare", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := falsify.NewRegistry()
			reg.Register("logits_parity", falsify.KindCosine, func(ctx context.Context, c *falsify.Check) error {
				return falsify.CompareLogits(c, got, want, tt.ties)
			}, falsify.Thresholds("min_cosine", "mean_cosine", "argmax_mismatches"))
			r := runOne(t, reg, embedded(t), "llama.logits_parity", testutil.Fixture(t, "models/stories260K.gguf"), "")
			notPass(t, r, tt.verdict, tt.reason)
			if tt.excluded >= 0 && r.Measured["excluded_positions"] != tt.excluded {
				t.Errorf("CompareLogits(ties %v) excluded_positions = %v, want %v", tt.ties, r.Measured["excluded_positions"], tt.excluded)
			}
			if tt.verdict == verdict.Pass && !strings.Contains(details(r), "position 2 excluded: router near-tie at layer 1") {
				t.Errorf("CompareLogits(ties %v) details do not report the excluded position:\n%s", tt.ties, details(r))
			}
		})
	}
}

// TestRecordedLogitsBySHA256: llama.cpp's logits are found by the model
// object's sha256, whatever the model file is called, and a file named
// after the model but recorded for other bytes is not used.
func TestRecordedLogitsBySHA256(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	expect := filepath.Join(fixtures, "expect")
	model := filepath.Join(fixtures, "models", "stories260K.gguf")
	r := runOne(t, fullRegistry(), embedded(t), "llama.logits_parity", model, fixtures)
	if r.Verdict != verdict.Pass {
		t.Fatalf("llama.logits_parity on stories260K: %s (%s)", r.Verdict, r.Reason)
	}
	sha := strings.TrimSpace(readSHA(t, filepath.Join(expect, "stories260K.logits.json")))

	tests := []struct {
		name, file, want string
	}{
		{"by name", "stories260K.gguf", filepath.Join(expect, "stories260K.logits.json")},
		{"renamed model", "renamed.gguf", filepath.Join(expect, "stories260K.logits.json")},
		{"named after another model", "qwen2-tiny-Q8_0.gguf", filepath.Join(expect, "stories260K.logits.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, why, err := falsify.RecordedLogits(expect, tt.file, sha)
			if err != nil || p != tt.want {
				t.Errorf("RecordedLogits(%s, %s, %.12s) = %q, %q, %v; want %q", expect, tt.file, sha, p, why, err, tt.want)
			}
		})
	}
	p, why, err := falsify.RecordedLogits(expect, "stories260K.gguf", strings.Repeat("0", 64))
	if err != nil || p != "" || !strings.Contains(why, "stories260K.logits.json was recorded for sha256 "+sha) {
		t.Errorf("RecordedLogits for unknown bytes = %q, %q, %v; want none, naming the file recorded for other bytes", p, why, err)
	}

	// Through the falsifier: a renamed copy (a link) of the model finds its
	// logits by sha256 under params.expect_dir, without --fixtures.
	dir := t.TempDir()
	link := filepath.Join(dir, "renamed.gguf")
	if err := os.Symlink(model, link); err != nil {
		t.Skipf("SKIP (not a pass): cannot make a symlink: %v", err)
	}
	rep, err := falsify.Run(context.Background(), falsify.Options{IDs: []string{"llama.logits_parity"}, Model: link,
		Set: embedded(t), Registry: fullRegistry(), Params: map[string]any{"expect_dir": expect}})
	if err != nil || len(rep.Results) != 1 || rep.Results[0].Verdict != verdict.Pass {
		t.Errorf("Run(llama.logits_parity, renamed model, expect_dir) = %+v, %v; want one pass", rep, err)
	}
}

func readSHA(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	i := strings.Index(string(b), `"sha256"`)
	if i < 0 {
		tb.Fatalf("%s has no sha256", path)
	}
	rest := string(b[i+len(`"sha256"`):])
	j := strings.Index(rest, `"`)
	return rest[j+1 : j+65]
}

// TestNoiseFloor runs qwen35's engine_parity_quantized (the cpu engine
// against the reference in ggml numerics) on qwen35-tiny-Q8_0, where the
// reference's jittered twin flips an activation's rounding (its floor is
// below 1): the gate measures the floor and reports it with the distance
// it judged; a contract whose noise_floor is not a number ≥ 0 is refused;
// noise_floor 0 measures none.
func TestNoiseFloor(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	model := filepath.Join(fixtures, "models", "synth", "qwen35-tiny-Q8_0.gguf")
	const id = "qwen35.engine_parity_quantized"
	r := runOne(t, fullRegistry(), embedded(t), id, model, fixtures)
	if r.Verdict != verdict.Pass {
		t.Fatalf("%s: %s (%s)", id, r.Verdict, r.Reason)
	}
	if f := r.Measured["noise_floor_min_cosine"]; !(f < 1 && f > 0.99) {
		t.Errorf("noise_floor_min_cosine %v, want the twin's flip measured (0.99 < floor < 1)", f)
	}
	if _, ok := r.Measured["measured_min_cosine"]; !ok || !strings.Contains(details(r), "noise floor") {
		t.Errorf("the distance before the floor or the floor's note is missing: %v\n%s", r.Measured, details(r))
	}
	for _, c := range []struct {
		value   string
		verdict verdict.Verdict
	}{{"-1", verdict.Refused}, {`"two"`, verdict.Refused}, {"0", verdict.Pass}} {
		dir := contractsDir(t, func(files map[string]string) {
			files["common.cue"] = mustReplace(t, files["common.cue"], "qwen35: 2, qwen3moe: 0", "qwen35: "+c.value+", qwen3moe: 0")
		})
		set, err := contracts.LoadDir(dir)
		if err != nil {
			t.Fatalf("noise_floor %s: LoadDir: %v", c.value, err)
		}
		r := runOne(t, fullRegistry(), set, id, model, fixtures)
		if r.Verdict != c.verdict {
			t.Errorf("noise_floor %s: %s (%s), want %s", c.value, r.Verdict, r.Reason, c.verdict)
		}
		if _, ok := r.Measured["noise_floor_min_cosine"]; ok {
			t.Errorf("noise_floor %s: a floor was measured", c.value)
		}
		if c.verdict == verdict.Refused && !strings.Contains(r.Reason, "noise_floor") {
			t.Errorf("noise_floor %s: reason %q does not name params.noise_floor", c.value, r.Reason)
		}
	}
}
