package ladder_test

import (
	"context"
	"testing"
	"time"

	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/ladder"
	"github.com/aprqa/apr/verdict"
)

// TestServeCells: a serve cell serves the model and passes when every
// concurrent response equals its solo run; cuda is refused by name.
func TestServeCells(t *testing.T) {
	fixtures := testutil.Fixtures(t)
	root := linkModels(t, fixtures, map[string]string{"s.gguf": "models/stories260K.gguf", "q.gguf": "models/synth/qwen2-tiny-Q8_0.gguf"})
	cfg := baseConfig(root)
	cfg.Verbs = []string{"serve"}
	cfg.Backends = []string{"cpu", "ref", "cuda"}
	cfg.Timeout = time.Minute
	cfg.Executors = ladder.DefaultExecutors(ladder.ExecOptions{})
	rec, err := ladder.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	seen := 0
	for _, c := range rec.Cells {
		seen++
		switch c.Backend {
		case "cuda":
			if c.Verdict != verdict.Refused {
				t.Errorf("cell %s = %s, want refused", c.ID, c.Verdict)
			}
		default:
			if c.Verdict != verdict.Pass {
				t.Errorf("cell %s = %s (%s)", c.ID, c.Verdict, c.Reason)
			}
			if v, ok := cellValue(c, "mismatches"); !ok || v.Value != 0 {
				t.Errorf("cell %s: mismatches %+v", c.ID, v)
			}
			if v, ok := cellValue(c, "max_batch"); !ok || v.Value < 2 {
				t.Errorf("cell %s: max_batch %+v", c.ID, v)
			}
		}
	}
	if seen != 6 {
		t.Errorf("%d cells, want 2 models × 3 backends", seen)
	}
}
