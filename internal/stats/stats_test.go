package stats_test

import (
	"math"
	"testing"

	"github.com/aprqa/apr/internal/stats"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		x    []float64
		want stats.Summary
	}{
		{"odd", []float64{3, 1, 2}, stats.Summary{Min: 1, Median: 2, Max: 3, Mean: 2}},
		{"even: the mean of the middle two", []float64{4, 1, 3, 2}, stats.Summary{Min: 1, Median: 2.5, Max: 4, Mean: 2.5}},
		{"one", []float64{7}, stats.Summary{Min: 7, Median: 7, Max: 7, Mean: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.x...)
			if got := stats.Summarize(tt.x); got != tt.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.x, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.x[i] {
					t.Fatalf("Summarize modified its input: %v, was %v", tt.x, in)
				}
			}
		})
	}
}

func TestMeanCI(t *testing.T) {
	x := []float64{10, 11, 9, 10.5, 9.5, 10.2, 9.8}
	a := stats.MeanCI(x, 0.95, 2000, stats.SeededRand("a"))
	b := stats.MeanCI(x, 0.95, 2000, stats.SeededRand("a"))
	if a != b {
		t.Errorf("MeanCI with the same seed: %v then %v", a, b)
	}
	if !(a.Lo < 10 && 10 < a.Hi) || a.Lo < 9 || a.Hi > 11 {
		t.Errorf("MeanCI(%v) = %v: want the mean 10 inside, within [min, max]", x, a)
	}
	one := stats.MeanCI([]float64{5, 5, 5}, 0.95, 100, stats.SeededRand("b"))
	if one != (stats.Interval{Lo: 5, Hi: 5}) {
		t.Errorf("MeanCI(constant 5) = %v, want [5, 5]", one)
	}
}

func TestRatioCI(t *testing.T) {
	base := []float64{100, 102, 98, 101, 99}
	same := stats.RatioCI(base, base, 0.95, 2000, stats.SeededRand("c"))
	if !(same.Lo < 1 && 1 < same.Hi) {
		t.Errorf("RatioCI(x, x) = %v, want 1 inside", same)
	}
	half := make([]float64, len(base))
	for i, v := range base {
		half[i] = v / 2
	}
	r := stats.RatioCI(half, base, 0.95, 2000, stats.SeededRand("c"))
	if !(r.Hi < 0.6 && r.Lo > 0.4) {
		t.Errorf("RatioCI(x/2, x) = %v, want about 0.5", r)
	}
}

func TestCV(t *testing.T) {
	if got := stats.CV([]float64{1, 2, 3}); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("CV(1, 2, 3) = %v, want 0.5 (sample sd 1 over mean 2)", got)
	}
	if got := stats.CV([]float64{0, 0}); !math.IsInf(got, 1) {
		t.Errorf("CV(0, 0) = %v, want +Inf", got)
	}
}
