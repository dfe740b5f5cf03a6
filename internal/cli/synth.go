package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
)

func init() { register(12, newSynthCmd) }

type synthOptions struct {
	Arch   string
	Preset string
	Type   string
	Seed   uint64
	Out    string
	JSON   bool
}

func newSynthCmd(env *Env) *cobra.Command {
	var opts synthOptions
	c := &cobra.Command{
		Use:   "synth --arch ARCH --preset NAME [--type T] -o FILE",
		Short: "Write a random-weight model in a real architecture's shape",
		Long: `synth writes a GGUF model with seeded random weights, llama.cpp's tensor
names and metadata keys, and a byte-level BPE tokenizer with a ChatML chat
template, so that apr can be run and measured with nothing downloaded.
Matrices are written in --type (quantized with apr's quantizers); 1-D
tensors stay F32.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runSynth(env, opts) },
	}
	c.Flags().StringVar(&opts.Arch, "arch", "llama", "architecture")
	c.Flags().StringVar(&opts.Preset, "preset", "tiny", "shape preset")
	c.Flags().StringVar(&opts.Type, "type", "F32", "weight type of the matrices (ggml name, e.g. F32, F16, Q8_0, Q4_K)")
	c.Flags().Uint64Var(&opts.Seed, "seed", 1, "random seed")
	c.Flags().StringVarP(&opts.Out, "output", "o", "", "output file (required)")
	jsonFlag(c, &opts.JSON)
	return c
}

func runSynth(env *Env, opts synthOptions) error {
	if opts.Out == "" {
		return badInputf("synth: -o FILE is required")
	}
	p, err := synth.FindPreset(opts.Arch, opts.Preset)
	if err != nil {
		return badInput(err)
	}
	t, err := quant.ParseType(opts.Type)
	if err != nil {
		return badInput(err)
	}
	if err := synth.Write(opts.Out, synth.Options{Preset: p, Type: t, Seed: opts.Seed}); err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, map[string]any{"path": opts.Out, "arch": p.Arch, "preset": p.Name, "type": t.String(), "seed": opts.Seed})
	}
	fmt.Fprintf(env.Stderr, "wrote %s (%s %s, %s, seed %d)\n", opts.Out, p.Arch, p.Name, t, opts.Seed)
	return nil
}
