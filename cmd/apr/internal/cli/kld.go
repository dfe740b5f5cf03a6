package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/internal/kldfile"
	"github.com/aprqa/apr/perplexity"
)

func init() { register(36, newKLDCmd) }

type kldOptions struct {
	Model   string
	Base    string
	Chunks  int
	Backend string
	Threads int
	JSON    bool
	Quiet   bool
}

func newKLDCmd(env *Env) *cobra.Command {
	var opts kldOptions
	c := &cobra.Command{
		Use:   "kld MODEL --base FILE.kld",
		Short: "KL divergence of a model against a llama.cpp base file",
		Long: `kld reads FILE.kld, a base file as llama-perplexity --kl-divergence-base (or
apr perplexity --kl-divergence-base) writes it — the tokens and, for the
second half of every chunk, the base model's log-probabilities — evaluates
MODEL over the same tokens, chunk by chunk as the base was made, and prints
the statistics llama-perplexity --kl-divergence prints: after every chunk
PPL(Q), ln(PPL(Q)/PPL(base)), mean KL divergence, RMS Δp and same-top-p,
each ± its uncertainty; then (from 100 scored positions) mean PPL(Q) and
PPL(base), their correlation, ratio and difference, mean/maximum/percentile
KL divergence, the distribution of Δp (the change in the probability of the
right token), RMS Δp and how often the top token is the same.

With --json, stdout carries one object: model, backend, base, n_ctx,
n_vocab, n_chunk, count, chunks (the per-chunk rows) and summary (null below
100 positions; probabilities as fractions, not percent).

MODEL must have the base's vocabulary; a file that is not llama.cpp's layout
is bad input (exit 2) with the offset and field at fault.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			if opts.Base == "" {
				return badInputf("kld: --base FILE.kld is required")
			}
			return runKLD(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Base, "base", "", "the base file (llama-perplexity --kl-divergence-base)")
	fl.IntVar(&opts.Chunks, "chunks", 0, "compare at most this many chunks (0: all)")
	fl.StringVar(&opts.Backend, "backend", "cpu", "backend to run on (ref: the FP32 reference; cpu: the optimized engine)")
	threadsFlag(fl, &opts.Threads, "threads for the backend (0: its choice)")
	quietFlag(c, &opts.Quiet)
	jsonFlag(c, &opts.JSON)
	return c
}

func runKLD(ctx context.Context, env *Env, opts kldOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Chunks < 0 {
		return badInputf("kld: --chunks %d is negative", opts.Chunks)
	}
	base, err := kldfile.Open(opts.Base)
	if err != nil {
		return badInput(err)
	}
	defer base.Close()
	prog := newProgress(env.Stderr, "kld", opts.Quiet)
	defer prog.Done()
	prog.Step("loading %s on %s", opts.Model, opts.Backend)
	res, err := perplexity.KLD(ctx, perplexity.Options{Model: opts.Model, Backend: opts.Backend, Threads: opts.Threads,
		Chunks: opts.Chunks, Log: env.Log, OnChunk: func(chunk int, ppl float64) {
			prog.Step("chunk %d of %d scored: PPL(Q) %.4f so far", chunk, base.NChunk, ppl)
		}}, base)
	prog.Done()
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, res)
	}
	return perplexity.WriteKLD(env.Stdout, res)
}
