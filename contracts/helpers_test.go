package contracts_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
)

// writeContracts writes the embedded contract files (and goldens) into a temporary
// directory, lets edit change them (name → content; "" deletes), and
// returns the directory.
func writeContracts(tb testing.TB, edit func(files map[string]string)) string {
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
		tb.Fatalf("read embedded contracts: %v", err)
	}
	if edit != nil {
		edit(files)
	}
	dir := tb.TempDir()
	for name, content := range files {
		if content == "" {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// replace replaces old with new in files[name], failing when old is absent.
func replace(tb testing.TB, files map[string]string, name, old, new string) {
	tb.Helper()
	if !strings.Contains(files[name], old) {
		tb.Fatalf("%s does not contain %q", name, old)
	}
	files[name] = strings.Replace(files[name], old, new, 1)
}

// rewriteModel writes a copy of src into a temporary file, with edit
// choosing, for every tensor, the type, shape and data to write (keep false
// drops it), and kv changing the metadata. It returns the new file's path.
func rewriteModel(tb testing.TB, src string, kv func(b *gguf.Builder), edit func(t *gguf.TensorInfo, data []byte) (typ quant.Type, shape []int64, out []byte, keep bool)) string {
	tb.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		tb.Fatalf("open %s: %v", src, err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	for _, e := range f.KV {
		b.Set(e.Key, e.Value)
	}
	if kv != nil {
		kv(b)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		typ, shape, data, keep := t.Type, t.Shape, f.Data(t), true
		if edit != nil {
			typ, shape, data, keep = edit(t, data)
		}
		if !keep {
			continue
		}
		if err := b.AddTensor(t.Name, typ, shape, append([]byte(nil), data...)); err != nil {
			tb.Fatalf("rewrite %s: %v", t.Name, err)
		}
	}
	out := filepath.Join(tb.TempDir(), filepath.Base(src))
	if err := b.WriteFile(out); err != nil {
		tb.Fatalf("write %s: %v", out, err)
	}
	return out
}
