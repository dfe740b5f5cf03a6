package testutil

import (
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
)

// TinyModel writes apr synth's tiny model of arch with its matrices in typ
// (seed 1) into a temporary directory of tb and returns its path: what
// `apr synth --arch ARCH --preset tiny --type TYP` writes.
func TinyModel(tb testing.TB, arch string, typ quant.Type) string {
	tb.Helper()
	p, err := synth.FindPreset(arch, "tiny")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), arch+"-"+typ.String()+".gguf")
	if _, err := synth.Write(path, synth.Options{Preset: p, Type: typ, Seed: 1}); err != nil {
		tb.Fatal(err)
	}
	return path
}
