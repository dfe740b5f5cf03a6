package quant

import (
	"errors"
	"fmt"
)

// Type is a ggml tensor type id, as stored in a GGUF tensor info.
type Type uint32

// The ggml tensor type ids. Gaps are ids that ggml once used and removed
// (Q4_2, Q4_3, the Q4_0_x_y and IQ4_NL_x_y repacked layouts); they are refused.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// ErrUnknownType is wrapped by every refusal of a type id the registry does
// not know.
var ErrUnknownType = errors.New("quant: unknown ggml type")

// Info describes one ggml type's storage layout.
type Info struct {
	Type      Type
	Name      string // ggml's name, e.g. "Q4_K"
	BlockSize int    // values per block
	TypeSize  int    // bytes per block
	Quantized bool   // false for the float and integer types
	Integer   bool   // I8, I16, I32, I64: converted exactly, not dequantized
}

var infos = map[Type]Info{
	F32:     {F32, "F32", 1, 4, false, false},
	F16:     {F16, "F16", 1, 2, false, false},
	Q4_0:    {Q4_0, "Q4_0", 32, 18, true, false},
	Q4_1:    {Q4_1, "Q4_1", 32, 20, true, false},
	Q5_0:    {Q5_0, "Q5_0", 32, 22, true, false},
	Q5_1:    {Q5_1, "Q5_1", 32, 24, true, false},
	Q8_0:    {Q8_0, "Q8_0", 32, 34, true, false},
	Q8_1:    {Q8_1, "Q8_1", 32, 36, true, false},
	Q2_K:    {Q2_K, "Q2_K", 256, 84, true, false},
	Q3_K:    {Q3_K, "Q3_K", 256, 110, true, false},
	Q4_K:    {Q4_K, "Q4_K", 256, 144, true, false},
	Q5_K:    {Q5_K, "Q5_K", 256, 176, true, false},
	Q6_K:    {Q6_K, "Q6_K", 256, 210, true, false},
	Q8_K:    {Q8_K, "Q8_K", 256, 292, true, false},
	IQ2_XXS: {IQ2_XXS, "IQ2_XXS", 256, 66, true, false},
	IQ2_XS:  {IQ2_XS, "IQ2_XS", 256, 74, true, false},
	IQ3_XXS: {IQ3_XXS, "IQ3_XXS", 256, 98, true, false},
	IQ1_S:   {IQ1_S, "IQ1_S", 256, 50, true, false},
	IQ4_NL:  {IQ4_NL, "IQ4_NL", 32, 18, true, false},
	IQ3_S:   {IQ3_S, "IQ3_S", 256, 110, true, false},
	IQ2_S:   {IQ2_S, "IQ2_S", 256, 82, true, false},
	IQ4_XS:  {IQ4_XS, "IQ4_XS", 256, 136, true, false},
	I8:      {I8, "I8", 1, 1, false, true},
	I16:     {I16, "I16", 1, 2, false, true},
	I32:     {I32, "I32", 1, 4, false, true},
	I64:     {I64, "I64", 1, 8, false, true},
	F64:     {F64, "F64", 1, 8, false, false},
	IQ1_M:   {IQ1_M, "IQ1_M", 256, 56, true, false},
	BF16:    {BF16, "BF16", 1, 2, false, false},
	TQ1_0:   {TQ1_0, "TQ1_0", 256, 54, true, false},
	TQ2_0:   {TQ2_0, "TQ2_0", 256, 66, true, false},
	MXFP4:   {MXFP4, "MXFP4", 32, 17, true, false},
	NVFP4:   {NVFP4, "NVFP4", 64, 36, true, false},
	Q1_0:    {Q1_0, "Q1_0", 128, 18, true, false},
	Q2_0:    {Q2_0, "Q2_0", 64, 18, true, false},
}

// removed names ids that ggml once defined and has since dropped, so that a
// refusal can say what the id used to be.
var removed = map[Type]string{
	4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
	36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8",
}

// Lookup returns the layout of t, or an error wrapping ErrUnknownType that
// names the id.
func Lookup(t Type) (Info, error) {
	if in, ok := infos[t]; ok {
		return in, nil
	}
	if name, ok := removed[t]; ok {
		return Info{}, fmt.Errorf("%w: id %d (%s, removed from ggml)", ErrUnknownType, uint32(t), name)
	}
	return Info{}, fmt.Errorf("%w: id %d", ErrUnknownType, uint32(t))
}

// Known reports whether t is a type id the registry knows.
func (t Type) Known() bool { _, ok := infos[t]; return ok }

// String returns ggml's name for t, or "type(N)" for an unknown id.
func (t Type) String() string {
	if in, ok := infos[t]; ok {
		return in.Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ParseType returns the type with ggml's name s (case-sensitive, "Q4_K").
func ParseType(s string) (Type, error) {
	for t, in := range infos {
		if in.Name == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w: name %q", ErrUnknownType, s)
}

// All returns every known type in id order.
func All() []Info {
	out := make([]Info, 0, len(infos))
	for id := Type(0); id < 64; id++ {
		if in, ok := infos[id]; ok {
			out = append(out, in)
		}
	}
	return out
}

// RowBytes returns the bytes of n values of type t. n must be a multiple of
// the block size; ok is false when it is not or when the size overflows.
func (in Info) RowBytes(n int64) (int64, bool) {
	if n < 0 || n%int64(in.BlockSize) != 0 {
		return 0, false
	}
	blocks := n / int64(in.BlockSize)
	if blocks > (1<<62)/int64(in.TypeSize) {
		return 0, false
	}
	return blocks * int64(in.TypeSize), true
}
