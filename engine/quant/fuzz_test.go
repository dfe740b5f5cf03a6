package quant_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// maxFuzzValues limits the work of one fuzz input.
const maxFuzzValues = 1 << 14

// addFixtureSeeds adds the first two blocks of every dequant fixture's q as
// seeds when the shared fixtures are present (they need not be: the synthetic
// seeds below cover every type).
func addFixtureSeeds(f *testing.F) {
	dir := filepath.Join(filepath.Dir(testutil.RepoRoot(f)), "shared", "fixtures", "dequant")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".gguf" {
			continue
		}
		g, err := gguf.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if ti, ok := g.Tensor("q"); ok {
			info, err := quant.Lookup(ti.Type)
			if err == nil {
				data := g.Data(ti)
				n := min(len(data), 2*info.TypeSize)
				f.Add(uint8(ti.Type), true, int16(0), append([]byte(nil), data[:n]...))
			}
		}
		g.Close()
	}
}

// FuzzDequantize feeds random type ids (known, removed and unknown), value
// counts and bytes to Dequantize: it must never panic, must refuse unknown
// ids with ErrUnknownType, must refuse lengths that are not exactly whole
// blocks, and must accept every exact length.
func FuzzDequantize(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, in := range quant.All() {
		b := make([]byte, 2*in.TypeSize)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(uint8(in.Type), true, int16(0), b)
		f.Add(uint8(in.Type), false, int16(in.BlockSize+1), b)
	}
	f.Add(uint8(4), true, int16(32), make([]byte, 18)) // removed Q4_2
	f.Add(uint8(200), false, int16(1), []byte{1, 2, 3, 4})
	addFixtureSeeds(f)

	f.Fuzz(func(t *testing.T, id uint8, exact bool, count int16, data []byte) {
		typ := quant.Type(id)
		info, lookupErr := quant.Lookup(typ)
		n := int(count)
		if exact && lookupErr == nil {
			blocks := len(data) / info.TypeSize
			n = blocks * info.BlockSize
			data = data[:blocks*info.TypeSize]
		}
		if n < 0 || n > maxFuzzValues {
			return
		}
		dst := make([]float32, n)
		err := quant.Dequantize(typ, data, dst)
		switch {
		case lookupErr != nil:
			if !errors.Is(err, quant.ErrUnknownType) {
				t.Fatalf("Dequantize(unknown id %d) = %v, want ErrUnknownType", id, err)
			}
		case n%info.BlockSize != 0 || len(data) != n/info.BlockSize*info.TypeSize:
			if err == nil {
				t.Fatalf("Dequantize(%s, %d bytes, %d values) accepted a bad length", info.Name, len(data), n)
			}
		default:
			if err != nil {
				t.Fatalf("Dequantize(%s, %d bytes, %d values) = %v, want nil", info.Name, len(data), n, err)
			}
			// Whatever it decoded must re-encode without panicking.
			if quant.CanQuantize(typ) {
				finite := true
				for _, v := range dst {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						finite = false
						break
					}
				}
				q := make([]byte, len(data))
				if err := quant.Quantize(typ, dst, q); (err == nil) != (finite || !info.Quantized) {
					t.Fatalf("Quantize(%s) of decoded values (finite %v) = %v", info.Name, finite, err)
				}
			}
		}
	})
}

// FuzzQuantize feeds arbitrary float32 bit patterns (NaN, infinities,
// subnormals, huge values) to every quantizer: it must never panic, refuse
// non-finite input to block formats, and produce blocks that decode.
func FuzzQuantize(f *testing.F) {
	f.Add(uint8(quant.Q4_K), []byte{0, 0, 0x80, 0x7f})
	f.Add(uint8(quant.Q8_0), []byte{1, 0, 0, 0, 0xff, 0xff, 0x7f, 0x7f})
	f.Add(uint8(quant.MXFP4), []byte{1, 0, 0, 0})
	f.Add(uint8(quant.NVFP4), []byte{0xff, 0xff, 0x7f, 0x7f})
	f.Fuzz(func(t *testing.T, id uint8, bits []byte) {
		typ := quant.Type(id)
		if !quant.CanQuantize(typ) {
			return
		}
		info, _ := quant.Lookup(typ)
		vals := make([]float32, 0, len(bits)/4)
		for i := 0; i+4 <= len(bits); i += 4 {
			vals = append(vals, math.Float32frombits(uint32(bits[i])|uint32(bits[i+1])<<8|uint32(bits[i+2])<<16|uint32(bits[i+3])<<24))
		}
		if len(vals) == 0 {
			return
		}
		// Tile the pattern to whole blocks.
		n := (len(vals) + info.BlockSize - 1) / info.BlockSize * info.BlockSize
		if n > maxFuzzValues {
			return
		}
		x := make([]float32, n)
		finite := true
		for i := range x {
			x[i] = vals[i%len(vals)]
			if math.IsNaN(float64(x[i])) || math.IsInf(float64(x[i]), 0) {
				finite = false
			}
		}
		q := make([]byte, n/info.BlockSize*info.TypeSize)
		err := quant.Quantize(typ, x, q)
		if info.Quantized && !finite {
			if err == nil {
				t.Fatalf("Quantize(%s) accepted a non-finite value", info.Name)
			}
			return
		}
		if err != nil {
			t.Fatalf("Quantize(%s, %d values) = %v", info.Name, n, err)
		}
		if err := quant.Dequantize(typ, q, make([]float32, n)); err != nil {
			t.Fatalf("Dequantize(%s) of its own output = %v", info.Name, err)
		}
	})
}
