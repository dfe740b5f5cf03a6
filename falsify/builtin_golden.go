package falsify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// GreedyGolden is a golden file of greedy generations: for one model
// object (by sha256) and backend, the token ids each prompt must produce.
// Prompts are tokenized raw (control tokens parsed, BOS as the model says)
// and generation runs MaxTokens steps without stopping at end-of-generation
// tokens.
type GreedyGolden struct {
	Kind        string       `json:"kind"` // "greedy"
	Model       string       `json:"model"`
	ModelSHA256 string       `json:"model_sha256"`
	Backend     string       `json:"backend"`
	Reviewed    string       `json:"reviewed"` // how it was reviewed
	Cases       []GreedyCase `json:"cases"`
}

// GreedyCase is one prompt of a GreedyGolden.
type GreedyCase struct {
	Prompt    string  `json:"prompt"`
	MaxTokens int     `json:"max_tokens"`
	TokenIDs  []int32 `json:"token_ids"`
}

// ParseGreedyGolden decodes and checks a greedy golden file.
func ParseGreedyGolden(b []byte) (*GreedyGolden, error) {
	var g GreedyGolden
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("greedy golden: %w", err)
	}
	switch {
	case g.Kind != "greedy":
		return nil, fmt.Errorf("greedy golden: kind %q, want greedy", g.Kind)
	case len(g.ModelSHA256) != 64:
		return nil, fmt.Errorf("greedy golden: model_sha256 %q is not a sha256", g.ModelSHA256)
	case g.Backend == "" || len(g.Cases) == 0:
		return nil, fmt.Errorf("greedy golden: needs a backend and at least one case")
	}
	for i, c := range g.Cases {
		if c.MaxTokens < 1 || len(c.TokenIDs) != c.MaxTokens {
			return nil, fmt.Errorf("greedy golden: case %d: %d token ids for max_tokens %d", i, len(c.TokenIDs), c.MaxTokens)
		}
	}
	return &g, nil
}

func loadGreedyGolden(c *Check) (*GreedyGolden, error) {
	name, err := c.ParamString("golden", "")
	if err != nil {
		return nil, err
	}
	b, err := c.Set.Golden(name)
	if err != nil {
		return nil, err
	}
	return ParseGreedyGolden(b)
}

// goldenApplies: a golden speaks only for the model object it was made from.
func goldenApplies(c *Check) (bool, string) {
	g, err := loadGreedyGolden(c)
	if err != nil {
		return true, "" // the run refuses with the reason
	}
	sha, err := c.ModelSHA256()
	if err != nil {
		return true, ""
	}
	if sha != g.ModelSHA256 {
		return false, fmt.Sprintf("its golden is for %s (sha256 %.12s…); the model's sha256 is %.12s…", g.Model, g.ModelSHA256, sha)
	}
	return true, ""
}

// GenerateFunc produces greedy token ids: engine/generate.Run in apr.
type GenerateFunc func(ctx context.Context, model, backend, prompt string, maxTokens int) ([]int32, error)

func generateGreedy(ctx context.Context, model, backend, prompt string, maxTokens int) ([]int32, error) {
	res, err := generate.Run(ctx, generate.Options{Model: model, Backend: backend, Prompt: prompt, Raw: true,
		MaxTokens: maxTokens, IgnoreEOS: true})
	return res.TokenIDs, err
}

func greedyGolden(ctx context.Context, c *Check) error {
	return GreedyGoldenCheck(generateGreedy)(ctx, c)
}

// GreedyGoldenCheck returns the greedy_golden code over gen: every case's
// generated ids must equal the golden's; mismatched_cases counts the cases
// that differ, and the first differing step of each is noted.
func GreedyGoldenCheck(gen GenerateFunc) Func {
	return func(ctx context.Context, c *Check) error {
		var g *GreedyGolden
		if err := c.CallRef("golden file", func() (err error) { g, err = loadGreedyGolden(c); return err }); err != nil {
			return err
		}
		sha, err := c.ModelSHA256()
		if err != nil {
			return err
		}
		if sha != g.ModelSHA256 {
			return c.Refuse("the golden is for %s (sha256 %s), not this model object (%s)", g.Model, g.ModelSHA256, sha)
		}
		bad := 0
		for i, cs := range g.Cases {
			ids, err := gen(ctx, c.ModelPath(), g.Backend, cs.Prompt, cs.MaxTokens)
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

func vetGolden(f schema.Falsifier, set *contracts.Set) []string {
	name, _ := f.Params["golden"].(string)
	b, err := set.Golden(name)
	if err != nil {
		return []string{err.Error()}
	}
	if _, err := ParseGreedyGolden(b); err != nil {
		return []string{fmt.Sprintf("golden %s: %v", name, err)}
	}
	return nil
}
