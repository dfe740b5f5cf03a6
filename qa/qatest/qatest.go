// Package qatest plants defects for apr qa's tests: engines wrapped to
// perturb logits, to run slowly or noisily, or to fail, registered as
// backends of their own; and GGUF files rewritten with one thing broken.
// Only tests import it.
package qatest

import (
	"errors"
	"fmt"
	"github.com/aprqa/apr/engine/backends"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/engine/synth"
)

// Backend names registered by Register.
const (
	Perturbed = "qatest-perturbed" // cpu with every logit row perturbed (cosine ≈ 0.999)
	Noisy     = "qatest-noisy"     // cpu sleeping 3 ms per token in every other 137 ms window
	Broken    = "qatest-broken"    // ref whose sessions fail on every Eval
)

var once sync.Once

// Register registers the engines (engine/backends) and the planted
// backends over them (once per process).
func Register() {
	backends.Register()
	once.Do(func() {
		model.RegisterBackend(Perturbed, wrap(Perturbed, "cpu", func(rows [][]float32) { perturb(rows) }, nil, nil))
		// Noisy is a machine whose load comes and goes: in every other
		// 137 ms window each token costs 3 ms more.
		model.RegisterBackend(Noisy, wrap(Noisy, "cpu", nil, func(n int) {
			if time.Now().UnixMilli()/137%2 == 1 {
				time.Sleep(time.Duration(n) * 3 * time.Millisecond)
			}
		}, nil))
		model.RegisterBackend(Broken, wrap(Broken, "ref", nil, nil, errors.New("qatest: this reference engine is broken on purpose")))
	})
}

// perturb adds to every row a deterministic wave of 4% of the row's RMS:
// the logits still look plausible (cosine about 0.999) but are not the
// model's.
func perturb(rows [][]float32) {
	for _, r := range rows {
		var ss float64
		for _, v := range r {
			ss += float64(v) * float64(v)
		}
		rms := math.Sqrt(ss / float64(len(r)))
		for i := range r {
			r[i] += float32(0.04 * rms * math.Sin(float64(i)*0.7))
		}
	}
}

func wrap(name, base string, rows func([][]float32), before func(tokens int), fail error) model.OpenFunc {
	return func(f *gguf.File, spec *model.Spec, o model.OpenOptions) (model.Engine, error) {
		e, err := model.OpenBackend(base, f, spec, o)
		if err != nil {
			return nil, err
		}
		return &engine{Engine: e, name: name, rows: rows, before: before, fail: fail}, nil
	}
}

type engine struct {
	model.Engine
	name   string
	rows   func([][]float32)
	before func(tokens int)
	fail   error
}

func (e *engine) Backend() string { return e.name }

func (e *engine) NewSession(maxCtx int) (model.Session, error) {
	s, err := e.Engine.NewSession(maxCtx)
	if err != nil {
		return nil, err
	}
	return &session{Session: s, e: e}, nil
}

type session struct {
	model.Session
	e *engine
}

func (s *session) Eval(tokens []int32, all bool) ([][]float32, error) {
	if s.e.fail != nil {
		return nil, s.e.fail
	}
	if s.e.before != nil {
		s.e.before(len(tokens))
	}
	rows, err := s.Session.Eval(tokens, all)
	if err == nil && s.e.rows != nil {
		s.e.rows(rows)
	}
	return rows, err
}

// Synth writes the tiny F32 preset of arch (seed 1, as apr qa's default
// models) into tb.TempDir().
func Synth(tb testing.TB, arch string) string {
	tb.Helper()
	p, err := synth.FindPreset(arch, "tiny")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), fmt.Sprintf("synth-%s-tiny-F32.gguf", arch))
	if _, err := synth.Write(path, synth.Options{Preset: p, Type: quant.F32, Seed: 1}); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Rewrite writes a copy of src into tb.TempDir() with apr's GGUF writer:
// kv (if set) changes the metadata, edit (if set) returns each tensor's new
// bytes (same type and shape). It returns the new file's path.
func Rewrite(tb testing.TB, src string, kv func(b *gguf.Builder), edit func(t *gguf.TensorInfo, data []byte) []byte) string {
	tb.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		tb.Fatalf("qatest: open %s: %v", src, err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	for _, e := range f.KV {
		b.Set(e.Key, e.Value)
	}
	if kv != nil {
		kv(b)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		data := append([]byte(nil), f.Data(t)...)
		if edit != nil {
			data = edit(t, data)
		}
		if err := b.AddTensor(t.Name, t.Type, t.Shape, data); err != nil {
			tb.Fatalf("qatest: rewrite %s: %v", t.Name, err)
		}
	}
	out := filepath.Join(tb.TempDir(), "planted-"+filepath.Base(src))
	if err := b.WriteFile(out); err != nil {
		tb.Fatalf("qatest: write %s: %v", out, err)
	}
	return out
}

// SetF32 writes v at index i of an F32 tensor's bytes.
func SetF32(data []byte, i int, v float32) {
	bits := math.Float32bits(v)
	data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
}
