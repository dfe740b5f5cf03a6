package kern

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aprqa/apr/engine/quant"
)

// A Plant is a deliberate defect in one weight type's kernel: the hook with
// which tests and people prove that apr's gates catch a wrong kernel (the
// mutation test of the gates). The planted kernel is the type's pure-Go
// kernel with the defect written into it; it replaces every instruction
// set's kernel of that type for the products of the engine it is given to,
// and has no four-row, eight-row or tile variants, so every product goes
// through it. Never use one outside tests and falsifiers.
//
// The defects (ParsePlant's syntax, TYPE:DEFECT[:ARGS]):
//
//	Q8_0:scale:B:F       block B's scale of every row multiplied by F
//	Q8_0:drop_last       the last block of every row left out of the sum
//	Q4_K:min_sign:SB     sub-block SB's min with the wrong sign (added, not subtracted)
//	Q4_K:nibble:SB       sub-block SB reads the other nibble of its bytes
//	Q6_K:scale_from:SB:S sub-block SB's scale read from sub-block S
type Plant struct {
	Type quant.Type
	Spec string // as given to ParsePlant
	dot  dotFunc
}

// ParsePlant reads a planted defect (see Plant). Anything it does not know
// is an error naming the syntax, never a silently unplanted kernel.
func ParsePlant(s string) (*Plant, error) {
	parts := strings.Split(s, ":")
	bad := func(why string) (*Plant, error) {
		return nil, fmt.Errorf("kern: plant %q: %s (defects: Q8_0:scale:B:F, Q8_0:drop_last, Q4_K:min_sign:SB, Q4_K:nibble:SB, Q6_K:scale_from:SB:S)", s, why)
	}
	if len(parts) < 2 {
		return bad("want TYPE:DEFECT[:ARGS]")
	}
	ints := func(args []string, lo, hi int) ([]int, bool) {
		var out []int
		for _, a := range args {
			v, err := strconv.Atoi(a)
			if err != nil || v < lo || v > hi {
				return nil, false
			}
			out = append(out, v)
		}
		return out, true
	}
	p := &Plant{Spec: s}
	args := parts[2:]
	switch parts[0] + ":" + parts[1] {
	case "Q8_0:scale":
		if len(args) != 2 {
			return bad("want Q8_0:scale:BLOCK:FACTOR")
		}
		b, ok := ints(args[:1], 0, 1<<20)
		f, err := strconv.ParseFloat(args[1], 32)
		if !ok || err != nil {
			return bad("block or factor is not a number")
		}
		p.Type, p.dot = quant.Q8_0, plantQ8_0(b[0], float32(f), false)
	case "Q8_0:drop_last":
		if len(args) != 0 {
			return bad("drop_last takes no arguments")
		}
		p.Type, p.dot = quant.Q8_0, plantQ8_0(-1, 1, true)
	case "Q4_K:min_sign", "Q4_K:nibble":
		sb, ok := ints(args, 0, 7)
		if !ok || len(sb) != 1 {
			return bad("want one sub-block 0..7")
		}
		if parts[1] == "min_sign" {
			p.Type, p.dot = quant.Q4_K, plantQ4_K(sb[0], -1)
		} else {
			p.Type, p.dot = quant.Q4_K, plantQ4_K(-1, sb[0])
		}
	case "Q6_K:scale_from":
		sb, ok := ints(args, 0, 15)
		if !ok || len(sb) != 2 {
			return bad("want two sub-blocks 0..15")
		}
		p.Type, p.dot = quant.Q6_K, plantQ6_K(sb[0], sb[1])
	default:
		return bad("unknown defect")
	}
	return p, nil
}

// Kernel returns the planted kernel for op: the type's Go kernel (its
// activation format and block sizes) computing with the defect. Its
// contract id is the Go kernel's with "+plant(SPEC)" appended, so every
// listing of the kernels in use shows the plant.
func (p *Plant) Kernel(op Op) (*Kernel, error) {
	g, err := Lookup(Key{Op: op, Type: p.Type, Backend: Backend, ISA: ISAGo})
	if err != nil {
		return nil, err
	}
	return &Kernel{Key: g.Key, Contract: g.Contract + "+plant(" + p.Spec + ")", Act: g.Act,
		block: g.block, wBytes: g.wBytes, actBlock: g.actBlock, aBytes: g.aBytes, convert: g.convert,
		dot: p.dot}, nil
}

// plantQ8_0 is dotQ8_0Go with block `block`'s weight scale times factor,
// or (drop) without the row's last block.
func plantQ8_0(block int, factor float32, drop bool) dotFunc {
	return func(n int, w, a []byte) float32 {
		nb := n / 32
		if drop {
			nb--
		}
		var sum float32
		for ib := 0; ib < nb; ib++ {
			x, y := w[34*ib:34*ib+34], a[34*ib:34*ib+34]
			xs, ys := x[2:34], y[2:34]
			s := int32(0)
			for j := 0; j < 32; j++ {
				s += int32(int8(xs[j])) * int32(int8(ys[j]))
			}
			d := fp16At(x)
			if ib == block {
				d *= factor
			}
			sum += float32(s) * float32(d*fp16At(y))
		}
		return sum
	}
}

// plantQ4_K is dotQ4_KGo with sub-block minSign's min added instead of
// subtracted, and sub-block nibble reading the other nibble (-1: none).
func plantQ4_K(minSign, nibble int) dotFunc {
	return func(n int, w, a []byte) float32 {
		var sum float32
		for i := 0; i < n/256; i++ {
			x := w[144*i : 144*i+144]
			yd, q8, bs := q8K(a[292*i : 292*i+292])
			scales, qs := x[4:16], x[16:144]
			isum, msum := int32(0), int32(0)
			for sb := 0; sb < 8; sb++ {
				sc, m := kScaleMin(sb, scales)
				q := qs[32*(sb/2) : 32*(sb/2)+32]
				y := q8[32*sb : 32*sb+32]
				shift := uint(4 * (sb % 2))
				if sb == nibble {
					shift = 4 - shift
				}
				s := int32(0)
				for l := 0; l < 32; l++ {
					s += int32(q[l]>>shift&15) * int32(int8(y[l]))
				}
				isum += sc * s
				if sb == minSign {
					m = -m
				}
				msum += m * (bsum(bs, 2*sb) + bsum(bs, 2*sb+1))
			}
			sum += float32(fp16At(x)*yd)*float32(isum) - float32(fp16At(x[2:])*yd)*float32(msum)
		}
		return sum
	}
}

// plantQ6_K is dotQ6_KGo with sub-block sb's scale read from sub-block from.
func plantQ6_K(sb, from int) dotFunc {
	return func(n int, w, a []byte) float32 {
		var sum float32
		for i := 0; i < n/256; i++ {
			x := w[210*i : 210*i+210]
			yd, q8, _ := q8K(a[292*i : 292*i+292])
			ql, qh, sc := x[0:128], x[128:192], x[192:208]
			isum := int32(0)
			for v := 0; v < 256; v += 16 {
				half, grp := v/128, (v%128)/32
				s := int32(0)
				for t := v; t < v+16; t++ {
					l := t % 32
					lo := ql[64*half+l+32*(grp&1)] >> (4 * (grp / 2)) & 15
					hi := qh[32*half+l] >> (2 * grp) & 3
					s += (int32(lo|hi<<4) - 32) * int32(int8(q8[t]))
				}
				j := v / 16
				if j == sb {
					j = from
				}
				isum += int32(int8(sc[j])) * s
			}
			sum += float32(fp16At(x[208:])*yd) * float32(isum)
		}
		return sum
	}
}
