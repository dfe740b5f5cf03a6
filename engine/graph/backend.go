package graph

import (
	"fmt"

	"github.com/aprqa/apr/engine/model"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

// Buf is a backend's activation buffer (or a view of one): Rows × Cols
// float32 values, row-major.
type Buf interface {
	Rows() int
	Cols() int
}

// Weight is a model tensor a backend has prepared: a matrix whose products
// go through the backend's kernels (its type checked when prepared), or a
// small vector (norm weights, biases, convolution kernels) used element-wise.
type Weight interface {
	Tensor() *model.Tensor
}

// KV is one layer's key/value cache in one session, owned by the backend.
type KV any

// Attn describes one attention layer's heads.
type Attn struct {
	NHead, NKV int     // query heads, key/value heads (NHead a multiple of NKV)
	HK, HV     int     // key (and query) head size, value head size
	Scale      float32 // logits scale, 1/sqrt(HK) unless the model says otherwise
}

// Rope is a rotary position embedding as ggml's rope_ext and rope_multi
// compute it: pair i of the first NRot values of each head turns by
// θ = p·Base^(−2i/NRot) (divided by Factors[i] when present, then mixed
// with YaRN's interpolation when ExtFactor ≠ 0), cos and sin scaled by the
// attention factor. Mode picks the pairs: RopeNorm (2i, 2i+1), RopeNeox and
// RopeIMRope (i, i+NRot/2). Under RopeIMRope pair i takes its position from
// one of four components (t, h, w, e) by Sections; text tokens have
// (p, p, p, 0).
type Rope struct {
	Mode       model.RopeType
	NRot       int // rotated values per head
	HeadDim    int // head width: heads sit HeadDim apart in a row
	Base       float32
	FreqScale  float32 // 1 unless linear/YaRN scaling
	ExtFactor  float32 // YaRN extrapolation mix (0: none)
	AttnFactor float32
	BetaFast   float32
	BetaSlow   float32
	OrigCtx    int
	Factors    Weight // rope_freqs (NRot/2 divisors), or nil
	Sections   [4]int // IMROPE sections, in pairs
}

// Backend provides the operations of the forward pass. Ops act on the rows
// of their operands together: row r of every operand belongs to the token
// at position pos0+r. Unless stated, dst may be the same Buf as an input
// (element-wise ops work in place).
type Backend interface {
	// Name is the backend's registered name ("cpu", "cuda").
	Name() string

	// Matrix prepares a 2-D (or 3-D expert) tensor for MatMul, MatMulID and
	// GetRows. A weight type the backend has no kernel for is refused, by
	// name, here.
	Matrix(t *model.Tensor) (Weight, error)
	// Vector prepares a small tensor used element-wise.
	Vector(t *model.Tensor) (Weight, error)

	// Alloc returns a zeroed rows × cols buffer, released when no longer
	// referenced (recurrent states).
	Alloc(rows, cols int) Buf
	// Work returns a zeroed rows × cols buffer that lives until Release or
	// until the backend is closed (the model's reused work buffers).
	Work(rows, cols int) Buf
	// Release frees a buffer from Work; it and its views must not be used
	// afterwards.
	Release(b Buf)
	// Zero sets every value of b to 0.
	Zero(b Buf)
	// View returns rows [r0, r1) and columns [c0, c1) of b, sharing its
	// storage.
	View(b Buf, r0, r1, c0, c1 int) Buf
	// Read copies row r of b into dst (len Cols).
	Read(b Buf, r int, dst []float32)

	// GetRows writes row ids[r] of the matrix w into dst row r.
	GetRows(dst Buf, w Weight, ids []int32) error
	// MatMul writes dst[r] = W·x[r] (dst Rows × W.Rows, x Rows × W.Cols).
	// dst must not overlap x.
	MatMul(dst Buf, w Weight, x Buf) error
	// MatMuls writes dst[i] = W_i·x for every i: several products of one
	// input (q, k and v), which a backend may convert once.
	MatMuls(x Buf, dst []Buf, w []Weight) error
	// MatMulID is ggml's mul_mat_id: w is 3-D (one matrix per expert);
	// dst row t·k+j = W[ids[t·k+j]]·x[t] when x has len(ids)/k rows, or
	// W[ids[r]]·x[r] when x has len(ids) rows.
	MatMulID(dst Buf, w Weight, x Buf, ids []int32, k int) error
	// AddVec adds the vector v to every row of dst.
	AddVec(dst Buf, v Weight)
	// Add writes dst += x.
	Add(dst, x Buf)
	// RMSNorm writes, for each group of group columns of each row,
	// dst = x / sqrt(mean(x²) + eps) ⊙ w (w nil: no weight; else group values).
	RMSNorm(dst, x Buf, w Weight, group int, eps float32)
	// Rope rotates each head of x in place; row r is at position pos0+r.
	Rope(x Buf, pos0 int, r *Rope)

	// NewKV returns an empty cache for maxCtx positions.
	NewKV(maxCtx int, a Attn) (KV, error)
	// ClearKV forgets every position of kv (its memory is kept).
	ClearKV(kv KV)
	// FreeKV releases kv's memory; kv must not be used afterwards.
	FreeKV(kv KV)
	// Store writes the keys (roped) and values of positions pos0.. into kv.
	Store(kv KV, k, v Buf, pos0 int) error
	// Attend writes causal softmax attention of the queries q (positions
	// pos0..) over kv's positions 0..pos: query head h reads kv head
	// h/(NHead/NKV).
	Attend(out, q Buf, kv KV, pos0 int) error

	// SwiGLU writes dst = silu(gate) ⊙ up.
	SwiGLU(dst, gate, up Buf)
	// Softmax turns each row of x into probabilities.
	Softmax(x Buf)
	// TopK writes, per row of x, the indexes of its k largest values in
	// descending order to ids[r·k:] and the values to vals[r·k:].
	TopK(x Buf, k int, ids []int32, vals []float32)
	// WeightedSum writes dst[t] = Σ_j w[t·k+j]·y[t·k+j], j in slot order.
	WeightedSum(dst, y Buf, w []float32, k int)

	// Deinterleave splits each row of src, made of repeating runs of width
	// values for dst[0], dst[1], …, into the dst buffers.
	Deinterleave(src Buf, width int, dst ...Buf)
	// Sigmoid writes x = 1/(1+e^(−x)).
	Sigmoid(x Buf)
	// SiLU writes x = x·sigmoid(x).
	SiLU(x Buf)
	// MulSigmoid writes x = x ⊙ sigmoid(gate).
	MulSigmoid(x, gate Buf)
	// SoftplusMul writes g = softplus(g + bias) ⊙ a per column (bias, a:
	// Cols values); softplus(u) = u above 20, else log(1+eᵘ).
	SoftplusMul(g Buf, bias, a Weight)
	// Conv is the causal depthwise convolution with state: per channel c,
	// out[t][c] = Σ_{i<K} w[c][i]·in[t−K+1+i][c] where in is the K−1
	// inputs kept in state (rows oldest first) followed by x; state then
	// keeps the last K−1 inputs. w is [K, channels] (ggml order), state is
	// (K−1) × channels. out must not overlap x.
	Conv(out, x, state Buf, w Weight)
	// L2Norm scales each group of group columns to unit length:
	// x / max(‖x‖, eps).
	L2Norm(x Buf, group int, eps float32)
	// DeltaRule runs the gated delta rule token by token. q and k have
	// nK heads of hk values, v and out nV heads of hv values (nV a multiple
	// of nK; value head j reads key head j mod nK), g and beta nV values.
	// state is nV × (hv·hk): S_j, row-major, row r a value dimension. Per
	// token and value head: S ← e^g·S; d = beta·(v − S·k); S += d⊗k;
	// out = S·q / sqrt(hk).
	DeltaRule(out, q, k, v, g, beta, state Buf, hk int)
	// GatedNorm writes, per group of group columns, o = rmsnorm(o) ⊙ w ⊙
	// silu(z) (w: group values).
	GatedNorm(o, z Buf, w Weight, group int, eps float32)
}

// TopKRow writes the indexes of row's len(ids) largest values in descending
// order to ids and the values to vals; ties keep the lower index first. It
// is TopK's definition, for backends that select on the host.
func TopKRow(row []float32, ids []int32, vals []float32) {
	k := len(ids)
	n := 0
	for i, v := range row {
		if n == k && !(v > vals[k-1]) {
			continue
		}
		j := min(n, k-1)
		for j > 0 && v > vals[j-1] {
			if j < k {
				vals[j], ids[j] = vals[j-1], ids[j-1]
			}
			j--
		}
		vals[j], ids[j] = v, int32(i)
		if n < k {
			n++
		}
	}
}

// MaxVector bounds what a backend's Vector dequantizes (norm weights,
// biases, convolution kernels are far smaller).
const MaxVector = 1 << 22

// VectorValues dequantizes t for a backend's Vector: every value as
// float32, row after row. A nil tensor, one over MaxVector values and one
// that cannot be dequantized are refused by by, naming the tensor.
func VectorValues(by string, t *model.Tensor) ([]float32, error) {
	if t == nil {
		return nil, refuse.New(by, "no tensor to prepare")
	}
	n := t.Cols() * t.Rows()
	if n > MaxVector {
		return nil, refuse.New(by, "tensor %q has %d values, too many for an element-wise weight", t.Name, n)
	}
	v := make([]float32, n)
	for r := 0; r < t.Rows(); r++ {
		if err := quant.Dequantize(t.Type, t.Row(r), v[r*t.Cols():(r+1)*t.Cols()]); err != nil {
			return nil, refuse.New(by, "tensor %q of type %s cannot be dequantized: %v", t.Name, t.Type, err)
		}
	}
	return v, nil
}

// DeltaRuleShapes checks DeltaRule's operands and returns the key heads,
// value heads and value head size. Mismatched shapes are a programmer error:
// it panics, naming every shape, with who ("cpu", "cuda") in front.
func DeltaRuleShapes(who string, out, q, k, v, g, beta, state Buf, hk int) (nK, nV, hv int) {
	n := q.Rows()
	nV = g.Cols()
	if hk <= 0 || q.Cols()%hk != 0 || nV == 0 || v.Cols()%nV != 0 {
		panic(fmt.Sprintf("%s: DeltaRule: q %d columns, head %d, %d value heads over %d values", who, q.Cols(), hk, nV, v.Cols()))
	}
	nK, hv = q.Cols()/hk, v.Cols()/nV
	if k.Cols() != q.Cols() || out.Cols() != v.Cols() || beta.Cols() != nV || nV%nK != 0 ||
		state.Rows() != nV || state.Cols() != hv*hk || k.Rows() != n || v.Rows() != n || out.Rows() != n || g.Rows() != n || beta.Rows() != n {
		panic(fmt.Sprintf("%s: DeltaRule shapes: q %d×%d k %d×%d v %d×%d out %d×%d g %d×%d beta %d×%d state %d×%d", who,
			q.Rows(), q.Cols(), k.Rows(), k.Cols(), v.Rows(), v.Cols(), out.Rows(), out.Cols(), g.Rows(), g.Cols(), beta.Rows(), beta.Cols(), state.Rows(), state.Cols()))
	}
	return nK, nV, hv
}

// StateAllocator is implemented by a backend that keeps a session's
// recurrent states (Gated DeltaNet) out of the garbage-collected heap, so
// that closing a session gives their memory back at once and the
// collector's heap goal (twice the live heap) does not grow with them.
// A backend without it gets its states from Alloc.
type StateAllocator interface {
	// AllocState returns a zeroed rows × cols buffer. If FreeState is
	// never called it is released when no longer referenced.
	AllocState(rows, cols int) Buf
	// FreeState releases a buffer from AllocState now; it and its views
	// must not be used afterwards.
	FreeState(b Buf)
}

func allocState(b Backend, rows, cols int) Buf {
	if sa, ok := b.(StateAllocator); ok {
		return sa.AllocState(rows, cols)
	}
	return b.Alloc(rows, cols)
}

func freeState(b Backend, x Buf) {
	if sa, ok := b.(StateAllocator); ok && x != nil {
		sa.FreeState(x)
	}
}
