package cuda_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/engine/cuda/internal/cu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/engine/model"
	refeng "github.com/aprqa/apr/engine/ref"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
	"github.com/ebitengine/purego"
)

// TestUnavailableIsRefused: on a machine without a usable CUDA driver and
// device (CI), opening the cuda backend is a refusal by engine/cuda that
// says why (refused by "backend", as a backend this build lacks) — never
// another backend, never a panic; also after Warm started the driver's
// set-up in the background.
func TestUnavailableIsRefused(t *testing.T) {
	cuda.Warm()
	if _, err := cuda.Available(); err == nil {
		t.Skip("SKIP (not a pass): this machine has a CUDA device; the refusal path is tested where it has none")
	}
	_, why := cuda.Available()
	dir := testutil.Fixtures(t)
	f, err := gguf.Open(filepath.Join(dir, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := model.OpenBackend("cuda", f, spec, model.OpenOptions{})
	if err == nil {
		eng.Close()
		t.Fatal("the cuda backend opened on a machine without CUDA")
	}
	r, ok := refuse.As(err)
	if !ok || r.By != cuda.ByBackend || !strings.Contains(r.Reason, why.Error()) {
		t.Fatalf("OpenBackend(cuda) = %v; want a refusal by %s carrying %q", err, cuda.ByBackend, why)
	}
}

type expectLogits struct {
	Tokens []int32     `json:"tokens"`
	Logits [][]float64 `json:"logits"`
}

type expectGreedy struct {
	Results []struct {
		PromptIDs    []int32   `json:"prompt_ids"`
		GeneratedIDs []int32   `json:"generated_ids"`
		Margins      []float64 `json:"top1_top2_margins"`
	} `json:"results"`
}

// TestParity runs every fixture model on cuda, the reference and cpu:
// cuda, which computes in ggml numerics (every product rounds x as
// ggml-cpu does), is held to the reference in those numerics at the
// deployed tier (quantized weights; float: the plain tier), and its
// agreement with cpu and with llama.cpp's logits is reported; greedy
// decoding on cuda must give llama.cpp's ids up to the first step whose
// margin is under the tier's noise.
func TestParity(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	dir := testutil.Fixtures(t)
	var paths []string
	for _, pat := range []string{"models/*.gguf", "models/synth/*.gguf"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	if only := os.Getenv(envEmuModels); only != "" {
		var keep []string
		for _, p := range paths {
			if slices.Contains(strings.Split(only, ","), strings.TrimSuffix(filepath.Base(p), ".gguf")) {
				keep = append(keep, p)
			}
		}
		paths = keep
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n1−cos (min/mean over positions): cuda~ref (judged), cuda~cpu, cuda~llama.cpp, cpu~llama.cpp; greedy: steps equal to llama.cpp / steps judged\n")
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			line := parity(t, dir, path)
			fmt.Fprintf(&sb, "%-26s %s\n", name, line)
		})
	}
	t.Log(sb.String())
}

func parity(t *testing.T, dir, path string) string {
	name := strings.TrimSuffix(filepath.Base(path), ".gguf")
	cpu := enginetest.Open(t, path, "cpu", 0)
	judge, err := model.OpenBackend("ref", cpu.F, cpu.Spec, model.OpenOptions{Numerics: refeng.NumericsGGML})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { judge.Close() })
	ref := &enginetest.Loaded{F: cpu.F, Spec: cpu.Spec, Eng: judge}
	gpu := enginetest.Open(t, path, "cuda", 0)
	var ex expectLogits
	hasEx := enginetest.ReadJSON(t, filepath.Join(dir, "expect", name+".logits.json"), &ex)
	tokens := ex.Tokens
	if !hasEx {
		for i := 0; i < 24; i++ {
			tokens = append(tokens, int32((1+i*7919)%ref.Spec.NVocab))
		}
	}
	nearTie := map[int]bool{}
	want := enginetest.EvalAll(t, ref, tokens, nearTie)
	got := enginetest.EvalAll(t, gpu, tokens, nil)
	onCPU := enginetest.EvalAll(t, cpu, tokens, nil)
	// The contracts' deployed tier (the cpu engine's, which rounds as cuda
	// does) on quantized weights; the plain tier on float ones.
	minWant, meanWant := 0.999, 0.9995
	if !enginetest.Quantized(ref.F) {
		minWant, meanWant = 0.99999, 0.999999
	}
	stat := func(a [][]float32, b func(pos int) []float64) (float64, float64) {
		mn, sum, n := 1.0, 0.0, 0
		for pos := range a {
			if nearTie[pos] {
				continue
			}
			c := enginetest.Cosine(a[pos], b(pos))
			mn = min(mn, c)
			sum += c
			n++
		}
		return mn, sum / float64(max(n, 1))
	}
	mnR, meR := stat(got, func(p int) []float64 { return enginetest.F64(want[p]) })
	mnC, meC := stat(got, func(p int) []float64 { return enginetest.F64(onCPU[p]) })
	gg, cg := "-", "-"
	if hasEx {
		a, b := stat(got, func(p int) []float64 { return ex.Logits[p] })
		gg = fmt.Sprintf("%.1e/%.1e", 1-a, 1-b)
		a, b = stat(onCPU, func(p int) []float64 { return ex.Logits[p] })
		cg = fmt.Sprintf("%.1e/%.1e", 1-a, 1-b)
	}
	if mnR < minWant || meR < meanWant {
		t.Errorf("cuda vs ref (ggml numerics): min %.9f (want ≥ %g), mean %.9f (want ≥ %g)", mnR, minWant, meR, meanWant)
	}
	args := 0
	for pos := range got {
		if best, margin := enginetest.Top2(want[pos]); margin >= 0.2 && !nearTie[pos] {
			if g, _ := enginetest.Top2(got[pos]); g != best {
				args++
				t.Errorf("position %d: cuda argmax %d, ref %d (ref margin %.3f)", pos, g, best, margin)
			}
		}
	}
	greedy := "-"
	var gr expectGreedy
	// The noise below which llama.cpp's top-1/top-2 margin may flip on an
	// engine that computes in plain FP32 (the reference's rule: llama.cpp
	// quantizes activations, cuda does not).
	noise := 1e-3
	if enginetest.Quantized(ref.F) {
		noise = 0.25
		if ref.Spec.Arch == "qwen35" {
			noise = 1.0
		}
	}
	if emuGreedy(name) && enginetest.ReadJSON(t, filepath.Join(dir, "expect", name+".greedy.json"), &gr) {
		eq, judged := 0, 0
		for _, r := range gr.Results {
			ids := greedyRun(t, gpu, r.PromptIDs, len(r.GeneratedIDs))
			for i, id := range r.GeneratedIDs {
				if name != "stories260K" && i < len(r.Margins) && r.Margins[i] < noise {
					break // a near-tie for this tier: what follows may legitimately differ
				}
				judged++
				if ids[i] != id {
					t.Errorf("greedy %v: step %d: cuda %d, llama.cpp %d (llama.cpp margin %.4f)", r.PromptIDs, i, ids[i], id, r.Margins[i])
					break
				}
				eq++
			}
		}
		greedy = fmt.Sprintf("%d/%d", eq, judged)
	}
	return fmt.Sprintf("ref %.1e/%.1e  cpu %.1e/%.1e  ggml %s  cpu~ggml %s  argmax-miss %d  greedy %s  excluded %d",
		1-mnR, 1-meR, 1-mnC, 1-meC, gg, cg, args, greedy, len(nearTie))
}

func greedyRun(t *testing.T, m *enginetest.Loaded, prompt []int32, n int) []int32 {
	s, err := m.Eng.NewSession(len(prompt) + n + 1)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Eval(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for len(out) < n {
		id, _ := enginetest.Top2(rows[len(rows)-1])
		out = append(out, int32(id))
		if rows, err = s.Eval([]int32{int32(id)}, false); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The emulated run (TestEmulated): which models TestParity takes, and on
// which of them it also decodes greedily (the emulator runs every thread of
// every block on the CPU, so CI takes a few models that cover every layer
// kind and the decode path).
const (
	envEmuModels = "APR_CUDA_EMU_MODELS"
	envEmuGreedy = "APR_CUDA_EMU_GREEDY"
)

func emuGreedy(name string) bool {
	g, set := os.LookupEnv(envEmuGreedy)
	return !set || slices.Contains(strings.Split(g, ","), name)
}

// TestEmulated runs the CUDA engine's own tests — every format's decoder
// on the device path (GetRows), the products (mv, mm, mmid) and TestParity
// on a few fixture models of every layer kind (attention, Gated DeltaNet,
// MoE), and the binding's results on moved stacks — against the host
// emulator of the driver (kernels/emu.cpp, built with the host C++
// compiler): the engine's launches, arguments, strides and every kernel's
// arithmetic are checked on machines without a GPU, and the emulator's
// guard pages abort on any access outside a live device allocation. It
// proves nothing about nvcc's code or speed; a GPU run does that.
func TestEmulated(t *testing.T) {
	if os.Getenv(cu.EnvLibrary) != "" {
		t.Skip("SKIP (not a pass): already running on the emulator")
	}
	if _, err := cuda.Available(); err == nil {
		t.Skip("SKIP (not a pass): this machine has a CUDA device; TestParity runs on it")
	}
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Skipf("SKIP (not a pass): no host C++ compiler to build the emulator: %v", err)
	}
	testutil.Fixtures(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcuda-emu.so")
	if out, err := exec.Command(cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-o", lib, "kernels/emu.cpp").CombinedOutput(); err != nil {
		t.Fatalf("building the emulator: %v\n%s", err, out)
	}
	ptx := filepath.Join(dir, "emulator.ptx")
	if err := os.WriteFile(ptx, []byte("// the emulator runs the kernels compiled for the host; this image is not read\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", deviceTests(t, "emulator"), "-test.v")
	cmd.Env = append(os.Environ(), cu.EnvLibrary+"="+lib, cuda.EnvPTX+"="+ptx,
		envEmuModels+"=stories260K,llama-tiny-Q4_K_M,qwen2-tiny-IQ4_XS,qwen35-tiny-Q8_0,qwen3moe-tiny-Q8_0",
		envEmuGreedy+"=stories260K,qwen3moe-tiny-Q8_0")
	out, err := cmd.CombinedOutput()
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "=== ") && strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	t.Logf("emulated run:\n%s", strings.Join(keep, "\n"))
	if err != nil {
		t.Fatalf("the CUDA engine's tests on the emulator failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestParity") || strings.Contains(string(out), "--- SKIP: TestParity") {
		t.Fatal("TestParity did not run and pass on the emulator")
	}
	// rerun runs tests (a -test.run pattern) on the emulator of library
	// lib with env set, and fails t as what unless they pass and pass
	// names one that ran.
	rerun := func(what, lib, tests, pass string, env ...string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run", tests, "-test.v")
		cmd.Env = append(append(os.Environ(), cu.EnvLibrary+"="+lib, cuda.EnvPTX+"="+ptx), env...)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: "+pass) {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
	}
	// With many multiprocessors the products take fewer rows per slot (the
	// G of apr.cu's mv_body): the products and fusion again that way.
	rerun("the products on an emulator of 48 multiprocessors", lib, "^(TestProducts|TestWideProducts|TestFusion)$", "TestFusion", "APR_CUDA_EMU_SMS=48")
	// The attention's build parameters (apr.cu: AG_L, which the host reads
	// through k_attgcfg and sizes k_attg's splits by, and AG_CU, the
	// combine's loads in flight), each away from its default, so that a
	// value an A/B may pick is known to compute the same results.
	vlib := filepath.Join(dir, "libcuda-emu-variants.so")
	if out, err := exec.Command(cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-DAG_L=32", "-DAG_CU=16", "-o", vlib, "kernels/emu.cpp").CombinedOutput(); err != nil {
		t.Fatalf("building the emulator with the variants: %v\n%s", err, out)
	}
	rerun("the kernels built with AG_L=32, AG_CU=16", vlib, "^(TestAttendKernels|TestAttendRope|TestEvalLast)$", "TestAttendKernels")
	// A device that holds no block of a product kernel: the load refuses.
	rerun("an emulator holding no block of mv_<type>", lib, "^TestZeroResidentRefused$", "TestZeroResidentRefused", "APR_CUDA_EMU_RESIDENT=0")
	// No pinned memory for the upload's buffers: it copies from pageable
	// memory, the same bytes.
	rerun("an emulator that pins nothing over 64 KiB", lib, "^TestUpload$", "TestUpload", "APR_CUDA_EMU_PIN_MAX=65536")
	runEmuProbes(t, append(os.Environ(), cu.EnvLibrary+"="+lib, cuda.EnvPTX+"="+ptx))
}

// deviceTests is the -test.run pattern of testdata/device-tests.txt's
// tests for where ("gpu" or "emulator"): the one list gpu.sh and
// TestEmulated run.
func deviceTests(t *testing.T, where string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "device-tests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case len(f) > 2 || len(f) == 2 && f[1] != "gpu" && f[1] != "emulator" || !strings.HasPrefix(f[0], "Test"):
			t.Fatalf("testdata/device-tests.txt:%d: %q: want a test's name, then optionally gpu or emulator", i+1, l)
		case len(f) == 1 || f[1] == where:
			names = append(names, f[0])
		}
	}
	return "^(" + strings.Join(names, "|") + ")$"
}

// TestDeviceTestList: every name in testdata/device-tests.txt is a test of
// this package (a misspelt one would run nothing, on the GPU or the
// emulator, and say nothing), and the list's two selections are what
// gpu.sh reads it as.
func TestDeviceTestList(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
					have[fn.Name.Name] = true
				}
			}
		}
	}
	for _, where := range []string{"gpu", "emulator"} {
		pat := deviceTests(t, where)
		for _, n := range strings.Split(strings.Trim(pat, "^()$"), "|") {
			if !have[n] {
				t.Errorf("testdata/device-tests.txt names %s, which is not a test of engine/cuda", n)
			}
		}
		if where == "emulator" && (!strings.Contains(pat, "TestParity") || strings.Contains(pat, "TestUnavailableIsRefused")) {
			t.Errorf("the emulator's selection %s: want TestParity and not the gpu-only TestUnavailableIsRefused", pat)
		}
	}
	if b, err := os.ReadFile("gpu.sh"); err != nil || !strings.Contains(string(b), "testdata/device-tests.txt") {
		t.Errorf("gpu.sh does not read testdata/device-tests.txt (%v): its device tests would be a second list", err)
	}
}

// TestPlantedDefect plants a wrong kernel (one output column of layer 1's
// ffn_down product scaled by 3) and checks that the bisect names exactly
// that (layer, op) against the cpu engine, and that F2 fails.
func TestPlantedDefect(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	dir := testutil.Fixtures(t)
	path := filepath.Join(dir, "models", "synth", "qwen2-tiny-Q8_0.gguf")
	cpu := enginetest.Open(t, path, "cpu", 0)
	bad, _ := newEngine(t, path, cuda.Options{Plant: &cuda.Plant{Tensor: "blk.1.ffn_down.weight", Col: 5, Factor: 3}})
	var ex expectLogits
	if !enginetest.ReadJSON(t, filepath.Join(dir, "expect", "qwen2-tiny-Q8_0.logits.json"), &ex) {
		t.Fatal("no expect logits")
	}
	toks := ex.Tokens[:8]
	trace := func(eng model.Engine) []oracle.Record {
		s, err := eng.NewSession(len(toks))
		if err != nil {
			t.Fatal(err)
		}
		var rec oracle.Recording
		s.SetTrace(rec.Trace())
		if _, err := s.Eval(toks, true); err != nil {
			t.Fatal(err)
		}
		return rec.Records
	}
	d := oracle.FirstDivergence(trace(bad), trace(cpu.Eng), oracle.DivergenceTol{MinCosine: 0.999})
	if d.First == nil || d.First.Layer != 1 || d.First.Op != model.OpFFNOut {
		t.Fatalf("the bisect named %+v; want layer 1 op %s (the planted ffn_down)", d.First, model.OpFFNOut)
	}
	sum := sha256.Sum256(mustRead(t, path))
	r := falsify.RunF2(context.Background(), bad, falsify.F2Options{Model: path, ModelSHA256: hex.EncodeToString(sum[:]),
		Tokens: ex.Tokens, Identity: "test", CacheDir: "-"})
	if r.Verdict != verdict.Fail {
		t.Fatalf("F2 on the planted engine: %+v; want fail", r)
	}
	t.Logf("planted blk.1.ffn_down col 5 ×3: bisect names layer %d %s (cosine %.6f at position %d); F2 %s: %s", d.First.Layer, d.First.Op, d.First.Cosine, d.First.Pos, r.Verdict, r.Reason)
}

// TestGraphReplay: decoding with the graph cache (tapes captured into CUDA
// graphs and replayed) gives logits bit-identical to launching every
// kernel on its own (APR_CUDA_GRAPHS=0), on a model of each layer kind,
// and decode steps do replay (a cache that never hits would pass the
// comparison and speed nothing up).
func TestGraphReplay(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	dir := testutil.Fixtures(t)
	for _, name := range []string{"stories260K", "synth/qwen35-tiny-Q8_0", "synth/qwen3moe-tiny-Q8_0"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			on, off, _ := decodeWithout(t, filepath.Join(dir, "models", name+".gguf"), cuda.EnvGraphs, []int32{1, 5, 9, 13, 17}, 12)
			var st, stOff [3]int
			st[0], st[1], st[2] = on.GraphStats()
			stOff[0], stOff[1], stOff[2] = off.GraphStats()
			if st[2] == 0 || stOff != [3]int{} {
				t.Fatalf("graph stats (direct, captured, replayed): on %v, off %v; want replays with the cache and none without", st, stOff)
			}
			t.Logf("12 decode steps bit-identical with and without graphs; tapes direct %d, captured %d, replayed %d", st[0], st[1], st[2])
		})
	}
}

// TestEarlyLaunch: decoding with programmatic dependent launch (each
// kernel of a tape launched before the one ahead of it finishes, and
// waiting for it in apr.cu's pdl) gives logits bit-identical to launching
// each only after the one before (APR_CUDA_EARLY=0), with and without the
// graph cache; and it does launch early where the device has sm_90.
func TestEarlyLaunch(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	path := filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen35-tiny-Q8_0.gguf")
	for _, graphs := range []bool{true, false} {
		t.Run(fmt.Sprintf("graphs=%v", graphs), func(t *testing.T) {
			if !graphs {
				t.Setenv(cuda.EnvGraphs, "0")
			}
			on, off, _ := decodeWithout(t, path, cuda.EnvEarly, []int32{1, 5, 9, 13}, 8)
			n, nOff := on.EarlyLaunches(), off.EarlyLaunches()
			if nOff != 0 {
				t.Fatalf("%d early launches with %s=0", nOff, cuda.EnvEarly)
			}
			if d, _ := cuda.Available(); n == 0 && d.Major >= 9 {
				t.Fatalf("no kernel launched early on %s (sm_%d%d)", d.Name, d.Major, d.Minor)
			}
			t.Logf("8 decode steps bit-identical with and without early launch (%d kernels launched early)", n)
		})
	}
}

// TestChunks: a decode step's tape run in parts as it is recorded gives
// logits bit-identical to running it whole at the step's read
// (APR_CUDA_CHUNK=0), folds as many ops (the parts keep every op a later
// one may fold into), and does run in parts: more graphs replayed than
// steps. qwen3.5's step is long enough for parts; qwen2-tiny's is not
// (nothing changes there, checked too).
func TestChunks(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	for _, c := range []struct {
		name  string
		parts bool
	}{{"qwen35-tiny-Q8_0", true}, {"qwen2-tiny-Q8_0", false}} {
		t.Run(c.name, func(t *testing.T) {
			const steps = 8
			on, off, _ := decodeWithout(t, filepath.Join(testutil.Fixtures(t), "models", "synth", c.name+".gguf"), cuda.EnvChunk, []int32{1, 5, 9}, steps)
			_, _, rOn := on.GraphStats()
			_, _, rOff := off.GraphStats()
			if on.Fused() != off.Fused() {
				t.Fatalf("folded %d ops in parts, %d whole", on.Fused(), off.Fused())
			}
			if c.parts && rOn <= rOff || !c.parts && rOn != rOff || rOff == 0 {
				t.Fatalf("graphs replayed: %d in parts, %d whole (parts expected: %v)", rOn, rOff, c.parts)
			}
			t.Logf("%d decode steps bit-identical in parts and whole; graphs replayed %d and %d, %d ops folded", steps, rOn, rOff, on.Fused())
		})
	}
}

// TestFusion: folding ops into the kernel before them in decode steps
// (the norms, q/k/v and gate/up as one product, biases, SwiGLU, residual
// adds, the key rotation and the KV store) gives logits bit-identical to
// launching them on their own (APR_CUDA_FUSE=0), and does fold, on
// qwen2 and on qwen3.5 (Gated DeltaNet layers beside attention).
func TestFusion(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	for _, c := range []struct {
		name string
		// want is the least folded per decode step: qwen2, per layer: two
		// norms, the q, k, v biases, SwiGLU, two residual adds, the key
		// rotation, the store and the rotation again into the attention; qwen3.5, per layer: two norms and two
		// residual adds.
		want func(*model.Spec) int
	}{
		{"qwen2-tiny-Q8_0", func(s *model.Spec) int { return 11 * s.NLayer }},
		{"qwen35-tiny-Q8_0", func(s *model.Spec) int { return 4 * s.NLayer }},
	} {
		t.Run(c.name, func(t *testing.T) {
			on, off, spec := decodeWithout(t, filepath.Join(testutil.Fixtures(t), "models", "synth", c.name+".gguf"), cuda.EnvFuse, []int32{1, 5, 9}, 6)
			n, nOff, want := on.Fused(), off.Fused(), 6*c.want(spec)
			if n < want || nOff != 0 {
				t.Fatalf("fused %d ops in 6 decode steps (off: %d); want ≥ %d", n, nOff, want)
			}
			t.Logf("6 decode steps bit-identical with and without fusion; %d ops folded", n)
		})
	}
}

// newEngine builds a cuda engine over the model at path, closed (with its
// file) when the test ends.
func newEngine(t *testing.T, path string, o cuda.Options) (*cuda.Engine, *model.Spec) {
	t.Helper()
	f, spec := enginetest.Model(t, path)
	eng, err := cuda.New(f, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, spec
}

// decodeWithout decodes steps tokens after prompt on the model at path
// twice, as is and then with env set to "0" (t.Setenv: for the rest of t),
// and fails t unless every step's logits are bit-identical; it returns
// both engines (closed when t ends) for their counters, and the spec.
func decodeWithout(t *testing.T, path, env string, prompt []int32, steps int) (on, off *cuda.Engine, spec *model.Spec) {
	t.Helper()
	on, spec = newEngine(t, path, cuda.Options{})
	rowsOn := decodeRows(t, on, prompt, steps)
	t.Setenv(env, "0")
	off, _ = newEngine(t, path, cuda.Options{})
	rowsOff := decodeRows(t, off, prompt, steps)
	for i := range rowsOn {
		if !slices.Equal(rowsOn[i], rowsOff[i]) {
			t.Fatalf("step %d: logits with %s=0 differ from those without it", i, env)
		}
	}
	return on, off, spec
}

// decodeRows feeds prompt, then decodes steps tokens greedily, and returns
// the logits row of every step.
func decodeRows(t *testing.T, eng *cuda.Engine, prompt []int32, steps int) [][]float32 {
	t.Helper()
	s, err := eng.NewSession(len(prompt) + steps + 1)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	rows, err := s.Eval(prompt, false)
	for step := 0; step < steps && err == nil; step++ {
		out = append(out, rows[0])
		rows, err = s.Eval([]int32{int32(enginetest.Argmax(rows[0]))}, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeviceMemoryRefusals: a model whose weights do not fit the device's
// free memory is refused when the engine is built, naming both sizes, and a
// KV cache that does not fit is refused when the session is made (the
// emulator's device shrunk through its aprEmuSetMemory; skipped on a GPU).
func TestDeviceMemoryRefusals(t *testing.T) {
	in, err := cuda.Available()
	if err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	lib := os.Getenv(cu.EnvLibrary)
	if !strings.Contains(in.Name, "emulator") || lib == "" {
		t.Skip("SKIP (not a pass): shrinking the device needs the emulator")
	}
	var setMemory func(uint64)
	emuFunc(t, lib, "aprEmuSetMemory", &setMemory)
	defer setMemory(16 << 30)
	f, spec := enginetest.Model(t, filepath.Join(testutil.Fixtures(t), "models", "synth", "qwen2-tiny-Q8_0.gguf"))
	setMemory(64 << 20) // less than weights + the 256 MiB workspace
	_, err = cuda.New(f, spec, cuda.Options{})
	r, ok := refuse.As(err)
	if !ok || r.By != cuda.By || !strings.Contains(r.Reason, "needs") || !strings.Contains(r.Reason, "bytes free") {
		t.Fatalf("cuda.New on a 64 MiB device: %v; want a refusal by %s naming the bytes needed and free", err, cuda.By)
	}
	setMemory(16 << 30)
	eng, err := cuda.New(f, spec, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := eng.Upload(); err != nil {
		t.Fatal(err)
	}
	setMemory(eng.WeightBytes() + 8<<20) // the weights fit; a KV cache for 1M positions does not
	_, err = eng.NewSession(1 << 20)
	if r, ok := refuse.As(err); !ok || !strings.Contains(r.Reason, "KV cache") || !strings.Contains(r.Reason, "bytes free") {
		t.Fatalf("NewSession(1Mi positions) on a device with no room: %v; want a refusal naming the KV cache's bytes", err)
	}
}

// TestStreamRead: apr bench --stream's device read measures a positive
// rate, and (on the emulator, which counts them through aprEmuLiveEvents)
// releases the CUDA events it times with.
func TestStreamRead(t *testing.T) {
	if _, err := cuda.Available(); err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	live := func() int64 { return -1 }
	if lib := os.Getenv(cu.EnvLibrary); lib != "" {
		emuFunc(t, lib, "aprEmuLiveEvents", &live)
	} else {
		t.Log("on a GPU the driver does not count live events: the rate is checked, the release is not (TestEmulated checks it)")
	}
	eng, _ := newEngine(t, filepath.Join(testutil.Fixtures(t), "models", "stories260K.gguf"), cuda.Options{})
	before := live()
	for range 3 {
		bps, err := eng.StreamRead(1<<20, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !(bps > 0) || math.IsInf(bps, 0) {
			t.Fatalf("StreamRead measured %v bytes/s", bps)
		}
	}
	if after := live(); after != before {
		t.Errorf("three StreamReads left %d more live events (%d before, %d after)", after-before, before, after)
	}
}

// emuFunc binds fn (a pointer to a func variable) to the emulator's
// exported function name in the library lib.
func emuFunc(t *testing.T, lib, name string, fn any) {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	purego.RegisterLibFunc(fn, h, name)
}
