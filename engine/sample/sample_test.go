package sample_test

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/sample"
)

func TestGreedy(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"max", []float32{1, 3, 2}, 1},
		{"first of equals", []float32{5, 1, 5}, 0},
		{"negative", []float32{-3, -1, -2}, 1},
		{"nan skipped", []float32{float32(math.NaN()), 0, 1}, 2},
		{"empty", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sample.Greedy(tt.logits); got != tt.want {
				t.Errorf("Greedy(%v) = %d, want %d", tt.logits, got, tt.want)
			}
		})
	}
}

func draw(t *testing.T, p sample.Params, logits []float32, recent []int32, n int) []int32 {
	t.Helper()
	s, err := sample.New(p)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int32, n)
	for i := range out {
		if out[i], err = s.Sample(logits, recent); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestSampleSeededIsDeterministic(t *testing.T) {
	logits := []float32{1, 1.5, 0.5, 2, 0}
	p := sample.Params{Temp: 1, Seed: 42}
	a := draw(t, p, logits, nil, 200)
	b := draw(t, p, logits, nil, 200)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two samplers with seed 42 differ (-first +second):\n%s", diff)
	}
	p.Seed = 43
	if c := draw(t, p, logits, nil, 200); cmp.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same 200 tokens")
	}
}

func TestSampleFollowsSoftmax(t *testing.T) {
	logits := []float32{0, float32(math.Log(3)), float32(math.Log(6))} // p = 0.1, 0.3, 0.6
	const n = 20000
	got := draw(t, sample.Params{Temp: 1, Seed: 7}, logits, nil, n)
	var count [3]float64
	for _, id := range got {
		count[id]++
	}
	for i, want := range []float64{0.1, 0.3, 0.6} {
		if f := count[i] / n; math.Abs(f-want) > 0.015 {
			t.Errorf("token %d drawn with frequency %.4f, want %.2f ± 0.015", i, f, want)
		}
	}
}

func TestSampleFilters(t *testing.T) {
	logits := []float32{0, float32(math.Log(3)), float32(math.Log(6))} // p = 0.1, 0.3, 0.6
	tests := []struct {
		name    string
		p       sample.Params
		allowed map[int32]bool
	}{
		{"greedy", sample.Params{}, map[int32]bool{2: true}},
		{"top-k 1", sample.Params{Temp: 1, TopK: 1}, map[int32]bool{2: true}},
		{"top-k 2", sample.Params{Temp: 1, TopK: 2}, map[int32]bool{1: true, 2: true}},
		{"top-p 0.5", sample.Params{Temp: 1, TopP: 0.5}, map[int32]bool{2: true}},
		{"top-p 0.85", sample.Params{Temp: 1, TopP: 0.85}, map[int32]bool{1: true, 2: true}},
		{"min-p 0.4", sample.Params{Temp: 1, MinP: 0.4}, map[int32]bool{1: true, 2: true}},
		{"min-p 0.6", sample.Params{Temp: 1, MinP: 0.6}, map[int32]bool{2: true}},
		{"tiny temperature", sample.Params{Temp: 1e-4}, map[int32]bool{2: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[int32]bool{}
			for _, id := range draw(t, tt.p, logits, nil, 2000) {
				seen[id] = true
			}
			if diff := cmp.Diff(tt.allowed, seen); diff != "" {
				t.Errorf("tokens drawn with %+v (-allowed +seen):\n%s", tt.p, diff)
			}
		})
	}
}

func TestRepeatPenalty(t *testing.T) {
	logits := []float32{2, 1.5, -1}
	tests := []struct {
		name   string
		p      sample.Params
		recent []int32
		want   int32
	}{
		{"no penalty", sample.Params{}, []int32{0}, 0},
		{"penalised best", sample.Params{RepeatPenalty: 2}, []int32{0}, 1}, // 2/2 = 1 < 1.5
		{"outside window", sample.Params{RepeatPenalty: 2, RepeatLastN: 1}, []int32{0, 2}, 0},
		{"negative made worse", sample.Params{RepeatPenalty: 2}, []int32{2}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := draw(t, tt.p, logits, tt.recent, 1)[0]; got != tt.want {
				t.Errorf("Sample(%v, recent %v) with %+v = %d, want %d", logits, tt.recent, tt.p, got, tt.want)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	for _, p := range []sample.Params{{Temp: -1}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}, {RepeatPenalty: math.NaN()}, {RepeatLastN: -2}} {
		if _, err := sample.New(p); err == nil {
			t.Errorf("New(%+v) accepted bad parameters", p)
		}
	}
	s, err := sample.New(sample.Params{Temp: 1})
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(-1))
	for _, row := range [][]float32{nil, {0, float32(math.NaN())}, {inf, inf}, {float32(math.Inf(1)), 0}} {
		if _, err := s.Sample(row, nil); !errors.Is(err, sample.ErrBadLogits) {
			t.Errorf("Sample(%v) = %v, want ErrBadLogits", row, err)
		}
	}
}

// TestPenaltiesAndBias pins the penalties' and biases' arithmetic to
// llama.cpp's (logit biases first; then, for each token among the last
// RepeatLastN, ÷ the repetition penalty (× when ≤ 0), − count × frequency,
// − presence): token 0's adjusted logit is found by greedy decoding against
// token 1 just above and just below it.
func TestPenaltiesAndBias(t *testing.T) {
	tests := []struct {
		name   string
		p      sample.Params
		logit  float64 // token 0's
		recent []int32
		want   float64 // token 0's after the penalties and bias
	}{
		{"none", sample.Params{}, 2, []int32{0, 0}, 2},
		{"repeat only", sample.Params{RepeatPenalty: 1.5}, 2, []int32{0, 0}, 2 / 1.5},
		{"frequency counts", sample.Params{FrequencyPenalty: 0.5}, 2, []int32{0, 0, 0, 3}, 2 - 3*0.5},
		{"presence once", sample.Params{PresencePenalty: 0.25}, 2, []int32{0, 0, 0}, 2 - 0.25},
		{"all three", sample.Params{RepeatPenalty: 1.5, FrequencyPenalty: 0.5, PresencePenalty: 0.25}, 2, []int32{0, 3, 0}, 2/1.5 - 2*0.5 - 0.25},
		{"negative logit multiplied", sample.Params{RepeatPenalty: 2, FrequencyPenalty: 0.1}, -1, []int32{0}, -2 - 0.1},
		{"window of 2", sample.Params{FrequencyPenalty: 0.5, RepeatLastN: 2}, 2, []int32{0, 0, 0, 3}, 2 - 0.5},
		{"negative penalties raise", sample.Params{FrequencyPenalty: -0.5, PresencePenalty: -1}, 2, []int32{0}, 2 + 0.5 + 1},
		{"not recent", sample.Params{FrequencyPenalty: 9, PresencePenalty: 9}, 2, []int32{3, 3}, 2},
		{"bias", sample.Params{LogitBias: map[int32]float64{0: -1.75}}, 2, nil, 0.25},
		{"bias before penalties", sample.Params{LogitBias: map[int32]float64{0: 1}, RepeatPenalty: 2}, 2, []int32{0}, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, temp := range []float64{0, 1e-9} { // greedy, and the sampling path at a vanishing temperature
				p := tt.p
				p.Temp = temp
				for _, d := range []float64{1e-4, -1e-4} {
					logits := []float32{float32(tt.logit), float32(tt.want + d), -50, -50}
					want := int32(0)
					if float64(logits[1]) > tt.want {
						want = 1
					}
					if got := draw(t, p, logits, tt.recent, 1)[0]; got != want {
						t.Errorf("temp %g: token 1 at %.5f: got token %d, want %d (token 0 adjusted to %.5f)", temp, logits[1], got, want, tt.want)
					}
				}
			}
		})
	}
}

func TestLogitBiasBansAndRefuses(t *testing.T) {
	logits := []float32{1, 3, 2}
	if got := draw(t, sample.Params{LogitBias: map[int32]float64{1: -100}}, logits, nil, 1)[0]; got != 2 {
		t.Errorf("bias -100 on the argmax: got %d, want 2", got)
	}
	if got := draw(t, sample.Params{Temp: 1, Seed: 7, LogitBias: map[int32]float64{0: 100}}, logits, nil, 50); !cmp.Equal(got, make([]int32, 50)) {
		t.Errorf("bias +100 at temperature 1: got %v, want token 0 every time", got)
	}
	s, err := sample.New(sample.Params{LogitBias: map[int32]float64{3: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sample(logits, nil); err == nil {
		t.Error("a bias for token 3 of a 3-token row was not refused")
	}
	for _, p := range []sample.Params{
		{LogitBias: map[int32]float64{-1: 1}},
		{LogitBias: map[int32]float64{1: math.Inf(-1)}},
		{LogitBias: map[int32]float64{1: sample.MaxLogitBias + 1}},
		{FrequencyPenalty: math.NaN()},
		{PresencePenalty: math.Inf(1)},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", p)
		}
	}
}
