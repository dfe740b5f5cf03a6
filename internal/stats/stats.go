// Package stats is apr's one home for the statistics of repeated
// measurements (apr bench's runs, apr qa's throughput gate): summaries,
// percentile-bootstrap confidence intervals of a mean and of a ratio of
// means, and the coefficient of variation. Means, standard deviations and
// quantiles are gonum's (gonum.org/v1/gonum/stat); only the bootstrap
// resampling loop and the median of an even count (the mean of the two
// middle values, which gonum's quantile estimators do not give) are written
// here.
//
// # Conventions
//
// Every function that resamples takes its random source, so that the same
// samples and seed always give the same interval (SeededRand derives one
// from strings). Inputs are not modified.
package stats

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Interval is a confidence interval [Lo, Hi].
type Interval struct{ Lo, Hi float64 }

// Summary is what a report shows of repeated measurements.
type Summary struct {
	Min, Median, Max, Mean float64
}

// Summarize returns x's minimum, median (the mean of the two middle values
// for an even count), maximum and mean. x must not be empty.
func Summarize(x []float64) Summary {
	v := slices.Clone(x)
	slices.Sort(v)
	n := len(v)
	s := Summary{Min: v[0], Max: v[n-1], Mean: stat.Mean(v, nil)}
	if n%2 == 1 {
		s.Median = v[n/2]
	} else {
		s.Median = (v[n/2-1] + v[n/2]) / 2
	}
	return s
}

// MeanCI is the percentile-bootstrap confidence interval of the mean of x at
// level conf, from resamples resamples drawn with rng. A resample's mean lies
// within [min x, max x]; the interval is clamped there (summation may round
// it an ulp outside).
func MeanCI(x []float64, conf float64, resamples int, rng *rand.Rand) Interval {
	means := make([]float64, resamples)
	s := make([]float64, len(x))
	for i := range means {
		resample(s, x, rng)
		means[i] = stat.Mean(s, nil)
	}
	ci := percentiles(means, conf)
	lo, hi := slices.Min(x), slices.Max(x)
	return Interval{Lo: min(max(ci.Lo, lo), hi), Hi: min(max(ci.Hi, lo), hi)}
}

// RatioCI is the percentile-bootstrap confidence interval of
// mean(cur)/mean(base) at level conf, resampling both independently.
func RatioCI(cur, base []float64, conf float64, resamples int, rng *rand.Rand) Interval {
	ratios := make([]float64, resamples)
	c := make([]float64, len(cur))
	b := make([]float64, len(base))
	for i := range ratios {
		resample(c, cur, rng)
		resample(b, base, rng)
		ratios[i] = stat.Mean(c, nil) / stat.Mean(b, nil)
	}
	return percentiles(ratios, conf)
}

// CV is the coefficient of variation: the sample standard deviation over the
// mean (+Inf for a zero mean).
func CV(x []float64) float64 {
	m, sd := stat.MeanStdDev(x, nil)
	if m == 0 {
		return math.Inf(1)
	}
	return sd / m
}

// SeededRand returns a generator seeded from the strings (their sha256), so
// that the same samples always give the same interval.
func SeededRand(parts ...string) *rand.Rand {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

// resample fills dst with values of x drawn with replacement.
func resample(dst, x []float64, rng *rand.Rand) {
	for j := range dst {
		dst[j] = x[rng.IntN(len(x))]
	}
}

// percentiles sorts v and returns its (1−conf)/2 and (1+conf)/2 empirical
// quantiles.
func percentiles(v []float64, conf float64) Interval {
	slices.Sort(v)
	a := (1 - conf) / 2
	return Interval{Lo: stat.Quantile(a, stat.Empirical, v, nil), Hi: stat.Quantile(1-a, stat.Empirical, v, nil)}
}
