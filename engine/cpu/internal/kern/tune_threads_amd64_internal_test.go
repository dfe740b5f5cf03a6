//go:build amd64 && !noasm

package kern

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aprqa/apr/engine/quant"
)

// TestTuneDecodeThreads: min-of-reps GB/s of Mul with m = 1 (decode) on
// XTHREADS threads over 256 MiB of weight copies, for each prefetch lead in
// XLEAD, against the same threads' stream read, interleaved. XDEC=1,
// XT=types.
func TestTuneDecodeThreads(t *testing.T) {
	if os.Getenv("XDEC") == "" {
		t.Skip()
	}
	threads := 2
	if v, err := strconv.Atoi(os.Getenv("XTHREADS")); err == nil {
		threads = v
	}
	leads := []int{r4Lead}
	if l := os.Getenv("XLEAD"); l != "" {
		leads = nil
		for _, f := range strings.Split(l, ",") {
			v, _ := strconv.Atoi(f)
			leads = append(leads, v)
		}
	}
	defer func(v int) { r4Lead = v }(r4Lead)
	pool := NewPool(threads)
	defer pool.Close()
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	stream := func() time.Duration {
		t0 := time.Now()
		chunk := len(buf) / threads
		done := make(chan bool, threads)
		for i := 0; i < threads; i++ {
			go func(p []byte) { StreamSum(p); done <- true }(buf[i*chunk : (i+1)*chunk])
		}
		for i := 0; i < threads; i++ {
			<-done
		}
		return time.Since(t0)
	}
	types := []quant.Type{quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K}
	for _, typ := range types {
		if os.Getenv("XT") != "" && !strings.Contains(","+os.Getenv("XT")+",", ","+typ.String()+",") {
			continue
		}
		k, err := Select(OpMatVec, typ)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := 4864, 896
		if cols%k.block != 0 {
			rows, cols = 896, 4864
		}
		w := Weights{Type: typ, Rows: rows, Cols: cols, Data: xrand(typ, rows*cols)}
		var copies []Weights
		for total := 0; total < len(buf); total += len(w.Data) {
			c := w
			c.Data = append([]byte(nil), w.Data...)
			copies = append(copies, c)
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		dst := make([]float32, rows)
		var s Scratch
		bestS := time.Duration(1 << 62)
		best := make([]time.Duration, len(leads))
		for rep := 0; rep < 5; rep++ {
			bestS = min(bestS, stream())
			for li, lead := range leads {
				r4Lead = lead
				t0 := time.Now()
				for _, c := range copies {
					if err := k.Mul(pool, &s, dst, c, x, 1); err != nil {
						t.Fatal(err)
					}
				}
				d := time.Since(t0)
				if rep == 0 || d < best[li] {
					best[li] = d
				}
			}
		}
		sgb := float64(len(buf)) / bestS.Seconds() / 1e9
		line := fmt.Sprintf("%-5s %dx%d threads=%d stream %.1f GB/s:", typ, rows, cols, threads, sgb)
		for li, lead := range leads {
			gb := float64(len(copies)*len(w.Data)) / best[li].Seconds() / 1e9
			line += fmt.Sprintf("  lead %d: %.1f GB/s %3.0f%%", lead, gb, 100*gb/sgb)
		}
		t.Log(line)
		copies = nil
	}
}
