package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/backends"
	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/sample"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/refuse"
)

func init() { register(30, newRunCmd) }

type runOptions struct {
	Model      string
	Prompt     string
	N          int
	Backend    string
	Raw        bool
	IgnoreEOS  bool
	Sampling   sample.Params
	Threads    int
	PlantDelay []string
	NoF2       bool
	JSON       bool
}

func newRunCmd(env *Env) *cobra.Command {
	var opts runOptions
	c := &cobra.Command{
		Use:   "run MODEL -p PROMPT",
		Short: "Generate a completion and time each stage",
		Long: `run generates a completion of PROMPT with MODEL on one backend.

The prompt goes through the model's own chat template (one user message and
the generation prompt) unless --raw; with --raw it is tokenized as written,
with control tokens such as <|im_start|> parsed as control tokens and BOS
added as the model's add_bos says. Generation stops at any of the model's
end-of-generation tokens unless --ignore-eos, or after -n tokens. Sampling is
greedy unless --temp > 0; seeded sampling is deterministic.

The completion goes to stdout, the statistics to stderr. With --json, stdout
carries exactly one JSON object: model, model_sha256, backend, prompt_tokens,
tokens_out, token_ids, text, load_ms, h2d_ms, prefill_ms, decode_ms, wall_ms,
decode_tok_per_s (decode only) and finish_reason ("stop" or "length").

On a device backend (cuda) F2 runs before the prompt is evaluated: the
device's logits over the prompt's first tokens against the reference's; a
failed F2 exits 1 with nothing generated. --no-f2 skips it, to measure what
F2 costs (time to first token with and without it): f2_verdict is then
"off", a warning says the output is not validated, and apr qa's f2 gate is
unaffected.

--plant-delay STAGE=MS (stages load, h2d, prefill, decode) sleeps inside that
stage: the timing falsifier's hook, to show that each field measures its own
stage. An unknown or unavailable backend is refused (exit 3), never replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			if !c.Flags().Changed("prompt") {
				return badInputf("run: -p PROMPT is required")
			}
			return runRun(c.Context(), env, opts)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&opts.Prompt, "prompt", "p", "", "the prompt")
	fl.IntVarP(&opts.N, "n", "n", 128, "tokens to generate (at most)")
	fl.StringVar(&opts.Backend, "backend", "cpu", "backend to run on (ref: the FP32 reference; cpu: the optimized engine)")
	fl.BoolVar(&opts.Raw, "raw", false, "no chat template; control tokens in the prompt are parsed")
	fl.BoolVar(&opts.IgnoreEOS, "ignore-eos", false, "do not stop at end-of-generation tokens")
	samplingFlags(fl, &opts.Sampling)
	threadsFlag(fl, &opts.Threads, "threads for the backend (0: its choice)")
	fl.StringArrayVar(&opts.PlantDelay, "plant-delay", nil, "STAGE=MS: sleep MS milliseconds inside STAGE (load, h2d, prefill, decode)")
	fl.BoolVar(&opts.NoF2, "no-f2", false, "skip F2 on a device backend (f2_verdict \"off\"): to measure what it costs; the output is not validated")
	jsonFlag(c, &opts.JSON)
	return c
}

func runRun(ctx context.Context, env *Env, opts runOptions) error {
	if backends.Device(opts.Backend) {
		if !opts.NoF2 {
			falsify.F2Warm() // while the model loads
		}
		backends.Warm(opts.Backend) // the driver's set-up, beside the model's header
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.N < 1 {
		return badInputf("run: -n %d must be at least 1", opts.N)
	}
	if err := opts.Sampling.Validate(); err != nil {
		return badInput(err)
	}
	delays, err := generate.ParsePlantDelays(opts.PlantDelay)
	if err != nil {
		return badInput(err)
	}
	g := generate.Options{
		Model: opts.Model, Backend: opts.Backend, Prompt: opts.Prompt, Raw: opts.Raw,
		MaxTokens: opts.N, IgnoreEOS: opts.IgnoreEOS, Sampling: opts.Sampling, Threads: opts.Threads,
		PlantDelay: delays, Log: env.Log,
	}
	if opts.NoF2 {
		g.Validate = falsify.F2Skip
		if backends.Device(opts.Backend) {
			env.Log.Warn("run: F2 is off (--no-f2): the device's output is not validated against the reference", "backend", opts.Backend)
		}
	} else {
		f2 := falsify.NewF2Run(opts.Model, env.Log)
		g.Validate = f2.Validate
		if backends.Device(opts.Backend) {
			g.Prepare = f2.Prepare // the reference's answer beside the load and upload
		}
	}
	if !opts.JSON {
		g.OnText = func(b []byte) { env.Stdout.Write(b) }
	}
	res, err := generate.Run(ctx, g)
	if errors.Is(err, falsify.ErrF2Failed) {
		fmt.Fprintf(env.Stderr, "apr: %v\n", err)
		if opts.JSON {
			if werr := writeJSON(env.Stdout, res); werr != nil {
				return werr
			}
		}
		return ErrCheckFailed
	}
	if err != nil {
		if errors.Is(err, generate.ErrEmptyPrompt) {
			return badInput(err)
		}
		if r, ok := refuse.As(err); ok && r.By == chat.Refuser && !opts.Raw {
			// Name the way out: a base model has no chat template, and
			// --raw runs the prompt as plain text.
			return &refuse.Error{By: r.By, Reason: r.Reason + "; --raw runs the prompt as plain text, without a chat template", Err: r.Err}
		}
		return err
	}
	if opts.JSON {
		return writeJSON(env.Stdout, res)
	}
	fmt.Fprintln(env.Stdout)
	fmt.Fprintf(env.Stderr, "backend %s: prompt %d tokens, %d generated (%s); load %.1f ms, h2d %.1f ms, f2 %.1f ms (%s), prefill %.1f ms, decode %.1f ms (%.1f tok/s), wall %.1f ms\n",
		res.Backend, res.PromptTokens, res.TokensOut, res.FinishReason, res.LoadMS, res.H2DMS, res.F2MS, res.F2Verdict, res.PrefillMS, res.DecodeMS, res.DecodeTokPerS, res.WallMS)
	return nil
}
