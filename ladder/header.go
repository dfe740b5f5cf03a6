package ladder

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// Header is what the ladder reads from a model's GGUF header. Types come
// from the tensor infos, never from the file name or general.file_type.
type Header struct {
	GGUFVersion  uint32           `json:"gguf_version"`
	Architecture string           `json:"architecture"`
	Type         string           `json:"type"`                         // general.type; "model" when absent
	Name         string           `json:"name,omitempty"`               // general.name
	FileType     *int64           `json:"declared_file_type,omitempty"` // general.file_type as declared (informational only)
	Params       int64            `json:"params"`                       // sum of every tensor's element count
	Tensors      int              `json:"tensors"`
	TypeCounts   map[string]int   `json:"tensor_types"`       // ggml type name → number of tensors
	TypeParams   map[string]int64 `json:"tensor_type_params"` // ggml type name → elements stored in it
	DominantType string           `json:"dominant_type"`      // see ReadHeader
}

// ReadHeader summarises f.
//
// DominantType is the type holding the most elements among the layer
// weights: tensors named "blk.*" with two or more dimensions. A file with no
// such tensor falls back to every tensor with two or more dimensions, then to
// every tensor. Ties go to the type name that sorts first. So a Q4_K_M file
// (mostly Q4_K, some Q6_K) reads Q4_K, and an F16 file whose norms are F32
// reads F16; the embedding and output matrices, which quantizers often keep
// at higher precision, do not decide it.
func ReadHeader(f *gguf.File) Header {
	h := Header{
		GGUFVersion:  f.Version,
		Architecture: f.Architecture(),
		Type:         "model",
		Tensors:      len(f.Tensors),
		TypeCounts:   map[string]int{},
		TypeParams:   map[string]int64{},
	}
	if t, ok := f.String("general.type"); ok && t != "" {
		h.Type = t
	}
	h.Name, _ = f.String("general.name")
	if v, ok := f.Get("general.file_type"); ok {
		if n, ok := v.Int(); ok {
			h.FileType = &n
		}
	}
	layer := map[string]int64{}
	matrix := map[string]int64{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		name := t.Type.String()
		n := t.Elems()
		h.Params += n
		h.TypeCounts[name]++
		h.TypeParams[name] += n
		if len(t.Shape) >= 2 {
			matrix[name] += n
			if strings.HasPrefix(t.Name, "blk.") {
				layer[name] += n
			}
		}
	}
	for _, pool := range []map[string]int64{layer, matrix, h.TypeParams} {
		if len(pool) > 0 {
			h.DominantType = dominant(pool)
			break
		}
	}
	return h
}

func dominant(pool map[string]int64) string {
	names := make([]string, 0, len(pool))
	for k := range pool {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(pool[b], pool[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return names[0]
}

// modelRefusal says why a GGUF file with header h is not a model the ladder
// can run cells on, or nil.
func modelRefusal(h *Header) *refuse.Error {
	switch {
	case h.Type != "model":
		return refuse.New(ByUniverse, "general.type is %q: not a model", h.Type)
	case h.Tensors == 0:
		return refuse.New(ByUniverse, "no tensors: a vocabulary-only GGUF is not a model")
	case h.Architecture == "":
		return refuse.New(ByUniverse, "general.architecture is missing")
	}
	for name := range h.TypeCounts {
		if strings.HasPrefix(name, "type(") {
			return refuse.New(ByUniverse, "tensor type %s is unknown to apr", name)
		}
	}
	return nil
}

// QuantType returns the dominant weight type as a quant.Type, for contract
// gates that exclude types.
func (h *Header) QuantType() (quant.Type, error) {
	t, err := quant.ParseType(h.DominantType)
	if err != nil {
		return 0, fmt.Errorf("ladder: dominant type: %w", err)
	}
	return t, nil
}
