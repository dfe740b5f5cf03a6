package gguf_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
)

// SparseModel writes a sparse GGUF of about 30 GiB with a realistic header (a
// 151,936-token vocabulary with merges and 48 layers of MoE-sized tensors) and
// returns its path. Only the header's bytes are on disk.
func SparseModel(tb testing.TB) string {
	tb.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("qwen3moe"))
	b.Set("general.name", gguf.V("sparse-30GiB"))
	toks := make([]string, 151936)
	types := make([]int32, len(toks))
	for i := range toks {
		toks[i] = fmt.Sprintf("tok%06d", i)
		types[i] = 1
	}
	merges := make([]string, 151387)
	for i := range merges {
		merges[i] = fmt.Sprintf("m%d n%d", i, i)
	}
	b.Set("tokenizer.ggml.model", gguf.V("gpt2"))
	b.Set("tokenizer.ggml.tokens", gguf.V(toks))
	b.Set("tokenizer.ggml.token_type", gguf.V(types))
	b.Set("tokenizer.ggml.merges", gguf.V(merges))
	add := func(name string, shape ...int64) {
		if err := b.AddTensorFunc(name, quant.Q8_0, shape, nil); err != nil {
			tb.Fatal(err)
		}
	}
	add("token_embd.weight", 2048, 151936)
	for l := range 48 {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_q.weight", 2048, 4096)
		add(p+"attn_k.weight", 2048, 512)
		add(p+"attn_v.weight", 2048, 512)
		add(p+"attn_output.weight", 4096, 2048)
		add(p+"ffn_gate_exps.weight", 2048, 768, 128)
		add(p+"ffn_up_exps.weight", 2048, 768, 128)
		add(p+"ffn_down_exps.weight", 768, 2048, 128)
	}
	hdr, lay, err := b.EncodeHeader()
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "sparse.gguf")
	fd, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := fd.Write(hdr); err != nil {
		tb.Fatal(err)
	}
	if err := fd.Truncate(lay.Size); err != nil {
		tb.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkOpenSparse30GiB measures reading the header of a 30 GiB file:
// Open must touch only the header pages.
func BenchmarkOpenSparse30GiB(b *testing.B) {
	path := SparseModel(b)
	st, _ := os.Stat(path)
	b.ReportMetric(float64(st.Size())/(1<<30), "GiB-file")
	b.ReportAllocs()
	for b.Loop() {
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Tensors) != 1+48*7 {
			b.Fatalf("%d tensors", len(f.Tensors))
		}
		f.Close()
	}
}
