package gguf_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// randomValue draws a metadata value of any type, arrays nested up to depth.
func randomValue(r *rand.Rand, depth int) gguf.Value {
	n := r.IntN(5)
	top := 13
	if depth <= 0 {
		top = 9 // no arrays below the depth limit
	}
	switch t := gguf.ValueType(r.IntN(top)); t {
	case gguf.TypeUint8:
		return gguf.V(uint8(r.Uint32()))
	case gguf.TypeInt8:
		return gguf.V(int8(r.Uint32()))
	case gguf.TypeUint16:
		return gguf.V(uint16(r.Uint32()))
	case gguf.TypeInt16:
		return gguf.V(int16(r.Uint32()))
	case gguf.TypeUint32:
		return gguf.V(r.Uint32())
	case gguf.TypeInt32:
		return gguf.V(int32(r.Uint32()))
	case gguf.TypeFloat32:
		return gguf.V(math.Float32frombits(r.Uint32()))
	case gguf.TypeBool:
		return gguf.V(r.IntN(2) == 1)
	case gguf.TypeString:
		return gguf.V(randString(r))
	case gguf.TypeUint64:
		return gguf.V(r.Uint64())
	case gguf.TypeInt64:
		return gguf.V(int64(r.Uint64()))
	case gguf.TypeFloat64:
		return gguf.V(math.Float64frombits(r.Uint64()))
	default: // array
		switch r.IntN(6) {
		case 0:
			xs := make([]string, n)
			for i := range xs {
				xs[i] = randString(r)
			}
			return gguf.V(xs)
		case 1:
			xs := make([]int32, n)
			for i := range xs {
				xs[i] = int32(r.Uint32())
			}
			return gguf.V(xs)
		case 2:
			xs := make([]float32, n)
			for i := range xs {
				xs[i] = float32(r.NormFloat64())
			}
			return gguf.V(xs)
		case 3:
			xs := make([]bool, n)
			for i := range xs {
				xs[i] = r.IntN(2) == 1
			}
			return gguf.V(xs)
		case 4:
			xs := make([]uint8, n)
			for i := range xs {
				xs[i] = uint8(r.Uint32())
			}
			return gguf.V(xs)
		default:
			xs := make([]gguf.Value, n)
			inner := randomValue(r, depth-1)
			for inner.Type != gguf.TypeArray {
				inner = randomValue(r, depth-1)
				if depth-1 <= 0 {
					inner = gguf.V([]int64{r.Int64()})
				}
			}
			for i := range xs {
				xs[i] = inner
			}
			return gguf.V(xs)
		}
	}
}

func randString(r *rand.Rand) string {
	const alphabet = "abcxyz .,_-é漢🙂\x00\n"
	rs := []rune(alphabet)
	var sb strings.Builder
	for range r.IntN(12) {
		sb.WriteRune(rs[r.IntN(len(rs))])
	}
	return sb.String()
}

// TestRoundTrip is the writer/reader property: write → read gives back
// identical metadata (values, types, order) and tensor bytes.
func TestRoundTrip(t *testing.T) {
	params := gopter.DefaultTestParameters()
	params.MinSuccessfulTests = 200
	properties := gopter.NewProperties(params)
	types := []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_K, quant.IQ2_XXS, quant.BF16, quant.I32}
	properties.Property("write then read gives back the same file", prop.ForAll(
		func(seed uint64) string {
			r := rand.New(rand.NewPCG(seed, 7))
			b := gguf.NewBuilder()
			align := uint32(1) << r.IntN(8)
			b.Set("general.alignment", gguf.V(align))
			var wantKV []gguf.KV
			wantKV = append(wantKV, gguf.KV{Key: "general.alignment", Value: gguf.V(align)})
			for i := range r.IntN(12) {
				k := fmt.Sprintf("key.%d.%s", i, randString(r))
				v := randomValue(r, 3)
				b.Set(k, v)
				wantKV = append(wantKV, gguf.KV{Key: k, Value: v})
			}
			wantData := map[string][]byte{}
			for i := range r.IntN(6) {
				typ := types[r.IntN(len(types))]
				info, _ := quant.Lookup(typ)
				shape := []int64{int64(info.BlockSize * (1 + r.IntN(3)))}
				for range r.IntN(3) {
					shape = append(shape, int64(1+r.IntN(3)))
				}
				n := int64(1)
				for _, d := range shape {
					n *= d
				}
				size, _ := info.RowBytes(n)
				data := make([]byte, size)
				for j := range data {
					data[j] = byte(r.Uint32())
				}
				name := fmt.Sprintf("blk.%d.w", i)
				if err := b.AddTensor(name, typ, shape, data); err != nil {
					return err.Error()
				}
				wantData[name] = data
			}
			enc, _, err := b.Encode()
			if err != nil {
				return "Encode: " + err.Error()
			}
			f, err := gguf.Parse("rt.gguf", enc)
			if err != nil {
				return "Parse: " + err.Error()
			}
			gotKV := make([]gguf.KV, len(f.KV))
			for i, kv := range f.KV {
				gotKV[i] = gguf.KV{Key: kv.Key, Value: kv.Value}
			}
			if diff := cmp.Diff(wantKV, gotKV, cmp.Comparer(sameFloat32), cmp.Comparer(sameFloat64)); diff != "" {
				return "metadata (-want +got):\n" + diff
			}
			if len(f.Tensors) != len(wantData) {
				return fmt.Sprintf("%d tensors, want %d", len(f.Tensors), len(wantData))
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if !bytes.Equal(f.Data(ti), wantData[ti.Name]) {
					return "tensor bytes differ: " + ti.Name
				}
				if (f.DataOffset+int64(ti.Offset))%int64(align) != 0 {
					return "tensor not aligned: " + ti.Name
				}
			}
			return ""
		},
		gen.UInt64(),
	))
	// A failing property prints its seed; gopter logs it with the counterexample.
	properties.TestingRun(t)
}

func sameFloat32(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
func sameFloat64(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// FuzzParse feeds arbitrary bytes to the reader. It must never panic or
// allocate without bound; a file it accepts must survive a rewrite through
// the Builder unchanged.
func FuzzParse(f *testing.F) {
	data, _ := smallFile(f)
	f.Add(data)
	if dir, err := testutil.FixturesDir(); err == nil {
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || !strings.HasSuffix(p, ".gguf") || info.Size() > 4<<20 {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				// Keep seeds small: the header plus a little data.
				if len(b) > 64<<10 {
					b = b[:64<<10]
				}
				f.Add(b)
			}
			return nil
		})
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		file, err := gguf.Parse("fuzz.gguf", b)
		if err != nil {
			return
		}
		out := gguf.NewBuilder()
		for _, kv := range file.KV {
			out.Set(kv.Key, kv.Value)
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if err := out.AddTensor(ti.Name, ti.Type, ti.Shape, file.Data(ti)); err != nil {
				t.Fatalf("re-adding tensor %q: %v", ti.Name, err)
			}
		}
		enc, _, err := out.Encode()
		if err != nil {
			t.Fatalf("re-encoding an accepted file: %v", err)
		}
		again, err := gguf.Parse("fuzz2.gguf", enc)
		if err != nil {
			t.Fatalf("re-parsing a rewritten file: %v", err)
		}
		if len(again.KV) != len(file.KV) || len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("rewrite changed counts: %d/%d kv, %d/%d tensors", len(again.KV), len(file.KV), len(again.Tensors), len(file.Tensors))
		}
		for i := range file.Tensors {
			if !bytes.Equal(file.Data(&file.Tensors[i]), again.Data(&again.Tensors[i])) {
				t.Fatalf("rewrite changed tensor %q", file.Tensors[i].Name)
			}
		}
	})
}
