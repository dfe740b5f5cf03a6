package gguf_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// smallFile builds a valid file with metadata of several types and three
// tensors; tests corrupt it one field at a time.
func smallFile(tb testing.TB) ([]byte, gguf.Layout) {
	tb.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("llama"))
	b.Set("general.alignment", gguf.V(uint32(32)))
	b.Set("test.u8", gguf.V(uint8(7)))
	b.Set("test.strings", gguf.V([]string{"a", "bc", ""}))
	b.Set("test.nested", gguf.V([]gguf.Value{gguf.V([]int32{1, -2}), gguf.V([]int32{3})}))
	must(tb, b.AddTensor("a", quant.F32, []int64{4, 2}, make([]byte, 32)))
	must(tb, b.AddTensor("b", quant.Q8_0, []int64{32}, make([]byte, 34)))
	must(tb, b.AddTensor("c", quant.F16, []int64{3}, make([]byte, 6)))
	data, lay, err := b.Encode()
	must(tb, err)
	return data, lay
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func TestParseSmallFile(t *testing.T) {
	data, lay := smallFile(t)
	f, err := gguf.Parse("small.gguf", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := len(f.Tensors), 3; got != want {
		t.Fatalf("tensors: got %d, want %d", got, want)
	}
	if f.DataOffset != lay.Data {
		t.Errorf("DataOffset = %d, want %d", f.DataOffset, lay.Data)
	}
	for i, ti := range f.Tensors {
		if got := f.DataOffset + int64(ti.Offset); got != lay.Tensor[i] {
			t.Errorf("tensor %q data at %d, want %d", ti.Name, got, lay.Tensor[i])
		}
		if got := f.DataOffset + int64(ti.Offset); got%32 != 0 {
			t.Errorf("tensor %q data at %d is not aligned", ti.Name, got)
		}
	}
	v, ok := f.Get("test.nested")
	if !ok || v.Len() != 2 || v.Index(0).Len() != 2 {
		t.Errorf("nested array read back as %#v", v)
	}
}

// TestMalformed feeds one corruption per class of bad input and checks that
// Parse returns a *FormatError with the right sentinel and offset, never a
// panic.
func TestMalformed(t *testing.T) {
	base, lay := smallFile(t)
	le := binary.LittleEndian
	patch := func(off int64, b ...byte) func([]byte) []byte {
		return func(d []byte) []byte { copy(d[off:], b); return d }
	}
	u32 := func(off int64, v uint32) func([]byte) []byte {
		return func(d []byte) []byte { le.PutUint32(d[off:], v); return d }
	}
	u64 := func(off int64, v uint64) func([]byte) []byte {
		return func(d []byte) []byte { le.PutUint64(d[off:], v); return d }
	}
	// Offsets inside the header.
	const tensorCountAt, kvCountAt = 8, 16
	firstKeyLen := lay.KV[0]
	firstTensorType := lay.TensorType[0]
	// The value type field of the first KV: after its 8-byte length and the key.
	firstValType := lay.KV[0] + 8 + int64(len("general.architecture"))
	secondTensorName := lay.TensorInfo[1] + 8 // the name bytes of tensor "b"
	tensorDims := lay.TensorInfo[0] + 8 + 1   // after the name "a"

	tests := []struct {
		name    string
		mutate  func([]byte) []byte
		wantErr error
		wantOff int64
		wantMsg string
	}{
		{"wrong magic", patch(0, 'G', 'G', 'U', 'X'), gguf.ErrMagic, 0, "bad magic"},
		{"lowercase magic", patch(0, 'g', 'g', 'u', 'f'), gguf.ErrMagic, 0, "bad magic"},
		{"version 1", u32(4, 1), gguf.ErrVersion, 4, "version 1"},
		{"version 4", u32(4, 4), gguf.ErrVersion, 4, "version 4"},
		{"big-endian", func(d []byte) []byte { binary.BigEndian.PutUint32(d[4:], 3); return d }, gguf.ErrBigEndian, 4, "big-endian"},
		{"absurd tensor count", u64(tensorCountAt, 1<<60), gguf.ErrLimit, tensorCountAt, "tensor count"},
		{"absurd metadata count", u64(kvCountAt, math.MaxUint64), gguf.ErrLimit, kvCountAt, "metadata count"},
		{"absurd key length", u64(firstKeyLen, 1<<50), gguf.ErrLimit, firstKeyLen, "length"},
		{"unknown value type", u32(firstValType, 99), gguf.ErrValueType, firstValType, "type id 99"},
		{"unknown tensor type", u32(firstTensorType, 77), quant.ErrUnknownType, firstTensorType, "id 77"},
		{"removed tensor type", u32(firstTensorType, 4), quant.ErrUnknownType, firstTensorType, "Q4_2"},
		{"too many dims", u32(tensorDims, 5), gguf.ErrTensorShape, tensorDims, "5 dims"},
		{"duplicate tensor name", patch(secondTensorName, 'a'), gguf.ErrDuplicate, lay.TensorInfo[1], `tensor "a"`},
		{"offset past EOF", u64(lay.TensorOffset[2], 1<<20), gguf.ErrRange, lay.TensorInfo[2], "past the end"},
		{"offset overflow", u64(lay.TensorOffset[2], math.MaxUint64-31), gguf.ErrRange, lay.TensorInfo[2], "past the end"},
		{"misaligned offset", u64(lay.TensorOffset[1], 40), gguf.ErrAlignment, lay.TensorInfo[1], "not a multiple"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.mutate(append([]byte(nil), base...))
			_, err := gguf.Parse("bad.gguf", d)
			checkFormatError(t, err, tc.wantErr, tc.wantOff, tc.wantMsg)
		})
	}
}

func checkFormatError(t *testing.T, err, wantErr error, wantOff int64, wantMsg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Parse succeeded, want error %v", wantErr)
	}
	var fe *gguf.FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("Parse error %T (%v) is not a *gguf.FormatError", err, err)
	}
	if !errors.Is(err, wantErr) {
		t.Errorf("Parse error %q does not wrap %v", err, wantErr)
	}
	if wantOff >= 0 && fe.Offset != wantOff {
		t.Errorf("Parse error offset %d, want %d (%v)", fe.Offset, wantOff, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, wantMsg) || !strings.Contains(msg, "bad.gguf") || !strings.Contains(msg, fmt.Sprintf("offset %d", fe.Offset)) {
		t.Errorf("Parse error %q should name the file, the offset and %q", msg, wantMsg)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("Parse error %q is not one line", msg)
	}
}

// TestTruncated cuts a valid file at every section boundary and at every byte
// of the header: each must fail with ErrTruncated (or a count that no longer
// fits), never succeed and never panic.
func TestTruncated(t *testing.T) {
	base, lay := smallFile(t)
	cuts := []int64{0, 3, 4, 7, 8, 15, 16, 23, 24}
	cuts = append(cuts, lay.KV...)
	cuts = append(cuts, lay.TensorInfo...)
	cuts = append(cuts, lay.HeaderEnd, lay.Data, lay.Tensor[1], lay.Tensor[2], lay.Size-1)
	for i := int64(0); i < lay.HeaderEnd; i++ {
		cuts = append(cuts, i)
	}
	for _, n := range cuts {
		_, err := gguf.Parse("bad.gguf", base[:n])
		if err == nil {
			t.Errorf("Parse of the first %d of %d bytes succeeded", n, len(base))
			continue
		}
		if !errors.Is(err, gguf.ErrTruncated) && !errors.Is(err, gguf.ErrLimit) && !errors.Is(err, gguf.ErrRange) {
			t.Errorf("Parse of the first %d bytes: %v, want truncated, limit or range", n, err)
		}
	}
	// The section boundaries name the expected condition exactly.
	for _, tc := range []struct {
		n    int64
		want error
	}{{0, gguf.ErrTruncated}, {lay.KV[0], gguf.ErrLimit}, {lay.HeaderEnd, gguf.ErrTruncated}, {lay.Size - 1, gguf.ErrRange}} {
		_, err := gguf.Parse("bad.gguf", base[:tc.n])
		if !errors.Is(err, tc.want) {
			t.Errorf("cut at %d: %v, want %v", tc.n, err, tc.want)
		}
	}
}

func TestDuplicateKey(t *testing.T) {
	b := gguf.NewBuilder()
	b.Set("k.one", gguf.V(uint32(1)))
	b.Set("k.two", gguf.V(uint32(2)))
	data, lay, err := b.Encode()
	must(t, err)
	copy(data[lay.KV[1]+8:], "k.one")
	_, err = gguf.Parse("bad.gguf", data)
	checkFormatError(t, err, gguf.ErrDuplicate, lay.KV[1], `"k.one"`)
}

func TestBadAlignment(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    gguf.Value
	}{{"not a power of two", gguf.V(uint32(24))}, {"zero", gguf.V(uint32(0))}, {"wrong type", gguf.V(uint64(32))}} {
		t.Run(tc.name, func(t *testing.T) {
			b := gguf.NewBuilder()
			b.Set("general.alignment", tc.v)
			// Encode refuses too, so write the key by hand through a valid
			// value and patch it.
			b.Set("general.alignment", gguf.V(uint32(32)))
			data, lay, err := b.Encode()
			must(t, err)
			valAt := lay.KV[0] + 8 + int64(len("general.alignment"))
			switch x := tc.v.X.(type) {
			case uint32:
				binary.LittleEndian.PutUint32(data[valAt+4:], x)
			case uint64:
				binary.LittleEndian.PutUint32(data[valAt:], uint32(gguf.TypeUint64))
				data = append(data[:valAt+4], append(binary.LittleEndian.AppendUint64(nil, x), data[valAt+8:]...)...)
			}
			_, err = gguf.Parse("bad.gguf", data)
			checkFormatError(t, err, gguf.ErrAlignment, lay.KV[0], "alignment")
		})
	}
}

func TestFixturesOpen(t *testing.T) {
	dir := testutil.Fixtures(t)
	var n int
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".gguf") {
			return err
		}
		n++
		f, err := gguf.Open(p)
		if err != nil {
			t.Errorf("Open(%s): %v", p, err)
			return nil
		}
		for i := range f.Tensors {
			if d := f.Data(&f.Tensors[i]); uint64(len(d)) != f.Tensors[i].Size {
				t.Errorf("%s: tensor %q data is %d bytes, want %d", p, f.Tensors[i].Name, len(d), f.Tensors[i].Size)
			}
		}
		return f.Close()
	})
	must(t, err)
	if n == 0 {
		t.Fatalf("no .gguf files under %s", dir)
	}
	t.Logf("opened %d fixture GGUF files", n)
}

// TestTensorsMatchGGUFPy compares the tensor list with what gguf-py's reader
// recorded for the same files.
func TestTensorsMatchGGUFPy(t *testing.T) {
	dir := testutil.Fixtures(t)
	for _, name := range []string{"stories260K", "llama-2-tiny-random"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "expect", "tensors", name+".json"))
			must(t, err)
			type row struct {
				Name  string  `json:"name"`
				Type  string  `json:"type"`
				Shape []int64 `json:"shape"`
			}
			var want []row
			if err := json.Unmarshal(raw, &want); err != nil {
				var wrapped struct {
					Tensors []row `json:"tensors"`
				}
				must(t, json.Unmarshal(raw, &wrapped))
				want = wrapped.Tensors
			}
			f, err := gguf.Open(filepath.Join(dir, "models", name+".gguf"))
			must(t, err)
			defer f.Close()
			var got []row
			for _, ti := range f.Tensors {
				got = append(got, row{ti.Name, ti.Type.String(), ti.Shape})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tensors of %s mismatch (-gguf-py +apr):\n%s", name, diff)
			}
		})
	}
}
