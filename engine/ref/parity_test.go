package ref_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/ref"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/schema"
)

// expectLogits is a fixtures expect/<model>.logits.json file.
type expectLogits struct {
	Model  string      `json:"model"`
	Tokens []int32     `json:"tokens"`
	NVocab int         `json:"n_vocab"`
	Logits [][]float32 `json:"logits"`
}

func readJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

// modelPath finds a fixture model by file name.
func modelPath(dir, name string) string {
	for _, p := range []string{filepath.Join(dir, "models", name), filepath.Join(dir, "models", "synth", name)} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// quantized reports whether any tensor of f has a quantized type.
func quantized(f *gguf.File) bool {
	for _, t := range f.Tensors {
		if info, err := quant.Lookup(t.Type); err == nil && info.Quantized {
			return true
		}
	}
	return false
}

type parityRow struct {
	model            string
	tier             string
	min, mean        float64
	excluded         []int
	argmaxChecked    int
	argmaxMismatches []int
	status           string
}

// TestLogitsParity runs every model that has expect/<model>.logits.json on
// the reference and compares each position's logits with llama.cpp's.
func TestLogitsParity(t *testing.T) {
	dir := testutil.Fixtures(t)
	files, err := filepath.Glob(filepath.Join(dir, "expect", "*.logits.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no expect/*.logits.json under %s (%v)", dir, err)
	}
	var rows []parityRow
	for _, ef := range files {
		var ex expectLogits
		readJSON(t, ef, &ex)
		row := parityRow{model: strings.TrimSuffix(ex.Model, ".gguf")}
		t.Run(row.model, func(t *testing.T) {
			row = checkParity(t, dir, ex, row)
		})
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].model < rows[j].model })
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-28s %-9s %-12s %-12s %-10s %-9s %s\n", "model", "tier", "min cos", "mean cos", "excluded", "argmax", "status")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-28s %-9s %-12.9f %-12.9f %-10s %-9s %s\n", r.model, r.tier, r.min, r.mean,
			fmt.Sprint(len(r.excluded)), fmt.Sprintf("%d/%d", r.argmaxChecked-len(r.argmaxMismatches), r.argmaxChecked), r.status)
	}
	t.Log(sb.String())
}

// logitsParity is the model contract's logits_parity falsifier of f's
// weight tier: the thresholds, the argmax margin and the router near-tie
// epsilon this test holds the reference to are the contracts'.
func logitsParity(t *testing.T, f *gguf.File) schema.Falsifier {
	t.Helper()
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatalf("contracts.Embedded(): %v", err)
	}
	mc, ok := set.Model(f.Architecture())
	if !ok {
		t.Fatalf("no model contract for %s", f.Architecture())
	}
	tier := falsify.WeightTier(f)
	for _, fz := range mc.Falsifiers {
		if tr, _ := fz.Params["tier"].(string); fz.Code == "logits_parity" && tr == tier {
			return fz
		}
	}
	t.Fatalf("contract %s has no logits_parity falsifier for %s weights", mc.ID, tier)
	return schema.Falsifier{}
}

func param(t *testing.T, fz schema.Falsifier, name string) float64 {
	t.Helper()
	v, ok := fz.Params[name].(float64)
	if !ok {
		t.Fatalf("%s: param %s is %v, want a number", fz.ID, name, fz.Params[name])
	}
	return v
}

func checkParity(t *testing.T, dir string, ex expectLogits, row parityRow) parityRow {
	path := modelPath(dir, ex.Model)
	if path == "" {
		t.Fatalf("model %s not found under %s/models", ex.Model, dir)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec, err := model.Load(f)
	if err != nil {
		if f.Architecture() == "qwen35" && strings.Contains(err.Error(), "unknown architecture") {
			row.status = "SKIP: qwen35 not registered yet"
			t.Skipf("SKIP (not a pass): %v", err)
		}
		row.status = "REFUSED"
		t.Fatalf("model.Load(%s): %v", ex.Model, err)
	}
	eng, err := ref.New(f, spec, ref.Options{})
	if err != nil {
		if spec.Arch == "qwen35" && strings.Contains(err.Error(), "is not implemented by the reference") {
			row.status = "SKIP: qwen35 layers not registered in ref yet"
			t.Skipf("SKIP (not a pass): %v", err)
		}
		row.status = "REFUSED"
		t.Fatalf("ref.New(%s): %v", ex.Model, err)
	}
	sess, err := eng.NewSession(len(ex.Tokens))
	if err != nil {
		t.Fatal(err)
	}
	fz := logitsParity(t, f)
	row.tier = fz.Params["tier"].(string)
	// Router probabilities per layer and position, for the near-ties.
	rec := oracle.Recording{Ops: map[string]bool{model.OpRouter: true}}
	if spec.NExpert > 0 {
		sess.SetTrace(rec.Trace())
	}
	got, err := sess.Eval(ex.Tokens, true)
	if err != nil {
		t.Fatalf("Eval(%s): %v", ex.Model, err)
	}
	var ties []oracle.NearTie
	if spec.NExpert > 0 {
		eps := param(t, fz, falsify.ParamNearTieEps)
		if ties, err = oracle.RouterNearTies(rec.Records, len(ex.Tokens), spec.NExpertUsed, eps); err != nil {
			t.Fatalf("RouterNearTies(%s): %v", ex.Model, err)
		}
	}
	margin := param(t, fz, "argmax_margin")
	rep, err := oracle.CompareSeqWith(got, ex.Logits, oracle.SeqOptions{Exclude: oracle.TiePositions(ties), ArgmaxMargin: margin})
	if err != nil {
		row.status = "FAIL"
		t.Fatalf("CompareSeqWith(%s): %v", ex.Model, err)
	}
	for _, tie := range ties {
		t.Logf("position %d excluded: router near-tie at layer %d (gap %.3g); cosine %.6f", tie.Pos, tie.Layer, tie.Gap, rep.Positions[tie.Pos].Cosine)
	}
	row.min, row.mean, row.excluded = rep.MinCosine, rep.MeanCosine, rep.Excluded
	row.argmaxChecked, row.argmaxMismatches = rep.Compared, rep.ArgmaxMismatches
	row.status = "ok"
	for name, v := range map[string]float64{"min_cosine": rep.MinCosine, "mean_cosine": rep.MeanCosine, "argmax_mismatches": float64(len(rep.ArgmaxMismatches))} {
		th, ok := fz.Thresholds[name]
		if !ok {
			t.Fatalf("%s has no threshold %s", fz.ID, name)
		}
		if !th.Holds(v) {
			row.status = "FAIL"
			t.Errorf("%s: %s = %.9g, want %s %g (%s; argmax mismatches at %v)", ex.Model, name, v, th.Op, th.Value, fz.ID, rep.ArgmaxMismatches)
		}
	}
	return row
}
