// Package loaded is a model opened once: the GGUF file mapped, the sha256 of
// its bytes, its spec and tokenizer read from it, and a cache of the logits
// engines computed over it. apr qa opens each model it gates once and hands
// this handle to the falsifiers and to engine/generate, instead of every
// step opening the path again; paths exist only at the command line's edge.
//
// The spec and the tokenizer are read lazily and their errors kept (a model
// whose tokenizer is refused can still have its tensors checked); the handle
// is safe for concurrent use.
package loaded

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/tokenizer"
	"github.com/aprqa/apr/internal/regfile"
)

// Model is an opened model. Close releases the mapping.
type Model struct {
	Path string
	File *gguf.File

	shaOnce sync.Once
	sha     string
	bytes   int64
	shaErr  error

	specOnce sync.Once
	spec     *model.Spec
	specErr  error

	tokOnce sync.Once
	tok     *tokenizer.Tokenizer
	tokErr  error

	mu     sync.Mutex
	logits map[string]Logits
	memo   map[string]any
}

// Open maps the GGUF file at path (gguf.Open; a file that is not a regular
// file or not a readable GGUF is an error naming it). Its sha256 is computed
// when first asked for (SHA256).
func Open(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	return &Model{Path: path, File: f, logits: map[string]Logits{}}, nil
}

// KnownSHA256 records the file's sha256 and size, computed by a caller that
// hashed it already.
func (m *Model) KnownSHA256(sum string, size int64) {
	m.shaOnce.Do(func() { m.sha, m.bytes = sum, size })
}

// SHA256 returns the sha256 of the file's bytes and their count, computed
// once (regfile.SHA256).
func (m *Model) SHA256() (string, int64, error) {
	m.shaOnce.Do(func() { m.sha, m.bytes, m.shaErr = regfile.SHA256(m.Path) })
	return m.sha, m.bytes, m.shaErr
}

// Name is the file's base name.
func (m *Model) Name() string { return filepath.Base(m.Path) }

// Close unmaps the file.
func (m *Model) Close() error { return m.File.Close() }

// Spec returns the model's spec (model.Load), read once.
func (m *Model) Spec() (*model.Spec, error) {
	m.specOnce.Do(func() { m.spec, m.specErr = model.Load(m.File) })
	return m.spec, m.specErr
}

// Tokenizer returns the model's tokenizer (tokenizer.New), read once.
func (m *Model) Tokenizer() (*tokenizer.Tokenizer, error) {
	m.tokOnce.Do(func() { m.tok, m.tokErr = tokenizer.New(m.File) })
	return m.tok, m.tokErr
}

// Logits is one cached evaluation: every position's logits row, or the
// error the evaluation ended with.
type Logits struct {
	NVocab int
	Rows   [][]float32
	Err    error
}

// CachedLogits returns the logits of tokens on backend in numerics ("" for
// its default), computing them with eval the first time. An evaluation
// that was cancelled (cancelled reports it) is not kept.
func (m *Model) CachedLogits(backend, numerics string, tokens []int32, eval func() Logits, cancelled func() bool) Logits {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|", backend, numerics)
	for _, t := range tokens {
		fmt.Fprintf(&b, "%d,", t)
	}
	key := b.String()
	m.mu.Lock()
	l, ok := m.logits[key]
	m.mu.Unlock()
	if ok {
		return l
	}
	l = eval()
	if cancelled == nil || !cancelled() {
		m.mu.Lock()
		m.logits[key] = l
		m.mu.Unlock()
	}
	return l
}

// Memo returns the value kept under key, computing it with fn the first
// time; an error is returned and not kept (the next call computes again).
// A greedy reference run that several checks compare with is computed once.
func (m *Model) Memo(key string, fn func() (any, error)) (any, error) {
	m.mu.Lock()
	v, ok := m.memo[key]
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := fn()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.memo == nil {
		m.memo = map[string]any{}
	}
	m.memo[key] = v
	m.mu.Unlock()
	return v, nil
}
