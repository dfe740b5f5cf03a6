package quant_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

// dequantFixture is one <TYPE>.gguf of shared/fixtures/dequant: src (F32),
// q (src quantized by ggml) and deq (ggml's to_float of q).
type dequantFixture struct {
	name      string
	typ       quant.Type
	quantizer string // manifest "quantizer": reference or imatrix-aware
	imatrix   bool
	src       []float32
	q         []byte
	deq       []float32
}

type manifest struct {
	Types map[string]struct {
		File         string `json:"file"`
		ID           int    `json:"ggml_type_id"`
		BlockSize    int    `json:"block_size"`
		BytesPer     int    `json:"bytes_per_block"`
		Quantizer    string `json:"quantizer"`
		ImatrixUsed  bool   `json:"imatrix_used"`
		QuantizerFor string `json:"quantizer_detail"`
	} `json:"types"`
}

// loadDequantFixtures reads every fixture the manifest lists, in name order.
func loadDequantFixtures(tb testing.TB) []dequantFixture {
	tb.Helper()
	dir := testutil.Fixture(tb, "dequant")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		tb.Fatalf("read manifest: %v", err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatalf("parse manifest: %v", err)
	}
	names := make([]string, 0, len(m.Types))
	for n := range m.Types {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []dequantFixture
	for _, name := range names {
		e := m.Types[name]
		typ, err := quant.ParseType(name)
		if err != nil {
			tb.Fatalf("manifest type %q: %v", name, err)
		}
		if int(typ) != e.ID {
			tb.Fatalf("manifest type %q has id %d, registry says %d", name, e.ID, typ)
		}
		info, _ := quant.Lookup(typ)
		if info.BlockSize != e.BlockSize || info.TypeSize != e.BytesPer {
			tb.Fatalf("%s: registry layout %d values/%d bytes, manifest %d/%d", name, info.BlockSize, info.TypeSize, e.BlockSize, e.BytesPer)
		}
		f, err := gguf.Open(filepath.Join(dir, e.File))
		if err != nil {
			tb.Fatalf("open %s: %v", e.File, err)
		}
		fx := dequantFixture{name: name, typ: typ, quantizer: e.Quantizer, imatrix: e.ImatrixUsed}
		for _, tn := range []string{"src", "q", "deq"} {
			ti, ok := f.Tensor(tn)
			if !ok {
				tb.Fatalf("%s: no tensor %q", e.File, tn)
			}
			data := append([]byte(nil), f.Data(ti)...)
			switch tn {
			case "src", "deq":
				if ti.Type != quant.F32 {
					tb.Fatalf("%s: tensor %s has type %v, want F32", e.File, tn, ti.Type)
				}
				v := bytesToF32(data)
				if tn == "src" {
					fx.src = v
				} else {
					fx.deq = v
				}
			case "q":
				if ti.Type != typ {
					tb.Fatalf("%s: tensor q has type %v, want %v", e.File, ti.Type, typ)
				}
				fx.q = data
			}
		}
		f.Close()
		if len(fx.src) != 512*8 || len(fx.deq) != 512*8 {
			tb.Fatalf("%s: src/deq hold %d/%d values, want 4096", name, len(fx.src), len(fx.deq))
		}
		out = append(out, fx)
	}
	if len(out) != 28 {
		tb.Fatalf("manifest lists %d types, want 28", len(out))
	}
	return out
}

func bytesToF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// firstBitDiff returns the index of the first value whose float32 bits
// differ, or -1.
func firstBitDiff(want, got []float32) int {
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			return i
		}
	}
	return -1
}

func TestDequantizeMatchesGGMLBitExact(t *testing.T) {
	for _, fx := range loadDequantFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			got := make([]float32, len(fx.deq))
			if err := quant.Dequantize(fx.typ, fx.q, got); err != nil {
				t.Fatalf("Dequantize(%s): %v", fx.name, err)
			}
			n := 0
			first := firstBitDiff(fx.deq, got)
			for i := range got {
				if math.Float32bits(fx.deq[i]) != math.Float32bits(got[i]) {
					n++
				}
			}
			if n > 0 {
				t.Errorf("Dequantize(%s): %d of %d values differ in bits from ggml; first at %d (row %d col %d): want %g (%#08x) got %g (%#08x)",
					fx.name, n, len(got), first, first/512, first%512, fx.deq[first], math.Float32bits(fx.deq[first]), got[first], math.Float32bits(got[first]))
			}
		})
	}
}

func TestQuantizeMatchesGGMLBitExact(t *testing.T) {
	for _, fx := range loadDequantFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			if !quant.CanQuantize(fx.typ) {
				t.Skipf("SKIP (not a pass): apr has no %s quantizer (ggml's is %s)", fx.name, fx.quantizer)
			}
			got := make([]byte, len(fx.q))
			if err := quant.Quantize(fx.typ, fx.src, got); err != nil {
				t.Fatalf("Quantize(%s): %v", fx.name, err)
			}
			info, _ := quant.Lookup(fx.typ)
			bad := 0
			first := -1
			for b := 0; b < len(got); b += info.TypeSize {
				for i := b; i < b+info.TypeSize; i++ {
					if got[i] != fx.q[i] {
						if first < 0 {
							first = i
						}
						bad++
						break
					}
				}
			}
			if bad > 0 {
				blk := first / info.TypeSize
				off := blk * info.TypeSize
				t.Errorf("Quantize(%s): %d of %d blocks differ from ggml; first block %d (row %d), byte %d:\nwant % x\ngot  % x",
					fx.name, bad, len(got)/info.TypeSize, blk, off/(len(got)/8), first-off, fx.q[off:off+info.TypeSize], got[off:off+info.TypeSize])
			}
		})
	}
}
