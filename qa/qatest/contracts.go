package qatest

import (
	_ "embed"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aprqa/apr/contracts"
)

// qaFalsifiers is the CUE qa's gates need in every model contract, written
// into _model_falsifiers' list (what was asked of the contracts in
// /work/notes/qa-falsify.md).
//
//go:embed qa_falsifiers.cue.txt
var qaFalsifiers string

var (
	dirOnce sync.Once
	dir     string
	set     *contracts.Set
	dirErr  error
)

// Contracts returns a contract set holding qa's falsifiers and the
// directory it was loaded from: the embedded set when it already has them,
// else a copy of it with them added.
func Contracts(tb testing.TB) (*contracts.Set, string) {
	tb.Helper()
	dirOnce.Do(func() { set, dir, dirErr = load() })
	if dirErr != nil {
		tb.Fatalf("qatest: contracts with qa's falsifiers: %v", dirErr)
	}
	return set, dir
}

func load() (*contracts.Set, string, error) {
	d, err := os.MkdirTemp("", "qatest-contracts-")
	if err != nil {
		return nil, "", err
	}
	emb, err := contracts.Embedded()
	if err != nil {
		return nil, "", err
	}
	_, has := emb.Falsifier("llama.engine_parity")
	err = fs.WalkDir(contracts.EmbeddedFS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(d, p), 0o755)
		}
		b, err := fs.ReadFile(contracts.EmbeddedFS(), p)
		if err != nil {
			return err
		}
		s := string(b)
		if !has {
			if p == "common.cue" {
				s = strings.Replace(s, "\tout: [{\n", qaFalsifiers, 1)
			}
			s = strings.Replace(s, `_arch: "qwen35",`, `_arch: "qwen35", _qa_min_cos_q: 0.95, _qa_mean_cos_q: 0.99,`, 1)
			s = strings.Replace(s, `_arch: "qwen3moe",`, `_arch: "qwen3moe", _qa_min_cos_q: 0.93, _qa_mean_cos_q: 0.995,`, 1)
		}
		return os.WriteFile(filepath.Join(d, p), []byte(s), 0o644)
	})
	if err != nil {
		return nil, "", err
	}
	s, err := contracts.LoadDir(d)
	return s, d, err
}
