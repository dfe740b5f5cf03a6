package loaded_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/internal/regfile"
	"github.com/aprqa/apr/internal/testutil"
)

// TestModel: a model is opened once; its sha256 is the file's, its spec and
// tokenizer are read once and shared, and the logits cache evaluates each
// (backend, numerics, tokens) once — except an evaluation that was
// cancelled, which is not kept.
func TestModel(t *testing.T) {
	path := testutil.Fixture(t, "models/synth/llama-tiny-F16.gguf")
	m, err := loaded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, n, err := regfile.SHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, size, err := m.SHA256(); err != nil || got != want || size != n {
		t.Errorf("SHA256() = %s, %d, %v; want %s, %d", got, size, err, want, n)
	}
	s1, err1 := m.Spec()
	s2, _ := m.Spec()
	t1, err2 := m.Tokenizer()
	t2, _ := m.Tokenizer()
	if err1 != nil || err2 != nil || s1 != s2 || t1 != t2 || s1.NVocab != t1.NVocab() {
		t.Errorf("Spec/Tokenizer: %v %v; want one spec and one tokenizer, shared, of the same vocabulary", err1, err2)
	}
	calls := 0
	eval := func() loaded.Logits { calls++; return loaded.Logits{NVocab: 3, Rows: [][]float32{{1, 2, 3}}} }
	m.CachedLogits("ref", "", []int32{1, 2}, eval, nil)
	m.CachedLogits("ref", "", []int32{1, 2}, eval, nil)
	m.CachedLogits("ref", "ggml", []int32{1, 2}, eval, nil)
	m.CachedLogits("cpu", "", []int32{1, 2}, eval, nil)
	m.CachedLogits("cpu", "", []int32{12}, eval, nil)
	if calls != 4 {
		t.Errorf("%d evaluations, want 4 (one per backend, numerics and tokens)", calls)
	}
	cancelled := func() bool { return true }
	m.CachedLogits("cuda", "", []int32{1}, eval, cancelled)
	m.CachedLogits("cuda", "", []int32{1}, eval, cancelled)
	if calls != 6 {
		t.Errorf("%d evaluations, want 6: a cancelled evaluation is not kept", calls)
	}
}

func TestOpenNotAModel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(p, []byte("not a gguf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := loaded.Open(p); err == nil {
		m.Close()
		t.Fatalf("Open(%s) of a text file: no error", p)
	}
}
