package cuda

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"unsafe"

	"github.com/aprqa/apr/engine/cuda/internal/cu"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/graph"
	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite kernels/grids.cuh")

// TestGridsHeader keeps kernels/grids.cuh equal to engine/quant's grids.
func TestGridsHeader(t *testing.T) {
	want := gridsHeader()
	if *update {
		if err := os.WriteFile("kernels/grids.cuh", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("kernels/grids.cuh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("kernels/grids.cuh differs from engine/quant's grids: go test ./engine/cuda -run TestGridsHeader -update, then make kernels")
	}
}

// TestKernelMacros keeps the host's copies of apr.cu's sizes equal to the
// kernels' macros: the host sizes mv's grids and rows per slot from them.
func TestKernelMacros(t *testing.T) {
	src, err := os.ReadFile("kernels/apr.cu")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"MV_TILE": mvTile, "MV_G": mvMaxG} {
		var got int
		found := false
		for _, line := range strings.Split(string(src), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#define" && f[1] == name {
				if _, err := fmt.Sscanf(f[2], "%d", &got); err != nil {
					t.Fatalf("apr.cu: #define %s %s: %v", name, f[2], err)
				}
				found = true
			}
		}
		if !found || got != want {
			t.Errorf("apr.cu's %s is %d (found %v), the host's %d", name, got, found, want)
		}
	}
}

// TestKernelsCurrent fails when a kernel source changed and kernels.fatbin
// was not rebuilt from it (make kernels on a CUDA machine): the check
// kernelImage makes before the engine loads it. It also fails when the
// fatbin lacks a kernel the engine launches.
func TestKernelsCurrent(t *testing.T) {
	t.Setenv(EnvPTX, "") // the embedded image, not a developer's override
	fat, origin, err := kernelImage()
	if err != nil {
		if sum, _ := kernelFS.ReadFile("kernels.fatbin.sum"); fatbinSourcesSHA256(sum) == NotBuilt {
			t.Skipf("SKIP (not a pass): kernels.fatbin has never been built (no CUDA machine was available when the sources were written); the cuda backend refuses by name until make kernels runs on one")
		}
		t.Fatalf("%v", err)
	}
	if !strings.HasPrefix(origin, "embedded") {
		t.Fatalf("kernelImage loads %q, not the embedded fatbin", origin)
	}
	// The sm_90 code's symbol table names every kernel.
	for _, name := range kernelNames() {
		if !bytes.Contains(fat, []byte("\x00"+name+"\x00")) {
			t.Errorf("kernels.fatbin has no kernel %s", name)
		}
	}
}

// TestSourcesSHA256: an unchanged copy of the sources has the embedded
// sources' sum, and a planted change in apr.cu moves it.
func TestSourcesSHA256(t *testing.T) {
	want, err := SourcesSHA256(kernelFS)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(kernelFS, "kernels/*")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded sources: %v", err)
	}
	copyFS := fstest.MapFS{}
	for _, n := range names {
		b, err := kernelFS.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		copyFS[n] = &fstest.MapFile{Data: b}
	}
	if got, err := SourcesSHA256(copyFS); err != nil || got != want {
		t.Fatalf("a copy of the sources sums to %s (%v), the embedded ones to %s", got, err, want)
	}
	copyFS["kernels/apr.cu"].Data = append(copyFS["kernels/apr.cu"].Data, '\n')
	if got, _ := SourcesSHA256(copyFS); got == want {
		t.Fatalf("a changed apr.cu kept the sources' sha256 %s", want)
	}
	if fatbinSourcesSHA256([]byte(sumHeader+want+"\n")) != want {
		t.Fatal("fatbinSourcesSHA256 does not read the header it defines")
	}
	// build.sh writes that header.
	if b, err := os.ReadFile("kernels/build.sh"); err != nil || !bytes.Contains(b, []byte("'"+sumHeader+"%s\\n'")) {
		t.Fatalf("kernels/build.sh does not write kernels.fatbin.sum as %q followed by the sum (%v)", sumHeader, err)
	}
}

// testBackend is a backend on this machine's GPU; the test is skipped
// (not passed) without one.
func testBackend(t *testing.T) *backend {
	t.Helper()
	d, err := cu.Load()
	if err != nil {
		t.Skipf("SKIP (not a pass): no CUDA device: %v", err)
	}
	ptx, _, err := kernelImage()
	if err != nil {
		t.Fatalf("kernels: %v", err)
	}
	be, _, err := newBackend(d, ptx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.close)
	return be
}

// dequantFixture is one dequant/ file: ggml's blocks q and its own to_float deq.
type dequantFixture struct {
	typ    quant.Type
	q, deq *model.Tensor
	f      *gguf.File
}

func dequantFixtures(t *testing.T) []dequantFixture {
	dir := testutil.Fixtures(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "dequant", "*.gguf"))
	sort.Strings(paths)
	var out []dequantFixture
	for _, p := range paths {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		var fx dequantFixture
		fx.f = f
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			data := f.Data(ti)
			info, err := quant.Lookup(ti.Type)
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := info.RowBytes(int64(ti.Shape[0]))
			mt := &model.Tensor{Name: ti.Name, Type: ti.Type, Shape: append([]int64(nil), ti.Shape...), Data: data, RowBytes: int(rb)}
			switch ti.Name {
			case "q":
				fx.q, fx.typ = mt, ti.Type
			case "deq":
				fx.deq = mt
			}
		}
		if fx.q == nil || fx.deq == nil {
			t.Fatalf("%s: no q/deq tensors", p)
		}
		out = append(out, fx)
	}
	if len(out) == 0 {
		t.Fatal("no dequant fixtures")
	}
	return out
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out
}

// TestActivationFormats: the activation format each weight type's products
// round x to on the device (apr.cu's ActOf, read by k_actfmt) is the one
// the host launches k_round with and the reference's ggml
// numerics use (actFormat, from quant.VecDotType), for every type of the
// kernels.
func TestActivationFormats(t *testing.T) {
	be := testBackend(t)
	n := len(Types()) + 1 // the kernels' APR_TYPES also hold Q8_K
	out := be.Work(1, 2*n).(*buf)
	if err := be.launch("k_actfmt", cu.Dim{X: 1}, cu.Dim{X: 1}, 0, out.p); err != nil {
		t.Fatal(err)
	}
	got := be.readAll(out)
	seen := 0
	for i := 0; i < n; i++ {
		id, f := int(math.Float32bits(got[2*i])), int(math.Float32bits(got[2*i+1]))
		typ := quant.Type(id)
		if typ == quant.Q8_K {
			continue // an activation format: no product takes it
		}
		if !supported(typ) {
			t.Errorf("k_actfmt lists type id %d, which is not a weight type of the kernels", id)
			continue
		}
		seen++
		if want, err := actFormat(typ); err != nil || f != want {
			t.Errorf("%s: the device rounds x to activation format %d, the host and the reference to %d", typ, f, want)
		}
	}
	if seen != len(Types()) {
		t.Errorf("k_actfmt listed %d weight types, the kernels have %d", seen, len(Types()))
	}
}

// TestGetRowsBitExact: every type's device dequantization equals ggml's own
// to_float on the fixture blocks, bit for bit.
func TestGetRowsBitExact(t *testing.T) {
	be := testBackend(t)
	for _, fx := range dequantFixtures(t) {
		t.Run(fx.typ.String(), func(t *testing.T) {
			if !supported(fx.typ) {
				t.Skipf("SKIP (not a pass): %s is no weight type (an activation format); its decoder is checked by TestDecodersOnHost", fx.typ)
			}
			w, err := be.Matrix(fx.q)
			if err != nil {
				t.Fatal(err)
			}
			if err := be.upload(); err != nil {
				t.Fatal(err)
			}
			be.done = false // the next type's matrices upload again
			rows := fx.q.Rows()
			ids := make([]int32, rows)
			for i := range ids {
				ids[i] = int32(rows - 1 - i)
			}
			d := be.Work(rows, fx.q.Cols()).(*buf)
			defer be.Release(d)
			if err := be.GetRows(d, w, ids); err != nil {
				t.Fatal(err)
			}
			got := be.readAll(d)
			want := f32s(fx.deq.Data)
			bad := 0
			for r, id := range ids {
				for c := 0; c < fx.q.Cols(); c++ {
					g, x := got[r*fx.q.Cols()+c], want[int(id)*fx.q.Cols()+c]
					if math.Float32bits(g) != math.Float32bits(x) {
						if bad < 3 {
							t.Errorf("row %d col %d: got %g (%#08x), ggml %g (%#08x)", id, c, g, math.Float32bits(g), x, math.Float32bits(x))
						}
						bad++
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ from ggml's to_float", bad, len(got))
			}
		})
	}
	if be.err != nil {
		t.Fatal(be.err)
	}
}

// TestProducts holds mv, mm (a partial token tile) and mmid to Σ deq(w)·x in
// float64 for every type: |got − want| ≤ 1e-5·Σ|w·x| + 1e-6.
func TestProducts(t *testing.T) {
	be := testBackend(t)
	rng := rand.New(rand.NewSource(1))
	for _, fx := range dequantFixtures(t) {
		t.Run(fx.typ.String(), func(t *testing.T) {
			if !supported(fx.typ) {
				t.Skipf("SKIP (not a pass): %s is no weight type (an activation format); its decoder is checked by TestDecodersOnHost", fx.typ)
			}
			rows, cols := fx.q.Rows(), fx.q.Cols()
			wf := f32s(fx.deq.Data)
			w, err := be.Matrix(fx.q)
			if err != nil {
				t.Fatal(err)
			}
			half := *fx.q
			half.Shape = []int64{int64(cols), int64(rows / 2), 2}
			w3, err := be.Matrix(&half)
			if err != nil {
				t.Fatal(err)
			}
			be.done = false
			if err := be.upload(); err != nil {
				t.Fatal(err)
			}
			for _, m := range []int{1, 11} {
				x := make([]float32, m*cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				xb := be.Work(m, cols).(*buf)
				be.do(func() error { return be.d.HtoD(xb.p, unsafePtr(x), uint64(4*len(x))) })
				d := be.Work(m, rows).(*buf)
				if err := be.MatMul(d, w, xb); err != nil {
					t.Fatal(err)
				}
				got := be.readAll(d)
				check(t, fmt.Sprintf("MatMul m=%d", m), fx.typ, fx.q.Data, fx.q.RowBytes, got, wf, x, rows, cols, m)
				// mmid: slot s = token s/2's product with expert ids[s].
				ids := make([]int32, 2*m)
				for i := range ids {
					ids[i] = int32(rng.Intn(2))
				}
				dd := be.Work(2*m, rows/2).(*buf)
				if err := be.MatMulID(dd, w3, xb, ids, 2); err != nil {
					t.Fatal(err)
				}
				gotID := be.readAll(dd)
				// mmid multiplies x as k_round rounds it, without Q4_1's and
				// Q5_1's correction of the mins (mq_<type> has it, mmid not).
				xr, _ := ggmlActs(t, fx.typ, x, m, cols)
				for s := range ids {
					for r := 0; r < rows/2; r++ {
						want, sa := dot(wf[(int(ids[s])*rows/2+r)*cols:][:cols], xr[(s/2)*cols:][:cols])
						if g := float64(gotID[s*rows/2+r]); !(math.Abs(g-want) <= 1e-5*sa+1e-6) {
							t.Errorf("MatMulID m=%d slot %d expert %d row %d: got %g, want %g", m, s, ids[s], r, g, want)
						}
					}
				}
				be.Release(xb)
				be.Release(d)
				be.Release(dd)
			}
		})
	}
	if be.err != nil {
		t.Fatal(be.err)
	}
}

func dot(w, x []float32) (float64, float64) {
	var s, sa float64
	for i := range w {
		p := float64(w[i]) * float64(x[i])
		s += p
		sa += math.Abs(p)
	}
	return s, sa
}

// ggmlActs is x (m rows of cols values) as products with weights of type
// typ take it in ggml numerics (the engine's: apr.cu's act_round and
// k_round): each row rounded to typ's activation format by
// engine/quant's own quantizers; for Q4_1 and Q5_1 also each row's and
// block's s − Σ x̂ (quant.MinSumCorrections), else nil.
func ggmlActs(t *testing.T, typ quant.Type, x []float32, m, cols int) ([]float32, [][]float64) {
	t.Helper()
	out := make([]float32, len(x))
	var corr [][]float64
	var scratch []byte
	for i := 0; i < m; i++ {
		var err error
		if scratch, err = quant.RoundActivations(typ, x[i*cols:(i+1)*cols], out[i*cols:(i+1)*cols], scratch); err != nil {
			t.Fatal(err)
		}
		c, err := quant.MinSumCorrections(typ, x[i*cols:(i+1)*cols])
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			corr = append(corr, c)
		}
	}
	return out, corr
}

// check holds got (m tokens × rows) to the products of the dequantized
// weights wf (of type typ, raw rows in q, rowBytes each) with x in ggml
// numerics (ggmlActs; Q4_1, Q5_1: plus each block's min times s − Σ x̂),
// summed in float64.
func check(t *testing.T, what string, typ quant.Type, q []byte, rowBytes int, got, wf, x []float32, rows, cols, m int) {
	t.Helper()
	xr, corr := ggmlActs(t, typ, x, m, cols)
	var mins []float32
	if corr != nil {
		mins = make([]float32, len(corr[0]))
	}
	bad := 0
	for i := 0; i < m; i++ {
		for r := 0; r < rows; r++ {
			want, sa := dot(wf[r*cols:(r+1)*cols], xr[i*cols:(i+1)*cols])
			if corr != nil {
				if err := quant.BlockMins(typ, q[r*rowBytes:(r+1)*rowBytes], mins); err != nil {
					t.Fatal(err)
				}
				for b, mb := range mins {
					want += float64(mb) * corr[i][b]
				}
			}
			if g := float64(got[i*rows+r]); !(math.Abs(g-want) <= 1e-5*sa+1e-6) {
				if bad < 3 {
					t.Errorf("%s: token %d row %d: got %g, want %g (Σ|w·x| %g)", what, i, r, g, want, sa)
				}
				bad++
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d products off in all", what, bad, m*rows)
	}
}

// TestWideProducts: the one-token product (mv) on rows wide enough for two
// and four warps per row and for more than one shared-memory tile of x,
// and F16 rows that end in a partial chunk, and the prompt product (mm)
// on 37 tokens of the same rows (split over the chunks where its tiles are
// few), against the dequantized weights in float64 (quantized with
// engine/quant's own quantizers).
func TestWideProducts(t *testing.T) {
	be := testBackend(t)
	rng := rand.New(rand.NewSource(7))
	cases := []struct {
		typ        quant.Type
		rows, cols int
	}{
		{quant.Q8_0, 37, 2048}, {quant.Q8_0, 9, 4096 + 1024}, {quant.Q4_K, 21, 4352}, {quant.Q6_K, 7, 1792},
		{quant.F16, 13, 3100}, {quant.F32, 5, 1600}, {quant.Q4_K, 130, 256}, {quant.Q5_0, 67, 896},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%dx%d", c.typ, c.rows, c.cols), func(t *testing.T) {
			info, err := quant.Lookup(c.typ)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]float32, c.rows*c.cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			rowBytes := c.cols / info.BlockSize * info.TypeSize
			data := make([]byte, c.rows*rowBytes)
			wf := make([]float32, len(src))
			for r := 0; r < c.rows; r++ {
				row := data[r*rowBytes : (r+1)*rowBytes]
				if err := quant.Quantize(c.typ, src[r*c.cols:(r+1)*c.cols], row); err != nil {
					t.Fatal(err)
				}
				if err := quant.Dequantize(c.typ, row, wf[r*c.cols:(r+1)*c.cols]); err != nil {
					t.Fatal(err)
				}
			}
			w, err := be.Matrix(&model.Tensor{Name: "w", Type: c.typ, Shape: []int64{int64(c.cols), int64(c.rows)}, Data: data, RowBytes: rowBytes})
			if err != nil {
				t.Fatal(err)
			}
			be.done = false
			if err := be.upload(); err != nil {
				t.Fatal(err)
			}
			// One token (mv) and a prompt of 37 (mm: tiles, and a split
			// over the chunks where the tiles are few).
			for _, ntok := range []int{1, 37} {
				x := make([]float32, ntok*c.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				xb := be.Work(ntok, c.cols).(*buf)
				be.do(func() error { return be.d.HtoD(xb.p, unsafePtr(x), uint64(4*len(x))) })
				d := be.Work(ntok, c.rows).(*buf)
				if err := be.MatMul(d, w, xb); err != nil {
					t.Fatal(err)
				}
				op := "mv"
				if ntok > 1 {
					op = "mm"
				}
				check(t, op, c.typ, data, rowBytes, be.readAll(d), wf, x, c.rows, c.cols, ntok)
				be.Release(xb)
				be.Release(d)
			}
		})
	}
	if be.err != nil {
		t.Fatal(be.err)
	}
}

// TestProfile: with APR_CUDA_PROFILE=1 every launch is timed and counted
// under its kernel's name, and the graph cache is off.
func TestProfile(t *testing.T) {
	t.Setenv(EnvProfile, "1")
	be := testBackend(t)
	if be.prof == nil || be.graphs != nil {
		t.Fatalf("profiler %v, graphs %v: want the profiler on and the graph cache off", be.prof != nil, be.graphs != nil)
	}
	x := be.Work(3, 64).(*buf)
	be.Zero(x)
	be.Zero(x)
	if be.err != nil {
		t.Fatal(be.err)
	}
	k := be.prof.stats["k_zero"]
	if k == nil || k.launches < 3 || k.ms < 0 {
		t.Fatalf("k_zero: %+v; want 3 launches (Work's and two Zero) timed", k)
	}
	var sb strings.Builder
	be.prof.report(&sb)
	if !strings.Contains(sb.String(), "k_zero") {
		t.Fatalf("report:\n%s", sb.String())
	}
}

// TestAttendKernels: attention over a KV cache of 150 positions, by the
// split kernel (k_attn: a decode row, value heads up to 256; 150 positions
// fill three splits, so the last block combines; a decode row over 8,300
// positions fills 130, more than the combining block's threads), the prompt kernel
// (k_flash1/2/4 by head width, up to 128; 40 rows cross its 16-row tile,
// 150 positions five position tiles, the last partial) and the whole-row kernel
// (k_attend: wider value heads, which no fixture model has), one decode
// row and prompt pieces of 5 and 40 rows, against softmax(q·k·scale)·v in
// float64.
func TestAttendKernels(t *testing.T) {
	be := testBackend(t)
	rng := rand.New(rand.NewSource(11))
	for _, a := range []graph.Attn{{NHead: 4, NKV: 2, HK: 64, HV: 64, Scale: 0.125}, {NHead: 3, NKV: 3, HK: 128, HV: 80, Scale: 0.09}, {NHead: 2, NKV: 1, HK: 32, HV: 32, Scale: 0.2},
		{NHead: 4, NKV: 1, HK: 256, HV: 256, Scale: 0.0625}, {NHead: 2, NKV: 1, HK: 32, HV: 320, Scale: 0.17}} {
		for _, ctx := range []int{150, 8300} {
			if ctx > 150 && a.HV > attnMaxHV {
				continue // k_attend: one block per row, no splits to combine
			}
			testAttend(t, be, rng, a, ctx)
		}
	}
	// The grouped decode kernel (k_attg) for query groups of 7 (qwen2.5's
	// 14 heads over 2) and 8, the short context by the block-per-head one
	// (k_attw) and again by k_attg (APR_CUDA_ATTG=group), and with both
	// off (k_attn takes the decode rows), so that every kernel is checked.
	for _, grouped := range []bool{false, true} {
		be.noAttw = grouped
		for _, a := range []graph.Attn{{NHead: 14, NKV: 2, HK: 64, HV: 64, Scale: 0.125}, {NHead: 16, NKV: 2, HK: 128, HV: 128, Scale: 0.088},
			{NHead: 8, NKV: 2, HK: 256, HV: 256, Scale: 0.0625}} {
			for _, ctx := range []int{150, 8300} {
				if grouped && ctx > awMaxP {
					continue // k_attg either way
				}
				testAttend(t, be, rng, a, ctx)
			}
		}
	}
	be.noAttw = false
	be.noAttg = true
	defer func() { be.noAttg = false }()
	for _, a := range []graph.Attn{{NHead: 4, NKV: 2, HK: 64, HV: 64, Scale: 0.125}, {NHead: 4, NKV: 1, HK: 256, HV: 256, Scale: 0.0625}} {
		testAttend(t, be, rng, a, 8300)
	}
}

// testAttend is one TestAttendKernels case: a cache of ctx positions;
// prompt pieces of 5 and 40 rows only for the short one.
func testAttend(t *testing.T, be *backend, rng *rand.Rand, a graph.Attn, ctx int) {
	kernel := "k_attn"
	if a.HV > attnMaxHV {
		kernel = "k_attend"
	}
	if k, ok := be.attgKernel(1, a, (ctx+255)&^255); ok {
		kernel = k.name
	}
	if k, ok := be.attwKernel(1, a, (ctx+255)&^255); ok {
		kernel = k.name
	}
	t.Run(fmt.Sprintf("heads%d-%d/hv%d/ctx%d/%s", a.NHead, a.NKV, a.HV, ctx, kernel), func(t *testing.T) {
		kv, err := be.NewKV(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		defer be.FreeKV(kv)
		upload := func(rows, cols int) ([]float32, *buf) { return uploadRandom(be, rows, cols, rng.NormFloat64) }
		kd, vd := a.NKV*a.HK, a.NKV*a.HV
		ks, kb := upload(ctx, kd)
		vs, vb := upload(ctx, vd)
		if err := be.Store(kv, kb, vb, 0); err != nil {
			t.Fatal(err)
		}
		// The last n positions are the queries' own (pos0 = ctx − n).
		for _, n := range []int{1, 5, 40} {
			if ctx > 150 && n > 1 {
				break
			}
			q, qb := upload(n, a.NHead*a.HK)
			ob := be.Work(n, a.NHead*a.HV).(*buf)
			pos0 := ctx - n
			if err := be.Attend(ob, qb, kv, pos0); err != nil {
				t.Fatal(err)
			}
			got := be.readAll(ob)
			for r := 0; r < n; r++ {
				for h := 0; h < a.NHead; h++ {
					g := h / (a.NHead / a.NKV)
					np := pos0 + r + 1
					s := make([]float64, np)
					mx := math.Inf(-1)
					for j := range s {
						for c := 0; c < a.HK; c++ {
							s[j] += float64(q[r*a.NHead*a.HK+h*a.HK+c]) * float64(ks[j*kd+g*a.HK+c])
						}
						s[j] *= float64(a.Scale)
						mx = math.Max(mx, s[j])
					}
					sum := 0.0
					for j := range s {
						s[j] = math.Exp(s[j] - mx)
						sum += s[j]
					}
					for c := 0; c < a.HV; c++ {
						want := 0.0
						for j := range s {
							want += s[j] / sum * float64(vs[j*vd+g*a.HV+c])
						}
						if g := float64(got[r*a.NHead*a.HV+h*a.HV+c]); math.Abs(g-want) > 1e-5 {
							t.Fatalf("rows %d: row %d head %d value %d: got %g, want %g", n, r, h, c, g, want)
						}
					}
				}
			}
			be.Release(qb)
			be.Release(ob)
		}
		be.Release(kb)
		be.Release(vb)
		if be.err != nil {
			t.Fatal(be.err)
		}
	})
}

// TestAttendRope: a decode row's rotation of q and k, the store of k and v
// and the grouped attention folded into one launch (k_attgr) give what
// k_rope and k_attg give on their own (APR_CUDA_ATTG=norope), to the bit:
// the output, the rotated q and k rows and the cache's row pos0. Groups of
// 7 with whole heads rotated (neox), of 8 with half of each head rotated
// (adjacent pairs; the rest copied), and IMROPE sections with YaRN mixing;
// pos0 in the first split (one block of the group writes out), the third
// and the 130th (the last block combines).
func TestAttendRope(t *testing.T) {
	be := testBackend(t)
	for _, c := range []struct {
		a graph.Attn
		r graph.Rope
	}{
		{graph.Attn{NHead: 14, NKV: 2, HK: 64, HV: 64, Scale: 0.125}, graph.Rope{Mode: model.RopeNeox, NRot: 64, HeadDim: 64, Base: 1e6, FreqScale: 1, AttnFactor: 1}},
		{graph.Attn{NHead: 16, NKV: 2, HK: 128, HV: 128, Scale: 0.088}, graph.Rope{Mode: model.RopeNorm, NRot: 64, HeadDim: 128, Base: 1e4, FreqScale: 1, AttnFactor: 1}},
		{graph.Attn{NHead: 8, NKV: 2, HK: 64, HV: 32, Scale: 0.1}, graph.Rope{Mode: model.RopeIMRope, NRot: 64, HeadDim: 64, Base: 1e7, FreqScale: 0.5, ExtFactor: 1, AttnFactor: 1,
			BetaFast: 32, BetaSlow: 1, OrigCtx: 4096, Sections: [4]int{11, 11, 10, 0}}},
		{graph.Attn{NHead: 8, NKV: 2, HK: 256, HV: 256, Scale: 0.0625}, graph.Rope{Mode: model.RopeIMRope, NRot: 64, HeadDim: 256, Base: 1e7, FreqScale: 1, AttnFactor: 1,
			Sections: [4]int{11, 11, 10, 0}}},
	} {
		for _, pg := range []struct {
			pos0    int
			grouped bool
		}{{20, false}, {150, false}, {20, true}, {150, true}, {8299, true}} {
			pos0 := pg.pos0
			be.noAttw = pg.grouped
			k, ok := be.attgKernel(1, c.a, (pos0+256)&^255)
			name := k.name
			if !ok {
				t.Fatalf("%+v: no k_attg instance", c.a)
			}
			if w, ok := be.attwKernel(1, c.a, (pos0+256)&^255); ok {
				name = w.name
			} else if !pg.grouped {
				t.Fatalf("%+v at %d: no k_attw instance", c.a, pos0)
			}
			t.Run(fmt.Sprintf("heads%d-%d/rope%d-%d/pos%d/%s", c.a.NHead, c.a.NKV, c.r.Mode, c.r.NRot, pos0, name), func(t *testing.T) {
				var got [2][][]float32
				for i, fold := range []bool{false, true} {
					be.noAttgRope = !fold
					var folded int
					got[i], folded = attendRope(t, be, rand.New(rand.NewSource(int64(pos0))), c.a, &c.r, pos0)
					if want := 2 + i; folded != want {
						t.Fatalf("fold %v: %d ops folded, want %d", fold, folded, want)
					}
				}
				be.noAttgRope = false
				be.noAttw = false
				for j, what := range []string{"out", "q", "k", "the cache's keys", "the cache's values"} {
					for i := range got[0][j] {
						if math.Float32bits(got[0][j][i]) != math.Float32bits(got[1][j][i]) {
							t.Fatalf("%s[%d]: k_rope and k_attg give %g, k_attgr %g", what, i, got[0][j][i], got[1][j][i])
						}
					}
				}
			})
		}
	}
}

// attendRope is one TestAttendRope run: pos0 random cached positions, then
// a decode row's Rope(q), Rope(k), Store and Attend inside one held
// evaluation (so that they may fold). It returns out, q, k and the cache's
// row pos0 (keys, values) afterwards, and how many ops folded.
func attendRope(t *testing.T, be *backend, rng *rand.Rand, a graph.Attn, r *graph.Rope, pos0 int) ([][]float32, int) {
	t.Helper()
	kv, err := be.NewKV(pos0+1, a)
	if err != nil {
		t.Fatal(err)
	}
	defer be.FreeKV(kv)
	kd, vd := a.NKV*a.HK, a.NKV*a.HV
	_, kb := uploadRandom(be, pos0, kd, rng.NormFloat64)
	_, vb := uploadRandom(be, pos0, vd, rng.NormFloat64)
	_, qb := uploadRandom(be, 1, a.NHead*a.HK, rng.NormFloat64)
	_, k1 := uploadRandom(be, 1, kd, rng.NormFloat64)
	_, v1 := uploadRandom(be, 1, vd, rng.NormFloat64)
	ob := be.Work(1, a.NHead*a.HV).(*buf)
	bufs := []*buf{kb, vb, qb, k1, v1, ob}
	defer func() {
		for _, b := range bufs {
			be.Release(b)
		}
	}()
	if err := be.Store(kv, kb, vb, 0); err != nil {
		t.Fatal(err)
	}
	release, err := be.d.Hold()
	if err != nil {
		t.Fatal(err)
	}
	fused := be.fused
	be.held = true
	be.Rope(qb, pos0, r)
	be.Rope(k1, pos0, r)
	err = be.Store(kv, k1, v1, pos0)
	if err == nil {
		err = be.Attend(ob, qb, kv, pos0)
	}
	if err == nil {
		err = be.do(be.flush)
	}
	be.held = false
	release()
	if err != nil {
		t.Fatal(err)
	}
	c := asKV(kv)
	kc := &buf{p: c.k.p + cu.Ptr(4*pos0*kd), rows: 1, cols: kd, stride: kd}
	vc := &buf{p: c.v.p + cu.Ptr(4*pos0*vd), rows: 1, cols: vd, stride: vd}
	out := [][]float32{be.readAll(ob), be.readAll(qb), be.readAll(k1), be.readAll(kc), be.readAll(vc)}
	if be.err != nil {
		t.Fatal(be.err)
	}
	return out, be.fused - fused
}

// TestDeltaRuleKernels: the gated delta rule over 7 tokens from a non-zero
// state, by the register kernels (k_deltaw2 and 4; 20 value rows leave the
// last block's rows partly empty, 48 and 100 key values their lanes'
// columns) and by the
// shared-memory one (k_delta, which key heads over 256 take), against the
// rule in float64: the outputs and the final state.
func TestDeltaRuleKernels(t *testing.T) {
	be := testBackend(t)
	const n, nK, nV, hv = 7, 2, 4, 20
	for _, c := range []struct {
		hk, maxHK int
	}{{48, 256}, {100, 256}, {48, 0}} {
		hk := c.hk
		t.Run(fmt.Sprintf("hk%d/%s", hk, map[bool]string{true: deltaKernel(hk), false: "k_delta"}[hk <= c.maxHK]), func(t *testing.T) {
			defer func(old int) { deltaMaxHK = old }(deltaMaxHK)
			deltaMaxHK = c.maxHK
			rng := rand.New(rand.NewSource(5))
			norm := func() float64 { return rng.NormFloat64() * 0.3 }
			q, qb := uploadRandom(be, n, nK*hk, norm)
			k, kb := uploadRandom(be, n, nK*hk, norm)
			v, vb := uploadRandom(be, n, nV*hv, rng.NormFloat64)
			g, gb := uploadRandom(be, n, nV, func() float64 { return -rng.Float64() })
			beta, bb := uploadRandom(be, n, nV, rng.Float64)
			s0, sb := uploadRandom(be, nV, hv*hk, norm)
			ob := be.Work(n, nV*hv).(*buf)
			be.DeltaRule(ob, qb, kb, vb, gb, bb, sb, hk)
			got, state := be.readAll(ob), be.readAll(sb)
			if be.err != nil {
				t.Fatal(be.err)
			}
			S := make([]float64, len(s0))
			for i, x := range s0 {
				S[i] = float64(x)
			}
			bad := 0
			check := func(what string, got float32, want float64) {
				if math.Abs(float64(got)-want) > 1e-4*(1+math.Abs(want)) {
					if bad++; bad <= 5 {
						t.Errorf("%s: got %g, want %g", what, got, want)
					}
				}
			}
			for tok := 0; tok < n; tok++ {
				for j := 0; j < nV; j++ {
					kh := j % nK
					decay, b := math.Exp(float64(g[tok*nV+j])), float64(beta[tok*nV+j])
					for r := 0; r < hv; r++ {
						row := S[(j*hv+r)*hk:][:hk]
						sk := 0.0
						for c := range row {
							row[c] *= decay
							sk += row[c] * float64(k[tok*nK*hk+kh*hk+c])
						}
						d := b * (float64(v[tok*nV*hv+j*hv+r]) - sk)
						o := 0.0
						for c := range row {
							row[c] += d * float64(k[tok*nK*hk+kh*hk+c])
							o += row[c] * float64(q[tok*nK*hk+kh*hk+c])
						}
						check(fmt.Sprintf("token %d head %d row %d", tok, j, r), got[tok*nV*hv+j*hv+r], o/math.Sqrt(float64(hk)))
					}
				}
			}
			for i, want := range S {
				check(fmt.Sprintf("state %d", i), state[i], want)
			}
		})
	}
}

// uploadRandom fills a rows × cols work buffer with values drawn from f and
// returns them beside it.
func uploadRandom(be *backend, rows, cols int, f func() float64) ([]float32, *buf) {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(f())
	}
	b := be.Work(rows, cols).(*buf)
	be.do(func() error { return be.d.HtoD(b.p, unsafePtr(x), uint64(4*len(x))) })
	return x, b
}

// TestSwitchesRefused: a developer switch set to a value it does not take
// is refused by New, naming the switch, before any device is touched; the
// values it takes pass.
func TestSwitchesRefused(t *testing.T) {
	for _, sw := range switches {
		for _, v := range sw.vals {
			t.Setenv(sw.env, v)
			if err := checkSwitches(); err != nil {
				t.Errorf("%s=%s: %v", sw.env, v, err)
			}
		}
		t.Setenv(sw.env, "")
	}
	t.Setenv(EnvAttg, "nrope")
	_, err := New(nil, nil, Options{})
	if err == nil || !strings.Contains(err.Error(), `APR_CUDA_ATTG="nrope" is not one of 0, 1, norope, group`) {
		t.Fatalf("New with APR_CUDA_ATTG=nrope: %v, want it refused by name", err)
	}
}

// TestMvOneWave: a one-token product takes the fewest rows per slot whose
// slots the device runs in one wave, and a grid of at most one wave, on
// qwen2.5-0.5b's and qwen3.5-0.8b's decode shapes (an H100 or H200: 132
// multiprocessors, 4 blocks of mv_<type> resident on each).
func TestMvOneWave(t *testing.T) {
	const f = cu.Func(1)
	be := &backend{sms: 132, resident: map[cu.Func]int{f: 4}}
	for _, c := range []struct {
		name      string
		rows, rpb int
		g, grid   int
	}{
		{"q25 q/k/v", 896 + 128 + 128, 4, 1, 288},
		{"q25 o", 896, 4, 1, 224},
		{"q25 gate/up (paired)", 4864, 4, 4, 304}, // G 2: 608 slots, two waves
		{"q25 down", 896, 2, 1, 448},
		{"q25 output", 151936, 4, 4, 528},
		{"q35 gate/up (paired)", 3584, 4, 2, 448},
		{"q35 DeltaNet in-projection", 6144 + 2048 + 16 + 16, 4, 4, 514},
	} {
		g := mvRowsPerSlot(be.wave(f), c.rows, c.rpb)
		slots := (c.rows + c.rpb*g - 1) / (c.rpb * g)
		if grid := mvGrid(be.wave(f), slots, 28); g != c.g || grid != c.grid {
			t.Errorf("%s: G %d and %d blocks, want G %d and %d", c.name, g, grid, c.g, c.grid)
		}
	}
	// A kernel that holds more blocks keeps smaller slots: at 5 per
	// multiprocessor (660 a wave) the gate/up's 608 slots of G 2 fit.
	be.resident[f] = 5
	if g := mvRowsPerSlot(be.wave(f), 4864, 4); g != 2 {
		t.Errorf("q25 gate/up at 5 resident blocks: G %d, want 2", g)
	}
	// x of more than one tile: one block per slot, whatever the wave.
	if grid := mvGrid(be.wave(f), 5000, mvTile+1); grid != 5000 {
		t.Errorf("x of two tiles: %d blocks, want 5000", grid)
	}
}

// TestMvRowsPerSlotBitIdentical: a one-token product gives the same bits
// whatever rows per slot (G) and grid the device's wave leads to (1, 2 or
// 4 rows per slot; a grid of one block that takes every slot, and one
// block per slot), for every weight type (each dequant fixture's rows
// eight times over): the wave may move them, results must not move with
// it.
func TestMvRowsPerSlotBitIdentical(t *testing.T) {
	be := testBackend(t)
	rng := rand.New(rand.NewSource(3))
	type run struct {
		m    *matrix
		x, d *buf
		rows int
	}
	var runs []run
	var types []quant.Type
	for _, fx := range dequantFixtures(t) {
		if !supported(fx.typ) {
			continue
		}
		// The fixture's rows eight times over: enough slots for G 4.
		q := *fx.q
		q.Shape = []int64{int64(fx.q.Cols()), int64(8 * fx.q.Rows())}
		q.Data = bytes.Repeat(fx.q.Data[:fx.q.Rows()*fx.q.RowBytes], 8)
		w, err := be.Matrix(&q)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := q.Rows(), q.Cols()
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		xb := be.Work(1, cols).(*buf)
		be.do(func() error { return be.d.HtoD(xb.p, unsafePtr(x), uint64(4*len(x))) })
		runs = append(runs, run{w.(*matrix), xb, be.Work(1, rows).(*buf), rows})
		types = append(types, fx.typ)
	}
	be.done = false
	if err := be.upload(); err != nil {
		t.Fatal(err)
	}
	sms, resident := be.sms, maps.Clone(be.resident)
	t.Cleanup(func() { be.sms, be.resident = sms, resident })
	be.sms = 1
	tried := map[int]bool{}
	for i, r := range runs {
		rpb := 128 / mvThreads((r.m.cols+31)/32)
		slots := func(g int) int { return (r.rows + rpb*g - 1) / (rpb * g) }
		var want []float32
		// Waves: every slot in one block's turn (G 4, one block), G 2's
		// slots exactly, G 1's (one block per slot).
		for _, wave := range []int{1, slots(2), slots(1)} {
			be.resident[r.m.mv] = wave
			g := mvRowsPerSlot(be.wave(r.m.mv), r.rows, rpb)
			tried[g] = true
			if err := be.MatMul(r.d, r.m, r.x); err != nil {
				t.Fatal(err)
			}
			got := be.readAll(r.d)
			if want == nil {
				want = got
				continue
			}
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("%s: row %d at G %d (a wave of %d) is %g, at G 4 in one block %g", types[i], j, g, wave, got[j], want[j])
					break
				}
			}
		}
	}
	if !tried[1] || !tried[2] || !tried[4] {
		t.Errorf("rows per slot tried: %v, want 1, 2 and 4", tried)
	}
}

// TestZeroResidentRefused: a device on which a one-token product kernel
// cannot hold one block of 128 threads is refused at load, naming the
// kernel, never run as if one fitted. Run by TestEmulated on an emulator
// that answers 0 (APR_CUDA_EMU_RESIDENT=0).
func TestZeroResidentRefused(t *testing.T) {
	if os.Getenv("APR_CUDA_EMU_RESIDENT") != "0" {
		t.Skip("SKIP (not a pass): run by TestEmulated only")
	}
	d, err := cu.Load()
	if err != nil {
		t.Fatal(err)
	}
	ptx, _, err := kernelImage()
	if err != nil {
		t.Fatalf("kernels: %v", err)
	}
	be, _, err := newBackend(d, ptx, "test", nil)
	if err == nil {
		be.close()
		t.Fatal("the load took a device that holds no block of mv_<type>")
	}
	if !strings.Contains(err.Error(), "cannot run a block of 128 threads") || !strings.Contains(err.Error(), "mv_") {
		t.Fatalf("refused with %q, want the kernel named and why", err)
	}
}

// TestRoundOnce: a prompt's products over one x (MatMuls: q, k and v;
// gate and up) round x once for each run of matrices that round it alike
// (sameRounding: the same activation format, kernel family and width),
// and give results bit-identical to each product on its own; with
// APR_CUDA_FUSE=0 every product rounds x itself.
func TestRoundOnce(t *testing.T) {
	be := testBackend(t)
	rng := rand.New(rand.NewSource(4))
	byCols := map[int][]*matrix{}
	for _, w := range uploadFixtures(t, be) {
		// Each matrix twice in a row: a run of two that round alike.
		byCols[w.cols] = append(byCols[w.cols], w, w)
	}
	defer func(old bool) { be.noFuse = old }(be.noFuse)
	tried := 0
	for cols, ms := range byCols {
		const m = 11
		x := make([]float32, m*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		xb := be.Work(m, cols).(*buf)
		be.do(func() error { return be.d.HtoD(xb.p, unsafePtr(x), uint64(4*len(x))) })
		var want [][]float32
		for _, w := range ms {
			d := be.Work(m, w.rows).(*buf)
			if err := be.MatMul(d, w, xb); err != nil {
				t.Fatal(err)
			}
			want = append(want, be.readAll(d))
			be.Release(d)
		}
		for _, noFuse := range []bool{false, true} {
			be.noFuse = noFuse
			ds := make([]graph.Buf, len(ms))
			ws := make([]graph.Weight, len(ms))
			wantAgain := 0
			for i, w := range ms {
				ds[i], ws[i] = be.Work(m, w.rows), w
				if i > 0 && !noFuse && be.sameRounding(ms[i-1], w) {
					wantAgain++
				}
			}
			before := be.roundedAgain
			if err := be.MatMuls(xb, ds, ws); err != nil {
				t.Fatal(err)
			}
			if got := be.roundedAgain - before; got != wantAgain || (!noFuse && got < len(ms)/2) {
				t.Errorf("cols %d, fuse off %v: %d products took the x rounded before them, want %d", cols, noFuse, got, wantAgain)
			}
			for i := range ds {
				got := be.readAll(ds[i].(*buf))
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("cols %d, fuse off %v: product %d (%s) value %d is %g in MatMuls, %g alone", cols, noFuse, i, ms[i].name, j, got[j], want[i][j])
					}
				}
				be.Release(ds[i].(*buf))
			}
			tried++
		}
		be.Release(xb)
	}
	if be.err != nil {
		t.Fatal(be.err)
	}
	if tried == 0 {
		t.Fatal("no products tried")
	}
}

// TestUpload: the weights reach the device byte for byte through copyIn's
// pinned buffers, with buffers so small (4,099 bytes) that pieces span
// several fills and fills hold several pieces, and at the full size. Run
// again by TestEmulated on an emulator that pins nothing over 64 KiB
// (APR_CUDA_EMU_PIN_MAX): there the full-size copy is from pageable memory,
// and says so.
func TestUpload(t *testing.T) {
	pinMax, _ := strconv.Atoi(os.Getenv("APR_CUDA_EMU_PIN_MAX"))
	for _, stage := range []int{4099, uploadStage} {
		paged := pinMax > 0 && stage > pinMax
		t.Run(fmt.Sprintf("stage%d", stage), func(t *testing.T) {
			defer func(old int) { uploadStage = old }(uploadStage)
			uploadStage = stage
			be := testBackend(t)
			ms := uploadFixtures(t, be)
			if be.uploadPaged != paged {
				t.Fatalf("copied from pageable memory: %v, want %v", be.uploadPaged, paged)
			}
			total := 0
			for _, m := range ms {
				got := make([]byte, len(m.t.Data))
				if err := be.do(func() error { return be.d.DtoH(unsafe.Pointer(unsafe.SliceData(got)), m.p, uint64(len(got))) }); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, m.t.Data) {
					t.Fatalf("%s (%d bytes): the device's copy differs", m.t.Name, len(got))
				}
				total += len(got)
			}
			if total <= 2*stage && stage < 1<<20 {
				t.Fatalf("%d bytes uploaded through buffers of %d: fewer than three fills", total, stage)
			}
		})
	}
}

// uploadFixtures prepares every dequant fixture of a weight type as a
// matrix of be and uploads them.
func uploadFixtures(t *testing.T, be *backend) []*matrix {
	t.Helper()
	var ms []*matrix
	for _, fx := range dequantFixtures(t) {
		if !supported(fx.typ) {
			continue
		}
		w, err := be.Matrix(fx.q)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, w.(*matrix))
	}
	be.done = false
	if err := be.upload(); err != nil {
		t.Fatal(err)
	}
	return ms
}
