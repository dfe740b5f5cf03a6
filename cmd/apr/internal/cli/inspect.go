package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/regfile"
)

func init() { register(10, newInspectCmd) }

type inspectOptions struct {
	Path   string
	JSON   bool
	SHA256 bool
}

// InspectReport is what `apr inspect --json` prints.
type InspectReport struct {
	Path        string      `json:"path"`
	Bytes       int64       `json:"bytes"`
	SHA256      string      `json:"sha256,omitempty"`
	Version     uint32      `json:"version"`
	Arch        string      `json:"architecture"`
	Alignment   uint64      `json:"alignment"`
	FileType    *FileType   `json:"file_type,omitempty"`
	KVCount     int         `json:"metadata_count"`
	Metadata    []InspectKV `json:"metadata"`
	TensorCount int         `json:"tensor_count"`
	Params      int64       `json:"parameter_count"`
	TypeHist    []TypeCount `json:"tensor_types"`
	DataOffset  int64       `json:"data_offset"`
}

// InspectKV is one metadata entry with its GGUF type.
type InspectKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// TypeCount is one row of the tensor-type histogram.
type TypeCount struct {
	Type    string `json:"type"`
	Tensors int    `json:"tensors"`
	Params  int64  `json:"params"`
	Bytes   int64  `json:"bytes"`
}

// FileType is general.file_type and its llama.cpp label.
type FileType struct {
	ID    int64  `json:"id"`
	Label string `json:"label"`
}

func newInspectCmd(env *Env) *cobra.Command {
	var opts inspectOptions
	c := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a GGUF file's header: metadata, tensor count, parameters, type histogram",
		Long: `inspect reads only the header of a GGUF file (the tensor data is never read)
and prints its format version, architecture, every metadata key and value,
the tensor count, the parameter count and a histogram of tensor types read
from the tensor headers. --sha256 also hashes the whole file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Path = args[0]
			return runInspect(env, opts)
		},
	}
	jsonFlag(c, &opts.JSON)
	c.Flags().BoolVar(&opts.SHA256, "sha256", false, "also compute the file's sha256 (reads the whole file)")
	return c
}

func runInspect(env *Env, opts inspectOptions) error {
	f, err := gguf.Open(opts.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep := Inspect(f)
	if opts.SHA256 {
		sum, _, err := regfile.SHA256(opts.Path)
		if err != nil {
			return err
		}
		rep.SHA256 = sum
	}
	if opts.JSON {
		return writeJSON(env.Stdout, rep)
	}
	printInspect(env.Stdout, rep)
	return nil
}

// Inspect summarises a parsed file. It reads no tensor data.
func Inspect(f *gguf.File) InspectReport {
	rep := InspectReport{
		Path: f.Path, Bytes: f.Size, Version: f.Version, Arch: f.Architecture(),
		Alignment: f.Alignment, KVCount: len(f.KV), TensorCount: len(f.Tensors), DataOffset: f.DataOffset,
	}
	for _, kv := range f.KV {
		rep.Metadata = append(rep.Metadata, InspectKV{Key: kv.Key, Type: kv.Value.TypeName(), Value: kv.Value.Native()})
	}
	if v, ok := f.Get("general.file_type"); ok {
		if id, ok := v.Int(); ok {
			rep.FileType = &FileType{ID: id, Label: FileTypeLabel(id)}
		}
	}
	hist := map[quant.Type]*TypeCount{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		n := t.Elems()
		rep.Params += n
		h := hist[t.Type]
		if h == nil {
			h = &TypeCount{Type: t.Type.String()}
			hist[t.Type] = h
		}
		h.Tensors++
		h.Params += n
		h.Bytes += int64(t.Size)
	}
	for _, h := range hist {
		rep.TypeHist = append(rep.TypeHist, *h)
	}
	sort.Slice(rep.TypeHist, func(i, j int) bool {
		a, b := rep.TypeHist[i], rep.TypeHist[j]
		if a.Params != b.Params {
			return a.Params > b.Params
		}
		return a.Type < b.Type
	})
	return rep
}

// longArray is how many elements an array shows in text mode before it is
// summarised; --json always gives arrays whole.
const longArray = 8

func printInspect(w io.Writer, r InspectReport) {
	fmt.Fprintf(w, "file:         %s\n", r.Path)
	fmt.Fprintf(w, "bytes:        %d\n", r.Bytes)
	if r.SHA256 != "" {
		fmt.Fprintf(w, "sha256:       %s\n", r.SHA256)
	}
	fmt.Fprintf(w, "gguf version: %d\n", r.Version)
	fmt.Fprintf(w, "architecture: %s\n", orNone(r.Arch))
	if r.FileType != nil {
		fmt.Fprintf(w, "file type:    %d (%s)\n", r.FileType.ID, r.FileType.Label)
	}
	fmt.Fprintf(w, "tensors:      %d\n", r.TensorCount)
	fmt.Fprintf(w, "parameters:   %d (%s)\n", r.Params, humanCount(r.Params))
	fmt.Fprintf(w, "\ntensor types (from tensor headers):\n")
	for _, h := range r.TypeHist {
		fmt.Fprintf(w, "  %-8s %5d tensors  %14d params  %14d bytes\n", h.Type, h.Tensors, h.Params, h.Bytes)
	}
	fmt.Fprintf(w, "\nmetadata (%d keys):\n", r.KVCount)
	for _, kv := range r.Metadata {
		fmt.Fprintf(w, "  %s (%s) = %s\n", kv.Key, kv.Type, summarise(kv.Value))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2fK", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}

// summarise prints a value on one line; arrays longer than longArray show
// their first elements and their length, and long strings are cut.
func summarise(v any) string {
	switch x := v.(type) {
	case string:
		return quoteCut(x, 120)
	case []string:
		parts := make([]string, 0, longArray)
		for i, s := range x {
			if i == longArray {
				break
			}
			parts = append(parts, quoteCut(s, 40))
		}
		return arraySummary(parts, len(x))
	}
	if xs, ok := toAnySlice(v); ok {
		parts := make([]string, 0, longArray)
		for i, e := range xs {
			if i == longArray {
				break
			}
			parts = append(parts, summarise(e))
		}
		return arraySummary(parts, len(xs))
	}
	return fmt.Sprint(v)
}

func arraySummary(parts []string, n int) string {
	s := "[" + strings.Join(parts, ", ")
	if n > len(parts) {
		s += fmt.Sprintf(", … (%d elements)", n)
	}
	return s + "]"
}

func quoteCut(s string, max int) string {
	r := []rune(s)
	if len(r) > max {
		return fmt.Sprintf("%q… (%d bytes)", string(r[:max]), len(s))
	}
	return fmt.Sprintf("%q", s)
}

func toAnySlice(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []uint16:
		return anys(x), true
	case []int8:
		return anys(x), true
	case []int16:
		return anys(x), true
	case []uint32:
		return anys(x), true
	case []int32:
		return anys(x), true
	case []uint64:
		return anys(x), true
	case []int64:
		return anys(x), true
	case []bool:
		return anys(x), true
	}
	return nil, false
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// FileTypeLabel is llama.cpp's name for a general.file_type value
// (enum llama_ftype), or "unknown" for one it does not define.
func FileTypeLabel(id int64) string {
	if s, ok := fileTypes[id]; ok {
		return s
	}
	return "unknown"
}

var fileTypes = map[int64]string{
	0: "ALL_F32", 1: "MOSTLY_F16", 2: "MOSTLY_Q4_0", 3: "MOSTLY_Q4_1",
	7: "MOSTLY_Q8_0", 8: "MOSTLY_Q5_0", 9: "MOSTLY_Q5_1", 10: "MOSTLY_Q2_K",
	11: "MOSTLY_Q3_K_S", 12: "MOSTLY_Q3_K_M", 13: "MOSTLY_Q3_K_L", 14: "MOSTLY_Q4_K_S",
	15: "MOSTLY_Q4_K_M", 16: "MOSTLY_Q5_K_S", 17: "MOSTLY_Q5_K_M", 18: "MOSTLY_Q6_K",
	19: "MOSTLY_IQ2_XXS", 20: "MOSTLY_IQ2_XS", 21: "MOSTLY_Q2_K_S", 22: "MOSTLY_IQ3_XS",
	23: "MOSTLY_IQ3_XXS", 24: "MOSTLY_IQ1_S", 25: "MOSTLY_IQ4_NL", 26: "MOSTLY_IQ3_S",
	27: "MOSTLY_IQ3_M", 28: "MOSTLY_IQ2_S", 29: "MOSTLY_IQ2_M", 30: "MOSTLY_IQ4_XS",
	31: "MOSTLY_IQ1_M", 32: "MOSTLY_BF16", 36: "MOSTLY_TQ1_0", 37: "MOSTLY_TQ2_0",
	38: "MOSTLY_MXFP4_MOE",
}
