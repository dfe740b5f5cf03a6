package falsify

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
)

// recordedLogits is a fixtures expect/<model>.logits.json: llama.cpp's
// logits for a token sequence.
type recordedLogits struct {
	Model  string      `json:"model"`
	SHA256 string      `json:"sha256"`
	Tokens []int32     `json:"tokens"`
	NVocab int         `json:"n_vocab"`
	Logits [][]float32 `json:"logits"`
}

func recordedPath(c *Check) (string, error) {
	base := strings.TrimSuffix(filepath.Base(c.ModelPath()), ".gguf")
	return c.Fixture("expect/" + base + ".logits.json")
}

func readRecorded(path string) (*recordedLogits, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r recordedLogits
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Tokens) == 0 || len(r.Logits) != len(r.Tokens) {
		return nil, fmt.Errorf("%s: %d tokens, %d logits rows", path, len(r.Tokens), len(r.Logits))
	}
	return &r, nil
}

// parityApplies: llama.cpp's logits exist for this very model object.
func parityApplies(c *Check) (bool, string) {
	path, err := recordedPath(c)
	if err != nil {
		return false, err.Error()
	}
	if _, err := os.Stat(path); err != nil {
		return false, fmt.Sprintf("no recorded llama.cpp logits for this model (%s)", path)
	}
	return true, ""
}

// LogitsFunc evaluates tokens from position 0 and returns every position's
// logits: engine/generate.Logits in apr.
type LogitsFunc func(ctx context.Context, model, backend string, tokens []int32) ([][]float32, error)

func generateLogits(ctx context.Context, model, backend string, tokens []int32) ([][]float32, error) {
	res, err := generate.Logits(ctx, generate.LogitsOptions{Model: model, Backend: backend, Tokens: tokens})
	return res.Logits, err
}

func logitsParity(ctx context.Context, c *Check) error { return LogitsParity(generateLogits)(ctx, c) }

// LogitsParity returns the logits_parity code (the cosine kind) over eval:
// the backend's logits against llama.cpp's recorded ones for the same model
// object and tokens, position by position. It measures min_cosine,
// mean_cosine, argmax_agree (fraction of positions) and max_kl, and notes
// the worst position. A NaN, an Inf or a zero row is a fail by name.
func LogitsParity(eval LogitsFunc) Func {
	return func(ctx context.Context, c *Check) error {
		backend, err := c.ParamString("backend", "ref")
		if err != nil {
			return err
		}
		path, err := recordedPath(c)
		if err != nil {
			return err
		}
		var want *recordedLogits
		if err := c.CallRef("llama.cpp logits", func() (err error) { want, err = readRecorded(path); return err }); err != nil {
			return err
		}
		sha, err := c.ModelSHA256()
		if err != nil {
			return err
		}
		if want.SHA256 != sha {
			return c.Refuse("%s was recorded for sha256 %s, the model is %s", path, want.SHA256, sha)
		}
		got, err := eval(ctx, c.ModelPath(), backend, want.Tokens)
		if err != nil {
			if _, ok := refuse.As(err); ok {
				return err
			}
			return Fail("%s logits: %v", backend, err)
		}
		return CompareLogits(c, got, want.Logits)
	}
}

// CompareLogits is the cosine kind's judgement of got against want.
func CompareLogits(c *Check, got, want [][]float32) error {
	rep, err := oracle.CompareSeq(got, want, 0)
	if err != nil {
		return Fail("%v", err)
	}
	w := rep.Positions[rep.Worst]
	c.Note("worst position %d: cosine %.9f, max-abs %.3g, KL %.3g, argmax %d vs %d", rep.Worst, w.Cosine, w.MaxAbs, w.KL, w.ArgmaxGot, w.ArgmaxWant)
	if rep.FirstArgmaxMismatch >= 0 {
		p := rep.Positions[rep.FirstArgmaxMismatch]
		c.Note("first argmax mismatch at position %d: %d vs %d", rep.FirstArgmaxMismatch, p.ArgmaxGot, p.ArgmaxWant)
	}
	c.Measure("min_cosine", rep.MinCosine)
	c.Measure("mean_cosine", rep.MeanCosine)
	c.Measure("argmax_agree", float64(rep.ArgmaxAgree)/float64(len(want)))
	c.Measure("max_kl", rep.MaxKL)
	c.Measure("worst_position", float64(rep.Worst))
	return nil
}
