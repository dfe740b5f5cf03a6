package oracle

import (
	"fmt"
	"math"
	"slices"

	"github.com/aprqa/apr/internal/kldfile"
)

// This file is llama.cpp's perplexity and KL-divergence statistics
// (tools/perplexity/perplexity.cpp), computed as llama.cpp computes them, down
// to which sums are float32 and which float64, so that the printed digits
// agree: a difference then comes from the logits, not from the statistics.

// expf is C's expf to within the last bit: exp in float64, rounded once.
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// maxSumExp returns the largest logit, its lowest index, and Σ expf(x − max)
// accumulated in float64, as llama.cpp's log_softmax functions do.
func maxSumExp(logits []float32) (float32, int, float64) {
	m, im := logits[0], 0
	for i, v := range logits[1:] {
		if v > m {
			m, im = v, i+1
		}
	}
	var s float64
	for _, v := range logits {
		s += float64(expf(v - m))
	}
	return m, im, s
}

// NLL returns −log p(tok) under softmax(logits) as llama.cpp's perplexity
// computes it when it writes no base file: logits[tok] − max in float32, then
// log Σexp subtracted in float64. Non-finite logits are an error.
func NLL(logits []float32, tok int32) (float64, error) {
	if err := Finite("logits", logits); err != nil {
		return 0, err
	}
	if tok < 0 || int(tok) >= len(logits) {
		return 0, fmt.Errorf("oracle: token %d outside %d logits", tok, len(logits))
	}
	m, _, s := maxSumExp(logits)
	return -(float64(logits[tok]-m) - math.Log(s)), nil
}

// Perplexity accumulates negative log-likelihoods into llama.cpp's estimate
// exp(mean) ± exp(mean)·sd/√(n−1).
type Perplexity struct {
	nll, nll2 float64
	count     int
}

// Add records one scored token's negative log-likelihood.
func (p *Perplexity) Add(nll float64) {
	p.nll += nll
	p.nll2 += nll * nll
	p.count++
}

// Count is the number of scored tokens.
func (p *Perplexity) Count() int { return p.count }

// Value is exp(mean NLL) so far (llama.cpp's per-chunk "[i]x" figure).
func (p *Perplexity) Value() float64 { return math.Exp(p.nll / float64(p.count)) }

// Estimate is llama.cpp's "Final estimate: PPL = x ± y"; ok is false where
// llama.cpp prints "Unexpected negative standard deviation" instead (no
// spread: fewer than two tokens, or all alike).
func (p *Perplexity) Estimate() (ppl, unc float64, ok bool) {
	n := float64(p.count)
	mean := p.nll / n
	ppl = math.Exp(mean)
	v := p.nll2/n - mean*mean
	if v <= 0 || p.count < 2 {
		return ppl, 0, false
	}
	return ppl, math.Sqrt(v/(n-1)) * ppl, true
}

// KLD accumulates llama.cpp's comparison of a model's logits with a base
// file's log-probabilities (kl_divergence_result): perplexities of both,
// their covariance, the KL divergence per token, the change in the
// probability of the right token (Δp), and how often the top token agrees.
type KLD struct {
	sumNLL, sumNLL2, sumNLLBase, sumNLLBase2, sumNLLNLLBase float64
	sumKLD, sumKLD2                                         float64
	sumPDiff, sumPDiff2, sumPDiff4                          float64
	maxPDiff                                                float32
	sameTop, count                                          int
	klds, pdiffs                                            []float32
}

// Add compares one scored position: logits are the model's, base the base
// file's record for the same position, tok the token that follows. It
// returns the position's KL divergence and Δp.
func (k *KLD) Add(logits []float32, base kldfile.Record, tok int32) (float64, float32, error) {
	if err := Finite("logits", logits); err != nil {
		return 0, 0, err
	}
	if base.Len() != len(logits) {
		return 0, 0, fmt.Errorf("oracle: %d logits against a base record of %d", len(logits), base.Len())
	}
	if tok < 0 || int(tok) >= len(logits) {
		return 0, 0, fmt.Errorf("oracle: token %d outside %d logits", tok, len(logits))
	}
	maxL, imax, s := maxSumExp(logits)
	logSum := float32(math.Log(s))
	nll := (maxL + logSum) - logits[tok]
	k.sumNLL += float64(nll)
	k.sumNLL2 += float64(nll * nll)
	nllBase := -base.LogProb(int(tok))
	k.sumNLLBase += float64(nllBase)
	k.sumNLLBase2 += float64(nllBase * nllBase)
	k.sumNLLNLLBase += float64(nll * nllBase)

	maxL += logSum
	var sum float64
	imaxBase := -1
	var pmax float32
	for i, v := range logits {
		pl := base.LogProb(i)
		if i == 0 || pl > pmax {
			pmax, imaxBase = pl, i
		}
		if pl > -16 {
			pb := expf(pl)
			sum += float64(pb * float32((pl-v)+maxL))
		}
	}
	k.sumKLD += sum
	k.sumKLD2 += sum * sum
	k.count++
	if imax == imaxBase {
		k.sameTop++
	}
	pBase := expf(-nllBase)
	p := expf(-nll)
	pd := p - pBase
	k.sumPDiff += float64(pd)
	pd2 := float64(pd * pd)
	k.sumPDiff2 += pd2
	k.sumPDiff4 += pd2 * pd2
	k.maxPDiff = max(k.maxPDiff, float32(math.Abs(float64(pd))))
	k.klds = append(k.klds, float32(sum))
	k.pdiffs = append(k.pdiffs, pd)
	return sum, pd, nil
}

// Count is the number of positions compared.
func (k *KLD) Count() int { return k.count }

// meanUnc is llama.cpp's mean_and_uncertainty.
func meanUnc(sum, sum2 float64, count int) Estimate {
	if count < 1 {
		return Estimate{}
	}
	n := float64(count)
	f := sum / n
	df := sum2/n - f*f
	if df > 0 && count > 10 {
		df = math.Sqrt(df / (n - 1))
	} else {
		df = 0
	}
	return Estimate{f, df}
}

// covariance is llama.cpp's covariance of the mean.
func covariance(a, b, ab float64, count int) float64 {
	if count < 10 {
		return 0
	}
	n := float64(count)
	return (ab/n - (a/n)*(b/n)) / (n - 1)
}

// Estimate is a value and its uncertainty (one standard error).
type Estimate struct {
	Value float64 `json:"value"`
	Unc   float64 `json:"unc"`
}

// KLDRunning is the row llama.cpp prints after each chunk: the statistics of
// every position so far.
type KLDRunning struct {
	PPL        Estimate `json:"ppl"`          // PPL(Q)
	LnPPLRatio Estimate `json:"ln_ppl_ratio"` // ln(PPL(Q)/PPL(base))
	KLD        Estimate `json:"kld"`          // mean KL divergence
	RMSDp      Estimate `json:"rms_dp"`       // RMS Δp (a fraction, not %)
	SameTop    Estimate `json:"same_top_p"`   // fraction of positions with the same top token
}

func (k *KLD) logPPL() (q, base Estimate, cov float64) {
	q = meanUnc(k.sumNLL, k.sumNLL2, k.count)
	base = meanUnc(k.sumNLLBase, k.sumNLLBase2, k.count)
	cov = covariance(k.sumNLL, k.sumNLLBase, k.sumNLLNLLBase, k.count)
	return
}

func (k *KLD) rmsDp() Estimate {
	mse := meanUnc(k.sumPDiff2, k.sumPDiff4, k.count)
	v := math.Sqrt(mse.Value)
	return Estimate{v, 0.5 / v * mse.Unc}
}

func (k *KLD) sameTopP() Estimate {
	p := float64(k.sameTop) / float64(k.count)
	return Estimate{p, math.Sqrt(p * (1 - p) / float64(k.count-1))}
}

// Running returns the statistics so far, as llama.cpp's per-chunk row.
func (k *KLD) Running() KLDRunning {
	q, b, cov := k.logPPL()
	return KLDRunning{
		PPL:        Estimate{math.Exp(q.Value), math.Exp(q.Value) * q.Unc},
		LnPPLRatio: Estimate{q.Value - b.Value, math.Sqrt(q.Unc*q.Unc + b.Unc*b.Unc - 2*cov)},
		KLD:        meanUnc(k.sumKLD, k.sumKLD2, k.count),
		RMSDp:      k.rmsDp(),
		SameTop:    k.sameTopP(),
	}
}

// Distribution is the order statistics llama.cpp prints of a sorted set of
// values: percentiles by linear interpolation in float32 (its percentile),
// the median as the mean of the middle two.
type Distribution struct {
	Max    float64 `json:"max"`
	P999   float64 `json:"p99_9"`
	P99    float64 `json:"p99"`
	P95    float64 `json:"p95"`
	P90    float64 `json:"p90"`
	P75    float64 `json:"p75"`
	Median float64 `json:"median"`
	P25    float64 `json:"p25"`
	P10    float64 `json:"p10"`
	P5     float64 `json:"p5"`
	P1     float64 `json:"p1"`
	P01    float64 `json:"p0_1"`
	Min    float64 `json:"min"`
}

func percentile(v []float32, fraction float32) float32 {
	if fraction <= 0 {
		return v[0]
	}
	if fraction >= 1 {
		return v[len(v)-1]
	}
	p := fraction * float32(len(v)-1)
	ip := int(p)
	p -= float32(ip)
	return float32((1-p)*v[ip]) + float32(p*v[min(ip+1, len(v)-1)])
}

func distribution(v []float32) Distribution {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = 0.5 * (v[n/2] + v[n/2-1])
	}
	pc := func(f float32) float64 { return float64(percentile(v, f)) }
	return Distribution{Max: float64(v[n-1]), P999: pc(0.999), P99: pc(0.990), P95: pc(0.950), P90: pc(0.900),
		P75: pc(0.750), Median: float64(med), P25: pc(0.250), P10: pc(0.100), P5: pc(0.050), P1: pc(0.010),
		P01: pc(0.001), Min: float64(v[0])}
}

// KLDMinCount is the fewest positions llama.cpp computes the final
// statistics over ("we do not wish to do statistics on so few values").
const KLDMinCount = 100

// KLDSummary is llama.cpp's final statistics of a KL-divergence run.
// Probabilities (Δp, RMS Δp, same top p) are fractions; llama.cpp prints them
// in percent.
type KLDSummary struct {
	Count int `json:"count"`
	// Perplexity statistics.
	PPL        Estimate `json:"ppl"`          // Mean PPL(Q)
	PPLBase    Estimate `json:"ppl_base"`     // Mean PPL(base)
	Cor        float64  `json:"cor_ln_ppl"`   // Cor(ln(PPL(Q)), ln(PPL(base)))
	LnPPLRatio Estimate `json:"ln_ppl_ratio"` // Mean ln(PPL(Q)/PPL(base))
	PPLRatio   Estimate `json:"ppl_ratio"`    // Mean PPL(Q)/PPL(base)
	PPLDiff    Estimate `json:"ppl_diff"`     // Mean PPL(Q)-PPL(base)
	// KL divergence statistics.
	KLD     Estimate     `json:"kld"`
	KLDDist Distribution `json:"kld_dist"`
	// Token probability statistics.
	Dp      Estimate     `json:"dp"`
	DpDist  Distribution `json:"dp_dist"`
	RMSDp   Estimate     `json:"rms_dp"`
	SameTop Estimate     `json:"same_top_p"`
}

// Summary returns the final statistics; ok is false below KLDMinCount
// positions, where llama.cpp prints none.
func (k *KLD) Summary() (KLDSummary, bool) {
	if k.count < KLDMinCount {
		return KLDSummary{Count: k.count}, false
	}
	q, b, cov := k.logPPL()
	ppl := Estimate{math.Exp(q.Value), math.Exp(q.Value) * q.Unc}
	pplBase := Estimate{math.Exp(b.Value), math.Exp(b.Value) * b.Unc}
	ratio := Estimate{q.Value - b.Value, math.Sqrt(q.Unc*q.Unc + b.Unc*b.Unc - 2*cov)}
	pplCov := ppl.Value * pplBase.Value * cov
	return KLDSummary{
		Count:      k.count,
		PPL:        ppl,
		PPLBase:    pplBase,
		Cor:        cov / (q.Unc * b.Unc),
		LnPPLRatio: ratio,
		PPLRatio:   Estimate{math.Exp(ratio.Value), math.Exp(ratio.Value) * ratio.Unc},
		PPLDiff: Estimate{ppl.Value - pplBase.Value,
			math.Sqrt(ppl.Unc*ppl.Unc + pplBase.Unc*pplBase.Unc - 2*pplCov)},
		KLD:     meanUnc(k.sumKLD, k.sumKLD2, k.count),
		KLDDist: distribution(k.klds),
		Dp:      meanUnc(k.sumPDiff, k.sumPDiff2, k.count),
		DpDist:  distribution(k.pdiffs),
		RMSDp:   k.rmsDp(),
		SameTop: k.sameTopP(),
	}, true
}
