package bench

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
)

// TestBootstrapCI: the interval of constant data is that constant; for
// spread data it holds the mean, lies within [min, max], narrows as the
// sample grows, and is the same for the same seed.
func TestBootstrapCI(t *testing.T) {
	if got := bootstrapCI([]float64{0.1, 0.1, 0.1}, 0.95, 2000, 1); got != [2]float64{0.1, 0.1} {
		t.Errorf("bootstrapCI(constant 0.1) = %v, want [0.1, 0.1]", got)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	width := func(n int) float64 {
		v := make([]float64, n)
		var sum float64
		for i := range v {
			v[i] = 100 + 10*rng.NormFloat64()
			sum += v[i]
		}
		ci := bootstrapCI(v, 0.95, 4000, 3)
		if mean := sum / float64(n); !(ci[0] <= mean && mean <= ci[1]) {
			t.Errorf("n=%d: CI %v does not hold the mean %g", n, ci, mean)
		}
		if again := bootstrapCI(v, 0.95, 4000, 3); again != ci {
			t.Errorf("n=%d: CI %v then %v with the same seed", n, ci, again)
		}
		return ci[1] - ci[0]
	}
	if w5, w500 := width(5), width(500); !(w500 < w5) {
		t.Errorf("CI width %g for 500 values is not below %g for 5", w500, w5)
	}
}

// TestStreamRead: --stream measures the streaming read once per thread
// count and sets each run's decode bandwidth (median tg tok/s × the bytes a
// decode step reads) and its fraction of that read; decodeBytes counts a
// tied embedding in full and an untied one as one row.
func TestStreamRead(t *testing.T) {
	defer func(n int) { streamBytes = n }(streamBytes)
	streamBytes = 8 << 20
	res := Result{DecodeBytesPerToken: 3e6, Runs: []Run{
		{Backend: "cpu", Threads: 1, Tests: []Stats{{Name: "pp8", Median: 100}, {Name: "tg4", Median: 10}}},
		{Backend: "ref", Threads: 1, Tests: []Stats{{Name: "pp8", Median: 1}}},
	}}
	if err := streamRead(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Stream) != 1 || res.Stream[0].Threads != 1 || !(res.Stream[0].GBps > 0) {
		t.Fatalf("stream: %+v, want one positive measurement on 1 thread", res.Stream)
	}
	cpu, ref := res.Runs[0], res.Runs[1]
	if cpu.DecodeGBps != 10*3e6/1e9 || cpu.DecodeStreamFraction != cpu.DecodeGBps/res.Stream[0].GBps {
		t.Errorf("cpu run: %g GB/s, fraction %g; want 0.03 GB/s over %g", cpu.DecodeGBps, cpu.DecodeStreamFraction, res.Stream[0].GBps)
	}
	if ref.DecodeGBps != 0 || ref.DecodeStreamFraction != 0 {
		t.Errorf("a run without a tg test has decode %g GB/s, fraction %g", ref.DecodeGBps, ref.DecodeStreamFraction)
	}
}

func TestDecodeBytes(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"qwen2-tiny-Q8_0", "qwen3moe-tiny-Q8_0"} {
		f, err := gguf.Open(filepath.Join(dir, "models", "synth", name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		spec, err := model.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		var all, embd, exps int64
		for _, ti := range f.Tensors {
			all += int64(ti.Size)
			if ti.Name == spec.TokEmbd.Name {
				embd = int64(ti.Size)
			}
			if strings.Contains(ti.Name, "_exps") {
				exps += int64(ti.Size)
			}
		}
		want := all - exps + exps*int64(spec.NExpertUsed)/int64(max(spec.NExpert, 1))
		if spec.Output.Name != spec.TokEmbd.Name {
			want += embd/int64(spec.TokEmbd.Rows()) - embd
		}
		if got := decodeBytes(f, spec); got != want || got <= 0 || got > f.Size {
			t.Errorf("%s: decodeBytes = %d, want %d (file %d, embedding %d, experts %d)", name, got, want, f.Size, embd, exps)
		}
		f.Close()
	}
}
