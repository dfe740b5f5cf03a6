package cli

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/generate"
)

func init() { register(31, newLogitsCmd) }

type logitsOptions struct {
	Model    string
	Tokens   string
	Backend  string
	Numerics string
	Threads  int
	JSON     bool
}

func newLogitsCmd(env *Env) *cobra.Command {
	var opts logitsOptions
	c := &cobra.Command{
		Use:   "logits MODEL --tokens ID,ID,...",
		Short: "Print every position's logits for a token sequence",
		Long: `logits feeds the token ids, in one evaluation from position 0, to MODEL on one
backend and prints the logits at every position.

With --json, stdout carries one object: {"n_vocab", "tokens", "logits"}, where
logits holds one full row of n_vocab values per position. Without it, each
position's five best tokens are listed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			return runLogits(c.Context(), env, opts)
		},
	}
	c.Flags().StringVar(&opts.Tokens, "tokens", "", "comma-separated token ids")
	c.Flags().StringVar(&opts.Backend, "backend", "cpu", "backend to run on (ref: the FP32 reference; cpu: the optimized engine)")
	c.Flags().StringVar(&opts.Numerics, "numerics", "", `the reference's numerics (--backend ref): "plain" (its default), "ggml" (activations rounded as ggml-cpu's kernels round them) or "ggml-jitter" (ggml with each activation moved 4 float32 ulps first: the noise floor of apr qa's cosine gates)`)
	threadsFlag(c.Flags(), &opts.Threads, "threads for the backend (0: its choice)")
	jsonFlag(c, &opts.JSON)
	return c
}

// parseTokenIDs parses "1,2,3" (spaces allowed around ids).
func parseTokenIDs(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--tokens is empty")
	}
	parts := strings.Split(s, ",")
	out := make([]int32, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--tokens: entry %d (%q) is not a token id", i, p)
		}
		out[i] = int32(v)
	}
	return out, nil
}

func runLogits(ctx context.Context, env *Env, opts logitsOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ids, err := parseTokenIDs(opts.Tokens)
	if err != nil {
		return badInput(err)
	}
	res, err := generate.Logits(ctx, generate.LogitsOptions{
		Model: opts.Model, Backend: opts.Backend, Tokens: ids, Threads: opts.Threads, Log: env.Log, Numerics: opts.Numerics,
	})
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, res)
	}
	w := bufio.NewWriter(env.Stdout)
	for pos, row := range res.Logits {
		idx := make([]int, len(row))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] > row[idx[b]] })
		fmt.Fprintf(w, "pos %d token %d:", pos, res.Tokens[pos])
		for _, i := range idx[:min(5, len(idx))] {
			fmt.Fprintf(w, " %d:%.4f", i, row[i])
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}
