package falsify_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/verdict"
)

// f2Model writes apr synth's tiny llama at Q8_0 and opens it on the
// reference engine in ggml numerics, which stands in for a device engine
// that computes in them as the CUDA engine does (F2 is engine-agnostic;
// engine/cuda's TestPlantedDefect runs it on the CUDA engine).
func f2Model(t *testing.T) (string, string, model.Engine) {
	t.Helper()
	p, err := synth.FindPreset("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := model.OpenBackend("ref", f, spec, model.OpenOptions{Threads: 1, Numerics: f2Numerics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); f.Close() })
	return path, hex.EncodeToString(sum[:]), eng
}

// wrongEngine plants a defect: every logits row's first value is moved (a
// wrong kernel), or every Eval fails (an injected kernel error).
type wrongEngine struct {
	model.Engine
	fail  bool
	shift float32
}

func (w wrongEngine) NewSession(n int) (model.Session, error) {
	s, err := w.Engine.NewSession(n)
	return wrongSession{s, w}, err
}

type wrongSession struct {
	model.Session
	w wrongEngine
}

func (s wrongSession) Eval(tokens []int32, all bool) ([][]float32, error) {
	if s.w.fail {
		return nil, errors.New("injected kernel error: CUDA_ERROR_ILLEGAL_ADDRESS")
	}
	rows, err := s.Session.Eval(tokens, all)
	for _, r := range rows {
		for i := 0; i < len(r); i += 3 {
			r[i] += s.w.shift
		}
	}
	return rows, err
}

// f2Numerics is the reference's numerics in F2 of the CUDA engine
// (contracts' _engine_numerics), which keys its cache entries.
const f2Numerics = "ggml"

func TestF2(t *testing.T) {
	path, sha, eng := f2Model(t)
	ctx := context.Background()
	tokens := []int32{1, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	refCalls := 0
	counting := func(ctx context.Context, m, backend, numerics string, toks []int32) ([][]float32, error) {
		refCalls++
		return realLogitsOf(ctx, m, backend, numerics, toks)
	}
	base := falsify.F2Options{Model: path, ModelSHA256: sha, Tokens: tokens, Identity: "test-binary sha256 aaaa",
		CacheDir: t.TempDir(), RefLogits: counting}

	t.Run("pass, then from the cache", func(t *testing.T) {
		r := falsify.RunF2(ctx, eng, base)
		if r.Verdict != verdict.Pass || r.ProbeTokens != 8 || r.RefCached {
			t.Fatalf("F2 on a correct engine: %+v; want pass over 8 probe tokens, reference computed", r)
		}
		if r.Falsifier != "llama.f2_quantized" || r.MinCosine < 0.99999 {
			t.Errorf("F2 applied %s, min cosine %g", r.Falsifier, r.MinCosine)
		}
		if r.SetupMS <= 0 || r.ProbeMS <= 0 || r.ReferenceMS <= 0 || r.SetupMS+r.ProbeMS+r.ReferenceMS > r.MS {
			t.Errorf("F2's stages: set-up %g ms, reference %g ms, probe %g ms, of %g ms; want each measured, within the whole", r.SetupMS, r.ReferenceMS, r.ProbeMS, r.MS)
		}
		calls := refCalls
		r = falsify.RunF2(ctx, eng, base)
		if r.Verdict != verdict.Pass || !r.RefCached || refCalls != calls {
			t.Fatalf("second F2: %+v, reference calls %d → %d; want a pass from the cache without a reference forward", r, calls, refCalls)
		}
	})
	t.Run("planted wrong kernel fails", func(t *testing.T) {
		r := falsify.RunF2(ctx, wrongEngine{Engine: eng, shift: 0.2}, base)
		if r.Verdict != verdict.Fail || !errors.Is(r.Err(), falsify.ErrF2Failed) || !strings.Contains(r.Reason, "worst position") {
			t.Fatalf("F2 on a wrong engine: %+v; want fail naming the worst position", r)
		}
		// Below the tier, it was judged again beyond the model's own noise
		// (the reference against its jittered twin): on this model ~0.
		if !strings.Contains(r.Reason, "noise floor") || r.FloorMinCosine < 0.99999 {
			t.Errorf("F2's failure: %q, noise floor min cosine %g; want judged beyond a noise floor near 1", r.Reason, r.FloorMinCosine)
		}
	})
	t.Run("beyond a noise floor the contract multiplies", func(t *testing.T) {
		// The same wrong engine passes where the contract allows 1e15 times
		// the model's own noise: the floor's judgement is what decides.
		dir := contractsDir(t, func(files map[string]string) {
			files["common.cue"] = mustReplace(t, files["common.cue"], "_noise_floor: {llama: 2,", "_noise_floor: {llama: 1e15,")
		})
		set, err := contracts.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		o := base
		o.Contracts = set
		r := falsify.RunF2(ctx, wrongEngine{Engine: eng, shift: 0.2}, o)
		if r.Verdict != verdict.Pass || r.FloorMinCosine == 0 || r.MeasuredMinCosine > 0.999 || r.MinCosine < 0.999 {
			t.Fatalf("F2 on a wrong engine beyond 1e15× the noise floor: %+v; want a pass judged by the floor", r)
		}
	})
	refusals := []struct {
		name string
		edit func(o *falsify.F2Options)
		eng  model.Engine
		want string
	}{
		{"reference unavailable", func(o *falsify.F2Options) {
			o.CacheDir = "-"
			o.RefLogits = func(context.Context, string, string, string, []int32) ([][]float32, error) {
				return nil, refuse.New("backend", "backend \"ref\" is not available in this build")
			}
		}, eng, "reference"},
		{"probe of one token", func(o *falsify.F2Options) { o.Tokens = tokens[:1] }, eng, "at least 2"},
		{"injected kernel error", func(o *falsify.F2Options) {}, wrongEngine{Engine: eng, fail: true}, "injected kernel error"},
		{"no identity", func(o *falsify.F2Options) { o.Identity = "" }, eng, "identity"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			r := falsify.RunF2(ctx, tc.eng, o)
			if r.Verdict != verdict.Refused || !strings.Contains(r.Reason, tc.want) {
				t.Fatalf("F2 with %s: %+v; want refused mentioning %q", tc.name, r, tc.want)
			}
			if _, ok := refuse.As(r.Err()); !ok {
				t.Errorf("Err() of a refused F2 is %v, not a refusal", r.Err())
			}
		})
	}
	t.Run("a threshold F2 does not measure", func(t *testing.T) {
		dir := contractsDir(t, func(files map[string]string) {
			files["common.cue"] = mustReplace(t, files["common.cue"],
				`mean_cosine: {op: ">=", value: _parity_tiers.deployed[_arch].mean, doc: "beyond params.noise_floor times the model's own noise"}`,
				`mean_cosine: {op: ">=", value: _parity_tiers.deployed[_arch].mean, doc: "beyond params.noise_floor times the model's own noise"}
			max_kl: {op: "<=", value: 1}`)
		})
		set, err := contracts.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		o := base
		o.Contracts = set
		r := falsify.RunF2(ctx, eng, o)
		if r.Verdict != verdict.Refused || !strings.Contains(r.Reason, "max_kl") {
			t.Fatalf("F2 with a threshold it does not measure: %+v; want refused naming max_kl", r)
		}
	})
	t.Run("truncated cache entry", func(t *testing.T) {
		o := base
		o.CacheDir = t.TempDir()
		if r := falsify.RunF2(ctx, eng, o); r.Verdict != verdict.Pass || r.RefCached {
			t.Fatalf("F2 filling the cache: %+v", r)
		}
		path := filepath.Join(o.CacheDir, falsify.F2CacheKey(sha, tokens[:8], o.Identity, f2Numerics)+falsify.F2CacheExt)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b[:len(b)-4], 0o644); err != nil {
			t.Fatal(err)
		}
		r := falsify.RunF2(ctx, eng, o)
		if r.Verdict != verdict.Refused || !strings.Contains(r.Reason, path) || !strings.Contains(r.Reason, "bytes for 8 rows") {
			t.Fatalf("F2 over a truncated cache entry: %+v; want refused naming %s and its size", r, path)
		}
	})
	t.Run("cache entry of another binary", func(t *testing.T) {
		o := base
		o.CacheDir = t.TempDir()
		key := falsify.F2CacheKey(sha, tokens[:8], o.Identity, f2Numerics)
		b, _ := json.Marshal(map[string]any{"key": key, "model_sha256": sha, "tokens": tokens[:8], "identity": "another binary", "rows": 1, "cols": 1})
		b = append(b, "\n\x00\x00\x80\x3f"...)
		if err := os.WriteFile(filepath.Join(o.CacheDir, key+falsify.F2CacheExt), b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := falsify.RunF2(ctx, eng, o)
		if r.Verdict != verdict.Refused || !strings.Contains(r.Reason, "another binary") {
			t.Fatalf("F2 over another binary's cache entry: %+v; want refused", r)
		}
	})
}

func realLogitsOf(ctx context.Context, m, backend, numerics string, toks []int32) ([][]float32, error) {
	res, err := generate.Logits(ctx, generate.LogitsOptions{Model: m, Backend: backend, Tokens: toks, Numerics: numerics})
	return res.Logits, err
}

// TestF2Receipt: a receipt is keyed by (identity, model, device); another
// device or binary writes another receipt.
func TestF2Receipt(t *testing.T) {
	dir := t.TempDir()
	r := falsify.F2Receipt{Identity: "bin a", ModelSHA256: "m", Device: "H200 sm_90 driver 13000 kernels x", Result: falsify.F2Result{Verdict: verdict.Pass}}
	p1, err := falsify.WriteF2Receipt(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	r.Device = "another device"
	p2, err := falsify.WriteF2Receipt(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	r.Identity = "bin b"
	p3, _ := falsify.WriteF2Receipt(dir, r)
	if p1 == p2 || p2 == p3 || p1 == p3 {
		t.Fatalf("receipts of different devices or binaries share a path: %s %s %s", p1, p2, p3)
	}
	var back falsify.F2Receipt
	b, _ := os.ReadFile(p1)
	if err := json.Unmarshal(b, &back); err != nil || back.Device != "H200 sm_90 driver 13000 kernels x" || back.Result.Verdict != verdict.Pass {
		t.Fatalf("receipt read back as %+v (%v)", back, err)
	}
}

// uploading makes an engine look like a device engine (model.Uploader), the
// only kind F2Run.Validate checks.
type uploading struct{ model.Engine }

func (uploading) Upload() error { return nil }

// TestF2Early: the reference's answer Prepare starts before the engine is
// up is the one Validate judges with — computed once, before Validate was
// called — and an answer started for another probe or model is never used
// (planted: were it used, the probe of other tokens would fail F2). On too
// few cores Prepare starts nothing and Validate computes the answer itself.
func TestF2Early(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the receipts
	path, sha, eng := f2Model(t)
	dev := uploading{eng}
	ctx := context.Background()
	tokens := []int32{1, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	other := []int32{1, 200, 210, 220, 230, 240, 250, 260, 270}
	shaOf := func(s string) func() (string, error) { return func() (string, error) { return s, nil } }
	type call struct {
		at     time.Time
		tokens []int32
	}
	var mu sync.Mutex
	var calls []call
	counting := func(ctx context.Context, m, backend, numerics string, toks []int32) ([][]float32, error) {
		mu.Lock()
		calls = append(calls, call{time.Now(), toks})
		mu.Unlock()
		return realLogitsOf(ctx, m, backend, numerics, toks)
	}
	ncalls := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	run := func(t *testing.T, minCPU int, prepTokens []int32, prepSHA string) (verdictS string, err error, validateAt time.Time) {
		t.Helper()
		defer falsify.SetF2EarlyMinCPU(minCPU)()
		mu.Lock()
		calls = nil
		mu.Unlock()
		f := falsify.NewF2Run(path, nil).WithReference(counting, "-")
		f.Prepare(ctx, shaOf(prepSHA), prepTokens)
		// The device's load and upload: until the early reference has
		// started (it first hashes this executable), or 100 ms.
		wait := 100 * time.Millisecond
		if minCPU <= 1 {
			wait = 10 * time.Second
		}
		for t0 := time.Now(); time.Since(t0) < wait && ncalls() == 0; time.Sleep(time.Millisecond) {
		}
		validateAt = time.Now()
		v, err := f.Validate(ctx, dev, sha, tokens)
		return v, err, validateAt
	}
	t.Run("used", func(t *testing.T) {
		v, err, at := run(t, 1, tokens, sha)
		if v != "pass" || err != nil {
			t.Fatalf("F2 with the early answer: %s %v; want pass", v, err)
		}
		if len(calls) != 1 || !calls[0].at.Before(at) || len(calls[0].tokens) != 8 {
			t.Fatalf("reference calls %v (Validate at %v); want one, for the 8-token probe, before Validate", calls, at)
		}
	})
	for _, tc := range []struct {
		name   string
		tokens []int32
		sha    string
	}{{"another probe", other, sha}, {"another model", tokens, strings.Repeat("0", 64)}} {
		t.Run(tc.name+" is not used", func(t *testing.T) {
			v, err, at := run(t, 1, tc.tokens, tc.sha)
			if v != "pass" || err != nil {
				t.Fatalf("F2 after an early answer for %s: %s %v; want pass (judged by its own answer)", tc.name, v, err)
			}
			if len(calls) != 2 || !calls[1].at.After(at) || !slices.Equal(calls[1].tokens, tokens[:8]) {
				t.Fatalf("reference calls %v; want the early one and Validate's own for the probe", calls)
			}
		})
	}
	// The file's hash (the cache's key) takes a while: with no cache entry
	// for this binary and probe the forward pass starts before it is done;
	// with one, Prepare waits for the hash and reads the answer.
	dir := t.TempDir()
	// prepareUnhashed starts Prepare while the file is still being hashed;
	// hashed finishes the hash.
	prepareUnhashed := func(t *testing.T) (f *falsify.F2Run, hashed func()) {
		t.Cleanup(falsify.SetF2EarlyMinCPU(1))
		mu.Lock()
		calls = nil
		mu.Unlock()
		done := make(chan struct{})
		f = falsify.NewF2Run(path, nil).WithReference(counting, dir)
		f.Prepare(ctx, func() (string, error) { <-done; return sha, nil }, tokens)
		return f, func() { close(done) }
	}
	t.Run("a cache miss is computed before the hash", func(t *testing.T) {
		f, hashed := prepareUnhashed(t)
		for t0 := time.Now(); time.Since(t0) < 10*time.Second && ncalls() == 0; time.Sleep(time.Millisecond) {
		}
		n := ncalls()
		hashed()
		if n != 1 {
			t.Fatalf("reference calls before the hash: %d; want the forward pass started", n)
		}
		if v, err := f.Validate(ctx, dev, sha, tokens); v != "pass" || err != nil || ncalls() != 1 {
			t.Fatalf("F2: %s %v, reference calls %d; want pass from the early answer", v, err, ncalls())
		}
		if ents, _ := filepath.Glob(filepath.Join(dir, "*"+falsify.F2CacheExt)); len(ents) != 1 {
			t.Fatalf("cache entries %v; want the early answer kept", ents)
		}
	})
	t.Run("a possible hit waits for the hash", func(t *testing.T) {
		f, hashed := prepareUnhashed(t)
		time.Sleep(100 * time.Millisecond)
		n := ncalls()
		hashed()
		if v, err := f.Validate(ctx, dev, sha, tokens); v != "pass" || err != nil || n != 0 || ncalls() != 0 {
			t.Fatalf("F2: %s %v, reference calls %d before the hash, %d in all; want pass from the cache, no forward pass", v, err, n, ncalls())
		}
	})
	t.Run("too few cores", func(t *testing.T) {
		v, err, at := run(t, 1<<20, tokens, sha)
		if v != "pass" || err != nil || len(calls) != 1 || !calls[0].at.After(at) {
			t.Fatalf("F2 where Prepare starts nothing: %s %v, calls %v; want pass, the reference computed by Validate", v, err, calls)
		}
	})
}

// TestF2Skip: apr run --no-f2's Validate calls no engine and says so: a
// device engine's verdict is "off", never "pass", and a host engine's stays
// "not_required", as with F2 on.
func TestF2Skip(t *testing.T) {
	_, _, eng := f2Model(t)
	if v, err := falsify.F2Skip(context.Background(), uploading{eng}, "sha", []int32{1, 2}); v != generate.F2Off || err != nil {
		t.Errorf("F2Skip on a device engine: %q, %v; want %q", v, err, generate.F2Off)
	}
	if v, err := falsify.F2Skip(context.Background(), eng, "sha", []int32{1, 2}); v != generate.F2NotRequired || err != nil {
		t.Errorf("F2Skip on a host engine: %q, %v; want %q", v, err, generate.F2NotRequired)
	}
}
