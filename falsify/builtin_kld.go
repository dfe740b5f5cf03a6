package falsify

import (
	"context"
	"math"

	"github.com/aprqa/apr/internal/kldfile"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/perplexity"
)

// ParamKLDBase is the kld falsifier's param naming the base file (llama.cpp's
// --kl-divergence-base layout); apr qa --kld-base sets it.
const ParamKLDBase = "kld_base"

// RefuseTooFew is the kld falsifier's refusal code when the base file scores
// fewer positions than llama.cpp computes statistics over.
const RefuseTooFew = "too_few_positions"

func registerKLD(r *Registry) {
	r.Register("kld", KindGolden, kldCheck,
		Needs(NeedModel), Thresholds("mean_kld", "kld_p99", "abs_ln_ppl_ratio"), Params("backend"), Refs("base file"),
		AppliesWhen(kldApplies),
		Doc("a backend's KL divergence, Δp and perplexity ratio against a llama.cpp base file (params.kld_base), as llama-perplexity --kl-divergence computes them"))
}

// kldApplies: without a base file there is nothing to compare with.
func kldApplies(c *Check) (bool, string) {
	if p, _ := c.ParamString(ParamKLDBase, ""); p == "" {
		return false, "no base file (params." + ParamKLDBase + "; apr qa --kld-base FILE)"
	}
	return true, ""
}

// kldCheck evaluates the model on params.backend (default cpu) over the base
// file's tokens (params.chunks: at most that many chunks, 0 all) and measures
// llama.cpp's statistics: mean_kld, kld_p99, kld_max, abs_ln_ppl_ratio
// (|ln(PPL(Q)/PPL(base))|), rms_dp, same_top_p, ppl, ppl_base. The base file
// is the reference: a file that cannot be read refuses.
func kldCheck(ctx context.Context, c *Check) error {
	path, err := c.ParamString(ParamKLDBase, "")
	if err != nil {
		return err
	}
	if path == "" {
		return c.Refuse("no base file: params.%s is empty", ParamKLDBase)
	}
	backend, err := c.ParamString("backend", "cpu")
	if err != nil {
		return err
	}
	chunks, err := c.ParamInt("chunks", 0)
	if err != nil {
		return err
	}
	if _, err := c.Model(); err != nil {
		return err
	}
	var base *kldfile.File
	if err := c.CallRef("base file", func() error {
		base, err = kldfile.Open(path)
		return err
	}); err != nil {
		return err
	}
	defer base.Close()
	res, err := perplexity.KLD(ctx, perplexity.Options{Model: c.ModelPath(), Backend: backend, Chunks: chunks}, base)
	if err != nil {
		return err
	}
	s := res.Summary
	if s == nil {
		return RefuseCode(RefuseTooFew, c.By(), "%d scored positions; llama.cpp computes no statistics on fewer than %d", res.Count, oracle.KLDMinCount)
	}
	c.Measure("mean_kld", s.KLD.Value)
	c.Measure("kld_p99", s.KLDDist.P99)
	c.Measure("kld_max", s.KLDDist.Max)
	c.Measure("abs_ln_ppl_ratio", math.Abs(s.LnPPLRatio.Value))
	c.Measure("rms_dp", s.RMSDp.Value)
	c.Measure("same_top_p", s.SameTop.Value)
	c.Measure("ppl", s.PPL.Value)
	c.Measure("ppl_base", s.PPLBase.Value)
	c.Note("%s on %s against %s: %d positions in %d chunks of %d; mean KLD %.6f ± %.6f, PPL(Q) %.4f, PPL(base) %.4f, same top p %.3f%%",
		c.ModelPath(), backend, path, s.Count, res.NChunk, res.NCtx, s.KLD.Value, s.KLD.Unc, s.PPL.Value, s.PPLBase.Value, 100*s.SameTop.Value)
	return nil
}
