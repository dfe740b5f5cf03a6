package qatest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
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

// load writes the set into a directory named by the embedded contracts'
// digest and qa's CUE, under the system's temporary directory: every test
// binary of one checkout state shares it, and nothing accumulates.
func load() (*contracts.Set, string, error) {
	emb, err := contracts.Embedded()
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256([]byte(emb.Digest + qaFalsifiers))
	final := filepath.Join(os.TempDir(), "apr-qatest-contracts-"+hex.EncodeToString(sum[:6]))
	if s, err := contracts.LoadDir(final); err == nil {
		return s, final, nil
	}
	d, err := os.MkdirTemp(os.TempDir(), "apr-qatest-contracts-tmp")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(d)
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
	if _, err := contracts.LoadDir(d); err != nil {
		return nil, "", err
	}
	if err := os.Rename(d, final); err != nil {
		if _, statErr := os.Stat(final); statErr != nil {
			return nil, "", err
		} // another test binary got there first
	}
	s, err := contracts.LoadDir(final)
	return s, final, err
}
