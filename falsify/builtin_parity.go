package falsify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
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

// expectDir is where llama.cpp's recorded logits are looked up:
// params.expect_dir, else the fixtures' expect/.
func expectDir(c *Check) (string, error) {
	if d, err := c.ParamString("expect_dir", ""); err != nil || d != "" {
		return d, err
	}
	return c.Fixture("expect")
}

var shaField = regexp.MustCompile(`"sha256"\s*:\s*"([0-9a-f]{64})"`)

// recordedSHA256 reads the "sha256" a recorded-logits file states: from its
// first 4 KiB (where the fixtures put it), else from the whole document.
func recordedSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	if m := shaField.FindSubmatch(head[:n]); m != nil {
		return string(m[1]), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var doc struct {
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return doc.SHA256, nil
}

// RecordedLogits returns the file under dir (*.logits.json, as in the
// fixtures' expect/) that records llama.cpp's logits for the model object
// whose sha256 is sum, matched by that sha256, never by name alone: the file
// named after the model (name, without .gguf) is tried first, then every
// other. It returns "" and why when none records sum.
func RecordedLogits(dir, name, sum string) (path, why string, err error) {
	first := filepath.Join(dir, strings.TrimSuffix(name, ".gguf")+".logits.json")
	paths, err := filepath.Glob(filepath.Join(dir, "*.logits.json"))
	if err != nil {
		return "", "", err
	}
	paths = append([]string{first}, paths...)
	named := ""
	for i, p := range paths {
		if i > 0 && p == first {
			continue
		}
		got, err := recordedSHA256(p)
		if i == 0 && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		if got == sum {
			return p, "", nil
		}
		if i == 0 {
			named = fmt.Sprintf("; %s was recorded for sha256 %s", filepath.Base(p), got)
		}
	}
	return "", fmt.Sprintf("no recorded llama.cpp logits for this model object (sha256 %s) in %s%s", sum, dir, named), nil
}

// recordedPath is RecordedLogits for c's model.
func recordedPath(c *Check) (path, why string, err error) {
	dir, err := expectDir(c)
	if err != nil {
		return "", "", err
	}
	sum, err := c.ModelSHA256()
	if err != nil {
		return "", "", err
	}
	return RecordedLogits(dir, filepath.Base(c.ModelPath()), sum)
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

// parityApplies: the model is of the falsifier's weight tier, and
// llama.cpp's logits exist for this very model object.
func parityApplies(c *Check) (bool, string) {
	if ok, why := TierApplies(c); !ok {
		return false, why
	}
	if _, ok := c.Param("expect_dir"); !ok && c.in.fixtures == "" {
		return false, "needs apr's shared fixtures (--fixtures DIR)"
	}
	path, why, err := recordedPath(c)
	if err != nil {
		return true, "" // the run refuses with the reason
	}
	if path == "" {
		return false, why
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

func logitsParity(ctx context.Context, c *Check) error {
	return LogitsParity(generateLogits, nil)(ctx, c)
}

// LogitsParity returns the logits_parity code (the cosine kind) over eval:
// the backend's (params.backend, default "ref") logits against llama.cpp's
// recorded ones for the same model object and tokens, position by
// position. For a mixture of experts the positions where the reference
// engine's router is near a tie (NearTies over router; nil: RouterProbs)
// are left out of every aggregate and reported. It measures min_cosine,
// mean_cosine, argmax_mismatches (positions whose argmax differs where
// llama.cpp's top-1 margin is at least params.argmax_margin), argmax_agree
// (compared positions whose argmax agrees), max_kl, worst_position,
// excluded_positions and compared_positions, and notes the worst position
// and each excluded one. A NaN, an Inf or a zero row is a fail by name.
func LogitsParity(eval LogitsFunc, router RouterFunc) Func {
	return func(ctx context.Context, c *Check) error {
		backend, err := c.ParamString("backend", "ref")
		if err != nil {
			return err
		}
		var want *recordedLogits
		err = c.CallRef("llama.cpp logits", func() error {
			path, why, err := recordedPath(c)
			if err != nil {
				return err
			}
			if path == "" {
				return errors.New(why)
			}
			if want, err = readRecorded(path); err != nil {
				return err
			}
			sha, err := c.ModelSHA256()
			if err != nil {
				return err
			}
			if want.SHA256 != sha {
				return fmt.Errorf("%s was recorded for sha256 %s, the model is %s", path, want.SHA256, sha)
			}
			return nil
		})
		if err != nil {
			return err
		}
		ties, err := NearTies(ctx, c, want.Tokens, router)
		if err != nil {
			return err
		}
		got, err := eval(ctx, c.ModelPath(), backend, want.Tokens)
		if err != nil {
			if _, ok := refuse.As(err); ok {
				return err
			}
			return Fail("%s logits: %v", backend, err)
		}
		return CompareLogits(c, got, want.Logits, ties)
	}
}

// CompareLogits is the cosine kind's judgement of got against want: the
// one parity judge (oracle.Parity) under the contract's argmax margin
// (params.argmax_margin), with the judge's router near-ties left out of the
// aggregates (and reported). Every metric of the report is measured (the
// runner holds them to the thresholds); the worst position, each counted
// argmax mismatch and each near-tie are noted.
func CompareLogits(c *Check, got, want [][]float32, ties []oracle.NearTie) error {
	margin, err := c.ParamFloat("argmax_margin", 0)
	if err != nil {
		return err
	}
	eps, _ := c.ParamFloat(ParamNearTieEps, math.NaN())
	rep, err := oracle.Parity{Margin: margin, Ties: ties}.Judge(got, want)
	if err != nil {
		return Fail("%v", err)
	}
	MeasureParity(c, rep, "reference", eps)
	return nil
}

// MeasureParity records a parity report in c: the worst position, the
// counted argmax mismatches and the near-ties as notes (judge names the
// reference in them), every metric as a measured value.
func MeasureParity(c *Check, rep oracle.ParityReport, judge string, eps float64) {
	c.Note("%s", rep.WorstNote())
	for _, n := range append(rep.MismatchNotes(judge), rep.TieNotes(eps)...) {
		c.Note("%s", n)
	}
	for _, m := range rep.Metrics() {
		c.Measure(m.Name, m.Value)
	}
}
