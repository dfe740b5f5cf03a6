package kern

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// Op is what a kernel computes.
type Op string

// The kernel operations.
const (
	// OpMatVec is one activation row against every weight row (decode).
	OpMatVec Op = "matvec"
	// OpMatMul is many activation rows against every weight row, each
	// weight block reused across activation rows (prefill).
	OpMatMul Op = "matmul"
)

// ISA is the instruction set a kernel is written for.
type ISA string

// The instruction sets, from the most general to the most specific.
const (
	ISAGo         ISA = "go"         // portable Go, every platform
	ISAAVX2       ISA = "avx2"       // amd64 AVX2 + FMA + F16C
	ISAAVX512     ISA = "avx512"     // amd64 AVX-512 F/BW/VL
	ISAAVX512VNNI ISA = "avx512vnni" // amd64 AVX-512 with VNNI (VPDPBUSD)
	// ISAAVX512VNNI16 is AVX-512 VNNI with packed weights, sixteen rows per
	// register (r16.go): held to the contract's bound, not to ggml's order.
	ISAAVX512VNNI16 ISA = "avx512vnni16"
	// ISAAVX2R16 is AVX2 (+ FMA + F16C) on the avx512vnni16 kernels'
	// packed weights (r16avx2_amd64.go): their float32 chains, the integer
	// products through VPMADDUBSW/VPMADDWD. It ranks above the unpacked
	// AVX-512 keys (faster where both run) and below avx512vnni16. F32, F16
	// and BF16 are there too, on the avx512r16 kernels' packing and chains
	// (r16f.go), eight rows per 256-bit register.
	ISAAVX2R16 ISA = "avx2r16"
	// ISAAVX512R16 is AVX-512F on packed float weights (r16f.go), sixteen
	// rows per register: held to the contract's bound, not to ggml's order.
	ISAAVX512R16 ISA = "avx512r16"
	// ISAAVX512BF16 is AVX512-BF16 (VDPBF16PS) on BF16 weights packed in
	// pairs (r16f.go): held to the contract's bound. It ranks below
	// avx512r16, which Select prefers wherever both run: on the Xeon (Sapphire
	// Rapids flags) this was measured on, its prefill kernel ran at 102
	// GFLOP/s against avx512r16's 152 on BF16 (BenchmarkR16FHot), VDPBF16PS
	// taking about 1.7 cycles where two FMAs take one.
	ISAAVX512BF16 ISA = "avx512bf16"
)

// isaRank orders instruction sets for Select: higher is preferred.
var isaRank = map[ISA]int{ISAGo: 0, ISAAVX2: 1, ISAAVX512: 2, ISAAVX512VNNI: 3, ISAAVX2R16: 4, ISAAVX512VNNI16: 5, ISAAVX512R16: 5, ISAAVX512BF16: 4}

// Backend is the backend name in every key of this package.
const Backend = "cpu"

// Key names one kernel: operation, weight type, backend, instruction set.
type Key struct {
	Op      Op
	Type    quant.Type
	Backend string
	ISA     ISA
}

// Contract returns the key's contract id, e.g. "kernel.matvec.Q4_K.cpu.avx2".
func (k Key) Contract() string {
	return fmt.Sprintf("kernel.%s.%s.%s.%s", k.Op, k.Type, k.Backend, k.ISA)
}

func (k Key) String() string { return k.Contract() }

// Kernel is one registered kernel: a weight type's dot product on one
// instruction set, with the activation format it consumes.
type Kernel struct {
	Key      Key
	Contract string
	// Act is the type the activation row is converted to before the dot
	// product (ggml's vec_dot_type): Q8_0, Q8_1, Q8_K, F16, BF16 or F32.
	Act quant.Type

	block     int // weight values per block
	wBytes    int // bytes per weight block
	actBlock  int // activation values per block
	aBytes    int // bytes per activation block
	convert   func(x []float32, dst []byte)
	dot       dotFunc
	dot4      dot4Func   // one weight row against four activation rows; nil: four dot calls
	dot8      dot4Func   // the same against eight rows (dot4Func's contract with r = 0..7); may be nil
	rows4     rowsFunc   // four weight rows against one activation row (decode); may be nil
	tile8     tileFunc   // one weight row against eight activation rows with float32 scales; may be nil
	tile8r    tileRFunc  // tile8 on activations repacked by repackQ8Group (preferred over tile8); may be nil
	corrBias  int        // tile8r's bias: the corrections bias·Σ₄a it subtracts (0: none)
	tileF     tileFFunc  // float types: four weight rows against twelve expanded activation rows; may be nil
	expand    expandFunc // tileF's converter of weight and activation rows to float32
	ftail     dotFunc    // tileF's dot of the last n mod 8 values, as the eight-row kernel adds it
	pack      packFunc   // packed kernels (r16.go): the weights' packing; nil: the kernel reads ggml's layout
	r16x8     r16x8Func  // packed: sixteen weight rows by eight activation rows
	r16x1     r16x1Func  // packed: sixteen weight rows by one activation row
	r16       r16Format  // packed: the block layout
	r16k4     r16kFunc   // packed on Q8_K: sixteen weight rows by four activation rows
	r16k1     r16kFunc   // packed on Q8_K: sixteen weight rows by one activation row
	r16f      []r16fFunc // packed floats (r16f.go): 32 weight rows by 1..r16fActs activation rows
	r16fPairs bool       // r16f takes BF16 pairs (packBF16PairR16, the activation rows as converted)
}

// dotFunc returns the dot product of one weight row w with one activation
// row a, n values each. n is a multiple of the weight block size and the
// lengths of w and a match n; kernels do not check.
type dotFunc func(n int, w, a []byte) float32

// dot4Func writes to out[r·ostride] the dot product of the weight row w
// with the activation row a[r·stride:], for r = 0..3. len(out) must exceed
// 3·ostride; kernels do not check.
type dot4Func func(n int, w, a []byte, stride int, out []float32, ostride int)

// rowsFunc writes to out[j] the dot product of the weight row
// w[j·wstride:] with the activation row a, for j = 0..3: four weight rows
// against one activation row, so that each activation block is loaded once
// for four rows and the four rows' accumulator chains overlap. Each row's
// float32 operations are exactly those dot performs for it. len(out) ≥ 4.
type rowsFunc func(n int, w []byte, wstride int, a []byte, out []float32)

// tileFunc writes to out[r·ostride] the dot product of the weight row w with
// the activation row a[r·stride:], for r = 0..7, like dot4Func, reading the
// activation block scales as float32 from sc, transposed: sc[8·b + r] is the
// scale of block b of row r (see actScales). Each row's float32 operations
// are exactly those dot performs for it.
type tileFunc func(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)

// tileRFunc is tileFunc on one group of eight activation rows repacked for
// the tile kernels: Q8_0 rows by repackQ8Go (block b of row r has its
// quants at aq[256b + 32r] and, for kernels with a corrBias, the int32
// lanes corrBias·Σ₄a at corr[256b + 32r]; sc as for tileFunc), Q8_K rows
// by repackQ8KGroup (everything in aq; corr and sc unused). Each row's
// float32 operations are exactly those dot performs for it.
//
// It runs rows weight rows, row j at w[j·wstride:] into out[j + r·ostride]
// (one call per group of eight activation rows and task, not per weight
// row). Their blocks may be passed in consecutive pieces (n values each, the
// slices starting at the piece's first block), so that a piece of the eight
// activation rows stays in L1 while the task's weight rows pass over it:
// acc[j·tileAccFloats:] carries row j's accumulators from one piece to the
// next. flags&tileFirst starts them at zero (else they are read from acc),
// flags&tileLast reduces them into out (else they are written to acc). A row
// in pieces gets exactly the operations of the row in one call.
type tileRFunc func(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)

// tileRFunc flags and accumulator state size.
const (
	tileFirst     = 1
	tileLast      = 2
	tileAccFloats = 96 // eight 8-lane accumulators, then four 8-lane min accumulators (Q4_K)
)

// Entry is one line of the registry listing.
type Entry struct {
	Key      Key
	Contract string
	Act      string // activation format
	Runnable bool   // this machine has the instruction set
}

var (
	regMu sync.RWMutex
	reg   = map[Key]*Kernel{}
)

// actFormat describes an activation type: block size, block bytes and its
// converter.
type actFormat struct {
	block, bytes int
	convert      func([]float32, []byte)
}

var actFormats = map[quant.Type]actFormat{
	quant.F32:  {1, 4, ConvertF32},
	quant.F16:  {1, 2, ConvertF16},
	quant.BF16: {1, 2, ConvertBF16},
	quant.Q8_0: {32, q80Bytes, QuantizeQ8_0},
	quant.Q8_1: {32, q81Bytes, QuantizeQ8_1},
	quant.Q8_K: {256, q8KBytes, QuantizeQ8_K},
}

// register adds the matvec and matmul kernels of weight type t on isa.
// Registering a key twice is a programmer error.
func register(t quant.Type, isa ISA, act quant.Type, dot dotFunc, dot4 dot4Func) {
	info, err := quant.Lookup(t)
	if err != nil {
		panic("kern: register: " + err.Error())
	}
	af, ok := actFormats[act]
	if !ok {
		panic("kern: register: no activation format " + act.String())
	}
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k := Key{Op: op, Type: t, Backend: Backend, ISA: isa}
		if _, dup := reg[k]; dup {
			panic("kern: register: duplicate " + k.Contract())
		}
		reg[k] = &Kernel{
			Key: k, Contract: k.Contract(), Act: act,
			block: info.BlockSize, wBytes: info.TypeSize,
			actBlock: af.block, aBytes: af.bytes, convert: af.convert,
			dot: dot, dot4: dot4,
		}
	}
}

// registerDot8 adds an eight-row kernel to the kernels of (t, isa), which
// must be registered already. Like dot4, it must give each row exactly what
// dot gives it.
func registerDot8(t quant.Type, isa ISA, dot8 dot4Func) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k, ok := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		if !ok {
			panic("kern: registerDot8: no kernel for " + t.String() + " on " + string(isa))
		}
		k.dot8 = dot8
	}
}

// registerRows4 adds a four-weight-row matvec kernel to the kernels of
// (t, isa), which must be registered already.
func registerRows4(t quant.Type, isa ISA, rows4 rowsFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k, ok := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		if !ok {
			panic("kern: registerRows4: no kernel for " + t.String() + " on " + string(isa))
		}
		k.rows4 = rows4
	}
}

// registerTile8 adds an eight-activation-row kernel with float32 scales to
// the kernels of (t, isa), which must be registered already.
func registerTile8(t quant.Type, isa ISA, tile8 tileFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k, ok := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		if !ok {
			panic("kern: registerTile8: no kernel for " + t.String() + " on " + string(isa))
		}
		k.tile8 = tile8
	}
}

// registerTile8R adds an eight-activation-row kernel on repacked Q8_0 or
// Q8_K activations (bias: the corrections it reads, 0, 8 or 16) to the kernels
// of (t, isa), which must be registered already.
func registerTile8R(t quant.Type, isa ISA, tile8r tileRFunc, bias int) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k, ok := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		if !ok || (k.Act != quant.Q8_0 && k.Act != quant.Q8_K) || (bias != 0 && k.Act != quant.Q8_0) {
			panic("kern: registerTile8R: no Q8_0- or Q8_K-activation kernel for " + t.String() + " on " + string(isa))
		}
		k.tile8r, k.corrBias = tile8r, bias
	}
}

// registerTileF adds a float tile kernel, with the converter of its weight
// and activation type to float32 and the dot of a row's last n mod 8 values,
// to the kernels of (t, isa), which must be registered already.
func registerTileF(t quant.Type, isa ISA, tile tileFFunc, expand expandFunc, tail dotFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, op := range []Op{OpMatVec, OpMatMul} {
		k, ok := reg[Key{Op: op, Type: t, Backend: Backend, ISA: isa}]
		if !ok || k.Act != t || (t != quant.F32 && t != quant.F16 && t != quant.BF16) {
			panic("kern: registerTileF: no float kernel for " + t.String() + " on " + string(isa))
		}
		k.tileF, k.expand, k.ftail = tile, expand, tail
	}
}

// Runnable reports whether this machine can execute code for isa.
func Runnable(isa ISA) bool { return cpuHas(isa) }

// List returns every registered kernel, sorted by operation, weight type id
// and instruction set, with whether this machine can run it: the listing
// behind `apr kernels`.
func List() []Entry {
	regMu.RLock()
	out := make([]Entry, 0, len(reg))
	for k, kn := range reg {
		out = append(out, Entry{Key: k, Contract: kn.Contract, Act: kn.Act.String(), Runnable: cpuHas(k.ISA)})
	}
	regMu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key, out[j].Key
		if a.Op != b.Op {
			return a.Op > b.Op // matvec before matmul
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return isaRank[a.ISA] < isaRank[b.ISA]
	})
	return out
}

// Lookup returns the kernel registered under key. A key that is not
// registered, or whose instruction set this machine lacks, is refused by its
// contract id; Lookup never substitutes another kernel.
func Lookup(key Key) (*Kernel, error) {
	regMu.RLock()
	k, ok := reg[key]
	regMu.RUnlock()
	if !ok {
		return nil, refuse.New(key.Contract(), "no kernel is registered for %s on %s/%s (this build: %s)", key.Type, key.Backend, key.ISA, buildISAs())
	}
	if !cpuHas(key.ISA) {
		return nil, refuse.New(key.Contract(), "this CPU lacks the %s instruction set", key.ISA)
	}
	return k, nil
}

// Select returns the kernel for (op, t) on the most specific instruction set
// this machine runs that has one registered. It is refused when the weight
// type has no kernel at all. The choice is visible in Kernel.Key.ISA, and
// callers report it.
func Select(op Op, t quant.Type) (*Kernel, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	var best *Kernel
	for k, kn := range reg {
		if k.Op != op || k.Type != t || !cpuHas(k.ISA) {
			continue
		}
		if best == nil || isaRank[k.ISA] > isaRank[best.Key.ISA] {
			best = kn
		}
	}
	if best == nil {
		key := Key{Op: op, Type: t, Backend: Backend, ISA: ISAGo}
		return nil, refuse.New(fmt.Sprintf("kernel.%s.%s.%s", op, t, Backend), "no %s kernel for weight type %s (%s)", op, t, key.Contract())
	}
	return best, nil
}

// AVX2ISAs are the instruction sets a CPU with AVX2 (+ FMA + F16C) but no
// AVX-512 runs (Haswell to Zen 3): SelectOn with them is Select as on such
// a CPU, the AVX-512 kernels masked off, so that a machine with AVX-512
// can run and test the kernels an AVX2-only one would choose.
var AVX2ISAs = []ISA{ISAGo, ISAAVX2, ISAAVX2R16}

// SelectOn is Select among the instruction sets isas (nil: every one) that
// this CPU runs, without the packed kernels (Kernel.Packs) when exact: the
// kernels in ggml's order of float32 operations, bit for bit llama.cpp's
// vec_dot on this machine where the listing says so, for bisecting a
// difference against llama.cpp. An instruction set of isas this CPU lacks
// is refused by name, never replaced by another.
func SelectOn(op Op, t quant.Type, isas []ISA, exact bool) (*Kernel, error) {
	for _, isa := range isas {
		if !cpuHas(isa) {
			return nil, refuse.New(fmt.Sprintf("kernel.%s.%s.%s.%s", op, t, Backend, isa), "this CPU lacks the %s instruction set", isa)
		}
	}
	regMu.RLock()
	defer regMu.RUnlock()
	var best *Kernel
	for k, kn := range reg {
		if k.Op != op || k.Type != t || !cpuHas(k.ISA) || (exact && kn.pack != nil) || (isas != nil && !slices.Contains(isas, k.ISA)) {
			continue
		}
		if best == nil || isaRank[k.ISA] > isaRank[best.Key.ISA] {
			best = kn
		}
	}
	if best == nil {
		what := "no"
		if exact {
			what = "no unpacked"
		}
		return nil, refuse.New(fmt.Sprintf("kernel.%s.%s.%s", op, t, Backend), "%s %s kernel for weight type %s on %v", what, op, t, isas)
	}
	return best, nil
}

// buildISAs names the instruction sets this build registered kernels for.
func buildISAs() string {
	seen := map[ISA]bool{}
	for k := range reg {
		seen[k.ISA] = true
	}
	var s []string
	for isa := range seen {
		s = append(s, string(isa))
	}
	sort.Slice(s, func(i, j int) bool { return isaRank[ISA(s[i])] < isaRank[ISA(s[j])] })
	return fmt.Sprint(s)
}

func init() {
	for _, g := range goKernels {
		register(g.t, ISAGo, g.act, g.dot, nil)
	}
}

// goKernels are the portable kernels, one per weight type, with the
// activation type ggml pairs with it.
var goKernels = []struct {
	t, act quant.Type
	dot    dotFunc
}{
	{quant.F32, quant.F32, dotF32Go},
	{quant.F16, quant.F16, dotF16Go},
	{quant.BF16, quant.BF16, dotBF16Go},
	{quant.Q4_0, quant.Q8_0, dotQ4_0Go},
	{quant.Q4_1, quant.Q8_1, dotQ4_1Go},
	{quant.Q5_0, quant.Q8_0, dotQ5_0Go},
	{quant.Q5_1, quant.Q8_1, dotQ5_1Go},
	{quant.Q8_0, quant.Q8_0, dotQ8_0Go},
	{quant.MXFP4, quant.Q8_0, dotMXFP4Go},
	{quant.NVFP4, quant.Q8_0, dotNVFP4Go},
	{quant.IQ4_NL, quant.Q8_0, dotIQ4NLGo},
	{quant.Q1_0, quant.Q8_0, dotQ1_0Go},
	{quant.Q2_0, quant.Q8_0, dotQ2_0Go},
	{quant.Q2_K, quant.Q8_K, dotQ2_KGo},
	{quant.Q3_K, quant.Q8_K, dotQ3_KGo},
	{quant.Q4_K, quant.Q8_K, dotQ4_KGo},
	{quant.Q5_K, quant.Q8_K, dotQ5_KGo},
	{quant.Q6_K, quant.Q8_K, dotQ6_KGo},
	{quant.IQ4_XS, quant.Q8_K, dotIQ4XSGo},
	{quant.TQ1_0, quant.Q8_K, dotTQ1_0Go},
	{quant.TQ2_0, quant.Q8_K, dotTQ2_0Go},
	{quant.IQ2_XXS, quant.Q8_K, dotIQ2_XXSGo},
	{quant.IQ2_XS, quant.Q8_K, dotIQ2_XSGo},
	{quant.IQ2_S, quant.Q8_K, dotIQ2_SGo},
	{quant.IQ3_XXS, quant.Q8_K, dotIQ3_XXSGo},
	{quant.IQ3_S, quant.Q8_K, dotIQ3_SGo},
	{quant.IQ1_S, quant.Q8_K, dotIQ1_SGo},
	{quant.IQ1_M, quant.Q8_K, dotIQ1_MGo},
}
