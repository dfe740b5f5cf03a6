package falsify

import (
	"context"
	"fmt"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/refuse"
)

// GoldenLookup finds the reviewed golden of a model object by the sha256 of
// its file: golden.Lookup in apr.
type GoldenLookup func(sha string) (*golden.File, bool, error)

// GenerateFunc produces greedy token ids (prompt tokenized raw, end of
// generation ignored): engine/generate.Run in apr.
type GenerateFunc func(ctx context.Context, model, backend, prompt string, maxTokens int) ([]int32, error)

func generateGreedy(ctx context.Context, model, backend, prompt string, maxTokens int) ([]int32, error) {
	res, err := generate.Run(ctx, generate.Options{Model: model, Backend: backend, Prompt: prompt, Raw: true,
		MaxTokens: maxTokens, IgnoreEOS: true})
	return res.TokenIDs, err
}

func greedyGolden(ctx context.Context, c *Check) error {
	return GreedyGoldenCheck(generateGreedy, golden.Lookup)(ctx, c)
}

// goldenApplies: a golden speaks only for the model object it was made from.
func goldenApplies(c *Check) (bool, string) {
	sha, err := c.ModelSHA256()
	if err != nil {
		return true, "" // the run refuses with the reason
	}
	if _, ok, err := golden.Lookup(sha); err == nil && !ok {
		return false, "no reviewed golden for this model object"
	}
	return true, ""
}

// GreedyGoldenCheck returns the greedy_golden code over gen and lookup:
// every case of the model's reviewed golden, generated greedily on
// params.backend (default "ref"), must give exactly the golden's token ids;
// mismatched_cases counts the cases that differ, and each one's first
// differing step is noted. The golden store is the falsifier's reference.
func GreedyGoldenCheck(gen GenerateFunc, lookup GoldenLookup) Func {
	return func(ctx context.Context, c *Check) error {
		backend, err := c.ParamString("backend", "ref")
		if err != nil {
			return err
		}
		sha, err := c.ModelSHA256()
		if err != nil {
			return err
		}
		var g *golden.File
		err = c.CallRef("golden store", func() error {
			f, ok, err := lookup(sha)
			switch {
			case err != nil:
				return err
			case !ok:
				return fmt.Errorf("no reviewed golden for sha256 %s", sha)
			}
			g = f
			return nil
		})
		if err != nil {
			return err
		}
		bad := 0
		for i, cs := range g.Cases {
			ids, err := gen(ctx, c.ModelPath(), backend, cs.Prompt, len(cs.TokenIDs))
			if err != nil {
				if _, ok := refuse.As(err); ok {
					return err
				}
				return Fail("case %d (%q): %v", i, cs.Prompt, err)
			}
			if at := firstDiff(ids, cs.TokenIDs); at >= 0 {
				bad++
				c.Note("case %d (%q): step %d: got %s, golden %s", i, cs.Prompt, at, idAt(ids, at), idAt(cs.TokenIDs, at))
			}
		}
		c.Measure("mismatched_cases", float64(bad))
		c.Measure("cases", float64(len(g.Cases)))
		return nil
	}
}

func firstDiff(a, b []int32) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func idAt(ids []int32, i int) string {
	if i < len(ids) {
		return fmt.Sprint(ids[i])
	}
	return "(nothing)"
}
