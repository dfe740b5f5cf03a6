package falsify_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/qa"
)

func embedded(tb testing.TB) *contracts.Set {
	tb.Helper()
	s, err := contracts.Embedded()
	if err != nil {
		tb.Fatalf("contracts.Embedded(): %v", err)
	}
	return s
}

// fullRegistry is what apr's binary registers: the builtins, qa's codes and
// (stand-ins for) cmd/apr/internal/cli's verb_fields and serve_responses.
func fullRegistry() *falsify.Registry {
	r := falsify.NewRegistry()
	falsify.RegisterBuiltins(r)
	qa.Register(r)
	r.Register("verb_fields", falsify.KindShape, func(ctx context.Context, c *falsify.Check) error {
		c.Measure("violations", 0)
		return nil
	}, falsify.Needs(falsify.NeedModel), falsify.Thresholds("violations"), falsify.Params("args"))
	r.Register("serve_responses", falsify.KindShape, func(ctx context.Context, c *falsify.Check) error {
		c.Measure("violations", 0)
		c.Measure("framing_violations", 0)
		return nil
	}, falsify.Needs(falsify.NeedModel), falsify.Thresholds("violations", "framing_violations"))
	return r
}

// runOne runs falsifier id alone and returns its result.
func runOne(tb testing.TB, reg *falsify.Registry, set *contracts.Set, id, model, fixtures string) falsify.Result {
	tb.Helper()
	rep, err := falsify.Run(context.Background(), falsify.Options{IDs: []string{id}, Model: model, Fixtures: fixtures,
		Seed: 1, Set: set, Registry: reg})
	if err != nil {
		tb.Fatalf("Run(%s): %v", id, err)
	}
	if len(rep.Results) != 1 {
		tb.Fatalf("Run(%s): %d results, want 1 (not run: %v)", id, len(rep.Results), rep.NotRun)
	}
	return rep.Results[0]
}

// contractsDir copies the embedded contract set (with goldens) into a
// temporary directory after edit changes it (path → content).
func contractsDir(tb testing.TB, edit func(files map[string]string)) string {
	tb.Helper()
	files := map[string]string{}
	err := fs.WalkDir(contracts.EmbeddedFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(contracts.EmbeddedFS(), p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if edit != nil {
		edit(files)
	}
	dir := tb.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func mustReplace(tb testing.TB, s, old, new string) string {
	tb.Helper()
	if !strings.Contains(s, old) {
		tb.Fatalf("%q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

func realLogits(ctx context.Context, model, backend string, tokens []int32) ([][]float32, error) {
	res, err := generate.Logits(ctx, generate.LogitsOptions{Model: model, Backend: backend, Tokens: tokens})
	return res.Logits, err
}
