package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/internal/atomicfile"
)

func init() { register(12, newSynthCmd) }

type synthOptions struct {
	Arch   string
	Preset string
	Type   string
	Seed   uint64
	Out    string
	JSON   bool
	List   bool
	Quiet  bool
}

func newSynthCmd(env *Env) *cobra.Command {
	var opts synthOptions
	c := &cobra.Command{
		Use:   "synth --arch ARCH --preset NAME [--type T] -o FILE",
		Short: "Write a random-weight model in a real architecture's shape",
		Example: `  apr synth --arch llama --preset tiny -o tiny.gguf
  apr synth --arch qwen2 --preset qwen2.5-0.5b --type Q4_K -o q05b.gguf
  apr synth --list`,
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
	c.Flags().BoolVar(&opts.List, "list", false, "list the presets and exit")
	quietFlag(c, &opts.Quiet)
	jsonFlag(c, &opts.JSON)
	return c
}

func runSynth(env *Env, opts synthOptions) error {
	if opts.List {
		ps := synth.Presets()
		if opts.JSON {
			return writeJSON(env.Stdout, ps)
		}
		for _, p := range ps {
			fmt.Fprintf(env.Stdout, "%-9s %-14s n_embd %-5d layers %-3d heads %d/%d  %s\n", p.Arch, p.Name, p.NEmbd, p.NLayer, p.NHead, p.NHeadKV, p.Note)
		}
		return nil
	}
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
	prog := newProgress(env.Stderr, "synth", opts.Quiet)
	res, err := synth.Write(opts.Out, synth.Options{Preset: p, Type: t, Seed: opts.Seed,
		Progress: func(name string, i, n int) { prog.Step("[%d/%d] %s", i, n, name) }})
	prog.Done()
	if err != nil {
		if errors.Is(err, atomicfile.ErrNotRegular) {
			return badInput(err)
		}
		return err
	}
	fallbacks := make([]string, len(res.Fallbacks))
	for i, f := range res.Fallbacks {
		fallbacks[i] = f.String()
	}
	if opts.JSON {
		return writeJSON(env.Stdout, map[string]any{"path": opts.Out, "arch": p.Arch, "preset": p.Name,
			"type": t.String(), "seed": opts.Seed, "parameters": res.Params, "fallbacks": fallbacks})
	}
	fmt.Fprintf(env.Stderr, "wrote %s (%s %s, %s, seed %d, %d parameters)\n", opts.Out, p.Arch, p.Name, t, opts.Seed, res.Params)
	if len(res.Fallbacks) > 0 {
		fmt.Fprintf(env.Stderr, "%d matrices could not be written as %s and use llama.cpp's substitute (--json lists each):\n", len(res.Fallbacks), t)
		for _, line := range fallbackSummary(res.Fallbacks) {
			fmt.Fprintf(env.Stderr, "  %s\n", line)
		}
	}
	return nil
}

// fallbackSummary is a line per row width and substitute, naming the first
// two matrices and the last: a 0.5B model's 145 substitutions are one line,
// not 145 (the --json document keeps every one).
func fallbackSummary(fs []synth.Fallback) []string {
	type group struct {
		f     synth.Fallback
		names []string
	}
	var groups []*group
	byKey := map[[2]int]*group{}
	for _, f := range fs {
		k := [2]int{f.RowWidth, int(f.Used)}
		g := byKey[k]
		if g == nil {
			g = &group{f: f}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, f.Tensor)
	}
	lines := make([]string, len(groups))
	for i, g := range groups {
		names := strings.Join(g.names, ", ")
		if n := len(g.names); n > 3 {
			names = strings.Join(g.names[:2], ", ") + ", …, " + g.names[n-1]
		}
		block := ""
		if info, err := quant.Lookup(g.f.Asked); err == nil {
			block = fmt.Sprintf(" of %d", info.BlockSize)
		}
		lines[i] = fmt.Sprintf("%d written as %s: rows of %d are not a multiple of %s's block%s (%s)", len(g.names), g.f.Used, g.f.RowWidth, g.f.Asked, block, names)
	}
	return lines
}
