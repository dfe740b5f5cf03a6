package falsify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/atomicfile"
	"github.com/aprqa/apr/internal/buildinfo"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// F2 is the validation a device engine passes before it generates: the
// prompt's first tokens (prefilled as one batch) and one decode step on the
// engine, compared position by position with the reference engine's logits
// for the same tokens at the thresholds of the model contract's <arch>.f2
// falsifier (float weights) or <arch>.f2_quantized (params.f2_tokens is the
// probe's length). The reference judges in the numerics the falsifier's
// params.numerics names for its params.backend (the CUDA engine's: ggml's,
// every product's activations rounded as ggml-cpu rounds them), so the
// two agree to float rounding where no activation's rounding flips; on a
// model that amplifies such flips (params.noise_floor) a probe below the
// tier is judged again beyond that many times the model's own noise (the
// reference against its jittered twin), as the engine parity gate judges.
//
// It fails closed: a pass lets generation start; a fail (a position below
// the tier, or an argmax flip where the reference is decided) stops it;
// anything else — the reference cannot run, the probe is too short, the
// engine errors, the cache is inconsistent — is a refusal, and nothing
// falls back to another engine.
//
// The reference's probe logits depend only on the model's bytes, the probe
// tokens, the reference's code and its numerics, so they are cached under a
// key of exactly (model sha256, probe tokens, reference binary identity,
// numerics): a second
// run of the same binary on the same model and prompt pays one probe on the
// device and no reference forward pass.
const F2By = "f2"

// F2ProbePrompt is the text a server validates with before it serves (apr
// run probes with the user's prompt): params.prompt of the embedded
// contracts' <arch>.f2 falsifier.
func F2ProbePrompt(arch string) (string, error) {
	set, err := contracts.Embedded()
	if err != nil {
		return "", err
	}
	fz, ok := set.Falsifier(arch + ".f2")
	if !ok {
		return "", refuse.New(F2By, "the contracts have no %s.f2 falsifier to take F2's probe from", arch)
	}
	p, _ := fz.Params["prompt"].(string)
	if p == "" {
		return "", refuse.New(F2By, "%s.f2 gives no params.prompt", arch)
	}
	return p, nil
}

// F2Options configure one F2 check.
type F2Options struct {
	Model       string  // the GGUF file's path
	ModelSHA256 string  // its sha256 (the caller hashed it)
	Tokens      []int32 // the prompt's tokens; the probe is their first f2_tokens
	// Identity is the reference binary's identity (build info and the
	// executable's sha256): part of the cache key, never a version string.
	Identity string
	// Reference is the judging backend ("" means "ref").
	Reference string
	// CacheDir holds the reference's probe logits; "" means the user cache
	// directory's apr/f2, "-" means no cache.
	CacheDir  string
	Contracts *contracts.Set // nil: embedded
	// RefLogits computes the reference's logits in numerics ("" plain; nil:
	// engine/generate's Logits on Reference); a test replaces it to make the
	// reference unavailable.
	RefLogits func(ctx context.Context, model, backend, numerics string, tokens []int32) ([][]float32, error)

	early    *f2Early // the reference's answer started beside the load (F2Run.Prepare)
	numerics string   // the reference's (f2Plan.numerics), set by RunF2 and Prepare
}

// F2Result is F2's verdict with what it measured.
type F2Result struct {
	Verdict     verdict.Verdict `json:"verdict"` // pass, fail or refused
	Reason      string          `json:"reason,omitempty"`
	RefusedBy   string          `json:"refused_by,omitempty"`
	Falsifier   string          `json:"falsifier,omitempty"` // the contract falsifier whose tier was applied
	ProbeTokens int             `json:"probe_tokens"`
	MinCosine   float64         `json:"min_cosine"`
	MeanCosine  float64         `json:"mean_cosine"`
	Worst       int             `json:"worst_position"`
	Mismatches  int             `json:"argmax_mismatches"`
	RefCached   bool            `json:"reference_cached"` // the reference's logits came from the cache
	MS          float64         `json:"ms"`
	// Where MS went: the set-up (the embedded contracts, evaluated once per
	// process, and the model's header), the engine's probe, then the
	// reference's answer (the cache's read, or the reference engine's run:
	// one started beside the load is still running during the probe); the
	// rest is the judging.
	SetupMS     float64 `json:"setup_ms"`
	ReferenceMS float64 `json:"reference_ms"`
	ProbeMS     float64 `json:"probe_ms"`
	// ReferenceEarlyMS is how long the answer started beside the load and
	// h2d stages (F2Run.Prepare) took from its start, waiting for the file's
	// sha256 included; ReferenceMS is then only what F2 still waited for it.
	ReferenceEarlyMS float64 `json:"reference_early_ms,omitempty"`
	// The noise floor a probe below the tier was judged again by (the
	// reference against its jittered twin), where the contract allows one;
	// MinCosine, MeanCosine and Mismatches are then the judgement beyond it
	// and Measured* the distance before it.
	FloorMinCosine     float64 `json:"noise_floor_min_cosine,omitempty"`
	FloorMeanCosine    float64 `json:"noise_floor_mean_cosine,omitempty"`
	MeasuredMinCosine  float64 `json:"measured_min_cosine,omitempty"`
	MeasuredMeanCosine float64 `json:"measured_mean_cosine,omitempty"`
}

// Err is nil for a pass, ErrF2Failed (wrapped with the reason) for a fail
// and a refusal for everything else.
func (r F2Result) Err() error {
	switch r.Verdict {
	case verdict.Pass:
		return nil
	case verdict.Fail:
		return fmt.Errorf("%w: %s", ErrF2Failed, r.Reason)
	}
	by := r.RefusedBy
	if by == "" {
		by = F2By
	}
	return refuse.New(by, "F2: %s", r.Reason)
}

// ErrF2Failed marks a device engine that F2 caught disagreeing with the
// reference.
var ErrF2Failed = errors.New("F2 failed: the engine disagrees with the reference; generation did not start")

// f2Cache is one cached reference answer. The logits are the rows'
// float32 values, little-endian, one row after another, after the JSON
// header line (readF2Cache): a 151,936-entry vocabulary's probe is ~5 MB,
// where a JSON array of numbers took seconds.
type f2Cache struct {
	Key         string  `json:"key"`
	ModelSHA256 string  `json:"model_sha256"`
	Tokens      []int32 `json:"tokens"`
	Identity    string  `json:"identity"`
	Numerics    string  `json:"numerics"` // the reference's ("" plain)
	Rows        int     `json:"rows"`
	Cols        int     `json:"cols"`
	LogitsF32LE []byte  `json:"-"` // after the header line
}

// readF2Cache parses a cache entry: a JSON header line, then the rows'
// little-endian float32 bytes. (Base64 inside JSON, the format before,
// took 60–80 ms to read for qwen2.5's 8 × 151,936 logits on the H200's
// host, a tenth of apr run's time to first token; the raw bytes take a
// few.)
func readF2Cache(b []byte) (f2Cache, error) {
	var c f2Cache
	head, payload, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return c, errors.New("no header line")
	}
	if err := json.Unmarshal(head, &c); err != nil {
		return c, err
	}
	c.LogitsF32LE = payload
	return c, nil
}

// encode is readF2Cache's inverse.
func (c f2Cache) encode() ([]byte, error) {
	head, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append(append(head, '\n'), c.LogitsF32LE...), nil
}

// packRows lays rows of equal length out as little-endian float32 bytes.
func packRows(rows [][]float32) (b []byte, cols int) {
	if len(rows) > 0 {
		cols = len(rows[0])
	}
	b = make([]byte, 0, 4*cols*len(rows))
	for _, r := range rows {
		for _, v := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b, cols
}

// unpackRows is packRows' inverse; the byte count must be rows·cols·4.
func unpackRows(b []byte, rows, cols int) ([][]float32, error) {
	if rows < 0 || cols < 0 || len(b) != 4*rows*cols {
		return nil, fmt.Errorf("%d bytes for %d rows of %d values", len(b), rows, cols)
	}
	out := make([][]float32, rows)
	for i := range out {
		out[i] = make([]float32, cols)
		for j := range out[i] {
			out[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*cols+j):]))
		}
	}
	return out, nil
}

// F2CacheExt ends a cached reference answer's file name (its key before).
const F2CacheExt = ".f2"

// F2CacheKey is the cache key of a reference answer in numerics ("" plain).
func F2CacheKey(modelSHA string, tokens []int32, identity, numerics string) string {
	h := sha256.New()
	fmt.Fprintf(h, "apr-f2-v3\nmodel %s\nidentity %s\ntokens %v\nnumerics %s\n", modelSHA, identity, tokens, numerics)
	return hex.EncodeToString(h.Sum(nil))
}

// RunF2 runs F2 on eng (a device engine over the model of o) and returns
// its verdict.
func RunF2(ctx context.Context, eng model.Engine, o F2Options) (res F2Result) {
	start := time.Now()
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	defer func() { res.MS = ms(time.Since(start)) }()
	refused := func(format string, args ...any) F2Result {
		res.Verdict, res.Reason = verdict.Refused, fmt.Sprintf(format, args...)
		return res
	}
	if o.Reference == "" {
		o.Reference = "ref"
	}
	if o.Identity == "" || o.ModelSHA256 == "" {
		return refused("no reference binary identity or model sha256 to key the reference's answer by")
	}
	pl, reason := f2PlanOf(o)
	res.Falsifier, res.ProbeTokens = pl.id, len(pl.probe)
	if reason != "" {
		return refused("%s", reason)
	}
	fz, probe := pl.fz, pl.probe
	o.numerics = pl.numerics

	// The engine's probe runs first: while it does, the reference's answer
	// started beside the load (F2Run.Prepare) is still being computed.
	t := time.Now()
	res.SetupMS = ms(t.Sub(start))
	r := trace.StartRegion(ctx, "f2 probe")
	got, err := f2Probe(eng, probe)
	r.End()
	res.ProbeMS = ms(time.Since(t))
	if err != nil {
		if rf, ok := refuse.As(err); ok {
			res.RefusedBy = rf.By
		}
		return refused("the %s engine's probe failed: %v", eng.Backend(), err)
	}

	t = time.Now()
	r = trace.StartRegion(ctx, "f2 reference")
	var want [][]float32
	var cached bool
	if e := o.early.answer(ctx, o, probe); e != nil {
		want, cached, err = e.want, e.cached, e.err
		res.ReferenceEarlyMS = e.ms
	} else {
		want, cached, err = f2Reference(ctx, o, probe)
	}
	r.End()
	res.ReferenceMS = ms(time.Since(t))
	if err != nil {
		return refused("the reference (%s) cannot answer: %v", o.Reference, err)
	}
	res.RefCached = cached
	margin := paramNumber(fz.Params["argmax_margin"])
	rep, err := oracle.Parity{Margin: margin}.Judge(got, want)
	if err != nil {
		res.Verdict, res.Reason = verdict.Fail, fmt.Sprintf("%s logits: %v", eng.Backend(), err)
		return res
	}
	res.MinCosine, res.MeanCosine, res.Worst, res.Mismatches = rep.MinCosine, rep.MeanCosine, rep.Worst, len(rep.ArgmaxMismatches)
	bad, refusal := f2Holds(pl, rep)
	if refusal != "" {
		return refused("%s", refusal)
	}
	if bad != "" && pl.floorK > 0 && jitterTwin(pl.numerics) != "" {
		// Below the tier on a model whose own noise the contract allows
		// for: judged again beyond pl.floorK times the reference's distance
		// from its jittered twin (a pass without it passes with it, so the
		// twin is computed only now).
		t := time.Now()
		to := o
		to.numerics, to.early = jitterTwin(pl.numerics), nil
		twin, _, err := f2Reference(ctx, to, probe)
		res.ReferenceMS += ms(time.Since(t))
		if err != nil {
			return refused("the noise floor needs the reference (%s) in %s numerics, which cannot answer: %v", o.Reference, to.numerics, err)
		}
		floor, err := oracle.Parity{Margin: margin}.Judge(twin, want)
		if err != nil {
			return refused("the noise floor: %v", err)
		}
		if rep, err = rep.AtFloor(floor.SeqReport, want, pl.floorK); err != nil {
			return refused("the noise floor: %v", err)
		}
		res.FloorMinCosine, res.FloorMeanCosine = floor.MinCosine, floor.MeanCosine
		res.MeasuredMinCosine, res.MeasuredMeanCosine = res.MinCosine, res.MeanCosine
		res.MinCosine, res.MeanCosine, res.Worst, res.Mismatches = rep.MinCosine, rep.MeanCosine, rep.Worst, len(rep.ArgmaxMismatches)
		if bad, refusal = f2Holds(pl, rep); refusal != "" {
			return refused("%s", refusal)
		}
		if bad != "" {
			bad += " " + rep.FloorNote(numericsName(pl.numerics))
		}
	}
	if bad != "" {
		res.Verdict, res.Reason = verdict.Fail, bad
		return res
	}
	res.Verdict = verdict.Pass
	return res
}

// f2Holds judges rep by pl's thresholds: the first that does not hold as a
// failure's reason, or a refusal's reason (a threshold F2 does not
// measure), or both empty.
func f2Holds(pl f2Plan, rep oracle.ParityReport) (bad, refusal string) {
	measured := map[string]float64{"min_cosine": rep.MinCosine, "mean_cosine": rep.MeanCosine,
		"argmax_mismatches": float64(len(rep.ArgmaxMismatches))}
	names := make([]string, 0, len(pl.fz.Thresholds))
	for name := range pl.fz.Thresholds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		th := pl.fz.Thresholds[name]
		v, ok := measured[name]
		if !ok {
			// A threshold F2 does not measure cannot be held: never a pass.
			return "", fmt.Sprintf("%s has a threshold on %s, which F2 does not measure (it measures min_cosine, mean_cosine, argmax_mismatches)", pl.id, name)
		}
		if !th.Holds(v) {
			return fmt.Sprintf("%s %.9g (want %s, %s's tier, the reference in %s numerics) — worst position %d of %d", name, v, verdict.FormatThreshold(th), pl.id, numericsName(pl.numerics), rep.Worst, len(rep.Positions)), ""
		}
	}
	return "", ""
}

// f2Plan is what F2 checks before it runs anything: the contract
// falsifier whose tier and probe length apply, the probe itself, the
// numerics the reference judges in and the noise floor's multiple (0: none).
type f2Plan struct {
	id       string
	fz       schema.Falsifier
	probe    []int32
	numerics string
	floorK   float64
}

// f2PlanOf reads o's plan, or the reason F2 must be refused. It needs
// neither the model's sha256 nor the binary's identity.
func f2PlanOf(o F2Options) (f2Plan, string) {
	var pl f2Plan
	set := o.Contracts
	if set == nil {
		var err error
		if set, err = contracts.Embedded(); err != nil {
			return pl, fmt.Sprintf("contracts: %v", err)
		}
	}
	f, err := gguf.Open(o.Model)
	if err != nil {
		return pl, err.Error()
	}
	arch := f.Architecture()
	tier := WeightTier(f)
	f.Close()
	pl.id = arch + ".f2"
	if tier == TierQuantized {
		pl.id = arch + ".f2_quantized"
	}
	fz, ok := set.Falsifier(pl.id)
	if !ok {
		return pl, fmt.Sprintf("the contracts have no %s falsifier to take F2's tier and probe from", pl.id)
	}
	pl.fz = fz
	backend, _ := fz.Params["backend"].(string)
	if backend == "" {
		return pl, fmt.Sprintf("%s gives no params.backend (the device engine whose numerics the reference judges in)", pl.id)
	}
	pl.numerics = RefNumerics(fz, backend)
	if v, ok := fz.Params[ParamNoiseFloor]; ok {
		k, ok := toFloat(v)
		if !ok || math.IsNaN(k) || k < 0 {
			return pl, fmt.Sprintf("%s: params.%s %v: want a number ≥ 0", pl.id, ParamNoiseFloor, v)
		}
		pl.floorK = k
	}
	n := paramNumber(fz.Params["f2_tokens"])
	if n < 2 {
		return pl, fmt.Sprintf("%s gives no params.f2_tokens of at least 2 (a prefill and a decode step)", pl.id)
	}
	pl.probe = o.Tokens
	if len(pl.probe) > int(n) {
		pl.probe = pl.probe[:int(n)]
	}
	if len(pl.probe) < 2 {
		return pl, fmt.Sprintf("the prompt has %d token(s); F2 needs at least 2 (the prompt's first tokens and one decode step)", len(pl.probe))
	}
	return pl, ""
}

// f2Probe feeds all but the last probe token as one batch and the last as
// a decode step, and returns every position's logits.
func f2Probe(eng model.Engine, probe []int32) ([][]float32, error) {
	s, err := eng.NewSession(len(probe))
	if err != nil {
		return nil, err
	}
	if c, ok := s.(interface{ Close() error }); ok {
		defer c.Close()
	}
	rows, err := s.Eval(probe[:len(probe)-1], true)
	if err != nil {
		return nil, err
	}
	last, err := s.Eval(probe[len(probe)-1:], true)
	if err != nil {
		return nil, err
	}
	return append(rows, last...), nil
}

// f2Reference returns the reference's logits for probe, from the cache
// when it holds them for this exact key.
func f2Reference(ctx context.Context, o F2Options, probe []int32) ([][]float32, bool, error) {
	dir, err := f2CacheDir(o)
	if err != nil {
		return nil, false, err
	}
	path := f2CachePath(dir, o, probe)
	if logits, hit, err := f2CacheRead(path, o, probe); hit || err != nil {
		return logits, hit, err
	}
	logits, err := f2Compute(ctx, o, probe)
	if err != nil {
		return nil, false, err
	}
	f2CacheWrite(dir, path, o, probe, logits)
	return logits, false, nil
}

// f2CacheDir is o's cache directory: the user cache's apr/f2 for "", "-"
// for none.
func f2CacheDir(o F2Options) (string, error) {
	if o.CacheDir != "" {
		return o.CacheDir, nil
	}
	return f2Dir()
}

// f2CachePath is the file of o's answer for probe in dir ("" without a
// cache).
func f2CachePath(dir string, o F2Options, probe []int32) string {
	if dir == "-" {
		return ""
	}
	return filepath.Join(dir, F2CacheKey(o.ModelSHA256, probe, o.Identity, o.numerics)+F2CacheExt)
}

// f2CacheRead reads the answer at path; a missing file is a miss, an entry
// that is not this key's answer an error.
func f2CacheRead(path string, o F2Options, probe []int32) ([][]float32, bool, error) {
	if path == "" {
		return nil, false, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, nil
	}
	c, err := readF2Cache(b)
	if err != nil {
		return nil, false, fmt.Errorf("cache entry %s is unreadable: %v", path, err)
	}
	key := F2CacheKey(o.ModelSHA256, probe, o.Identity, o.numerics)
	if c.Key != key || c.Identity != o.Identity || c.ModelSHA256 != o.ModelSHA256 || c.Numerics != o.numerics || !slices.Equal(c.Tokens, probe) {
		return nil, false, fmt.Errorf("cache entry %s was written for another binary, model, probe or numerics (identity %q, model %.12s, numerics %s): it is not this reference's answer", path, c.Identity, c.ModelSHA256, numericsName(c.Numerics))
	}
	if c.Rows != len(probe) {
		return nil, false, fmt.Errorf("cache entry %s holds %d rows for %d probe tokens", path, c.Rows, len(probe))
	}
	logits, err := unpackRows(c.LogitsF32LE, c.Rows, c.Cols)
	if err != nil {
		return nil, false, fmt.Errorf("cache entry %s: %v", path, err)
	}
	return logits, true, nil
}

// f2Compute runs the reference over probe.
func f2Compute(ctx context.Context, o F2Options, probe []int32) ([][]float32, error) {
	eval := o.RefLogits
	if eval == nil {
		eval = func(ctx context.Context, m, backend, numerics string, tokens []int32) ([][]float32, error) {
			r, err := generate.Logits(ctx, generate.LogitsOptions{Model: m, Backend: backend, Tokens: tokens, Numerics: numerics})
			return r.Logits, err
		}
	}
	logits, err := eval(ctx, o.Model, o.Reference, o.numerics, probe)
	if err != nil {
		return nil, err
	}
	if len(logits) != len(probe) {
		return nil, fmt.Errorf("%d logits rows for %d tokens", len(logits), len(probe))
	}
	return logits, nil
}

// f2CacheWrite keeps logits at path; a cache that cannot be written costs
// the next run a forward pass, nothing else.
func f2CacheWrite(dir, path string, o F2Options, probe []int32, logits [][]float32) {
	if path == "" {
		return
	}
	packed, cols := packRows(logits)
	b, err := f2Cache{Key: F2CacheKey(o.ModelSHA256, probe, o.Identity, o.numerics), ModelSHA256: o.ModelSHA256, Tokens: probe, Identity: o.Identity, Numerics: o.numerics,
		Rows: len(logits), Cols: cols, LogitsF32LE: packed}.encode()
	if err == nil && os.MkdirAll(dir, 0o755) == nil {
		_ = atomicfile.WriteFile(path, b)
	}
}

// f2CacheMayHold reports whether dir may hold an answer for identity and
// probe, of any model: false only when no entry there was written for
// both, so that the answer must be computed whatever the model's sha256.
// An entry or directory it cannot read counts as a maybe.
func f2CacheMayHold(dir, identity string, probe []int32) bool {
	if dir == "-" {
		return false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	for _, ent := range ents {
		if !strings.HasSuffix(ent.Name(), F2CacheExt) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, ent.Name()))
		if err != nil {
			return true
		}
		head, err := bufio.NewReader(f).ReadSlice('\n')
		f.Close()
		var c f2Cache
		if err != nil || json.Unmarshal(head, &c) != nil {
			return true
		}
		if c.Identity == identity && slices.Equal(c.Tokens, probe) {
			return true
		}
	}
	return false
}

// paramNumber reads a numeric contract parameter (0 when absent or not a
// number).
func paramNumber(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return 0
}

// f2Code is the f2 falsifier (apr falsify, apr qa's f2 gate): F2 on
// params.backend over the probe prompt params.prompt (tokenized raw, BOS
// per the model), with the reference's answer not cached.
func f2Code(ctx context.Context, c *Check) error {
	backend, err := c.ParamString("backend", "cuda")
	if err != nil {
		return err
	}
	prompt, err := c.ParamString("prompt", "")
	if err != nil {
		return err
	}
	f, err := c.Model()
	if err != nil {
		return err
	}
	sha, err := c.ModelSHA256()
	if err != nil {
		return err
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		return c.Refuse("the model's tokenizer: %v", err)
	}
	toks, err := generate.PromptTokens(ctx, tok, nil, prompt, true)
	if err != nil {
		return c.Refuse("the probe prompt: %v", err)
	}
	spec, err := model.Load(f)
	if err != nil {
		return refuse.Wrap(c.By(), err)
	}
	eng, err := model.OpenBackend(backend, f, spec, model.OpenOptions{})
	if err != nil {
		return err
	}
	defer eng.Close()
	if up, ok := eng.(model.Uploader); ok {
		if err := up.Upload(); err != nil {
			return err
		}
	}
	var refErr error
	r := RunF2(ctx, eng, F2Options{Model: c.ModelPath(), ModelSHA256: sha, Tokens: toks, Identity: "falsifier (uncached)",
		CacheDir: "-", Contracts: c.Set,
		RefLogits: func(ctx context.Context, m, b, numerics string, t []int32) ([][]float32, error) {
			var out [][]float32
			refErr = c.CallRef("reference engine", func() error {
				r, err := generate.Logits(ctx, generate.LogitsOptions{Model: m, Backend: b, Tokens: t, Numerics: numerics})
				out = r.Logits
				return err
			})
			return out, refErr
		}})
	c.Note("F2 on %s: %s over %d probe tokens (prefill + one decode step); worst position %d", backend, r.Verdict, r.ProbeTokens, r.Worst)
	if r.Verdict == verdict.Refused {
		if refErr != nil {
			return refErr
		}
		return c.Refuse("%s", r.Reason)
	}
	c.Measure("min_cosine", r.MinCosine)
	c.Measure("mean_cosine", r.MeanCosine)
	c.Measure("argmax_mismatches", float64(r.Mismatches))
	if r.FloorMinCosine != 0 {
		c.Note("judged beyond the model's noise floor (the reference against its jittered twin: min cosine %.9f, mean %.9f); measured before it: min cosine %.9f, mean %.9f",
			r.FloorMinCosine, r.FloorMeanCosine, r.MeasuredMinCosine, r.MeasuredMeanCosine)
	}
	return nil
}

// f2Applies: an f2 falsifier runs on models of its weight tier
// (params.tier) where its backend can run.
func f2Applies(c *Check) (bool, string) {
	if ok, why := TierApplies(c); !ok {
		return false, why
	}
	b, _ := c.ParamString("backend", "cuda")
	if err := model.Available(b); err != nil {
		return false, fmt.Sprintf("backend %s cannot run here: %v", b, err)
	}
	return true, ""
}

// F2Warm starts, in the background, what F2 computes once per process
// before it can compare anything — this executable's sha256 (the reference
// answer's identity) and the embedded contracts (the f2 tiers; ~0.25 s of
// CUE evaluation) — so that a device engine's F2 does not wait for them
// after the model has loaded. A caller about to load a model on a device
// backend calls it first; both are computed once, whoever asks first. On a
// machine of two cores or fewer it does nothing: there the work would only
// compete with the load (measured on a 2-core box: F2 0.6 → 0.13 s, load
// 0.4 → 1.1 s).
func F2Warm() {
	if !besideLoad() {
		return
	}
	go buildinfo.Current()
	go contracts.Embedded()
}

// F2Run is F2 for one generation (apr run): Prepare (generate.Options.
// Prepare) starts the reference's answer for the prompt's probe — read from
// the cache or computed by the reference engine, from its own mapping of
// the file — as soon as the prompt's tokens are known, so that it runs
// beside the device's set-up and upload. A forward pass starts at once when
// the cache holds no entry for this binary and probe (of any model); else
// Prepare first waits for the file's sha256, the cache's key. Validate
// (generate.Options.Validate) is F2Validate's, and waits for that answer
// instead of computing it after the upload. An answer started for another
// model, binary or probe is never used: Validate then computes its own,
// exactly as without Prepare.
type F2Run struct {
	path      string
	log       *slog.Logger
	early     *f2Early
	refLogits func(ctx context.Context, model, backend, numerics string, tokens []int32) ([][]float32, error) // tests: F2Options.RefLogits
	cacheDir  string                                                                                          // tests: F2Options.CacheDir
}

// NewF2Run returns the F2 of one run of the model at path.
func NewF2Run(path string, log *slog.Logger) *F2Run { return &F2Run{path: path, log: log} }

// f2EarlyMinCPU is the fewest cores on which F2's work runs beside the
// model's load (F2Warm, F2Run.Prepare); on fewer it would only compete with
// the load for them. A test lowers it.
var f2EarlyMinCPU = 3

// besideLoad reports whether F2's work may run beside the load here.
func besideLoad() bool { return runtime.NumCPU() >= f2EarlyMinCPU }

// f2Identity is the reference binary's identity that keys F2's answers:
// this executable's build and sha256, or a refusal saying why there is
// none.
func f2Identity() (string, error) {
	id := buildinfo.Current()
	if id.SHA256 == "" {
		return "", refuse.New(F2By, "F2: this executable's sha256 could not be measured (%s): the reference's answer has no identity to be kept under", id.Error)
	}
	return id.Short() + " sha256 " + id.SHA256, nil
}

// Prepare is generate.Options.Prepare: it starts the reference's answer
// for tokens' probe in the background and returns at once.
func (f *F2Run) Prepare(ctx context.Context, sha func() (string, error), tokens []int32) {
	if !besideLoad() {
		return
	}
	e := &f2Early{done: make(chan struct{})}
	f.early = e
	go func() {
		defer close(e.done)
		defer trace.StartRegion(ctx, "f2 reference beside the load").End()
		t := time.Now()
		defer func() { e.ms = float64(time.Since(t).Nanoseconds()) / 1e6 }()
		identity, err := f2Identity()
		if err != nil {
			return // Validate refuses, naming why
		}
		o := f.options("", tokens, identity)
		r := trace.StartRegion(ctx, "f2 plan")
		pl, reason := f2PlanOf(o)
		r.End()
		if reason != "" {
			return // Validate refuses, naming why
		}
		o.numerics = pl.numerics
		dir, err := f2CacheDir(o)
		if err != nil {
			return // Validate refuses, naming why
		}
		// The file's sha256 (the cache's key) is still being hashed: when no
		// entry was written for this binary and probe, the answer must be
		// computed whatever it is, so the forward pass starts now.
		var logits [][]float32
		var cerr error
		computed := !f2CacheMayHold(dir, o.Identity, pl.probe)
		if computed {
			r := trace.StartRegion(ctx, "f2 reference forward")
			logits, cerr = f2Compute(ctx, o, pl.probe)
			r.End()
		}
		r = trace.StartRegion(ctx, "f2 sha256 wait")
		o.ModelSHA256, err = sha()
		r.End()
		if err != nil {
			return // the load fails on it
		}
		e.o, e.probe = o, pl.probe
		if computed {
			if cerr == nil {
				f2CacheWrite(dir, f2CachePath(dir, o, pl.probe), o, pl.probe, logits)
			}
			e.want, e.err = logits, cerr
		} else {
			e.want, e.cached, e.err = f2Reference(ctx, o, pl.probe)
		}
		e.started = true
	}()
}

// options are the F2Options of this run's F2.
func (f *F2Run) options(sha string, tokens []int32, identity string) F2Options {
	return F2Options{Model: f.path, ModelSHA256: sha, Tokens: tokens, Identity: identity, Reference: "ref", RefLogits: f.refLogits, CacheDir: f.cacheDir, early: f.early}
}

// f2Early is the reference's answer that F2Run.Prepare started.
type f2Early struct {
	done    chan struct{}
	started bool      // it has an answer, read or computed (set before done closes)
	o       F2Options // what it ran with
	probe   []int32
	want    [][]float32
	cached  bool
	err     error
	ms      float64
}

// answer waits for the early answer and returns it when it was computed
// for exactly o's model, binary, cache and probe; nil otherwise (F2 then
// computes its own). A nil e has none.
func (e *f2Early) answer(ctx context.Context, o F2Options, probe []int32) *f2Early {
	if e == nil {
		return nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil // f2Reference then reports the cancellation
	}
	if !e.started || e.o.Model != o.Model || e.o.ModelSHA256 != o.ModelSHA256 || e.o.Identity != o.Identity ||
		e.o.CacheDir != o.CacheDir || e.o.Reference != o.Reference || e.o.numerics != o.numerics || !slices.Equal(e.probe, probe) {
		return nil
	}
	return e
}

// Validate is generate.Options.Validate (F2Validate's check), with the
// reference's answer Prepare started.
func (f *F2Run) Validate(ctx context.Context, eng model.Engine, sha string, tokens []int32) (string, error) {
	if !f2Gates(eng) {
		return generate.F2NotRequired, nil
	}
	identity, err := f2Identity()
	if err != nil {
		return string(verdict.Refused), err
	}
	r := RunF2(ctx, eng, f.options(sha, tokens, identity))
	device := eng.Backend()
	if d, ok := eng.(interface{ Identity() string }); ok {
		device = d.Identity()
	}
	receipt, werr := WriteF2Receipt("", F2Receipt{Identity: identity, ModelSHA256: sha, Device: device, Result: r})
	if f.log != nil {
		f.log.Info("F2", "backend", eng.Backend(), "verdict", r.Verdict, "probe_tokens", r.ProbeTokens,
			"min_cosine", r.MinCosine, "reference_cached", r.RefCached, "ms", r.MS, "setup_ms", r.SetupMS, "reference_ms", r.ReferenceMS, "probe_ms", r.ProbeMS,
			"reference_early_ms", r.ReferenceEarlyMS, "receipt", receipt, "receipt_error", werr)
	}
	return string(r.Verdict), r.Err()
}

// F2Skip is generate.Options.Validate when the user turned F2 off (apr run
// --no-f2, to measure what F2 costs): a device engine's verdict is
// generate.F2Off, never a pass, and a host engine's generate.F2NotRequired,
// as with F2 on.
func F2Skip(_ context.Context, eng model.Engine, _ string, _ []int32) (string, error) {
	if !f2Gates(eng) {
		return generate.F2NotRequired, nil
	}
	return generate.F2Off, nil
}

// f2Gates reports whether F2 gates eng's generation: a device engine, one
// that uploads its weights (cuda); engines on the host are not gated.
func f2Gates(eng model.Engine) bool {
	_, device := eng.(model.Uploader)
	return device
}

// F2Validate is generate.Options.Validate for the model at path: F2 on a
// device engine (one that uploads its weights: cuda) keyed by this
// binary's identity, before the prompt is evaluated; engines on the host
// are not gated by it (generate.F2NotRequired). apr run and the ladder's
// run cells use it.
func F2Validate(path string, log *slog.Logger) func(ctx context.Context, eng model.Engine, sha string, tokens []int32) (string, error) {
	return NewF2Run(path, log).Validate
}

// F2Receipt records one F2: keyed by the binary's identity, the model's
// sha256 and the device (name, capability, driver, kernel module) — never
// by a version string.
type F2Receipt struct {
	Identity    string    `json:"identity"`
	ModelSHA256 string    `json:"model_sha256"`
	Device      string    `json:"device"`
	Time        time.Time `json:"time"`
	Result      F2Result  `json:"result"`
}

// F2ReceiptKey is the receipt's key.
func F2ReceiptKey(identity, modelSHA, device string) string {
	h := sha256.New()
	fmt.Fprintf(h, "apr-f2-receipt-v1\nidentity %s\nmodel %s\ndevice %s\n", identity, modelSHA, device)
	return hex.EncodeToString(h.Sum(nil))
}

// WriteF2Receipt writes r under dir/receipts (dir "": the user cache
// directory's apr/f2), replacing an earlier receipt of the same key, and
// returns its path.
func WriteF2Receipt(dir string, r F2Receipt) (string, error) {
	if dir == "" {
		var err error
		if dir, err = f2Dir(); err != nil {
			return "", err
		}
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	dir = filepath.Join(dir, "receipts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, F2ReceiptKey(r.Identity, r.ModelSHA256, r.Device)+".json")
	return path, atomicfile.WriteFile(path, b)
}

// f2Dir is where F2 keeps the reference's answers and its receipts: the
// user cache directory's apr/f2.
func f2Dir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	return filepath.Join(base, "apr", "f2"), nil
}
