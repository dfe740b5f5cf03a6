package cli

import (
	"bufio"
	"context"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/oracle"
)

func init() { register(34, newDiffCmd) }

type diffOptions struct {
	Model     string
	Backend   string
	Against   string
	Numerics  string
	Tokens    string
	Prompt    string
	MinCosine float64
	Threads   int
	JSON      bool
	SVG       string
}

func newDiffCmd(env *Env) *cobra.Command {
	var opts diffOptions
	c := &cobra.Command{
		Use:   "diff MODEL [--backend cpu] [--against ref] (--tokens ID,... | --prompt TEXT)",
		Short: "Bisect where two backends' computations part: every traced op, layer by layer",
		Long: `diff evaluates the same tokens on two backends of MODEL (--backend, judged
against --against) with every intermediate result traced under the
reference's op names, and compares them op by op: for each (layer, op), in
the order the computation reaches it, the worst cosine over the positions,
where it is and the largest absolute difference; then the first record
(computation order, lowest position) whose cosine falls below --min-cosine,
and the logits. That first record is where to look: the ops before it
agree, so the defect (or the amplification of noise) is in it.

Each (layer, op) also names its worst channel: the output value that
carries the largest share of the difference over the positions, with the
backend's scale against the judge in it. Rounding noise spreads over every
channel at scales near 1; a defect confined to one channel (a product's
output column scaled) takes a large share at a scale away from 1 at the op
where it enters, even where the model's noise hides it from the cosines.

Tokens come from --tokens, or from --prompt tokenized as a raw prompt with
the model's own tokenizer (BOS as the model says).

Exit 0 when every compared record is at or above --min-cosine, 1 when one is
below (the divergence is printed), 2 for bad input, 3 when a backend refuses.
With --json stdout carries one document: the stages, the first divergence,
the logits' comparison and the counts of records only one side reported.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Model = args[0]
			return runDiff(c.Context(), env, opts)
		},
	}
	c.Flags().StringVar(&opts.Backend, "backend", "cpu", "backend under test")
	c.Flags().StringVar(&opts.Against, "against", "ref", "backend that judges it")
	c.Flags().StringVar(&opts.Numerics, "numerics", "", `the judge's numerics when it is the reference: "plain" (its default), "ggml" (activations rounded as ggml-cpu's kernels round them; what apr qa's engine gates judge by) or "ggml-jitter" (ggml with each activation moved 4 float32 ulps first: the gates' noise floor)`)
	c.Flags().StringVar(&opts.Tokens, "tokens", "", "comma-separated token ids")
	c.Flags().StringVar(&opts.Prompt, "prompt", "", "text to tokenize with the model's tokenizer (raw, BOS per the model) instead of --tokens")
	c.Flags().Float64Var(&opts.MinCosine, "min-cosine", 0.999, "a record diverges below this cosine against the judge")
	threadsFlag(c.Flags(), &opts.Threads, "threads for the backends (0: their choice)")
	c.Flags().StringVar(&opts.SVG, "svg", "", "also draw each (layer, op)'s worst 1 - cosine and NMSE, the threshold and the first divergence, as SVG to FILE")
	jsonFlag(c, &opts.JSON)
	return c
}

// diffStage is one (layer, op) of the computation: its worst position.
type diffStage struct {
	Layer     int     `json:"layer"`
	Op        string  `json:"op"`
	Positions int     `json:"positions"`
	MinCosine float64 `json:"min_cosine"`
	WorstPos  int     `json:"worst_pos"`
	MaxAbs    float64 `json:"max_abs"`
	// MaxNMSE is the worst normalised mean squared error over the
	// positions, Σ(got−want)²/Σwant² (test-backend-ops' measure).
	MaxNMSE    float64 `json:"max_nmse"`
	Divergent  int     `json:"divergent_positions"`
	NonFinite  bool    `json:"non_finite,omitempty"`
	Mismatched bool    `json:"length_mismatch,omitempty"`
	// The channel (value index of the op's output) that carries the
	// largest share of the difference over the positions, that share, and
	// the backend's scale against the judge in it (oracle.ChannelSums): a
	// defect confined to one channel, such as a product's output column
	// scaled, shows there at the op it enters even where rounding noise
	// keeps the cosine near the model's own (-1 and no share: no
	// difference; no scale: the judge is 0 throughout that channel).
	WorstChannel int      `json:"worst_channel"`
	ChannelShare float64  `json:"worst_channel_share"`
	ChannelScale *float64 `json:"worst_channel_scale,omitempty"`
}

type diffReport struct {
	Model     string             `json:"model"`
	Backend   string             `json:"backend"`
	Against   string             `json:"against"`
	Tokens    []int32            `json:"tokens"`
	MinCosine float64            `json:"min_cosine_threshold"`
	Stages    []diffStage        `json:"stages"`
	First     *oracle.Divergence `json:"first_divergence"`
	Compared  int                `json:"compared_records"`
	OnlyIn    map[string]int     `json:"only_in"`
	Logits    diffLogits         `json:"logits"`
}

type diffLogits struct {
	MinCosine         float64 `json:"min_cosine"`
	MeanCosine        float64 `json:"mean_cosine"`
	WorstPos          int     `json:"worst_pos"`
	ArgmaxAgree       int     `json:"argmax_agree"`
	ArgmaxMismatch    []int   `json:"argmax_mismatches"`
	ComparedPositions int     `json:"positions"`
}

// diffTokens is the token sequence to evaluate: --tokens parsed, or the
// --prompt tokenized with the model's tokenizer (h, opened only then).
func diffTokens(opts diffOptions, open func() (*loaded.Model, error)) ([]int32, error) {
	switch {
	case opts.Tokens != "" && opts.Prompt != "":
		return nil, badInputf("give --tokens or --prompt, not both")
	case opts.Tokens != "":
		ids, err := parseTokenIDs(opts.Tokens)
		if err != nil {
			return nil, badInput(err)
		}
		return ids, nil
	case opts.Prompt == "":
		return nil, badInputf("give the tokens to evaluate: --tokens ID,... or --prompt TEXT")
	}
	h, err := open()
	if err != nil {
		return nil, err
	}
	tok, err := h.Tokenizer()
	if err != nil {
		return nil, err
	}
	ids, err := generate.PromptTokens(context.Background(), tok, nil, opts.Prompt, true)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, badInputf("--prompt %q has no tokens", opts.Prompt)
	}
	return ids, nil
}

func runDiff(ctx context.Context, env *Env, opts diffOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if math.IsNaN(opts.MinCosine) || opts.MinCosine > 1 || opts.MinCosine < -1 {
		return badInputf("--min-cosine %v: want a cosine in [-1, 1]", opts.MinCosine)
	}
	if opts.Backend == opts.Against {
		return badInputf("--backend and --against are both %q: nothing to compare", opts.Backend)
	}
	// The model is opened once: for the prompt's tokens and both evaluations.
	var h *loaded.Model
	open := func() (*loaded.Model, error) {
		if h == nil {
			var err error
			if h, err = loaded.Open(opts.Model); err != nil {
				return nil, err
			}
		}
		return h, nil
	}
	defer func() {
		if h != nil {
			h.Close()
		}
	}()
	ids, err := diffTokens(opts, open)
	if err != nil {
		return err
	}
	if _, err := open(); err != nil {
		return err
	}
	trace := func(backend, numerics string) (generate.LogitsResult, []oracle.Record, error) {
		var rec oracle.Recording
		env.Log.Info("diff: evaluating", "backend", backend, "numerics", numerics, "tokens", len(ids))
		res, err := generate.Logits(ctx, generate.LogitsOptions{Model: opts.Model, Loaded: h, Backend: backend, Tokens: ids,
			Threads: opts.Threads, Log: env.Log, Trace: rec.Trace(), Numerics: numerics})
		return res, rec.Records, err
	}
	want, wantRecs, err := trace(opts.Against, opts.Numerics)
	if err != nil {
		return err
	}
	got, gotRecs, err := trace(opts.Backend, "")
	if err != nil {
		return err
	}
	rep := diffReport{Model: opts.Model, Backend: opts.Backend, Against: opts.Against, Tokens: ids, MinCosine: opts.MinCosine}
	td := oracle.FirstDivergence(wantRecs, gotRecs, oracle.DivergenceTol{MinCosine: opts.MinCosine})
	rep.First, rep.Compared = td.First, td.Compared
	rep.OnlyIn = map[string]int{opts.Against: td.OnlyInA, opts.Backend: td.OnlyInB}
	rep.Stages = diffStages(wantRecs, gotRecs, opts.MinCosine)
	// The one parity judge; margin 0: every argmax mismatch is listed (a
	// bisection shows all, the contracts' gates count the decided ones).
	seq, err := oracle.Parity{}.Judge(got.Logits, want.Logits)
	if err != nil {
		return fmt.Errorf("diff: logits: %w", err)
	}
	rep.Logits = diffLogits{MinCosine: seq.MinCosine, MeanCosine: seq.MeanCosine, WorstPos: seq.Worst,
		ArgmaxAgree: seq.ArgmaxAgree, ArgmaxMismatch: seq.ArgmaxMismatches, ComparedPositions: seq.Compared}
	if rep.Logits.ArgmaxMismatch == nil {
		rep.Logits.ArgmaxMismatch = []int{}
	}
	if opts.SVG != "" {
		if err := writeDiffSVG(opts.SVG, rep); err != nil {
			return fmt.Errorf("diff: --svg %s: %w", opts.SVG, err)
		}
	}
	if opts.JSON {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else if err := printDiff(env, rep); err != nil {
		return err
	}
	if rep.First != nil || rep.Logits.MinCosine < opts.MinCosine {
		return ErrCheckFailed
	}
	return nil
}

// diffStages folds the records into (layer, op) stages in the order the
// judge reported them.
func diffStages(want, got []oracle.Record, minCos float64) []diffStage {
	type key struct {
		layer int
		op    string
		pos   int
	}
	gi := make(map[key][]float32, len(got))
	for _, r := range got {
		gi[key{r.Layer, r.Op, r.Pos}] = r.Values
	}
	type sk struct {
		layer int
		op    string
	}
	idx := map[sk]int{}
	var out []diffStage
	var chans []oracle.ChannelSums
	for _, r := range want {
		gv, ok := gi[key{r.Layer, r.Op, r.Pos}]
		if !ok {
			continue
		}
		i, seen := idx[sk{r.Layer, r.Op}]
		if !seen {
			i = len(out)
			idx[sk{r.Layer, r.Op}] = i
			out = append(out, diffStage{Layer: r.Layer, Op: r.Op, MinCosine: 1, WorstPos: -1})
			chans = append(chans, oracle.ChannelSums{})
		}
		s := &out[i]
		s.Positions++
		if len(gv) != len(r.Values) {
			s.Mismatched = true
			s.Divergent++
			continue
		}
		c, err := oracle.Cosine(gv, r.Values)
		if err != nil {
			if oracle.Finite("", gv) != nil || oracle.Finite("", r.Values) != nil {
				s.NonFinite = true
				s.Divergent++
			}
			continue // both zero: equal
		}
		if c < s.MinCosine || s.WorstPos < 0 {
			s.MinCosine, s.WorstPos = min(c, s.MinCosine), r.Pos
		}
		if ma, _, err := oracle.MaxAbs(gv, r.Values); err == nil {
			s.MaxAbs = max(s.MaxAbs, ma)
		}
		if e, err := oracle.NMSE(gv, r.Values); err == nil {
			s.MaxNMSE = max(s.MaxNMSE, e)
		}
		if c < minCos {
			s.Divergent++
		}
		if chans[i].Add(gv, r.Values) != nil {
			s.Mismatched = true // a record of another width than the op's others
		}
	}
	for i := range out {
		w := chans[i].Worst()
		out[i].WorstChannel, out[i].ChannelShare = w.Channel, w.Share
		if w.ScaleOK {
			out[i].ChannelScale = &w.Scale
		}
	}
	return out
}

func printDiff(env *Env, rep diffReport) error {
	w := bufio.NewWriter(env.Stdout)
	fmt.Fprintf(w, "%s: %s against %s over %d tokens (a record diverges below cosine %g)\n",
		rep.Model, rep.Backend, rep.Against, len(rep.Tokens), rep.MinCosine)
	fmt.Fprintf(w, "%-6s %-16s %-12s %-6s %-10s %-10s %-22s %s\n", "layer", "op", "1 - cos", "at", "max |d|", "nmse", "worst channel", "divergent")
	for _, s := range rep.Stages {
		layer := fmt.Sprint(s.Layer)
		if s.Layer < 0 {
			layer = "-"
		}
		mark := ""
		if s.Divergent > 0 {
			mark = fmt.Sprintf("%d/%d", s.Divergent, s.Positions)
		}
		switch {
		case s.NonFinite:
			mark += " non-finite"
		case s.Mismatched:
			mark += " length mismatch"
		}
		ch := "-"
		if s.WorstChannel >= 0 {
			ch = fmt.Sprintf("%d %.0f%%", s.WorstChannel, 100*s.ChannelShare)
			if s.ChannelScale != nil {
				ch += fmt.Sprintf(" ×%.3g", *s.ChannelScale)
			}
		}
		fmt.Fprintf(w, "%-6s %-16s %-12.3e %-6d %-10.3g %-10.3g %-22s %s\n", layer, s.Op, 1-s.MinCosine, s.WorstPos, s.MaxAbs, s.MaxNMSE, ch, mark)
	}
	fmt.Fprintf(w, "logits: 1 - min cosine %.3e at position %d, 1 - mean %.3e, argmax %d/%d\n",
		1-rep.Logits.MinCosine, rep.Logits.WorstPos, 1-rep.Logits.MeanCosine, rep.Logits.ArgmaxAgree, rep.Logits.ComparedPositions)
	for who, n := range rep.OnlyIn {
		if n > 0 {
			fmt.Fprintf(w, "%d records only %s reported (not compared)\n", n, who)
		}
	}
	if rep.First != nil {
		fmt.Fprintf(w, "first divergence: %s\n", rep.First)
	} else {
		fmt.Fprintf(w, "no record below cosine %g (%d compared)\n", rep.MinCosine, rep.Compared)
	}
	return w.Flush()
}
