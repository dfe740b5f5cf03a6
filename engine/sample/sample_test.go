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
