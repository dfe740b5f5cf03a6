package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/internal/atomicfile"
	"github.com/aprqa/apr/perplexity"
)

func init() { register(35, newPerplexityCmd) }

type perplexityOptions struct {
	Model   string
	File    string
	NCtx    int
	Chunks  int
	Backend string
	Threads int
	Base    string
	JSON    bool
	Quiet   bool
}

func newPerplexityCmd(env *Env) *cobra.Command {
	var opts perplexityOptions
	c := &cobra.Command{
		Use:   "perplexity MODEL -f TEXT [-c N]",
		Short: "Perplexity over a text, as llama.cpp's llama-perplexity computes it",
		Long: `perplexity scores MODEL on the text in TEXT by llama.cpp's method
(tools/perplexity/perplexity.cpp): the text is tokenized with the model's
tokenizer (BOS added as the model's add_bos says, control tokens not parsed),
cut into chunks of -c tokens (the remainder is dropped), and every chunk is
evaluated from an empty cache with its first token replaced by BOS (when the
model adds one). Only the second half of each chunk is scored (positions
c/2 … c−2, each predicting the next token), so every scored token has at
least c/2 tokens of context. The text must give at least 2·c tokens.

stdout shows the running perplexity after each chunk ("[1]x,[2]y,…") and
llama.cpp's last line, "Final estimate: PPL = x +/- y" (y: exp(mean)·sd/√(n−1)
of the tokens' negative log-likelihoods). With --json, stdout carries one
object: model, backend, n_ctx, n_vocab, tokens, n_chunk, scored, chunk_ppl,
ppl, ppl_unc (and kl_divergence_base when written).

--kl-divergence-base OUT also writes the scored positions' log-probabilities
in llama.cpp's file layout (what llama-perplexity --kl-divergence-base
writes), for apr kld or llama-perplexity --kl-divergence to compare another
model against.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			if opts.File == "" {
				return badInputf("perplexity: -f TEXT is required")
			}
			return runPerplexity(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&opts.File, "file", "f", "", "the text to score")
	fl.IntVarP(&opts.NCtx, "ctx-size", "c", perplexity.DefaultNCtx, "tokens per chunk (llama.cpp's -c)")
	fl.IntVar(&opts.Chunks, "chunks", 0, "score at most this many chunks (0: all)")
	fl.StringVar(&opts.Backend, "backend", "cpu", "backend to run on (ref: the FP32 reference; cpu: the optimized engine)")
	threadsFlag(fl, &opts.Threads, "threads for the backend (0: its choice)")
	fl.StringVar(&opts.Base, "kl-divergence-base", "", "also write the log-probabilities to this file, in llama.cpp's layout")
	quietFlag(c, &opts.Quiet)
	jsonFlag(c, &opts.JSON)
	return c
}

func runPerplexity(ctx context.Context, env *Env, opts perplexityOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.NCtx < 3 {
		return badInputf("perplexity: -c %d leaves no token to score (want at least 3)", opts.NCtx)
	}
	if opts.Chunks < 0 {
		return badInputf("perplexity: --chunks %d is negative", opts.Chunks)
	}
	text, err := os.ReadFile(opts.File)
	if err != nil {
		return badInput(err)
	}
	prog := newProgress(env.Stderr, "perplexity", opts.Quiet)
	defer prog.Done()
	prog.Step("loading %s on %s", opts.Model, opts.Backend)
	po := perplexity.Options{Model: opts.Model, Backend: opts.Backend, Threads: opts.Threads, NCtx: opts.NCtx,
		Chunks: opts.Chunks, Log: env.Log}
	po.OnChunk = func(chunk int, ppl float64) {
		prog.Step("chunk %d scored: PPL %.4f so far", chunk, ppl)
		if !opts.JSON {
			fmt.Fprintf(env.Stdout, "[%d]%.4f,", chunk, ppl)
		}
	}
	var res perplexity.Result
	if opts.Base == "" {
		res, err = perplexity.Perplexity(ctx, po, string(text), nil)
	} else {
		res, err = writeBase(opts.Base, func(f *os.File) (perplexity.Result, error) {
			return perplexity.Perplexity(ctx, po, string(text), f)
		})
		res.BaseFile = opts.Base
	}
	prog.Done()
	if !opts.JSON && len(res.ChunkPPL) > 0 {
		fmt.Fprintln(env.Stdout)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, res)
	}
	_, err = fmt.Fprintln(env.Stdout, perplexity.FinalLine(res))
	return err
}

// writeBase writes the base file atomically (internal/atomicfile: only a
// new path or over a regular file, 0644 less the umask) and only when fn
// succeeded: a failed run leaves no file that looks complete.
func writeBase(path string, fn func(*os.File) (perplexity.Result, error)) (perplexity.Result, error) {
	var res perplexity.Result
	err := atomicfile.Write(path, false, func(f *os.File) error {
		var err error
		res, err = fn(f)
		return err
	})
	if errors.Is(err, atomicfile.ErrNotRegular) {
		return res, badInput(err)
	}
	return res, err
}
