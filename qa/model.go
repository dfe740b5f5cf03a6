package qa

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aprqa/apr/engine/chat"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/loaded"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/regfile"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/verdict"
)

// By is the refuser qa names when it refuses a gate itself.
const By = "qa"

// modelRun is the state of gating one model.
type modelRun struct {
	opts *Options
	host falsify.HostKey
	mr   *ModelReport // nil outside apr qa
	path string
	name string
	sha  string
	h    *loaded.Model // the model, opened once: its file, sha256, tokenizer, logits
	f    *gguf.File    // h.File
	arch string
	mc   *schema.Model // nil: no contract for the architecture

	tok    *tokenizer.Tokenizer
	tokErr error

	quantized bool // some matrix is stored in a quantized type

	mu           sync.Mutex
	parityResult map[string]verdict.Outcome // backend → the parity gate's verdict.Outcome
}

func newModelRun(opts *Options, host falsify.HostKey, h *loaded.Model, sha string) *modelRun {
	f := h.File
	m := &modelRun{opts: opts, host: host, path: h.Path, name: h.Name(), sha: sha, h: h, f: f, arch: f.Architecture(),
		parityResult: map[string]verdict.Outcome{}}
	if mc, ok := opts.Contracts.Model(m.arch); ok {
		m.mc = mc
	}
	m.tok, m.tokErr = h.Tokenizer()
	m.quantized = isQuantized(f)
	return m
}

// gateModel runs every selected gate on one model.
func gateModel(ctx context.Context, st *state, path, synth string) (ModelReport, error) {
	opts := st.opts
	sha, size, err := fileSHA256(path)
	if err != nil {
		return ModelReport{}, err
	}
	h, err := loaded.Open(path)
	if err != nil {
		return ModelReport{}, err
	}
	defer h.Close()
	h.KnownSHA256(sha, size)
	mr := ModelReport{Path: path, Name: h.Name(), SHA256: sha, Bytes: size, Arch: h.File.Architecture(),
		Synth: synth, Backends: slices.Clone(opts.Backends), Gates: []Gate{}}
	m := newModelRun(opts, st.host, h, sha)
	m.mr = &mr
	for _, gate := range Gates() {
		if opts.Gates != nil && !slices.Contains(opts.Gates, gate) {
			continue
		}
		if gate == GateKLD && opts.KLDBase == "" && opts.Gates == nil {
			continue // nothing to compare with, and not asked for by name
		}
		if !perBackend(gate) {
			m.record(ctx, st, gate, "")
			continue
		}
		for _, b := range opts.Backends {
			if againstReference(gate) && b == opts.Reference {
				continue
			}
			if (gate == GateGPUCPU || gate == GateF2) && !m.deviceGates(gate, b) {
				continue // only a device backend runs F2 and is held to the cpu engine
			}
			m.record(ctx, st, gate, b)
		}
	}
	return mr, nil
}

// record runs one gate and appends its result.
func (m *modelRun) record(ctx context.Context, st *state, gate, backend string) {
	start := time.Now()
	fzs, o := m.falsifiers(gate)
	if o == nil {
		var unavailable error
		if backend != "" {
			unavailable = model.Available(backend)
		}
		var r verdict.Outcome
		switch {
		case ctx.Err() != nil:
			r = verdict.RefusedBy(By, By, nil, "cancelled: %v", ctx.Err())
		case unavailable != nil:
			// A backend this build lacks, or one this machine cannot run
			// (cuda without a device): every gate on it is refused with the
			// reason, by "backend" (what --allow-refused backend accepts).
			rf, _ := refuse.As(unavailable)
			r = verdict.RefusedBy(CodeBackend, rf.By, nil, "%s", rf.Reason)
		case gate == GateFailClosed:
			r = m.failClosed(ctx, st, fzs[0], fzs[1].ID, backend)
		case gate == GateTemplate && !m.hasTemplate():
			r = verdict.RefusedBy(CodeNoTemplate, chat.Refuser, nil, "the model carries no %s (a base model); there is no chat template to gate", chat.KeyTemplate)
		case gate == GateThroughput && !m.opts.AcceptBaseline && !m.baselineExists(backend):
			_, why := falsify.HasBaseline(m.opts.BaselineFile, m.sha, m.host.Fingerprint, backend)
			r = verdict.RefusedBy(CodeNoBaseline, fzs[0].ID, nil, "%s", why)
		default:
			ids := make([]string, len(fzs))
			for i, f := range fzs {
				ids[i] = f.ID
			}
			r, _ = m.execute(ctx, st, ids, backend)
			if gate == GateParity {
				m.parityResult[backend] = r
			}
		}
		o = &r
	}
	var ids []string
	for _, f := range fzs {
		if gate != GateFailClosed || len(ids) == 0 {
			ids = append(ids, f.ID)
		}
	}
	g := Gate{Name: gate, Backend: backend, Falsifier: strings.Join(ids, " + "), Verdict: o.Verdict, Code: o.Code, By: o.RemovedBy,
		Reason: o.Reason, Values: o.Values, Details: o.Details, DurationMS: ms(time.Since(start))}
	if g.Values == nil {
		g.Values = []Value{}
	}
	for i := range g.Values {
		g.Values[i] = g.Values[i].Finite()
	}
	g.Status = string(g.Verdict)
	if g.Verdict == verdict.Refused && len(fzs) > 0 && slices.Contains(optionalRefusals(fzs[0]), g.Code) {
		g.Optional = true
		g.Status = StatusRefusedOptional
	}
	m.mr.Gates = append(m.mr.Gates, g)
	m.opts.Log.Info("gate", "model", m.mr.Name, "gate", gate, "backend", backend, "status", g.Status, "reason", g.Reason)
	if m.opts.Progress != nil {
		m.opts.Progress(m.mr, g)
	}
}

// deviceGates reports whether gate (gpu_cpu, f2) holds backend b: the
// contract's falsifier names b as its device backend.
func (m *modelRun) deviceGates(gate, b string) bool {
	fzs, o := m.falsifiers(gate)
	if o != nil || len(fzs) == 0 {
		return b == "cuda" // recorded, and refused by name for the missing contract
	}
	want, _ := fzs[0].Params["backend"].(string)
	return want == b
}

func (m *modelRun) hasTemplate() bool {
	_, ok := m.f.Get(chat.KeyTemplate)
	return ok
}

func (m *modelRun) baselineExists(backend string) bool {
	ok, _ := falsify.HasBaseline(m.opts.BaselineFile, m.sha, m.host.Fingerprint, backend)
	return ok
}

// falsifiers finds the contract falsifiers a gate is held to, by code: in
// the model contract of the file's architecture (timing: in the run verb's
// contract; serving: in the serve verb's). tensor_contract is held to tensor_contract and tensor_values;
// parity to the engine_parity of the model's weight tier (golden_output,
// gpu_cpu and f2 likewise to their tier's); failclosed to the
// failclosed falsifier whose target is that parity (returned first, the
// parity second). A missing one refuses the gate.
func (m *modelRun) falsifiers(gate string) ([]schema.Falsifier, *verdict.Outcome) {
	set := m.opts.Contracts
	var list []schema.Falsifier
	owner := ""
	if verb := map[string]string{GateTiming: "run", GateServing: "serve"}[gate]; verb != "" {
		v, ok := set.Verb(verb)
		if !ok {
			r := verdict.RefusedBy(CodeNoContract, By, nil, "the contract set (digest %.12s) has no contract for verb %s", set.Digest(), verb)
			return nil, &r
		}
		list, owner = v.Falsifiers, v.ID
	} else {
		if m.mc == nil {
			r := verdict.RefusedBy(CodeNoContract, By, nil, "the contract set (digest %.12s) has no model contract for architecture %q", set.Digest(), m.arch)
			return nil, &r
		}
		list, owner = m.mc.Falsifiers, m.mc.ID
	}
	find := func(what string, ok func(schema.Falsifier) bool) (schema.Falsifier, *verdict.Outcome) {
		for _, f := range list {
			if ok(f) {
				return f, nil
			}
		}
		r := verdict.RefusedBy(CodeNoContract, By, nil, "contract %s (contracts digest %.12s) has no %s: gate %s is not defined for this model", owner, set.Digest(), what, gate)
		return schema.Falsifier{}, &r
	}
	byCode := func(code string) func(schema.Falsifier) bool {
		return func(f schema.Falsifier) bool { return f.Code == code }
	}
	parityOf := func(f schema.Falsifier) bool {
		t, _ := f.Params["tier"].(string)
		return f.Code == FalsifierEngineParity && t == tier(m.f)
	}
	switch gate {
	case GateTensorContract:
		a, o := find("falsifier with code tensor_contract", byCode("tensor_contract"))
		if o != nil {
			return nil, o
		}
		b, o := find("falsifier with code "+FalsifierTensorValues, byCode(FalsifierTensorValues))
		if o != nil {
			return nil, o
		}
		return []schema.Falsifier{a, b}, nil
	case GateGolden:
		f, o := find(fmt.Sprintf("falsifier with code %s for %s weights", FalsifierGoldenOutput, tier(m.f)), func(f schema.Falsifier) bool {
			t, _ := f.Params["tier"].(string)
			return f.Code == FalsifierGoldenOutput && t == tier(m.f)
		})
		if o != nil {
			return nil, o
		}
		return []schema.Falsifier{f}, nil
	case GateGPUCPU, GateF2:
		code := gateCode[gate]
		f, o := find(fmt.Sprintf("falsifier with code %s for %s weights", code, tier(m.f)), func(f schema.Falsifier) bool {
			t, _ := f.Params["tier"].(string)
			return f.Code == code && t == tier(m.f)
		})
		if o != nil {
			return nil, o
		}
		return []schema.Falsifier{f}, nil
	case GateParity, GateFailClosed:
		p, o := find(fmt.Sprintf("falsifier with code %s for %s weights", FalsifierEngineParity, tier(m.f)), parityOf)
		if o != nil {
			return nil, o
		}
		if gate == GateParity {
			return []schema.Falsifier{p}, nil
		}
		fc, o := find("failclosed falsifier whose target is "+p.ID, func(f schema.Falsifier) bool {
			t, _ := f.Params["target"].(string)
			return f.Code == "failclosed" && t == p.ID
		})
		if o != nil {
			return nil, o
		}
		return []schema.Falsifier{fc, p}, nil
	}
	f, o := find("falsifier with code "+gateCode[gate], byCode(gateCode[gate]))
	if o != nil {
		return nil, o
	}
	return []schema.Falsifier{f}, nil
}

// isQuantized reports whether any matrix (≥ 2 dimensions) of f is stored in
// a quantized type or BF16 (falsify.WeightTier).
func isQuantized(f *gguf.File) bool { return falsify.WeightTier(f) == falsify.TierQuantized }

func fileSHA256(path string) (string, int64, error) {
	sum, n, err := regfile.SHA256(path)
	if err != nil {
		return "", 0, fmt.Errorf("qa: %w", err)
	}
	return sum, n, nil
}

// optionalRefusals returns the refusal codes the falsifier marks optional
// (params.optional_refusals).
func optionalRefusals(f schema.Falsifier) []string {
	var out []string
	switch l := f.Params["optional_refusals"].(type) {
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = l
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
