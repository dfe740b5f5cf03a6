package kldfile_test

import (
	"bytes"
	"testing"

	"github.com/aprqa/apr/internal/kldfile"
)

// FuzzParse: Parse never panics; what it accepts has exactly the length its
// counts imply, every record reads (or is refused) without panicking, and
// the header and tokens written back by NewWriter are the input's bytes.
func FuzzParse(f *testing.F) {
	for i, h := range []kldfile.Header{{NCtx: 3, NVocab: 1, NChunk: 1}, {NCtx: 6, NVocab: 5, NChunk: 2}, {NCtx: 8, NVocab: 16, NChunk: 1}} {
		b, _, _ := build(f, h, int64(i))
		f.Add(b)
	}
	f.Add([]byte(kldfile.Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		file, err := kldfile.Parse("fuzz", b)
		if err != nil {
			return
		}
		if int64(len(b)) != file.Size() {
			t.Fatalf("accepted %d bytes, counts imply %d", len(b), file.Size())
		}
		for c := range file.NChunk {
			for j := range file.Scored() {
				r, err := file.Record(c, j)
				if err != nil {
					continue
				}
				for i := range r.Len() {
					_ = r.LogProb(i)
				}
			}
		}
		var buf bytes.Buffer
		w, err := kldfile.NewWriter(&buf, file.Header, file.Tokens)
		if err != nil {
			t.Fatalf("NewWriter of a parsed header: %v", err)
		}
		_ = w.Close() // flushes; the missing records are its error
		if n := buf.Len(); !bytes.Equal(buf.Bytes(), b[:n]) {
			t.Fatalf("header and tokens written back differ from the input's first %d bytes", n)
		}
	})
}
