package goldentest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "model.gguf")
	out := filepath.Join(dir, "golden.json")
	if err := os.WriteFile(in, []byte("input"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
		inputs           []string
	}{
		{"creates", out, "", []string{in}},
		{"rewrites", out, "", []string{in}},
		{"never over an input", in, "it is an input", []string{in}},
		{"never over an input by another name", filepath.Join(dir, ".", "model.gguf"), "it is an input", []string{in}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []byte("output " + string(rune('a'+i)))
			err := write(tt.path, got, tt.inputs)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("write(%s) = %v, want an error saying %q", tt.path, err, tt.want)
				}
				if b, _ := os.ReadFile(in); string(b) != "input" {
					t.Fatalf("the input was overwritten: %q", b)
				}
				return
			}
			if err != nil {
				t.Fatalf("write(%s): %v", tt.path, err)
			}
			if b, _ := os.ReadFile(tt.path); string(b) != string(got) {
				t.Errorf("%s holds %q, want %q", tt.path, b, got)
			}
		})
	}
	ro := filepath.Join(dir, "ro.json")
	if err := os.WriteFile(ro, []byte("old"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := write(ro, []byte("new"), nil); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("write(read-only file) = %v, want a refusal", err)
	}
	if err := write(ro, []byte("old"), nil); err != nil {
		t.Errorf("write(read-only file, same bytes) = %v: unchanged bytes need no write", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

func TestDiff(t *testing.T) {
	d := Diff([]byte("a\nb\nc\nd\n"), []byte("a\nb\nX\nd\n"))
	for _, w := range []string{"@@ line 3 @@", "- c", "+ X", "  b", "  d"} {
		if !strings.Contains(d, w) {
			t.Errorf("Diff lacks %q:\n%s", w, d)
		}
	}
}
