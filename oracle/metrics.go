package oracle

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors. Every error of this package wraps one of them.
var (
	// ErrNonFinite: a NaN or an Inf in an input. The comparison has no value.
	ErrNonFinite = errors.New("oracle: non-finite value")
	// ErrZeroVector: a vector whose norm is zero where the metric divides by
	// it (cosine, relative error, NMSE). Named, so it can never read as a
	// NaN that happens to compare as pass.
	ErrZeroVector = errors.New("oracle: zero vector")
	// ErrLength: the two vectors (or sequences) differ in length.
	ErrLength = errors.New("oracle: length mismatch")
	// ErrEmpty: an empty vector or sequence.
	ErrEmpty = errors.New("oracle: empty input")
)

// NonFiniteError names where a NaN or Inf was found.
type NonFiniteError struct {
	Vector string // "got" or "want" (or a caller's name)
	Index  int
	Value  float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("oracle: %s[%d] is %v", e.Vector, e.Index, e.Value)
}

// Is makes errors.Is(err, ErrNonFinite) true.
func (e *NonFiniteError) Is(target error) bool { return target == ErrNonFinite }

// ZeroVectorError names the vector whose norm is zero.
type ZeroVectorError struct{ Vector string }

func (e *ZeroVectorError) Error() string {
	return fmt.Sprintf("oracle: %s is a zero vector (norm 0): the metric is undefined", e.Vector)
}

// Is makes errors.Is(err, ErrZeroVector) true.
func (e *ZeroVectorError) Is(target error) bool { return target == ErrZeroVector }

// Finite returns a *NonFiniteError for the first NaN or Inf in x, named name.
func Finite(name string, x []float32) error {
	for i, v := range x {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return &NonFiniteError{Vector: name, Index: i, Value: v}
		}
	}
	return nil
}

// pair checks that got and want are non-empty, of one length, and finite.
func pair(got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%w: got has %d values, want has %d", ErrLength, len(got), len(want))
	}
	if len(want) == 0 {
		return fmt.Errorf("%w: no values to compare", ErrEmpty)
	}
	if err := Finite("got", got); err != nil {
		return err
	}
	return Finite("want", want)
}

// Cosine returns the cosine similarity of got and want.
func Cosine(got, want []float32) (float64, error) {
	if err := pair(got, want); err != nil {
		return 0, err
	}
	return cosine(got, want)
}

// cosine is Cosine of a checked pair.
func cosine(got, want []float32) (float64, error) {
	var dot, ng, nw float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		dot += g * w
		ng += g * g
		nw += w * w
	}
	if nw == 0 {
		return 0, &ZeroVectorError{Vector: "want"}
	}
	if ng == 0 {
		return 0, &ZeroVectorError{Vector: "got"}
	}
	c := dot / (math.Sqrt(ng) * math.Sqrt(nw))
	// Rounding can push |c| a hair past 1; a cosine is never more than 1.
	return math.Max(-1, math.Min(1, c)), nil
}

// MaxAbs returns the largest |got[i]-want[i]| and its index.
func MaxAbs(got, want []float32) (float64, int, error) {
	if err := pair(got, want); err != nil {
		return 0, 0, err
	}
	best, at := maxAbs(got, want)
	return best, at, nil
}

// maxAbs is MaxAbs of a checked pair.
func maxAbs(got, want []float32) (float64, int) {
	best, at := -1.0, 0
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > best {
			best, at = d, i
		}
	}
	return best, at
}

// RelErr returns the norm-wise relative error ‖got−want‖₂ / ‖want‖₂.
func RelErr(got, want []float32) (float64, error) {
	n, err := NMSE(got, want)
	if err != nil {
		return 0, err
	}
	return math.Sqrt(n), nil
}

// NMSE returns the normalised mean squared error Σ(got−want)² / Σwant².
func NMSE(got, want []float32) (float64, error) {
	if err := pair(got, want); err != nil {
		return 0, err
	}
	return nmse(got, want)
}

// nmse is NMSE of a checked pair.
func nmse(got, want []float32) (float64, error) {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return 0, &ZeroVectorError{Vector: "want"}
	}
	return num / den, nil
}

// logSoftmax returns log(softmax(x)) in float64.
func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	ls := m + math.Log(s)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - ls
	}
	return out
}

// KL returns the Kullback–Leibler divergence KL(softmax(want) ‖ softmax(got))
// in nats: how much information is lost when got's distribution stands in for
// the reference's. It is never negative (tiny negative rounding is clamped).
func KL(got, want []float32) (float64, error) {
	if err := pair(got, want); err != nil {
		return 0, err
	}
	return kl(got, want), nil
}

// kl is KL of a checked pair.
func kl(got, want []float32) float64 {
	lg, lw := logSoftmax(got), logSoftmax(want)
	var d float64
	for i := range lw {
		p := math.Exp(lw[i])
		if p == 0 {
			continue
		}
		d += p * (lw[i] - lg[i])
	}
	return math.Max(0, d)
}

// Argmax returns the index of the largest value (the lowest index among
// ties). NaN or Inf is an error.
func Argmax(x []float32) (int, error) {
	if len(x) == 0 {
		return 0, fmt.Errorf("%w: argmax of no values", ErrEmpty)
	}
	if err := Finite("x", x); err != nil {
		return 0, err
	}
	return argmax(x), nil
}

// argmax is Argmax of finite, non-empty values.
func argmax(x []float32) int {
	at := 0
	for i, v := range x {
		if v > x[at] {
			at = i
		}
	}
	return at
}

// TopMargin returns the index of the largest value (the lowest index among
// ties) and how far it is above the second largest: +Inf for one value, 0
// for a tie. NaN or Inf is an error.
func TopMargin(x []float32) (best int, margin float64, err error) {
	if best, err = Argmax(x); err != nil {
		return 0, 0, err
	}
	second := math.Inf(-1)
	for i, v := range x {
		if i != best {
			second = math.Max(second, float64(v))
		}
	}
	return best, float64(x[best]) - second, nil
}

// ArgmaxEqual reports whether got and want have the same argmax, and both.
func ArgmaxEqual(got, want []float32) (equal bool, gotIdx, wantIdx int, err error) {
	if err := pair(got, want); err != nil {
		return false, 0, 0, err
	}
	g, w := argmax(got), argmax(want)
	return g == w, g, w, nil
}

// TopK returns the indexes of the k largest values, largest first, ties by
// lower index; NaN ranks below every number. k is clamped to len(x). It
// selects in one pass over x (a sorted buffer of k), not by sorting x: a
// logits row of a 151,936-entry vocabulary took ~100 ms to sort.
func TopK(x []float32, k int) []int {
	k = max(0, min(k, len(x)))
	// before reports whether x[a] ranks before x[b] for a > b (a later
	// index: an equal value never does).
	before := func(a, b int) bool {
		va, vb := x[a], x[b]
		if va != va {
			return false
		}
		return vb != vb || va > vb
	}
	top := make([]int, 0, k)
	for i := range x {
		if len(top) == k && (k == 0 || !before(i, top[k-1])) {
			continue
		}
		p := len(top)
		for p > 0 && before(i, top[p-1]) {
			p--
		}
		if len(top) < k {
			top = append(top, 0)
		}
		copy(top[p+1:], top[p:len(top)-1])
		top[p] = i
	}
	return top
}

// TopKOverlap returns |topk(got) ∩ topk(want)| / k: 1 when the k best tokens
// are the same set.
func TopKOverlap(got, want []float32, k int) (float64, error) {
	if err := pair(got, want); err != nil {
		return 0, err
	}
	return topKOverlap(got, want, k)
}

// topKOverlap is TopKOverlap of a checked pair.
func topKOverlap(got, want []float32, k int) (float64, error) {
	if k <= 0 {
		return 0, fmt.Errorf("%w: top-k with k=%d", ErrEmpty, k)
	}
	if k > len(want) {
		k = len(want)
	}
	in := map[int]bool{}
	for _, i := range TopK(want, k) {
		in[i] = true
	}
	n := 0
	for _, i := range TopK(got, k) {
		if in[i] {
			n++
		}
	}
	return float64(n) / float64(k), nil
}

// ChannelSums accumulates, channel by channel over the rows (positions) of
// one traced stage, what WorstChannel reports. A defect confined to one
// channel (an output column of a product scaled, one row of a weight
// matrix wrong) puts a large share of the difference into that channel and
// moves its scale away from 1; rounding noise spreads over every channel
// and leaves each scale near 1. Its zero value is ready to use.
type ChannelSums struct {
	dd, gw, ww []float64
}

// Add adds one pair of rows; a pair of unequal length, of another width
// than the rows before, or holding a NaN or an Inf is refused.
func (c *ChannelSums) Add(got, want []float32) error {
	if err := pair(got, want); err != nil {
		return err
	}
	if c.dd == nil {
		c.dd, c.gw, c.ww = make([]float64, len(want)), make([]float64, len(want)), make([]float64, len(want))
	}
	if len(want) != len(c.dd) {
		return fmt.Errorf("%w: a row of %d channels after rows of %d", ErrLength, len(want), len(c.dd))
	}
	for j := range want {
		g, w := float64(got[j]), float64(want[j])
		c.dd[j] += (g - w) * (g - w)
		c.gw[j] += g * w
		c.ww[j] += w * w
	}
	return nil
}

// ChannelShare is the channel of a stage that carries the largest share of
// the difference between two computations.
type ChannelShare struct {
	Channel int     // -1: the computations do not differ
	Share   float64 // its Σ(got−want)² over the positions, as a fraction of every channel's
	// Scale is got's least-squares scale against want in it, Σ got·want /
	// Σ want²; ok false where want is 0 throughout the channel.
	Scale   float64
	ScaleOK bool
}

// Worst returns the channel with the largest share of the difference (the
// lowest such channel on a tie), or Channel -1 when there is none.
func (c *ChannelSums) Worst() ChannelShare {
	out := ChannelShare{Channel: -1}
	var tot float64
	for j, d := range c.dd {
		tot += d
		if d > 0 && (out.Channel < 0 || d > c.dd[out.Channel]) {
			out.Channel = j
		}
	}
	if out.Channel < 0 {
		return out
	}
	j := out.Channel
	out.Share = c.dd[j] / tot
	if c.ww[j] > 0 {
		out.Scale, out.ScaleOK = c.gw[j]/c.ww[j], true
	}
	return out
}
