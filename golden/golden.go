package golden

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"sync"
)

//go:embed data
var embedded embed.FS

// Format is the version of the golden file format this package reads and writes.
const Format = 1

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("golden: invalid golden file")

// File is one model's reviewed greedy outputs.
type File struct {
	Format int    `json:"format"`
	Model  string `json:"model"`        // a display name
	SHA256 string `json:"model_sha256"` // of the model file; the lookup key
	// Source says how to obtain the model ("fixtures: models/stories260K.gguf",
	// "apr synth --arch llama --preset tiny --type F32 --seed 1").
	Source string `json:"source"`
	// Generator says how the outputs were produced.
	Generator string `json:"generator"`
	// Review says what the outputs were checked against before commit.
	Review string `json:"review"`
	Cases  []Case `json:"cases"`
}

// Case is one prompt and the greedy tokens that follow it.
type Case struct {
	Prompt    string  `json:"prompt"`     // tokenized raw: BOS as the model says, control tokens parsed
	PromptIDs []int32 `json:"prompt_ids"` // what the prompt tokenized to
	TokenIDs  []int32 `json:"token_ids"`  // the greedy continuation, end-of-generation ignored
	Text      string  `json:"text"`       // the continuation's text (informational; invalid UTF-8 replaced)
	// Margins[k] is the reference's top-1 minus top-2 logit at step k.
	Margins []float64 `json:"top1_top2_margins"`
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Parse reads a golden file strictly: unknown fields, a wrong format
// version, a malformed sha256, an empty case or lengths that disagree are
// errors wrapping ErrInvalid that name the field.
func Parse(name string, data []byte) (*File, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, bad("%v", err)
	}
	if dec.More() {
		return nil, bad("more than one JSON document")
	}
	switch {
	case f.Format != Format:
		return nil, bad("format is %d, this apr reads %d", f.Format, Format)
	case !shaRE.MatchString(f.SHA256):
		return nil, bad("model_sha256 %q is not 64 lower-case hex digits", f.SHA256)
	case f.Model == "":
		return nil, bad("model is empty")
	case len(f.Cases) == 0:
		return nil, bad("cases is empty")
	}
	for i, c := range f.Cases {
		switch {
		case len(c.PromptIDs) == 0:
			return nil, bad("cases[%d].prompt_ids is empty", i)
		case len(c.TokenIDs) == 0:
			return nil, bad("cases[%d].token_ids is empty", i)
		case len(c.Margins) != len(c.TokenIDs):
			return nil, bad("cases[%d] has %d token_ids but %d top1_top2_margins", i, len(c.TokenIDs), len(c.Margins))
		}
		for k, m := range c.Margins {
			if math.IsNaN(m) || m < 0 {
				return nil, bad("cases[%d].top1_top2_margins[%d] is %v; a margin is ≥ 0", i, k, m)
			}
		}
		for k, id := range append(append([]int32(nil), c.PromptIDs...), c.TokenIDs...) {
			if id < 0 {
				return nil, bad("cases[%d]: token id %d at index %d is negative", i, id, k)
			}
		}
	}
	return &f, nil
}

// Encode returns f in canonical form: indented JSON, margins rounded to six
// significant digits, a trailing newline.
func (f *File) Encode() ([]byte, error) {
	c := *f
	c.Format = Format
	c.Cases = make([]Case, len(f.Cases))
	for i, k := range f.Cases {
		k.Margins = append([]float64(nil), k.Margins...)
		for j, m := range k.Margins {
			k.Margins[j] = Round(m)
		}
		c.Cases[i] = k
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("golden: encode %s: %w", f.Model, err)
	}
	return numberLists.ReplaceAllFunc(b.Bytes(), func(m []byte) []byte {
		return spaces.ReplaceAll(m, []byte(" "))
	}), nil
}

// numberLists matches a JSON array of numbers as the indenting encoder
// writes it, one number per line; Encode puts each on one line.
var (
	numberLists = regexp.MustCompile(`\[\s*-?[0-9][0-9.eE+-]*(?:,\s*-?[0-9][0-9.eE+-]*)*\s*\]`)
	spaces      = regexp.MustCompile(`\s+`)
)

// Round rounds a margin to six significant digits, as Encode stores it.
func Round(m float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(m, 'g', 6, 64), 64)
	if err != nil {
		return m
	}
	return r
}

var loadOnce = sync.OnceValues(func() (map[string]*File, error) { return load(embedded) })

func load(fsys fs.FS) (map[string]*File, error) {
	names, err := fs.Glob(fsys, "data/*.json")
	if err != nil {
		return nil, err
	}
	out := map[string]*File{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("golden: %w", err)
		}
		f, err := Parse(path.Base(n), b)
		if err != nil {
			return nil, err
		}
		if prev, dup := out[f.SHA256]; dup {
			return nil, fmt.Errorf("%w: %s and %s are goldens of the same model %s", ErrInvalid, prev.Model, f.Model, f.SHA256)
		}
		out[f.SHA256] = f
	}
	return out, nil
}

// Lookup returns the embedded golden of the model whose file has sha256
// sha. An embedded file that does not parse is an error (a build that
// ships a broken golden must not read as "no golden").
func Lookup(sha string) (*File, bool, error) {
	m, err := loadOnce()
	if err != nil {
		return nil, false, err
	}
	f, ok := m[sha]
	return f, ok, nil
}

// All returns every embedded golden, sorted by model name.
func All() ([]*File, error) {
	m, err := loadOnce()
	if err != nil {
		return nil, err
	}
	out := make([]*File, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out, nil
}

// FS returns the embedded golden files (data/*.json).
func FS() fs.FS { return embedded }
