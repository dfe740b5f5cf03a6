package cli

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/aprqa/apr/engine/sample"
)

// Shared flags are declared and validated here, once: a value that makes no
// sense is refused while the flags are parsed, as bad usage (exit 2), by
// every verb that takes the flag alike.

// threadsFlag adds --threads: 0 lets the backend choose; negative counts
// are refused.
func threadsFlag(fs *pflag.FlagSet, p *int, usage string) {
	fs.Var((*countValue)(p), "threads", usage)
}

// countValue is an int flag that refuses negative values.
type countValue int

func (v *countValue) String() string { return strconv.Itoa(int(*v)) }
func (v *countValue) Type() string   { return "int" }

func (v *countValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < 0 {
		return fmt.Errorf("%d is negative (0 lets the backend choose)", n)
	}
	*v = countValue(n)
	return nil
}

// samplingFlags adds the sampling flags apr run and apr chat share: one
// set, mapped onto sample.Params as apr serve maps its request fields.
func samplingFlags(fs *pflag.FlagSet, p *sample.Params) {
	fs.Uint64Var(&p.Seed, "seed", 0, "sampling seed")
	fs.Float64Var(&p.Temp, "temp", 0, "temperature (0: greedy)")
	fs.IntVar(&p.TopK, "top-k", 0, "keep the K most likely tokens (0: all)")
	fs.Float64Var(&p.TopP, "top-p", 0, "nucleus sampling threshold (0 or 1: off)")
	fs.Float64Var(&p.MinP, "min-p", 0, "drop tokens below this fraction of the best one's probability")
	fs.Float64Var(&p.RepeatPenalty, "repeat-penalty", 0, "repetition penalty (0 or 1: off)")
	fs.IntVar(&p.RepeatLastN, "repeat-last-n", 64, "tokens the penalties look back over (0: all)")
	fs.Float64Var(&p.FrequencyPenalty, "frequency-penalty", 0, "lower a recent token's logit by this times its count (0: off)")
	fs.Float64Var(&p.PresencePenalty, "presence-penalty", 0, "lower a recent token's logit by this, once (0: off)")
	fs.Var((*logitBiasValue)(&p.LogitBias), "logit-bias", "ID=BIAS: add BIAS (-100 … 100) to token ID's logit (repeatable)")
}

// logitBiasValue is --logit-bias ID=BIAS, repeatable, into a map.
type logitBiasValue map[int32]float64

func (v *logitBiasValue) String() string {
	var parts []string
	for id, b := range *v {
		parts = append(parts, fmt.Sprintf("%d=%g", id, b))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
func (v *logitBiasValue) Type() string { return "ID=BIAS" }
func (v *logitBiasValue) Set(s string) error {
	ids, bs, ok := strings.Cut(s, "=")
	id, err := strconv.ParseInt(strings.TrimSpace(ids), 10, 32)
	if !ok || err != nil || id < 0 {
		return fmt.Errorf("%q: want ID=BIAS with a token id ≥ 0", s)
	}
	b, err := strconv.ParseFloat(strings.TrimSpace(bs), 64)
	if err != nil || !(math.Abs(b) <= sample.MaxLogitBias) {
		return fmt.Errorf("%q: the bias must be a number in [-%d, %d]", s, sample.MaxLogitBias, sample.MaxLogitBias)
	}
	if *v == nil {
		*v = map[int32]float64{}
	}
	(*v)[int32(id)] = b
	return nil
}
