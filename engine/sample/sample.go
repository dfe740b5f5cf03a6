// Package sample picks the next token from a logits row: greedy, or seeded
// sampling with temperature, top-k, top-p, min-p, logit biases and the
// repetition, frequency and presence penalties. The same seed, parameters
// and inputs always give the same tokens.
//
// # Conventions
//
// The steps run in llama.cpp's default order: logit biases, the penalties
// (one pass, as llama.cpp's penalties sampler: a recent token's logit is
// divided by the repetition penalty, or multiplied when ≤ 0, then lowered
// by count × the frequency penalty and once by the presence penalty), top-k,
// top-p, min-p, temperature, then a draw from the softmax. Candidates are
// kept sorted by logit, descending, ties by token id ascending, so every
// step is deterministic.
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Params configure a Sampler. The zero value is greedy decoding.
type Params struct {
	Temp          float64 // 0: greedy (argmax after the penalty); > 0: sample softmax(logits/Temp)
	TopK          int     // keep the K most likely tokens (0: all)
	TopP          float64 // keep the fewest tokens whose probability sums to ≥ TopP (0 or 1: all)
	MinP          float64 // drop tokens whose probability is below MinP × the best one's (0: none)
	RepeatPenalty float64 // recent tokens: positive logits ÷ it, negative × it (0 or 1: none)
	RepeatLastN   int     // how many recent tokens the penalties consider (0: all given)
	// FrequencyPenalty lowers a recent token's logit by it times the
	// token's count among them; PresencePenalty once (OpenAI's and
	// llama.cpp's frequency and presence penalties; 0: none).
	FrequencyPenalty float64
	PresencePenalty  float64
	// LogitBias is added to the named tokens' logits before every other
	// step (-100 all but bans a token, as OpenAI's logit_bias).
	LogitBias map[int32]float64
	Seed      uint64
}

// MaxLogitBias is the largest |LogitBias| (OpenAI's logit_bias range,
// which apr serve and apr run's --logit-bias take).
const MaxLogitBias = 100

// ErrBadLogits is wrapped when a logits row cannot be sampled (empty, NaN).
var ErrBadLogits = errors.New("sample: bad logits")

// Validate reports the first parameter out of range, by name.
func (p Params) Validate() error {
	switch {
	case p.Temp < 0 || math.IsNaN(p.Temp) || math.IsInf(p.Temp, 0):
		return fmt.Errorf("sample: temperature %v must be ≥ 0 and finite", p.Temp)
	case p.TopK < 0:
		return fmt.Errorf("sample: top-k %d must be ≥ 0", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("sample: top-p %v must be in [0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("sample: min-p %v must be in [0, 1]", p.MinP)
	case p.RepeatPenalty < 0 || math.IsNaN(p.RepeatPenalty) || math.IsInf(p.RepeatPenalty, 0):
		return fmt.Errorf("sample: repetition penalty %v must be ≥ 0 and finite", p.RepeatPenalty)
	case p.RepeatLastN < 0:
		return fmt.Errorf("sample: repeat-last-n %d must be ≥ 0", p.RepeatLastN)
	case math.IsNaN(p.FrequencyPenalty) || math.IsInf(p.FrequencyPenalty, 0):
		return fmt.Errorf("sample: frequency penalty %v must be finite", p.FrequencyPenalty)
	case math.IsNaN(p.PresencePenalty) || math.IsInf(p.PresencePenalty, 0):
		return fmt.Errorf("sample: presence penalty %v must be finite", p.PresencePenalty)
	}
	for id, b := range p.LogitBias {
		if id < 0 || !(math.Abs(b) <= MaxLogitBias) {
			return fmt.Errorf("sample: logit bias %v for token %d: want a token id ≥ 0 and a bias in [-%d, %d]", b, id, MaxLogitBias, MaxLogitBias)
		}
	}
	return nil
}

// CheckVocab reports a logit bias for a token past a vocabulary of n.
func (p Params) CheckVocab(n int) error {
	for id := range p.LogitBias {
		if int(id) >= n {
			return fmt.Errorf("sample: logit bias for token %d, past the vocabulary of %d tokens", id, n)
		}
	}
	return nil
}

// Sampler draws tokens. It is not safe for concurrent use.
type Sampler struct {
	p    Params
	rng  *rand.Rand
	cand []cand
}

type cand struct {
	id    int32
	logit float64
	p     float64
}

// New returns a sampler for p, seeded with p.Seed.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}, nil
}

// Greedy returns the index of the largest logit (the lowest index among
// equals, as ggml's argmax). It returns -1 for an empty row. NaNs are never
// chosen over numbers.
func Greedy(logits []float32) int32 {
	best := -1
	for i, v := range logits {
		if v != v {
			continue
		}
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// Sample picks the next token from logits; recent are the tokens so far
// (prompt and generated), which the repetition penalty reads.
func (s *Sampler) Sample(logits []float32, recent []int32) (int32, error) {
	if len(logits) == 0 {
		return 0, fmt.Errorf("%w: empty row", ErrBadLogits)
	}
	c := s.cand[:0]
	for i, v := range logits {
		if v != v || math.IsInf(float64(v), 1) {
			return 0, fmt.Errorf("%w: %v at token %d", ErrBadLogits, v, i)
		}
		c = append(c, cand{id: int32(i), logit: float64(v)})
	}
	s.cand = c
	if err := s.p.CheckVocab(len(c)); err != nil {
		return 0, err
	}
	for id, b := range s.p.LogitBias {
		c[id].logit += b
	}
	pen, freq, pres := s.p.RepeatPenalty, s.p.FrequencyPenalty, s.p.PresencePenalty
	if pen == 0 {
		pen = 1
	}
	if pen != 1 || freq != 0 || pres != 0 {
		if n := s.p.RepeatLastN; n > 0 && len(recent) > n {
			recent = recent[len(recent)-n:]
		}
		count := map[int32]int{}
		for _, id := range recent {
			if id >= 0 && int(id) < len(c) {
				count[id]++
			}
		}
		for id, n := range count {
			if c[id].logit > 0 {
				c[id].logit /= pen
			} else {
				c[id].logit *= pen
			}
			c[id].logit -= float64(n)*freq + pres
		}
	}
	if s.p.Temp == 0 {
		best := 0
		for i := range c {
			if c[i].logit > c[best].logit {
				best = i
			}
		}
		return c[best].id, nil
	}
	sort.SliceStable(c, func(i, j int) bool { return c[i].logit > c[j].logit })
	if math.IsInf(c[0].logit, -1) {
		return 0, fmt.Errorf("%w: every logit is -Inf", ErrBadLogits)
	}
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	if tp := s.p.TopP; tp > 0 && tp < 1 {
		softmax(c, 1)
		var cum float64
		for i := range c {
			cum += c[i].p
			if cum >= tp {
				c = c[:i+1]
				break
			}
		}
	}
	if mp := s.p.MinP; mp > 0 {
		// p_i ≥ mp·p_max  ⇔  logit_i ≥ logit_max + ln(mp)
		limit := c[0].logit + math.Log(mp)
		n := 1
		for n < len(c) && c[n].logit >= limit {
			n++
		}
		c = c[:n]
	}
	softmax(c, s.p.Temp)
	u := s.rng.Float64()
	var cum float64
	for i := range c {
		cum += c[i].p
		if u < cum {
			return c[i].id, nil
		}
	}
	return c[len(c)-1].id, nil
}

// softmax sets c[i].p = softmax(logit/temp) over c (sorted descending).
func softmax(c []cand, temp float64) {
	m := c[0].logit / temp
	var sum float64
	for i := range c {
		c[i].p = math.Exp(c[i].logit/temp - m)
		sum += c[i].p
	}
	for i := range c {
		c[i].p /= sum
	}
}
