package model

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// By is the name refusals from this package carry.
const By = "model"

// Limits on hyper-parameters: a value beyond them is refused as absurd
// before anything is sized from it.
const (
	MaxLayers  = 1 << 12
	MaxEmbd    = 1 << 17
	MaxHeads   = 1 << 12
	MaxHeadDim = 1 << 12
	MaxFF      = 1 << 20
	MaxVocab   = 1 << 22
	MaxExperts = 1 << 12 // LLAMA_MAX_EXPERTS is 512; the bound here only stops absurd sizes
	MaxCtx     = 1 << 24
)

// ArchFunc reads an architecture's hyper-parameters into s and binds its
// tensors, through b.
type ArchFunc func(b *Binder, s *Spec) error

var (
	archMu sync.RWMutex
	archs  = map[string]ArchFunc{}
)

// RegisterArch makes Load accept general.architecture == name. It panics when
// name is registered twice: that is a programmer error.
func RegisterArch(name string, fn ArchFunc) {
	archMu.Lock()
	defer archMu.Unlock()
	if _, dup := archs[name]; dup {
		panic("model: RegisterArch: " + name + " registered twice")
	}
	archs[name] = fn
}

// Archs lists the registered architectures, sorted.
func Archs() []string {
	archMu.RLock()
	defer archMu.RUnlock()
	out := make([]string, 0, len(archs))
	for n := range archs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Load reads the architecture's hyper-parameters from f's <arch>.* keys and
// binds every tensor to its role. An unknown architecture, a required key
// that is absent or of the wrong type, an absurd value, a tensor whose shape
// contradicts the header, a missing tensor and a tensor no role claims are
// each refused by name (refuse.Error with By "model").
func Load(f *gguf.File) (*Spec, error) {
	v, ok := f.Get("general.architecture")
	if !ok {
		return nil, refuse.New(By, "general.architecture is missing: the architecture is never guessed")
	}
	arch, ok := v.Str()
	if !ok {
		return nil, refuse.New(By, "general.architecture is a %s, not a string", v.TypeName())
	}
	archMu.RLock()
	fn, ok := archs[arch]
	archMu.RUnlock()
	if !ok {
		return nil, refuse.New(By, "unknown architecture %q (known: %s)", arch, strings.Join(Archs(), ", "))
	}
	b := &Binder{f: f, arch: arch, used: map[string]bool{}}
	s := &Spec{Arch: arch}
	b.spec = s
	if err := fn(b, s); err != nil {
		return nil, err
	}
	if err := b.checkAllBound(); err != nil {
		return nil, err
	}
	return s, nil
}

// Binder reads keys and binds tensors of one file for an ArchFunc, refusing
// by name whatever is missing or contradicts the header.
type Binder struct {
	f    *gguf.File
	arch string
	spec *Spec
	used map[string]bool
}

// File returns the file being bound.
func (b *Binder) File() *gguf.File { return b.f }

// Key returns the full name of an <arch>.* key: Key("block_count") is
// "llama.block_count".
func (b *Binder) Key(suffix string) string { return b.arch + "." + suffix }

func (b *Binder) missing(key string) error {
	return refuse.New(By, "required hyper-parameter %q is missing (architecture %s)", key, b.arch)
}

func (b *Binder) wrongType(key string, v gguf.Value, want string) error {
	return refuse.New(By, "hyper-parameter %q is a %s, want %s", key, v.TypeName(), want)
}

func (b *Binder) noteDefault(key, value, why string) {
	b.spec.Defaults = append(b.spec.Defaults, Default{Key: key, Value: value, Why: why})
}

// Has reports whether the <arch>.suffix key is present.
func (b *Binder) Has(suffix string) bool {
	_, ok := b.f.Get(b.Key(suffix))
	return ok
}

func (b *Binder) uint(key string, v gguf.Value, lo, hi int) (int, error) {
	u, ok := v.Uint()
	if !ok || v.Type == gguf.TypeArray || v.Type == gguf.TypeBool {
		return 0, b.wrongType(key, v, "a non-negative integer")
	}
	if u < uint64(lo) || u > uint64(hi) {
		return 0, refuse.New(By, "hyper-parameter %q = %d is out of range [%d, %d]", key, u, lo, hi)
	}
	return int(u), nil
}

// Uint reads the required integer key <arch>.suffix, refusing it by name when
// absent, not an integer, or outside [lo, hi].
func (b *Binder) Uint(suffix string, lo, hi int) (int, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		return 0, b.missing(key)
	}
	return b.uint(key, v, lo, hi)
}

// OptUint reads the optional integer key <arch>.suffix; when absent it
// returns def and records the default with why (llama.cpp's rule for it).
func (b *Binder) OptUint(suffix string, lo, hi, def int, why string) (int, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		b.noteDefault(key, fmt.Sprint(def), why)
		return def, nil
	}
	return b.uint(key, v, lo, hi)
}

func (b *Binder) float(key string, v gguf.Value) (float64, error) {
	x, ok := v.Float()
	if !ok {
		return 0, b.wrongType(key, v, "a float")
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, refuse.New(By, "hyper-parameter %q = %v is not finite", key, x)
	}
	return x, nil
}

// Float reads the required float key <arch>.suffix.
func (b *Binder) Float(suffix string) (float64, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		return 0, b.missing(key)
	}
	return b.float(key, v)
}

// OptFloat reads the optional float key <arch>.suffix, or def (recorded).
func (b *Binder) OptFloat(suffix string, def float64, why string) (float64, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		b.noteDefault(key, fmt.Sprint(def), why)
		return def, nil
	}
	return b.float(key, v)
}

// OptBool reads the optional bool key <arch>.suffix, or def (recorded).
func (b *Binder) OptBool(suffix string, def bool, why string) (bool, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		b.noteDefault(key, fmt.Sprint(def), why)
		return def, nil
	}
	x, ok := v.Bool()
	if !ok {
		return false, b.wrongType(key, v, "a bool")
	}
	return x, nil
}

// OptString reads the optional string key <arch>.suffix, or def (recorded).
func (b *Binder) OptString(suffix, def, why string) (string, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		b.noteDefault(key, def, why)
		return def, nil
	}
	x, ok := v.Str()
	if !ok {
		return "", b.wrongType(key, v, "a string")
	}
	return x, nil
}

// PerLayer reads <arch>.suffix given either as one integer for every layer
// or as an array of n integers (llama.cpp's get_key_or_arr). When absent and
// required it refuses; when absent and optional it returns def for every
// layer (recorded).
func (b *Binder) PerLayer(suffix string, n, lo, hi int, required bool, def []int, why string) ([]int, error) {
	key := b.Key(suffix)
	v, ok := b.f.Get(key)
	if !ok {
		if required {
			return nil, b.missing(key)
		}
		b.noteDefault(key, fmt.Sprint(def), why)
		return append([]int(nil), def...), nil
	}
	out := make([]int, n)
	if v.Type != gguf.TypeArray {
		x, err := b.uint(key, v, lo, hi)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i] = x
		}
		return out, nil
	}
	if v.Len() != n {
		return nil, refuse.New(By, "hyper-parameter %q has %d entries, block_count is %d", key, v.Len(), n)
	}
	for i := range out {
		x, err := b.uint(fmt.Sprintf("%s[%d]", key, i), v.Index(i), lo, hi)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// Tensor binds the required tensor name, refusing it by name when absent or
// when its shape is not want (ggml order).
func (b *Binder) Tensor(name string, want ...int64) (*Tensor, error) {
	t, err := b.OptTensor(name, want...)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, refuse.New(By, "required tensor %q is missing (architecture %s)", name, b.arch)
	}
	return t, nil
}

// OptTensor binds the tensor name when present (nil, nil when absent),
// refusing it when its shape is not want.
func (b *Binder) OptTensor(name string, want ...int64) (*Tensor, error) {
	ti, ok := b.f.Tensor(name)
	if !ok {
		return nil, nil
	}
	if !shapeEq(ti.Shape, want) {
		return nil, refuse.New(By, "tensor %q has shape %v, the header implies %v", name, ti.Shape, want)
	}
	info, err := quant.Lookup(ti.Type)
	if err != nil {
		return nil, refuse.New(By, "tensor %q: %v", name, err)
	}
	if info.Integer {
		return nil, refuse.New(By, "tensor %q has integer type %s; weights must be float or quantized", name, info.Name)
	}
	rb, ok := info.RowBytes(ti.Shape[0])
	if !ok {
		return nil, refuse.New(By, "tensor %q: a row of %d values is not a whole number of %s blocks of %d", name, ti.Shape[0], info.Name, info.BlockSize)
	}
	b.used[name] = true
	return &Tensor{
		Name:     name,
		Type:     ti.Type,
		Shape:    append([]int64(nil), ti.Shape...),
		Data:     b.f.Data(ti),
		RowBytes: int(rb),
	}, nil
}

// Claim marks name as used without binding it (for a tensor an architecture
// knows to ignore). It is a no-op when the tensor is absent.
func (b *Binder) Claim(name string) { b.used[name] = true }

func shapeEq(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (b *Binder) checkAllBound() error {
	var extra []string
	for _, t := range b.f.Tensors {
		if !b.used[t.Name] {
			extra = append(extra, t.Name)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	more := ""
	if len(extra) > 5 {
		more = fmt.Sprintf(" and %d more", len(extra)-5)
		extra = extra[:5]
	}
	return refuse.New(By, "tensor %q is not part of architecture %s as the header describes it (unbound: %s%s)",
		extra[0], b.arch, strings.Join(extra, ", "), more)
}
