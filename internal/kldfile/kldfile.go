package kldfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Magic opens every file.
const Magic = "_logits_"

// Limits: a count outside them is refused before anything is allocated.
const (
	MaxNCtx   = 1 << 24 // tokens per chunk
	MaxNVocab = 1 << 24 // vocabulary entries
	MaxNChunk = 1 << 24 // chunks
	headerLen = 8 + 3*4
)

// Sentinel errors; every error of Parse, Open and Record wraps one.
var (
	ErrMagic     = errors.New("not a llama.cpp log-probability file (bad magic)")
	ErrTruncated = errors.New("truncated")
	ErrLimit     = errors.New("count out of range")
	ErrLength    = errors.New("file length does not match its counts")
	ErrToken     = errors.New("token id outside the vocabulary")
	ErrRecord    = errors.New("bad record")
)

// FormatError says what is wrong with a file and where.
type FormatError struct {
	File   string
	Offset int64
	Field  string
	Err    error
	Detail string
}

func (e *FormatError) Error() string {
	msg := fmt.Sprintf("kldfile: %s: offset %d: %s: %v", e.File, e.Offset, e.Field, e.Err)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *FormatError) Unwrap() error { return e.Err }

// Header is a file's counts.
type Header struct {
	NCtx   int // tokens per chunk
	NVocab int // log-probabilities per record
	NChunk int // chunks
}

// First is the first scored position of a chunk (llama.cpp's n_ctx/2).
func (h Header) First() int { return h.NCtx / 2 }

// Scored is the number of records per chunk: positions First … NCtx−2.
func (h Header) Scored() int { return h.NCtx - 1 - h.NCtx/2 }

// RowLen is the number of uint16 values in one record for a vocabulary of
// nVocab: 2·⌈nVocab/2⌉ + 4 (llama.cpp's nv).
func RowLen(nVocab int) int { return 2*((nVocab+1)/2) + 4 }

// Size is the byte length of a file with h's counts.
func (h Header) Size() int64 {
	return headerLen + 4*int64(h.NChunk)*int64(h.NCtx) + 2*int64(h.NChunk)*int64(h.Scored())*int64(RowLen(h.NVocab))
}

// Check reports whether h's counts are within the limits and leave at least
// one scored position per chunk.
func (h Header) Check() error {
	switch {
	case h.NCtx < 3 || h.NCtx > MaxNCtx:
		return fmt.Errorf("%w: n_ctx %d (want 3 … %d: at least one scored position)", ErrLimit, h.NCtx, MaxNCtx)
	case h.NVocab < 1 || h.NVocab > MaxNVocab:
		return fmt.Errorf("%w: n_vocab %d (want 1 … %d)", ErrLimit, h.NVocab, MaxNVocab)
	case h.NChunk < 1 || h.NChunk > MaxNChunk:
		return fmt.Errorf("%w: n_chunk %d (want 1 … %d)", ErrLimit, h.NChunk, MaxNChunk)
	}
	return nil
}

// File is a parsed log-probability file. Its records are views of the bytes
// given to Parse (for Open: a read-only mapping of the file).
type File struct {
	Header
	Name   string
	Tokens []int32 // NChunk·NCtx ids, as written (BOS not substituted)
	data   []byte  // the records
	closer func() error
}

// Open maps path read-only and parses it. The caller must Close the File.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kldfile: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("kldfile: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("kldfile: %s: not a regular file", path)
	}
	size := st.Size()
	if size < headerLen {
		return nil, &FormatError{File: path, Offset: size, Field: "header", Err: ErrTruncated,
			Detail: fmt.Sprintf("%d bytes, the header alone is %d", size, headerLen)}
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("kldfile: %s: %d bytes do not fit the address space", path, size)
	}
	b, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("kldfile: %s: mmap: %w", path, err)
	}
	f, err := Parse(path, b)
	if err != nil {
		_ = unix.Munmap(b)
		return nil, err
	}
	f.closer = func() error { return unix.Munmap(b) }
	return f, nil
}

// Close releases the mapping (a File from Parse holds none).
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	return c()
}

// Parse reads the header and tokens of b, a whole file named name, and
// checks that its length is exactly what the counts imply.
func Parse(name string, b []byte) (*File, error) {
	ferr := func(off int64, field string, err error, format string, args ...any) error {
		return &FormatError{File: name, Offset: off, Field: field, Err: err, Detail: fmt.Sprintf(format, args...)}
	}
	if len(b) < headerLen {
		return nil, ferr(int64(len(b)), "header", ErrTruncated, "%d bytes, the header alone is %d", len(b), headerLen)
	}
	if string(b[:8]) != Magic {
		return nil, ferr(0, "magic", ErrMagic, "got %q, want %q", b[:8], Magic)
	}
	i32 := func(off int) int { return int(int32(binary.LittleEndian.Uint32(b[off:]))) }
	h := Header{NCtx: i32(8), NVocab: i32(12), NChunk: i32(16)}
	if err := h.Check(); err != nil {
		off, field := int64(8), "n_ctx"
		switch {
		case h.NVocab < 1 || h.NVocab > MaxNVocab:
			off, field = 12, "n_vocab"
		case h.NChunk < 1 || h.NChunk > MaxNChunk:
			off, field = 16, "n_chunk"
		}
		return nil, ferr(off, field, err, "")
	}
	if want := h.Size(); int64(len(b)) != want {
		return nil, ferr(int64(len(b)), "records", ErrLength,
			"%d bytes; n_ctx %d, n_vocab %d, n_chunk %d make %d (%d records of %d uint16)",
			len(b), h.NCtx, h.NVocab, h.NChunk, want, h.NChunk*h.Scored(), RowLen(h.NVocab))
	}
	n := h.NChunk * h.NCtx
	f := &File{Header: h, Name: name, Tokens: make([]int32, n)}
	for i := range f.Tokens {
		off := headerLen + 4*i
		t := int32(binary.LittleEndian.Uint32(b[off:]))
		if t < 0 || int(t) >= h.NVocab {
			return nil, ferr(int64(off), fmt.Sprintf("token %d (chunk %d, position %d)", i, i/h.NCtx, i%h.NCtx),
				ErrToken, "%d, n_vocab %d", t, h.NVocab)
		}
		f.Tokens[i] = t
	}
	f.data = b[headerLen+4*n:]
	return f, nil
}

// ChunkTokens returns chunk c's NCtx tokens (a view).
func (f *File) ChunkTokens(c int) []int32 { return f.Tokens[c*f.NCtx : (c+1)*f.NCtx] }

// Record returns the log-probabilities stored for chunk c's j-th scored
// position (position First()+j, predicting the token at First()+j+1). A
// record whose scale is negative or not finite, or whose min is not finite,
// is an error naming its offset.
//
// Record panics if c or j is out of range (a programmer error).
func (f *File) Record(c, j int) (Record, error) {
	if c < 0 || c >= f.NChunk || j < 0 || j >= f.Scored() {
		panic(fmt.Sprintf("kldfile: record (%d, %d) outside %d chunks × %d", c, j, f.NChunk, f.Scored()))
	}
	rl := 2 * RowLen(f.NVocab)
	off := (c*f.Scored() + j) * rl
	b := f.data[off : off+rl]
	r := Record{
		Scale: math.Float32frombits(binary.LittleEndian.Uint32(b)),
		Min:   math.Float32frombits(binary.LittleEndian.Uint32(b[4:])),
		q:     b[8 : 8+2*f.NVocab],
	}
	if s := float64(r.Scale); math.IsNaN(s) || math.IsInf(s, 0) || s < 0 || math.IsNaN(float64(r.Min)) || math.IsInf(float64(r.Min), 0) {
		return Record{}, &FormatError{File: f.Name, Offset: int64(headerLen + 4*len(f.Tokens) + off),
			Field: fmt.Sprintf("record (chunk %d, scored position %d)", c, j), Err: ErrRecord,
			Detail: fmt.Sprintf("scale %v, min_log_prob %v", r.Scale, r.Min)}
	}
	return r, nil
}

// Record is one scored position's compressed log-probabilities.
type Record struct {
	Scale float32 // log-probability per step of q
	Min   float32 // log-probability of q = 0
	q     []byte  // NVocab little-endian uint16
}

// Len is the vocabulary size.
func (r Record) Len() int { return len(r.q) / 2 }

// Q returns token i's stored step count.
func (r Record) Q(i int) uint16 { return binary.LittleEndian.Uint16(r.q[2*i:]) }

// LogProb returns token i's log-probability, scale·q + min in float32 as
// llama.cpp decodes it.
func (r Record) LogProb(i int) float32 {
	return float32(r.Scale*float32(r.Q(i))) + r.Min
}

// nearestInt is llama.cpp's nearest_int: the float32 rounded to the nearest
// integer, ties to even, by the 1.5·2²³ trick (valid for |v| ≤ 2²²).
func nearestInt(v float32) int32 {
	x := v + 12582912
	return int32(math.Float32bits(x)&0x007fffff) - 0x00400000
}

// expf is C's expf to within the last bit: exp in float64, rounded once.
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// Encode writes logits' log-probabilities into rec (RowLen(len(logits))
// uint16 values as bytes) exactly as llama.cpp's log_softmax for the base
// file does, and returns the negative log-likelihood of token tok as that
// function computes it: max + log Σexp − logits[tok] in float32.
//
// Log-probabilities more than 16 below the largest are stored as the
// smallest one kept (q = 0), as llama.cpp does.
//
// Encode panics if rec has the wrong length or tok is outside logits (a
// programmer error).
func Encode(rec []byte, logits []float32, tok int32) float64 {
	n := len(logits)
	if len(rec) != 2*RowLen(n) || tok < 0 || int(tok) >= n {
		panic(fmt.Sprintf("kldfile: Encode of %d logits into %d bytes, token %d", n, len(rec), tok))
	}
	maxL, minL := logits[0], logits[0]
	for _, v := range logits[1:] {
		maxL = max(maxL, v)
		minL = min(minL, v)
	}
	minL = max(minL, maxL-16)
	var sum float64
	for _, v := range logits {
		sum += float64(expf(v - maxL))
	}
	logSum := float32(math.Log(sum))
	minLogProb := (minL - maxL) - logSum
	scale := (maxL - minL) / 65535
	binary.LittleEndian.PutUint32(rec, math.Float32bits(scale))
	binary.LittleEndian.PutUint32(rec[4:], math.Float32bits(minLogProb))
	q := rec[8:]
	clear(q)
	if scale != 0 {
		inv := 1 / scale
		for i, v := range logits {
			if v > minL {
				binary.LittleEndian.PutUint16(q[2*i:], uint16(nearestInt(inv*(v-minL))))
			}
		}
	}
	return float64((maxL + logSum) - logits[tok])
}

// Writer writes a file: the header and tokens first, then one record per
// scored position in order.
type Writer struct {
	h     Header
	w     *bufio.Writer
	rec   []byte
	n     int // records written
	total int
}

// NewWriter writes h and tokens (h.NChunk·h.NCtx ids) to w.
func NewWriter(w io.Writer, h Header, tokens []int32) (*Writer, error) {
	if err := h.Check(); err != nil {
		return nil, fmt.Errorf("kldfile: %w", err)
	}
	if len(tokens) != h.NChunk*h.NCtx {
		return nil, fmt.Errorf("kldfile: %d tokens for %d chunks of %d", len(tokens), h.NChunk, h.NCtx)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var hdr [headerLen]byte
	copy(hdr[:], Magic)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(h.NCtx))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(h.NVocab))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(h.NChunk))
	if _, err := bw.Write(hdr[:]); err != nil {
		return nil, err
	}
	var b [4]byte
	for i, t := range tokens {
		if t < 0 || int(t) >= h.NVocab {
			return nil, fmt.Errorf("kldfile: token %d at index %d is outside the vocabulary of %d", t, i, h.NVocab)
		}
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		if _, err := bw.Write(b[:]); err != nil {
			return nil, err
		}
	}
	return &Writer{h: h, w: bw, rec: make([]byte, 2*RowLen(h.NVocab)), total: h.NChunk * h.Scored()}, nil
}

// Write encodes the next scored position's logits (Encode) and returns the
// negative log-likelihood of next, the token that follows.
func (w *Writer) Write(logits []float32, next int32) (float64, error) {
	if w.n == w.total {
		return 0, fmt.Errorf("kldfile: more than the %d records of %d chunks", w.total, w.h.NChunk)
	}
	if len(logits) != w.h.NVocab {
		return 0, fmt.Errorf("kldfile: %d logits for a vocabulary of %d", len(logits), w.h.NVocab)
	}
	if next < 0 || int(next) >= w.h.NVocab {
		return 0, fmt.Errorf("kldfile: token %d outside the vocabulary of %d", next, w.h.NVocab)
	}
	nll := Encode(w.rec, logits, next)
	w.n++
	_, err := w.w.Write(w.rec)
	return nll, err
}

// Close flushes what is buffered; it is an error to close before every
// record was written (the file would not parse).
func (w *Writer) Close() error {
	if err := w.w.Flush(); err != nil {
		return err
	}
	if w.n != w.total {
		return fmt.Errorf("kldfile: %d of %d records written", w.n, w.total)
	}
	return nil
}
