package ladder_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/verdict"
)

// linkModels links fixture models under a fresh root "zoo" by new names
// (name → path under the fixtures), so nothing can match them by name.
func linkModels(tb testing.TB, fixtures string, names map[string]string) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "zoo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, rel := range names {
		if err := os.Symlink(filepath.Join(fixtures, rel), filepath.Join(root, name)); err != nil {
			tb.Skipf("SKIP (not a pass): cannot make a symlink: %v", err)
		}
	}
	return root
}

func logitsCells(t *testing.T, root, expect string) map[string]ladder.Cell {
	t.Helper()
	cfg := baseConfig(root)
	cfg.Verbs = []string{"logits"}
	cfg.Backends = []string{"ref", "cpu"}
	cfg.Timeout = time.Minute
	cfg.Executors = ladder.DefaultExecutors(ladder.ExecOptions{ExpectDir: expect})
	rec, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	cells := map[string]ladder.Cell{}
	for _, c := range rec.Cells {
		cells[c.ID] = c
	}
	return cells
}

func cellValue(c ladder.Cell, name string) (ladder.Value, bool) {
	for _, v := range c.Values {
		if v.Name == name {
			return v, true
		}
	}
	return ladder.Value{}, false
}

// TestLogitsCellsRunTheContract: a logits cell with llama.cpp's logits for
// its model object (found by sha256, whatever the file is called) is the
// model contract's logits_parity of the model's weight tier: qwen3moe's
// router near-ties are excluded and reported, and it is held to the dense
// quantized tier; a model without a reference is checked for finite,
// well-formed logits only, and says so.
func TestLogitsCellsRunTheContract(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	root := linkModels(t, fixtures, map[string]string{
		"a.gguf": "models/synth/qwen3moe-tiny-Q8_0.gguf",
		"b.gguf": "models/stories260K.gguf",
		"c.gguf": "models/llama-2-tiny-random.gguf",
	})
	cells := logitsCells(t, root, filepath.Join(fixtures, "expect"))
	for _, b := range []string{"ref", "cpu"} {
		c := cells[ladder.CellID("zoo/a.gguf", "logits", b)]
		if c.Verdict != verdict.Pass {
			t.Errorf("cell %s = %s (%s)", c.ID, c.Verdict, c.Reason)
		}
		if v, ok := cellValue(c, "excluded_positions"); !ok || v.Value != 2 {
			t.Errorf("cell %s excluded_positions = %+v, want 2 (values %+v)", c.ID, v, c.Values)
		}
		if v, ok := cellValue(c, "min_cosine"); !ok || v.Threshold != ">= 0.998" || v.Value < 0.998 {
			t.Errorf("cell %s min_cosine = %+v, want ≥ 0.998 held to the contract's >= 0.998", c.ID, v)
		}
		if !strings.Contains(c.Detail, "qwen3moe.logits_parity_quantized") || !strings.Contains(c.Detail, "position 17 excluded: router near-tie") {
			t.Errorf("cell %s detail %q does not name the falsifier and the excluded position", c.ID, c.Detail)
		}

		c = cells[ladder.CellID("zoo/b.gguf", "logits", b)]
		if c.Verdict != verdict.Pass || !strings.Contains(c.Detail, "stories260K.logits.json (matched by sha256) by llama.logits_parity") {
			t.Errorf("cell %s = %s (%s), detail %q; want a pass by llama.logits_parity", c.ID, c.Verdict, c.Reason, c.Detail)
		}
		if v, ok := cellValue(c, "mean_cosine"); !ok || v.Threshold != ">= 0.999999" {
			t.Errorf("cell %s mean_cosine = %+v, want the float tier's >= 0.999999", c.ID, v)
		}

		c = cells[ladder.CellID("zoo/c.gguf", "logits", b)]
		if c.Verdict != verdict.Pass || !strings.Contains(c.Detail, "finite and well-formed only") {
			t.Errorf("cell %s = %s (%s), detail %q; want a pass that says it compared nothing", c.ID, c.Verdict, c.Reason, c.Detail)
		}
	}
}

// TestLogitsCellFailsOnWrongReference: with a reference whose one row is
// negated, the cell fails by the contract's min_cosine.
func TestLogitsCellFailsOnWrongReference(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	root := linkModels(t, fixtures, map[string]string{"b.gguf": "models/stories260K.gguf"})
	b, err := os.ReadFile(filepath.Join(fixtures, "expect", "stories260K.logits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	row := doc["logits"].([]any)[5].([]any)
	for i := range row {
		row[i] = -row[i].(float64)
	}
	expect := t.TempDir()
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(expect, "whatever.logits.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	cells := logitsCells(t, root, expect)
	c := cells[ladder.CellID("zoo/b.gguf", "logits", "ref")]
	if c.Verdict != verdict.Fail || !strings.Contains(c.Reason, "min_cosine") || !strings.Contains(c.Reason, "worst position 5") {
		t.Errorf("cell %s = %s (%s), want a fail by min_cosine at position 5", c.ID, c.Verdict, c.Reason)
	}
}
