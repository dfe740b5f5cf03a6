package falsify

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
)

// Finding is one tensor whose values are not plausible weights.
type Finding struct {
	Tensor string `json:"tensor"`
	Kind   string `json:"kind"` // "nonfinite", "all_zero" or "unreadable"
	Detail string `json:"detail"`
}

// ScanReport is what ScanTensors found.
type ScanReport struct {
	Tensors  int       `json:"tensors"`
	Values   int64     `json:"values"`
	Bytes    int64     `json:"bytes"`
	Findings []Finding `json:"findings"`
}

// scanChunk is how many values a worker dequantizes at a time.
const scanChunk = 1 << 16

// ScanTensors reads every tensor of f through its mapping (gguf.File.Data,
// no copy of the file) and dequantizes it a few rows at a time into a small
// per-worker buffer, reporting tensors holding a NaN or an Inf, tensors
// whose values are all zero (biases excepted: an all-zero bias is a real
// thing), and tensors that cannot be decoded.
func ScanTensors(f *gguf.File) ScanReport {
	n := len(f.Tensors)
	found := make([][]Finding, n)
	var values, bytes int64
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, scanChunk)
			for i := range work {
				t := &f.Tensors[i]
				v, b, fs := scanTensor(f, t, buf)
				found[i] = fs
				mu.Lock()
				values += v
				bytes += b
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	r := ScanReport{Tensors: n, Values: values, Bytes: bytes, Findings: []Finding{}}
	for _, fs := range found {
		r.Findings = append(r.Findings, fs...)
	}
	return r
}

func scanTensor(f *gguf.File, t *gguf.TensorInfo, buf []float32) (int64, int64, []Finding) {
	bad := func(format string, args ...any) (int64, int64, []Finding) {
		return 0, 0, []Finding{{Tensor: t.Name, Kind: "unreadable", Detail: fmt.Sprintf(format, args...)}}
	}
	info, err := quant.Lookup(t.Type)
	if err != nil {
		return bad("%v", err)
	}
	if len(t.Shape) == 0 {
		return bad("no dimensions")
	}
	rowLen := t.Shape[0]
	var rows int64 = 1
	for _, d := range t.Shape[1:] {
		rows *= d
	}
	rowBytes, ok := info.RowBytes(rowLen)
	if !ok || rowLen <= 0 || rows <= 0 {
		return bad("rows of %d values do not fit %s blocks of %d", rowLen, info.Name, info.BlockSize)
	}
	data := f.Data(t)
	if int64(len(data)) != rowBytes*rows {
		return bad("holds %d bytes, its shape needs %d", len(data), rowBytes*rows)
	}
	perChunk := max(1, int64(len(buf))/rowLen)
	var scratch []float32
	if rowLen > int64(len(buf)) {
		scratch = make([]float32, rowLen) // one row wider than the buffer
	}
	nonzero := false
	for r := int64(0); r < rows; r += perChunk {
		k := min(perChunk, rows-r)
		dst := buf[:k*rowLen]
		if scratch != nil {
			dst = scratch
		}
		if err := quant.Dequantize(t.Type, data[r*rowBytes:(r+k)*rowBytes], dst); err != nil {
			return bad("%v", err)
		}
		for i, v := range dst {
			if v != 0 {
				nonzero = true
			}
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				idx := r*rowLen + int64(i)
				return (r + k) * rowLen, int64(len(data)), []Finding{{Tensor: t.Name, Kind: "nonfinite",
					Detail: fmt.Sprintf("value %d (row %d, column %d) is %v", idx, idx/rowLen, idx%rowLen, v)}}
			}
		}
	}
	n := rows * rowLen
	if !nonzero && !strings.HasSuffix(t.Name, ".bias") {
		return n, int64(len(data)), []Finding{{Tensor: t.Name, Kind: "all_zero", Detail: fmt.Sprintf("all %d values are zero", n)}}
	}
	return n, int64(len(data)), nil
}
