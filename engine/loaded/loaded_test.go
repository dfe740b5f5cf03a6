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

// TestMemo: a value is computed once per key; an error is returned and not
// kept.
func TestMemo(t *testing.T) {
	m, err := loaded.Open(testutil.Fixture(t, "models/synth/llama-tiny-F16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	calls := 0
	fn := func() (any, error) { calls++; return calls, nil }
	a, _ := m.Memo("k", fn)
	b, _ := m.Memo("k", fn)
	if a != 1 || b != 1 || calls != 1 {
		t.Errorf("Memo(k) twice = %v, %v after %d calls; want 1, 1 after 1", a, b, calls)
	}
	bad := 0
	fail := func() (any, error) { bad++; return nil, os.ErrNotExist }
	m.Memo("e", fail)
	m.Memo("e", fail)
	if bad != 2 {
		t.Errorf("a failing Memo ran %d times in two calls, want 2 (errors are not kept)", bad)
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
