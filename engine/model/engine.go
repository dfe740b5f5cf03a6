package model

import "fmt"

// Engine is one loaded model on one backend. Engines are built by their own
// packages (engine/ref, engine/cpu, …) from a *gguf.File; this interface is
// what the verbs, the oracle's callers and the ladder see.
type Engine interface {
	// Backend names the engine: "ref", "cpu", "cuda".
	Backend() string
	// NVocab is the length of every logits row.
	NVocab() int
	// NewSession starts an empty sequence with room for maxCtx positions.
	NewSession(maxCtx int) (Session, error)
	// Close releases what the engine holds (device memory, threads).
	Close() error
}

// BatchDecoder is an Engine that can feed several of its sessions in one
// pass (a server's step: each session's prompt chunk or decode token; the
// products read each weight once for all of them), each session's rows
// equal, bit for bit, to its own Eval of its part.
type BatchDecoder interface {
	// EvalBatch feeds parts[i] to sessions[i] and returns, for each, the
	// logits row of its part's last token.
	EvalBatch(sessions []Session, parts [][]int32) ([][]float32, error)
	// MaxBatchRows is the most tokens (all parts together) one EvalBatch takes.
	MaxBatchRows() int
}

// Session is one sequence's state: its KV cache (and recurrent state for
// hybrid architectures) and the next position.
type Session interface {
	// Eval feeds tokens at positions Pos(), Pos()+1, … and returns logits:
	// one row per token when all is true, else only the last token's row.
	// Feeding a prompt at once or token by token gives the same logits
	// (within the engine's arithmetic).
	Eval(tokens []int32, all bool) ([][]float32, error)
	// Pos is the number of tokens fed so far.
	Pos() int
	// SetTrace installs a hook that observes intermediate results; nil removes it.
	SetTrace(Trace)
}

// LastEvaluator is a Session that also writes the last token's logits into
// the caller's buffer: EvalLast(tokens, dst) feeds tokens as Eval(tokens,
// false) does and leaves in dst (NVocab values) what Eval's one row would
// hold. A decode loop that reads the row and drops it (a sampler, a
// benchmark) keeps one buffer instead of a vocabulary-sized allocation per
// step. Sessions that lack it are fed with Eval (EvalLast below).
type LastEvaluator interface {
	EvalLast(tokens []int32, dst []float32) error
}

// RowAllocator is a Session whose logits rows are read fastest into memory
// it allocates (cuda: pinned host memory, which the device's copy writes
// directly instead of through the driver's staging). A row it returns is
// the session's: valid until the session or its engine closes, or until a
// LogitsRow of another n replaces it.
type RowAllocator interface {
	LogitsRow(n int) ([]float32, error)
}

// LogitsRow returns a row of n values for s's EvalLast: s's own when it
// allocates rows, else a new slice.
func LogitsRow(s Session, n int) ([]float32, error) {
	if ra, ok := s.(RowAllocator); ok {
		return ra.LogitsRow(n)
	}
	return make([]float32, n), nil
}

// EvalLast feeds tokens to s and leaves the last token's logits in dst:
// through s's own EvalLast when it has one, else Eval's row copied.
func EvalLast(s Session, tokens []int32, dst []float32) error {
	if le, ok := s.(LastEvaluator); ok {
		return le.EvalLast(tokens, dst)
	}
	rows, err := s.Eval(tokens, false)
	if err != nil {
		return err
	}
	if len(rows) != 1 || len(rows[0]) != len(dst) {
		return fmt.Errorf("model: EvalLast: Eval returned %d rows (want 1 of %d values)", len(rows), len(dst))
	}
	copy(dst, rows[0])
	return nil
}

// Trace observes one intermediate result: the vector computed by op at layer
// (-1 outside the layers) for the token at position pos. The slice is only
// valid during the call. Engines call it only when a hook is installed, so an
// unused hook costs one nil check per op.
type Trace func(layer int, op string, pos int, values []float32)

// Trace op names shared by every engine, so that engines can be compared op
// by op. An engine may report more ops; these it reports when it has them.
const (
	OpEmbed      = "embed"         // token embedding row (layer -1)
	OpAttnNorm   = "attn_norm"     // input of attention after RMSNorm
	OpQ          = "q"             // query after bias/norm, before RoPE
	OpK          = "k"             // key after bias/norm, before RoPE
	OpV          = "v"             // value
	OpQRope      = "q_rope"        // query after RoPE
	OpKRope      = "k_rope"        // key after RoPE
	OpAttnOut    = "attn_out"      // attention output after the output projection
	OpSSMOut     = "ssm_out"       // Gated DeltaNet block output after its projection
	OpFFNInp     = "ffn_inp"       // residual stream after attention
	OpFFNNorm    = "ffn_norm"      // FFN input after RMSNorm
	OpFFNOut     = "ffn_out"       // FFN (or MoE) output
	OpRouter     = "ffn_moe_probs" // router probabilities (MoE)
	OpLayerOut   = "l_out"         // residual stream leaving the layer
	OpResultNorm = "result_norm"   // final RMSNorm output (layer -1)
	OpLogits     = "logits"        // output logits (layer -1)
)

// Trace op names particular to qwen35's mixers, reported by every engine that
// runs qwen35 (the reference and the optimized engines use these same names).
const (
	OpQ35Gate     = "q_gate"       // full attention: output gate from attn_q, before the sigmoid
	OpQ35AttnPre  = "attn_pregate" // full attention: output before the gate and attn_output
	OpQ35QKV      = "ssm_qkv"      // DeltaNet: attn_qkv projection, before the convolution
	OpQ35Z        = "ssm_z"        // DeltaNet: attn_gate projection z
	OpQ35Beta     = "ssm_beta"     // DeltaNet: sigmoid(beta) per value head
	OpQ35G        = "ssm_g"        // DeltaNet: log decay per value head
	OpQ35Conv     = "ssm_conv"     // DeltaNet: after the causal convolution and SiLU
	OpQ35Delta    = "ssm_delta"    // DeltaNet: delta-rule output, all value heads, before the gated norm
	OpQ35GatedOut = "ssm_norm"     // DeltaNet: after the gated RMSNorm, before ssm_out
)
