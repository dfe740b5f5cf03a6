package qa

import (
	"fmt"
	"path/filepath"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
)

// DefaultSeed is the seed of the default models: the same seed gives the
// same bytes, so their goldens apply to every fresh clone.
const DefaultSeed = 1

// DefaultArchs are the architectures of the embedded default gate, in order.
var DefaultArchs = []string{"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe"}

// SynthModel is a default model written by SynthDefaults.
type SynthModel struct {
	Arch string
	Path string
	How  string // the apr synth command that writes the same file
}

// SynthDefaults writes the tiny preset of every architecture in
// DefaultArchs, F32, seed DefaultSeed, into dir.
func SynthDefaults(dir string) ([]SynthModel, error) {
	var out []SynthModel
	for _, arch := range DefaultArchs {
		p, err := synth.FindPreset(arch, "tiny")
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, fmt.Sprintf("synth-%s-tiny-F32.gguf", arch))
		if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.F32, Seed: DefaultSeed}); err != nil {
			return nil, fmt.Errorf("qa: synthesize %s: %w", arch, err)
		}
		out = append(out, SynthModel{Arch: arch, Path: path,
			How: fmt.Sprintf("apr synth --arch %s --preset tiny --type F32 --seed %d", arch, DefaultSeed)})
	}
	return out, nil
}
