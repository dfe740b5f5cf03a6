package qa_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aprqa/apr/contracts"
)

var (
	setOnce sync.Once
	set     *contracts.Set
	setErr  error
)

// qaContracts returns the embedded contract set, with qa's falsifiers added
// to every model contract when the embedded set does not have them yet (the
// text of testdata/qa_falsifiers.cue.txt is what the contracts carry).
func qaContracts(tb testing.TB) *contracts.Set {
	tb.Helper()
	setOnce.Do(func() {
		emb, err := contracts.Embedded()
		if err != nil {
			setErr = err
			return
		}
		if _, ok := emb.Falsifier("llama.engine_parity"); ok {
			set = emb
			return
		}
		dir, err := os.MkdirTemp("", "qa-contracts-")
		if err != nil {
			setErr = err
			return
		}
		extra, err := os.ReadFile("testdata/qa_falsifiers.cue.txt")
		if err != nil {
			setErr = err
			return
		}
		err = fs.WalkDir(contracts.EmbeddedFS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(dir, p), 0o755)
			}
			b, err := fs.ReadFile(contracts.EmbeddedFS(), p)
			if err != nil {
				return err
			}
			s := string(b)
			if p == "common.cue" {
				s = strings.Replace(s, "\tout: [{\n", string(extra), 1)
			}
			s = strings.Replace(s, `_arch: "qwen35",`, `_arch: "qwen35", _qa_min_cos_q: 0.95, _qa_mean_cos_q: 0.99,`, 1)
			s = strings.Replace(s, `_arch: "qwen3moe",`, `_arch: "qwen3moe", _qa_min_cos_q: 0.93, _qa_mean_cos_q: 0.995,`, 1)
			return os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
		})
		if err != nil {
			setErr = err
			return
		}
		set, setErr = contracts.LoadDir(dir)
	})
	if setErr != nil {
		tb.Fatalf("contracts with qa's falsifiers: %v", setErr)
	}
	return set
}
