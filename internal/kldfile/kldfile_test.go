package kldfile_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/internal/kldfile"
	"github.com/aprqa/apr/internal/testutil"
)

// build writes a file of h with random logits and returns its bytes and the
// logits rows written (chunk-major).
func build(tb testing.TB, h kldfile.Header, seed int64) ([]byte, [][]float32, []int32) {
	tb.Helper()
	rng := rand.New(rand.NewSource(seed))
	tokens := make([]int32, h.NChunk*h.NCtx)
	for i := range tokens {
		tokens[i] = int32(rng.Intn(h.NVocab))
	}
	var buf bytes.Buffer
	w, err := kldfile.NewWriter(&buf, h, tokens)
	if err != nil {
		tb.Fatal(err)
	}
	var rows [][]float32
	for c := range h.NChunk {
		for j := range h.Scored() {
			row := make([]float32, h.NVocab)
			for i := range row {
				row[i] = float32(rng.NormFloat64() * 4)
			}
			rows = append(rows, row)
			if _, err := w.Write(row, tokens[c*h.NCtx+h.First()+j+1]); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), rows, tokens
}

func TestRoundTrip(t *testing.T) {
	for _, h := range []kldfile.Header{{NCtx: 8, NVocab: 33, NChunk: 3}, {NCtx: 7, NVocab: 64, NChunk: 1}} {
		b, rows, tokens := build(t, h, 1)
		if int64(len(b)) != h.Size() {
			t.Fatalf("%+v: wrote %d bytes, Size says %d", h, len(b), h.Size())
		}
		f, err := kldfile.Parse("mem", b)
		if err != nil {
			t.Fatal(err)
		}
		if f.Header != h {
			t.Errorf("header %+v, want %+v", f.Header, h)
		}
		if !slicesEqual(f.Tokens, tokens) {
			t.Errorf("tokens differ")
		}
		k := 0
		for c := range h.NChunk {
			for j := range h.Scored() {
				r, err := f.Record(c, j)
				if err != nil {
					t.Fatal(err)
				}
				// The stored log-probabilities are within one step (scale) of
				// the exact ones, for every token within 16 of the best.
				row := rows[k]
				k++
				m, s := row[0], 0.0
				for _, v := range row {
					m = max(m, v)
				}
				for _, v := range row {
					s += math.Exp(float64(v - m))
				}
				for i, v := range row {
					exact := float64(v-m) - math.Log(s)
					if float64(v) < float64(m)-16 {
						continue
					}
					if d := math.Abs(float64(r.LogProb(i)) - exact); d > float64(r.Scale)*0.51+1e-5 {
						t.Fatalf("record (%d,%d) token %d: stored %v, exact %v (scale %v)", c, j, i, r.LogProb(i), exact, r.Scale)
					}
				}
			}
		}
	}
}

func slicesEqual(a, b []int32) bool {
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

// TestReadFixtures reads the three files llama.cpp wrote (fixtures kld/):
// their counts, first tokens, and every record a distribution.
func TestReadFixtures(t *testing.T) {
	dir := testutil.Fixture(t, "kld")
	for _, c := range []struct {
		name      string
		h         kldfile.Header
		firstToks []int32
	}{
		{"stories260K", kldfile.Header{NCtx: 128, NVocab: 512, NChunk: 12}, []int32{1}},
		{"qwen2-tiny-Q4_K_M", kldfile.Header{NCtx: 128, NVocab: 2003, NChunk: 10}, nil},
		{"llama-tiny-Q4_K_M", kldfile.Header{NCtx: 128, NVocab: 2003, NChunk: 10}, nil}, // odd n_vocab: a pad per record
	} {
		f, err := kldfile.Open(filepath.Join(dir, c.name+".kld"))
		if err != nil {
			t.Fatal(err)
		}
		if f.Header != c.h {
			t.Errorf("%s: header %+v, want %+v", c.name, f.Header, c.h)
		}
		for i, id := range c.firstToks {
			if f.Tokens[i] != id {
				t.Errorf("%s: token %d = %d, want %d", c.name, i, f.Tokens[i], id)
			}
		}
		// Every record: a positive scale, the best token's log-probability at
		// most 0, Σ p ≈ 1 over the stored distribution.
		for ch := range f.NChunk {
			for j := range f.Scored() {
				r, err := f.Record(ch, j)
				if err != nil {
					t.Fatal(err)
				}
				var sum float64
				for i := range r.Len() {
					sum += math.Exp(float64(r.LogProb(i)))
				}
				if math.Abs(sum-1) > 0.01 {
					t.Fatalf("%s: record (%d,%d): Σp = %v", c.name, ch, j, sum)
				}
			}
		}
		f.Close()
	}
}

func TestParseErrors(t *testing.T) {
	good, _, _ := build(t, kldfile.Header{NCtx: 6, NVocab: 5, NChunk: 2}, 2)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put := func(off int, v uint32) func(b []byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
	}
	for _, c := range []struct {
		name  string
		b     []byte
		want  error
		field string
	}{
		{"empty", nil, kldfile.ErrTruncated, "header"},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), kldfile.ErrMagic, "magic"},
		{"n_ctx", mod(put(8, 2)), kldfile.ErrLimit, "n_ctx"},
		{"n_vocab negative", mod(put(12, 0xffffffff)), kldfile.ErrLimit, "n_vocab"},
		{"n_chunk huge", mod(put(16, 1<<30)), kldfile.ErrLimit, "n_chunk"},
		{"n_chunk off by one", mod(put(16, 3)), kldfile.ErrLength, "records"},
		{"truncated", good[:len(good)-1], kldfile.ErrLength, "records"},
		{"trailing", append(bytes.Clone(good), 0), kldfile.ErrLength, "records"},
		{"token", mod(put(20+4*3, 5)), kldfile.ErrToken, "token 3 (chunk 0, position 3)"},
	} {
		_, err := kldfile.Parse("x.kld", c.b)
		var fe *kldfile.FormatError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Field != c.field || fe.File != "x.kld" {
			t.Errorf("%s: Parse error %v, want %v in field %q", c.name, err, c.want, c.field)
		}
	}
	// A record whose scale is NaN is refused when read, naming its offset.
	b := bytes.Clone(good)
	h := kldfile.Header{NCtx: 6, NVocab: 5, NChunk: 2}
	off := 20 + 4*12 + 2*kldfile.RowLen(5)*(1*h.Scored()+1)
	binary.LittleEndian.PutUint32(b[off:], math.Float32bits(float32(math.NaN())))
	f, err := kldfile.Parse("x.kld", b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Record(1, 1); !errors.Is(err, kldfile.ErrRecord) {
		t.Errorf("Record of a NaN scale: %v, want ErrRecord", err)
	} else if fe := err.(*kldfile.FormatError); fe.Offset != int64(off) {
		t.Errorf("Record error offset %d, want %d", fe.Offset, off)
	}
	if _, err := f.Record(1, 0); err != nil {
		t.Errorf("Record (1,0): %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := kldfile.Open(filepath.Join(t.TempDir(), "none.kld")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
}

func TestWriterRefuses(t *testing.T) {
	h := kldfile.Header{NCtx: 4, NVocab: 3, NChunk: 1}
	var buf bytes.Buffer
	if _, err := kldfile.NewWriter(&buf, h, []int32{0, 1, 2}); err == nil {
		t.Error("NewWriter with too few tokens: no error")
	}
	if _, err := kldfile.NewWriter(&buf, h, []int32{0, 1, 2, 3}); err == nil {
		t.Error("NewWriter with a token outside the vocabulary: no error")
	}
	w, err := kldfile.NewWriter(&buf, h, []int32{0, 1, 2, 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close before every record: no error")
	}
}

// TestEncodeSpecials: llama.cpp's edge cases — all logits equal (scale 0:
// every q is 0, min is the log-probability), and logits far below the best
// (stored as the floor, 16 below).
func TestEncodeSpecials(t *testing.T) {
	rec := make([]byte, 2*kldfile.RowLen(4))
	nll := kldfile.Encode(rec, []float32{2, 2, 2, 2}, 1)
	if want := math.Log(4); math.Abs(nll-want) > 1e-6 {
		t.Errorf("uniform: nll %v, want %v", nll, want)
	}
	f := parseOne(t, rec, 4)
	if f.Scale != 0 || math.Abs(float64(f.Min)+math.Log(4)) > 1e-6 || f.Q(0) != 0 || f.Q(3) != 0 {
		t.Errorf("uniform: scale %v min %v q %d %d", f.Scale, f.Min, f.Q(0), f.Q(3))
	}
	nll = kldfile.Encode(rec, []float32{0, -100, 1, 0.5}, 2)
	f = parseOne(t, rec, 4)
	if f.Q(1) != 0 || f.Q(2) != 65535 {
		t.Errorf("floor: q %d %d, want 0 65535", f.Q(1), f.Q(2))
	}
	if got := f.LogProb(1); math.Abs(float64(got)-(float64(f.Min))) > 0 {
		t.Errorf("floor: log-prob %v, want min %v", got, f.Min)
	}
	if math.Abs(float64(f.LogProb(2))+nll) > 1e-5 {
		t.Errorf("best token's stored log-prob %v, nll %v", f.LogProb(2), nll)
	}
}

// parseOne wraps one record in a file of one chunk of 3 tokens.
func parseOne(t *testing.T, rec []byte, nVocab int) kldfile.Record {
	t.Helper()
	b := []byte(kldfile.Magic)
	for _, v := range []uint32{3, uint32(nVocab), 1, 0, 0, 0} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	f, err := kldfile.Parse("one", append(b, rec...))
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Record(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
