package falsify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/oracle"
	"github.com/aprqa/apr/refuse"
	"github.com/aprqa/apr/schema"
)

// DequantFunc decodes whole blocks of type t: quant.Dequantize's signature,
// which every dequantizing kernel under test has.
type DequantFunc func(t quant.Type, src []byte, dst []float32) error

// QuantizeFunc encodes whole blocks: quant.Quantize's signature.
type QuantizeFunc func(t quant.Type, src []float32, dst []byte) error

func registerKernelBuiltins(r *Registry) {
	r.Register("dequant_layout", KindProperty, DequantLayout(quant.Dequantize),
		Thresholds("failures"),
		Doc("a dequantizer decodes exactly the bytes the contract's layout implies and refuses every other length"))
	r.Register("dequant_exact", KindProperty, DequantExact(quant.Dequantize),
		Thresholds("mismatches"), Refs("independent dequantizer"), VetWith(vetDequantExact),
		Doc("quant.Dequantize against the format written out independently, on random blocks, within the op's tolerance"))
	r.Register("dequant_golden", KindGolden, DequantGolden(quant.Dequantize),
		Needs(NeedFixtures), Thresholds("mismatches"), Params("fixture"), Refs("golden file"),
		Doc("quant.Dequantize of ggml's blocks equals ggml's own output (apr's shared fixtures)"))
	r.Register("kernel_dot", KindProperty, kernelDot,
		Thresholds("mismatches"), AppliesWhen(kernelDotApplies),
		Doc("every engine kernel registered for the contract's type against Σ dequant(w)·dequant(act(x)), within the op's tolerance"))
	r.Register("quant_roundtrip", KindProperty, QuantRoundtrip(quant.Quantize, quant.Dequantize),
		Thresholds("max_nmse"), VetWith(vetQuantRoundtrip),
		Doc("quantize random rows and dequantize them: the NMSE stays within the format's bound"))
}

// kernelOf returns the bound kernel contract and its ggml type.
func kernelOf(c *Check) (*schema.Kernel, quant.Type, quant.Info, error) {
	k, ok := c.Set.KernelByID(c.F.Binds)
	if !ok {
		return nil, 0, quant.Info{}, c.Refuse("binds %s, which is not a kernel contract", c.F.Binds)
	}
	t, err := quant.ParseType(k.Type)
	if err != nil {
		return nil, 0, quant.Info{}, refuse.Wrap(c.By(), err)
	}
	info, err := quant.Lookup(t)
	if err != nil {
		return nil, 0, quant.Info{}, refuse.Wrap(c.By(), err)
	}
	return k, t, info, nil
}

// property runs a gopter property with the run's seed and cases param and
// measures name: 0 when it held, 1 when it failed (with the failing case
// noted, so that the seed reproduces it).
func property(c *Check, name string, p gopter.Prop) error {
	cases, err := c.ParamInt("cases", 100)
	if err != nil {
		return err
	}
	params := gopter.DefaultTestParametersWithSeed(c.Seed())
	params.MinSuccessfulTests = cases
	res := p.Check(params)
	switch {
	case res.Passed():
		c.Measure(name, 0)
	case res.Error != nil:
		return refuse.Wrap(c.By(), fmt.Errorf("property errored after %d cases: %w", res.Succeeded, res.Error))
	default:
		c.Measure(name, 1)
		for _, l := range res.Labels {
			c.Note("%s", l)
		}
		for _, a := range res.Args {
			c.Note("failing case: %s = %v", a.Label, a.Arg)
		}
		c.Note("after %d passing cases (seed %d reproduces it)", res.Succeeded, c.seed)
	}
	return nil
}

// randomBlocks returns n blocks of random bytes for type info.
func randomBlocks(info quant.Info, blocks int, seed int64) []byte {
	b := make([]byte, blocks*info.TypeSize)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// DequantLayout returns the dequant_layout code for impl: for random block
// counts, impl accepts exactly the bytes the contract's layout implies,
// writes every value, and refuses a byte more or less and a value count that
// is not a multiple of the block.
func DequantLayout(impl DequantFunc) Func {
	return func(ctx context.Context, c *Check) error {
		k, t, info, err := kernelOf(c)
		if err != nil {
			return err
		}
		if info.BlockSize != k.BlockSize || info.TypeSize != k.BlockBytes {
			return Fail("contract says %d values in %d bytes, ggml's %s is %d in %d", k.BlockSize, k.BlockBytes, k.Type, info.BlockSize, info.TypeSize)
		}
		call := func(src []byte, dst []float32) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panicked: %v", p)
				}
			}()
			return impl(t, src, dst)
		}
		p := prop.ForAllNoShrink(func(blocks int, seed int64) string {
			n := blocks * k.BlockSize
			src := randomBlocks(info, blocks, seed)
			// Two sentinels: a value left unwritten keeps its sentinel in
			// both runs; a decoded value cannot equal both.
			const sa, sb = 0x7fc0dead, 0xffc0beef
			da, db := make([]float32, n), make([]float32, n)
			for i := range da {
				da[i], db[i] = math.Float32frombits(sa), math.Float32frombits(sb)
			}
			for _, dst := range [][]float32{da, db} {
				if err := call(src, dst); err != nil {
					return fmt.Sprintf("%d blocks (%d bytes): %v", blocks, len(src), err)
				}
			}
			for i := range da {
				if math.Float32bits(da[i]) == sa && math.Float32bits(db[i]) == sb {
					return fmt.Sprintf("%d blocks: value %d is never written", blocks, i)
				}
			}
			if err := call(src[:len(src)-1], make([]float32, n)); err == nil {
				return fmt.Sprintf("%d blocks: accepted %d bytes (one short)", blocks, len(src)-1)
			}
			if err := call(append(append([]byte(nil), src...), 0), make([]float32, n)); err == nil {
				return fmt.Sprintf("%d blocks: accepted %d bytes (one extra)", blocks, len(src)+1)
			}
			if k.BlockSize > 1 {
				if err := call(src, make([]float32, n+1)); err == nil {
					return fmt.Sprintf("%d blocks: accepted %d values, not a multiple of %d", blocks, n+1, k.BlockSize)
				}
			}
			return ""
		}, gen.IntRange(1, 64), gen.Int64())
		return property(c, "failures", p)
	}
}

// DequantExact returns the dequant_exact code for impl: on random blocks,
// impl agrees with the format's independent definition within the contract's
// dequant tolerance (bit-exact when it is zero; NaN only where the
// definition gives NaN).
func DequantExact(impl DequantFunc) Func {
	return func(ctx context.Context, c *Check) error {
		k, t, info, err := kernelOf(c)
		if err != nil {
			return err
		}
		op, ok := k.Ops["dequant"]
		if !ok {
			return c.Refuse("contract %s has no dequant op", k.ID)
		}
		tol := op.Tolerance
		exact := tol.Exact()
		var refErr error
		p := prop.ForAllNoShrink(func(blocks int, seed int64) string {
			n := blocks * info.BlockSize
			src := randomBlocks(info, blocks, seed)
			got, want := make([]float32, n), make([]float32, n)
			if err := impl(t, src, got); err != nil {
				return fmt.Sprintf("%d blocks: %v", blocks, err)
			}
			if err := c.CallRef("independent dequantizer", func() error { return refDequant(t, src, want) }); err != nil {
				refErr = err
				return "reference failed"
			}
			for i := range got {
				g, w := got[i], want[i]
				gn, wn := g != g, w != w
				switch {
				case gn || wn:
					if gn != wn {
						return fmt.Sprintf("block %d value %d: got %v, want %v", i/info.BlockSize, i%info.BlockSize, g, w)
					}
				case exact && g != w, !exact && !tol.Within(g, w):
					return fmt.Sprintf("block %d value %d: got %v (%#08x), want %v (%#08x), tolerance %v",
						i/info.BlockSize, i%info.BlockSize, g, math.Float32bits(g), w, math.Float32bits(w), tol)
				}
			}
			return ""
		}, gen.IntRange(1, 16), gen.Int64())
		err = property(c, "mismatches", p)
		if refErr != nil {
			// The property stopped at the reference's failure: that decides
			// nothing about the implementation.
			delete(c.measured, "mismatches")
			return refErr
		}
		return err
	}
}

// DequantGolden returns the dequant_golden code for impl: the fixture holds
// ggml's quantized blocks (tensor q) and ggml's own dequantization of them
// (tensor deq); impl must reproduce deq bit for bit.
func DequantGolden(impl DequantFunc) Func {
	return func(ctx context.Context, c *Check) error {
		_, t, _, err := kernelOf(c)
		if err != nil {
			return err
		}
		rel, err := c.ParamString("fixture", "")
		if err != nil {
			return err
		}
		path, err := c.Fixture(rel)
		if err != nil {
			return err
		}
		var q, deq *gguf.TensorInfo
		var f *gguf.File
		err = c.CallRef("golden file", func() error {
			var err error
			if f, err = gguf.Open(path); err != nil {
				return err
			}
			var ok1, ok2 bool
			q, ok1 = f.Tensor("q")
			deq, ok2 = f.Tensor("deq")
			switch {
			case !ok1 || !ok2:
				return fmt.Errorf("%s lacks tensor q or deq", path)
			case q.Type != t:
				return fmt.Errorf("%s: tensor q is %s, the contract binds %s", path, q.Type, t)
			case deq.Type != quant.F32 || q.Elems() != deq.Elems():
				return fmt.Errorf("%s: tensor deq is %s of %d values, want F32 of %d", path, deq.Type, deq.Elems(), q.Elems())
			}
			return nil
		})
		if f != nil {
			defer f.Close()
		}
		if err != nil {
			return err
		}
		n := int(q.Elems())
		got, want := make([]float32, n), make([]float32, n)
		if err := quant.Dequantize(quant.F32, f.Data(deq), want); err != nil {
			return refuse.Wrap(c.By(), err)
		}
		if err := impl(t, f.Data(q), got); err != nil {
			return Fail("dequantizing %s: %v", rel, err)
		}
		mism := 0
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				if mism == 0 {
					c.Note("first mismatch at value %d (row %d): got %v (%#08x), ggml %v (%#08x)", i, i/int(q.Shape[0]), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
				mism++
			}
		}
		c.Measure("mismatches", float64(mism))
		c.Measure("values", float64(n))
		return nil
	}
}

// QuantRoundtrip returns the quant_roundtrip code: rows of N(0, σ²) values
// with σ = 0.01 + U(0, 1) drawn per value (so blocks mix scales), quantized
// with q and decoded with dq; max_nmse is the worst row's NMSE.
func QuantRoundtrip(q QuantizeFunc, dq DequantFunc) Func {
	return func(ctx context.Context, c *Check) error {
		_, t, info, err := kernelOf(c)
		if err != nil {
			return err
		}
		if !quant.CanQuantize(t) {
			return c.Refuse("apr has no quantizer for %s", t)
		}
		rows, err := c.ParamInt("rows", 8)
		if err != nil {
			return err
		}
		cols, err := c.ParamInt("cols", 4096)
		if err != nil {
			return err
		}
		if rows < 1 || cols < 1 || cols%info.BlockSize != 0 || rows*cols > 1<<24 {
			return c.Refuse("params rows %d, cols %d: need cols a multiple of %d and at most 2^24 values", rows, cols, info.BlockSize)
		}
		rb, _ := info.RowBytes(int64(cols))
		rng := rand.New(rand.NewSource(c.Seed()))
		x, y, buf := make([]float32, cols), make([]float32, cols), make([]byte, rb)
		worst := 0.0
		for r := 0; r < rows; r++ {
			for i := range x {
				x[i] = float32(rng.NormFloat64() * (0.01 + rng.Float64()))
			}
			if err := q(t, x, buf); err != nil {
				return Fail("quantize row %d: %v", r, err)
			}
			if err := dq(t, buf, y); err != nil {
				return Fail("dequantize row %d: %v", r, err)
			}
			nmse, err := oracle.NMSE(y, x)
			if errors.Is(err, oracle.ErrNonFinite) {
				return Fail("row %d: %v", r, err)
			}
			if err != nil {
				return refuse.Wrap(c.By(), err)
			}
			worst = math.Max(worst, nmse)
		}
		c.Measure("max_nmse", worst)
		return nil
	}
}

func vetDequantExact(f schema.Falsifier, set *contracts.Set) []string {
	k, ok := set.KernelByID(f.Binds)
	if !ok {
		return []string{"binds " + f.Binds + ", which is not a kernel contract"}
	}
	t, err := quant.ParseType(k.Type)
	if err != nil || !refExact[t] {
		return []string{fmt.Sprintf("no independent %s dequantizer exists to compare against", k.Type)}
	}
	return nil
}

func vetQuantRoundtrip(f schema.Falsifier, set *contracts.Set) []string {
	k, ok := set.KernelByID(f.Binds)
	if !ok {
		return []string{"binds " + f.Binds + ", which is not a kernel contract"}
	}
	if t, err := quant.ParseType(k.Type); err != nil || !quant.CanQuantize(t) {
		return []string{fmt.Sprintf("apr has no %s quantizer", k.Type)}
	}
	return nil
}
