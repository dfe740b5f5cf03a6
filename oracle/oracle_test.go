package oracle_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/oracle"
)

var (
	nan = float32(math.NaN())
	inf = float32(math.Inf(1))
)

func TestCosine(t *testing.T) {
	tests := []struct {
		name      string
		got, want []float32
		cos       float64
		err       error
	}{
		{"identical", []float32{1, 2, 3}, []float32{1, 2, 3}, 1, nil},
		{"scaled", []float32{2, 4, 6}, []float32{1, 2, 3}, 1, nil},
		{"opposite", []float32{-1, -2}, []float32{1, 2}, -1, nil},
		{"orthogonal", []float32{1, 0}, []float32{0, 1}, 0, nil},
		{"zero want", []float32{1, 2}, []float32{0, 0}, 0, oracle.ErrZeroVector},
		{"zero got", []float32{0, 0}, []float32{1, 2}, 0, oracle.ErrZeroVector},
		{"both zero", []float32{0, 0}, []float32{0, 0}, 0, oracle.ErrZeroVector},
		{"nan in got", []float32{1, nan}, []float32{1, 2}, 0, oracle.ErrNonFinite},
		{"inf in want", []float32{1, 2}, []float32{inf, 2}, 0, oracle.ErrNonFinite},
		{"length", []float32{1}, []float32{1, 2}, 0, oracle.ErrLength},
		{"empty", nil, nil, 0, oracle.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := oracle.Cosine(tt.got, tt.want)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Cosine(%v, %v) error = %v, want %v", tt.got, tt.want, err, tt.err)
			}
			if err == nil && math.Abs(c-tt.cos) > 1e-12 {
				t.Errorf("Cosine(%v, %v) = %v, want %v", tt.got, tt.want, c, tt.cos)
			}
		})
	}
}

func TestNonFiniteNamesIndex(t *testing.T) {
	_, err := oracle.Cosine([]float32{1, 2, 3}, []float32{1, nan, 3})
	var nf *oracle.NonFiniteError
	if !errors.As(err, &nf) {
		t.Fatalf("Cosine with NaN: error %v is not a *NonFiniteError", err)
	}
	if diff := cmp.Diff("want[1]", fmt.Sprintf("%s[%d]", nf.Vector, nf.Index)); diff != "" {
		t.Errorf("NonFiniteError location mismatch (-want +got):\n%s", diff)
	}
}

func TestErrorsAndMetrics(t *testing.T) {
	got := []float32{1, 2, 3, 4}
	want := []float32{1, 2, 3, 5}
	ma, at, err := oracle.MaxAbs(got, want)
	if err != nil || ma != 1 || at != 3 {
		t.Errorf("MaxAbs = %v at %d, %v; want 1 at 3", ma, at, err)
	}
	nmse, err := oracle.NMSE(got, want)
	if wantN := 1.0 / (1 + 4 + 9 + 25); err != nil || math.Abs(nmse-wantN) > 1e-15 {
		t.Errorf("NMSE = %v, %v; want %v", nmse, err, wantN)
	}
	rel, err := oracle.RelErr(got, want)
	if err != nil || math.Abs(rel-math.Sqrt(nmse)) > 1e-15 {
		t.Errorf("RelErr = %v, %v; want sqrt(NMSE)", rel, err)
	}
	if _, err := oracle.NMSE([]float32{1}, []float32{0}); !errors.Is(err, oracle.ErrZeroVector) {
		t.Errorf("NMSE against zero want: error %v, want ErrZeroVector", err)
	}
}

func TestKL(t *testing.T) {
	same, err := oracle.KL([]float32{1, 2, 3}, []float32{1, 2, 3})
	if err != nil || same != 0 {
		t.Errorf("KL(x, x) = %v, %v; want 0", same, err)
	}
	// Shifting logits by a constant leaves the softmax unchanged.
	shift, err := oracle.KL([]float32{11, 12, 13}, []float32{1, 2, 3})
	if err != nil || shift > 1e-12 {
		t.Errorf("KL(x+10, x) = %v, %v; want ~0", shift, err)
	}
	// Two-token case by hand: p = softmax(0, 0) = (.5, .5), q = softmax(0, ln 3) = (.25, .75).
	kl, err := oracle.KL([]float32{0, float32(math.Log(3))}, []float32{0, 0})
	wantKL := 0.5*math.Log(0.5/0.25) + 0.5*math.Log(0.5/0.75)
	if err != nil || math.Abs(kl-wantKL) > 1e-7 {
		t.Errorf("KL = %v, %v; want %v", kl, err, wantKL)
	}
	// Large logits must not overflow.
	big, err := oracle.KL([]float32{1e30, 0}, []float32{0, 1e30})
	if err != nil || math.IsInf(big, 0) || math.IsNaN(big) || big < 1e29 {
		t.Errorf("KL of large logits = %v, %v; want finite and large", big, err)
	}
}

func TestTopKAndArgmax(t *testing.T) {
	x := []float32{0.1, 5, 3, 5, -1}
	if diff := cmp.Diff([]int{1, 3, 2}, oracle.TopK(x, 3)); diff != "" {
		t.Errorf("TopK(%v, 3) mismatch (-want +got):\n%s", x, diff)
	}
	if a, err := oracle.Argmax(x); err != nil || a != 1 {
		t.Errorf("Argmax(%v) = %d, %v; want 1 (lowest index of ties)", x, a, err)
	}
	ov, err := oracle.TopKOverlap([]float32{3, 2, 1, 0}, []float32{3, 1, 2, 0}, 2)
	if err != nil || ov != 0.5 {
		t.Errorf("TopKOverlap = %v, %v; want 0.5", ov, err)
	}
	eq, g, w, err := oracle.ArgmaxEqual([]float32{0, 1}, []float32{1, 0})
	if err != nil || eq || g != 1 || w != 0 {
		t.Errorf("ArgmaxEqual = %v %d %d %v; want false 1 0", eq, g, w, err)
	}
	if _, err := oracle.Argmax([]float32{1, nan}); !errors.Is(err, oracle.ErrNonFinite) {
		t.Errorf("Argmax with NaN: error %v, want ErrNonFinite", err)
	}
}

func TestCompareSeqWorst(t *testing.T) {
	want := [][]float32{{1, 2, 3}, {3, 2, 1}, {1, 1, 1}}
	got := [][]float32{{1, 2, 3}, {3, 2, 1.5}, {1, 1, 3}}
	r, err := oracle.CompareSeq(got, want, 1)
	if err != nil {
		t.Fatalf("CompareSeq: %v", err)
	}
	if r.Worst != 2 {
		t.Errorf("CompareSeq worst = %d, want 2 (cosines %v %v %v)", r.Worst, r.Positions[0].Cosine, r.Positions[1].Cosine, r.Positions[2].Cosine)
	}
	if r.FirstArgmaxMismatch != 2 || r.ArgmaxAgree != 2 {
		t.Errorf("CompareSeq argmax: first mismatch %d agree %d, want 2 and 2", r.FirstArgmaxMismatch, r.ArgmaxAgree)
	}
	got[1][0] = nan
	_, err = oracle.CompareSeq(got, want, 1)
	var pe *oracle.PositionError
	if !errors.As(err, &pe) || pe.Pos != 1 || !errors.Is(err, oracle.ErrNonFinite) {
		t.Errorf("CompareSeq with NaN at position 1: error %v, want a PositionError at 1 wrapping ErrNonFinite", err)
	}
	// Positions are compared concurrently; the error is still the lowest
	// bad position's, every time.
	got[2][1] = nan
	for range 20 {
		if _, err = oracle.CompareSeq(got, want, 1); !errors.As(err, &pe) || pe.Pos != 1 {
			t.Fatalf("CompareSeq with NaN at positions 1 and 2: error %v, want position 1's", err)
		}
	}
	got[2][1] = 1
	zero := [][]float32{{1, 2}, {0, 0}}
	if _, err := oracle.CompareSeq(zero, zero, 1); !errors.Is(err, oracle.ErrZeroVector) {
		t.Errorf("CompareSeq with a zero row: error %v, want ErrZeroVector (never a NaN that passes)", err)
	}
}

func TestTolerance(t *testing.T) {
	next := math.Nextafter32(1, 2)
	tests := []struct {
		name      string
		tol       oracle.Tolerance
		got, want float32
		ok        bool
	}{
		{"exact equal", oracle.Tolerance{}, 1, 1, true},
		{"exact signed zeros", oracle.Tolerance{}, 0, float32(math.Copysign(0, -1)), true},
		{"exact one ulp", oracle.Tolerance{}, next, 1, false},
		{"ulp 1", oracle.Tolerance{ULP: 1}, next, 1, true},
		{"abs", oracle.Tolerance{Abs: 0.1}, 1.05, 1, true},
		{"abs exceeded", oracle.Tolerance{Abs: 0.01}, 1.05, 1, false},
		{"rel", oracle.Tolerance{Rel: 0.1}, 105, 100, true},
		{"nan never", oracle.Tolerance{Abs: 1e9, ULP: 1 << 40}, nan, nan, false},
		{"inf never", oracle.Tolerance{Abs: 1e9}, inf, inf, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.Within(tt.got, tt.want); got != tt.ok {
				t.Errorf("Tolerance%+v.Within(%v, %v) = %v, want %v", tt.tol, tt.got, tt.want, got, tt.ok)
			}
		})
	}
	err := oracle.CheckClose([]float32{1, 2, 3.5, 4.2}, []float32{1, 2, 3, 4}, oracle.Tolerance{Abs: 0.25})
	var me *oracle.MismatchError
	if !errors.As(err, &me) || me.Count != 1 || me.Index != 2 || !errors.Is(err, oracle.ErrOutOfTolerance) {
		t.Errorf("CheckClose error = %v, want 1 mismatch at index 2", err)
	}
	if err := oracle.CheckClose([]float32{1, nan}, []float32{1, 2}, oracle.Tolerance{Abs: 100}); !errors.Is(err, oracle.ErrNonFinite) {
		t.Errorf("CheckClose with NaN: %v, want ErrNonFinite", err)
	}
	if d := oracle.ULPDistance(float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32); d != 1 {
		t.Errorf("ULPDistance(-0, smallest) = %d, want 1", d)
	}
}

func TestFirstDivergence(t *testing.T) {
	mk := func(layer int, op string, pos int, v ...float32) oracle.Record {
		return oracle.Record{Layer: layer, Op: op, Pos: pos, Values: v}
	}
	// a runs positions one by one; b batches them (different record order).
	a := []oracle.Record{
		mk(-1, "embed", 0, 1, 2), mk(0, "q", 0, 1, 0), mk(1, "q", 0, 1, 1),
		mk(-1, "embed", 1, 2, 1), mk(0, "q", 1, 0, 1), mk(1, "q", 1, 3, 1),
		mk(0, "extra", 0, 1),
	}
	b := []oracle.Record{
		mk(-1, "embed", 0, 1, 2), mk(-1, "embed", 1, 2, 1),
		mk(0, "q", 0, 1, 0), mk(0, "q", 1, 0, 1),
		mk(1, "q", 0, 1, 1), mk(1, "q", 1, 1, 3), // diverges at layer 1, pos 1
		mk(2, "only_b", 0, 1),
	}
	d := oracle.FirstDivergence(a, b, oracle.DivergenceTol{MinCosine: 0.999})
	if d.First == nil {
		t.Fatalf("FirstDivergence found none; want layer 1 q pos 1")
	}
	if diff := cmp.Diff([3]any{1, "q", 1}, [3]any{d.First.Layer, d.First.Op, d.First.Pos}); diff != "" {
		t.Errorf("FirstDivergence location mismatch (-want +got):\n%s", diff)
	}
	if d.Compared != 6 || d.OnlyInA != 1 || d.OnlyInB != 1 || d.Divergent != 1 {
		t.Errorf("FirstDivergence counts = %+v, want compared 6, only a 1, only b 1, divergent 1", d)
	}
	// An earlier stage wins over an earlier position of a later stage.
	b[3] = mk(0, "q", 1, 1, 0)
	d = oracle.FirstDivergence(a, b, oracle.DivergenceTol{MinCosine: 0.999})
	if d.First == nil || d.First.Layer != 0 || d.First.Pos != 1 {
		t.Errorf("FirstDivergence = %v, want layer 0 q pos 1", d.First)
	}
	// NaN diverges whatever the tolerance.
	b2 := []oracle.Record{mk(-1, "embed", 0, nan, 2)}
	d = oracle.FirstDivergence(a[:1], b2, oracle.DivergenceTol{})
	if d.First == nil {
		t.Errorf("FirstDivergence with NaN found none")
	}
	// Zero reference and zero engine agree; zero reference and non-zero engine do not.
	z := []oracle.Record{mk(0, "z", 0, 0, 0)}
	if d := oracle.FirstDivergence(z, z, oracle.DivergenceTol{MinCosine: 1}); d.First != nil {
		t.Errorf("FirstDivergence(zero, zero) = %v, want none", d.First)
	}
	if d := oracle.FirstDivergence(z, []oracle.Record{mk(0, "z", 0, 0, 1)}, oracle.DivergenceTol{}); d.First == nil {
		t.Errorf("FirstDivergence(zero, non-zero) found none")
	}
}

func TestRecording(t *testing.T) {
	r := oracle.Recording{Ops: map[string]bool{"q": true}}
	tr := r.Trace()
	buf := []float32{1, 2}
	tr(0, "q", 0, buf)
	tr(0, "k", 0, buf)
	buf[0] = 9 // the engine reuses its buffer: the recording must have copied
	if diff := cmp.Diff([]oracle.Record{{Layer: 0, Op: "q", Pos: 0, Values: []float32{1, 2}}}, r.Records); diff != "" {
		t.Errorf("Recording.Trace() records mismatch (-want +got):\n%s", diff)
	}
}

// TestTopKSelectsAsASortWould: the one-pass selection equals a stable sort
// by value (largest first, ties by lower index, NaN last) on random rows
// with ties and NaNs, for every k.
func TestTopKSelectsAsASortWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 200; trial++ {
		x := make([]float32, 1+rng.IntN(40))
		for i := range x {
			switch rng.IntN(10) {
			case 0:
				x[i] = float32(math.NaN())
			default:
				x[i] = float32(rng.IntN(8)) // many ties
			}
		}
		want := make([]int, len(x))
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(a, b int) bool {
			va, vb := x[want[a]], x[want[b]]
			if va != va {
				return false
			}
			return vb != vb || va > vb
		})
		for k := -1; k <= len(x)+1; k++ {
			got := oracle.TopK(x, k)
			n := max(0, min(k, len(x)))
			if !slices.Equal(got, want[:n]) {
				t.Fatalf("TopK(%v, %d) = %v, want %v", x, k, got, want[:n])
			}
		}
	}
}

// TestWorstChannel: one channel scaled by 1.5 on top of rounding-sized
// noise in every channel is the worst, with most of the difference and a
// scale of 1.5; noise alone leaves no channel with much of it and every
// scale near 1; equal rows have none; rows of another width are refused.
func TestWorstChannel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0))
	const width, rows = 896, 24
	var planted, noise oracle.ChannelSums
	for p := 0; p < rows; p++ {
		want, got, got2 := make([]float32, width), make([]float32, width), make([]float32, width)
		for j := range want {
			want[j] = float32(rng.NormFloat64())
			e := float32(rng.NormFloat64() * 0.03) // 1 − cos ≈ 4.5e-4, the 0.5B models' noise
			got[j], got2[j] = want[j]+e, want[j]+e
		}
		got[7] = 1.5*want[7] + (got[7] - want[7])
		if err := planted.Add(got, want); err != nil {
			t.Fatal(err)
		}
		if err := noise.Add(got2, want); err != nil {
			t.Fatal(err)
		}
	}
	w := planted.Worst()
	if w.Channel != 7 || !w.ScaleOK || math.Abs(w.Scale-1.5) > 0.02 || w.Share < 0.1 {
		t.Errorf("planted: %+v, want channel 7 at scale 1.5 with ≥ 10%% of the difference", w)
	}
	n := noise.Worst()
	t.Logf("planted %+v; noise alone %+v", w, n)
	if n.Share > 0.01 || math.Abs(n.Scale-1) > 0.05 {
		t.Errorf("noise alone: %+v, want no channel with ≥ 1%% of the difference and scales near 1", n)
	}
	var same oracle.ChannelSums
	if err := same.Add([]float32{1, 2}, []float32{1, 2}); err != nil || same.Worst().Channel != -1 {
		t.Errorf("equal rows: %+v, %v; want channel -1", same.Worst(), err)
	}
	if err := same.Add([]float32{1, 2, 3}, []float32{1, 2, 3}); err == nil {
		t.Error("a row of another width was added")
	}
}
