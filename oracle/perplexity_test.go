package oracle_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/kldfile"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/oracle"
)

func TestPerplexityEstimate(t *testing.T) {
	var p oracle.Perplexity
	for _, v := range []float64{1, 2, 3, 4} {
		p.Add(v)
	}
	ppl, unc, ok := p.Estimate()
	// mean 2.5, population variance 1.25, sd/√(n−1) = √(1.25/3).
	if !ok || math.Abs(ppl-math.Exp(2.5)) > 1e-12 || math.Abs(unc-math.Exp(2.5)*math.Sqrt(1.25/3)) > 1e-9 {
		t.Errorf("Estimate() = %v, %v, %v", ppl, unc, ok)
	}
	var flat oracle.Perplexity
	flat.Add(1)
	flat.Add(1)
	if _, _, ok := flat.Estimate(); ok {
		t.Error("Estimate of identical values: ok, want not ok (no spread)")
	}
}

func TestNLL(t *testing.T) {
	got, err := oracle.NLL([]float32{0, 0, 0, 0}, 2)
	if err != nil || math.Abs(got-math.Log(4)) > 1e-7 {
		t.Errorf("NLL(uniform of 4) = %v, %v; want ln 4", got, err)
	}
	if _, err := oracle.NLL([]float32{0, float32(math.NaN())}, 0); err == nil {
		t.Error("NLL with a NaN logit: no error")
	}
	if _, err := oracle.NLL([]float32{0, 1}, 2); err == nil {
		t.Error("NLL of a token outside the logits: no error")
	}
}

// logLine returns the text after ": " of the line of log that starts with
// prefix.
func logLine(t *testing.T, log, prefix string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(l[len(prefix):])
		}
	}
	t.Fatalf("no line %q in the log", prefix)
	return ""
}

// TestKLDBaseFromFixtures feeds each llama.cpp base file's own decoded
// log-probabilities back as logits: PPL(base) must be llama.cpp's printed
// figure to every digit (it depends on the file alone), and a model equal to
// its base must show KLD 0 and the same top token everywhere.
func TestKLDBaseFromFixtures(t *testing.T) {
	dir := testutil.Fixture(t, "kld")
	for _, name := range []string{"stories260K", "qwen2-tiny-Q4_K_M", "llama-tiny-Q4_K_M"} {
		f, err := kldfile.Open(filepath.Join(dir, name+".kld"))
		if err != nil {
			t.Fatal(err)
		}
		var k oracle.KLD
		row := make([]float32, f.NVocab)
		for c := range f.NChunk {
			for j := range f.Scored() {
				r, err := f.Record(c, j)
				if err != nil {
					t.Fatal(err)
				}
				for i := range row {
					row[i] = r.LogProb(i)
				}
				if _, _, err := k.Add(row, r, f.Tokens[c*f.NCtx+f.First()+j+1]); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.Close()
		s, ok := k.Summary()
		if !ok {
			t.Fatalf("%s: no summary over %d positions", name, k.Count())
		}
		log, err := os.ReadFile(filepath.Join(dir, name+".kld.log"))
		if err != nil {
			t.Fatal(err)
		}
		want := logLine(t, string(log), "Mean PPL(base)                :")
		if got := fmt.Sprintf("%10.6f ± %10.6f", s.PPLBase.Value, s.PPLBase.Unc); strings.TrimSpace(got) != want {
			t.Errorf("%s: Mean PPL(base) %q, llama.cpp printed %q", name, strings.TrimSpace(got), want)
		}
		// Not exactly 0: tokens more than 16 below the best are all stored at
		// that floor, so the decoded values, taken as logits, put a little more
		// mass there (stories260K: KLD 2.6e-5).
		if math.Abs(s.KLD.Value) > 1e-4 || s.SameTop.Value != 1 || math.Abs(s.PPL.Value/s.PPLBase.Value-1) > 1e-4 {
			t.Errorf("%s: base against itself: KLD %v, same top %v, PPL(Q)/PPL(base) %v", name, s.KLD.Value, s.SameTop.Value, s.PPL.Value/s.PPLBase.Value)
		}
	}
}

// TestKLDStatistics checks the order statistics on a known set: KLD of a
// shifted distribution against a base, positions with known Δp.
func TestKLDStatistics(t *testing.T) {
	var k oracle.KLD
	rec := make([]byte, 2*kldfile.RowLen(2))
	hdr := kldfile.Magic + "\x03\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	// Base: p = (0.5, 0.5); model: logits (a, 0) with a growing.
	kldfile.Encode(rec, []float32{0, 0}, 0)
	f, err := kldfile.Parse("two", append([]byte(hdr), rec...))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := f.Record(0, 0)
	var want []float64
	for i := range 101 {
		a := float32(i) / 100
		kl, dp, err := k.Add([]float32{a, 0}, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := 1 / (1 + math.Exp(-float64(a)))
		exact := 0.5*math.Log(0.5/p) + 0.5*math.Log(0.5/(1-p))
		if math.Abs(kl-exact) > 1e-6 || math.Abs(float64(dp)-(p-0.5)) > 1e-6 {
			t.Fatalf("a = %v: KLD %v Δp %v, want %v %v", a, kl, dp, exact, p-0.5)
		}
		want = append(want, exact)
	}
	s, ok := k.Summary()
	if !ok {
		t.Fatal("no summary over 101 positions")
	}
	// Sorted KLD grows with a: the median is position 50's, the maximum 100's,
	// the 90th percentile 90's (0.9·100 is whole).
	if math.Abs(s.KLDDist.Median-want[50]) > 1e-7 || math.Abs(s.KLDDist.Max-want[100]) > 1e-7 || math.Abs(s.KLDDist.P90-want[90]) > 1e-6 {
		t.Errorf("median %v max %v p90 %v, want %v %v %v", s.KLDDist.Median, s.KLDDist.Max, s.KLDDist.P90, want[50], want[100], want[90])
	}
	// Token 0 is the model's top everywhere but at a = 0 (a tie: the lowest
	// index wins on both sides), and the base's top is token 0 (a tie).
	if s.SameTop.Value != 1 {
		t.Errorf("same top %v, want 1", s.SameTop.Value)
	}
	if s.Cor != s.Cor || s.Count != 101 {
		t.Errorf("cor %v count %d", s.Cor, s.Count)
	}
}

// TestDivergenceNMSE: the first divergence carries the record's NMSE
// (Σ(b−a)²/Σa²), and its reason names it.
func TestDivergenceNMSE(t *testing.T) {
	a := []oracle.Record{{Layer: 0, Op: "q", Pos: 0, Values: []float32{1, 0, 0, 0}}}
	b := []oracle.Record{{Layer: 0, Op: "q", Pos: 0, Values: []float32{1, 0.5, 0, 0}}}
	d := oracle.FirstDivergence(a, b, oracle.DivergenceTol{MinCosine: 0.99})
	if d.First == nil || math.Abs(d.First.NMSE-0.25) > 1e-12 || !strings.Contains(d.First.Reason, "NMSE 0.25") {
		t.Errorf("FirstDivergence = %+v, want NMSE 0.25 named in the reason", d.First)
	}
}
