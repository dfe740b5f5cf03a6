package cuda

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/internal/testutil"
)

// TestProfileSteps: with APR_CUDA_PROFILE=steps, decode steps replay their
// graph between two events (the graph cache stays on), every Eval that
// replayed is counted with its host time, and the report names the time
// beyond the kernels.
func TestProfileSteps(t *testing.T) {
	t.Setenv(EnvProfile, ProfileSteps)
	if _, err := Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	f, spec := enginetest.Model(t, filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen2-tiny-Q8_0.gguf"))
	eng, err := New(f, spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if eng.be.steps == nil || eng.be.graphs == nil {
		t.Fatalf("step profiler %v, graph cache %v: want both on", eng.be.steps != nil, eng.be.graphs != nil)
	}
	s, err := eng.NewSession(16)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, eng.NVocab())
	for i := 0; i < 6; i++ {
		if err := model.EvalLast(s, []int32{int32(3 + i)}, row); err != nil {
			t.Fatal(err)
		}
	}
	p := eng.be.steps
	// The first two steps record and capture; the later ones replay.
	if p.replays < 3 || p.evals != p.replays || !(p.deviceMs > 0) || p.evalMs < p.deviceMs {
		t.Fatalf("replays %d, evals %d, device %.3f ms, host %.3f ms: want ≥ 3 replays, one per Eval, host ≥ device > 0",
			p.replays, p.evals, p.deviceMs, p.evalMs)
	}
	// The host clock's parts: recording is the rest of the Evals' time, so
	// it is positive only when flushing and reading fit in them; reading
	// took time; the three sum to the Evals' time (to rounding).
	if !(p.recMs > 0) || !(p.readMs > 0) || math.Abs(p.recMs+p.flushMs+p.readMs-p.evalMs) > 1e-9*p.evalMs {
		t.Fatalf("recording %.3f ms, flush %.3f ms, reads %.3f ms of %.3f ms: want recording and reads > 0, summing to the Evals",
			p.recMs, p.flushMs, p.readMs, p.evalMs)
	}
	var sb strings.Builder
	p.report(&sb)
	if !strings.Contains(sb.String(), "beyond the kernels") || !strings.Contains(sb.String(), "recording the tape") {
		t.Fatalf("report:\n%s", sb.String())
	}
}
