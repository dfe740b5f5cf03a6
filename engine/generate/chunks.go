package generate

import (
	"context"
	"fmt"

	"github.com/aprqa/apr/engine/model"
)

// ChunkFirst is the first scored position of a chunk of nCtx tokens in
// llama.cpp's perplexity (n_ctx/2): the positions before it are context only.
func ChunkFirst(nCtx int) int { return nCtx / 2 }

// ChunkScored is the number of scored positions of a chunk: ChunkFirst(nCtx)
// … nCtx−2, each predicting the chunk's next token.
func ChunkScored(nCtx int) int { return nCtx - 1 - nCtx/2 }

// EvalChunks evaluates nChunk chunks of tokens as llama.cpp's perplexity tool
// (tools/perplexity/perplexity.cpp) does: chunk c is tokens[c·nCtx :
// (c+1)·nCtx], fed in one evaluation to a fresh session (an empty KV cache)
// from position 0, with its first token replaced by bos when addBOS is set.
// fn receives the chunk's rows of logits at positions ChunkFirst(nCtx) …
// nCtx−2 (ChunkScored(nCtx) rows, row j predicting the token at
// ChunkFirst(nCtx)+j+1); the rows are valid during the call.
func EvalChunks(ctx context.Context, eng model.Engine, tokens []int32, nCtx, nChunk int, addBOS bool, bos int32,
	fn func(c int, rows [][]float32) error) error {
	if nCtx < 3 {
		return fmt.Errorf("generate: chunks of %d tokens leave none to score (want at least 3)", nCtx)
	}
	if nChunk < 1 || nChunk*nCtx > len(tokens) {
		return fmt.Errorf("generate: %d chunks of %d tokens need %d tokens, have %d", nChunk, nCtx, nChunk*nCtx, len(tokens))
	}
	first := ChunkFirst(nCtx)
	buf := make([]int32, nCtx)
	for c := range nChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		copy(buf, tokens[c*nCtx:(c+1)*nCtx])
		if addBOS {
			buf[0] = bos
		}
		sess, err := eng.NewSession(nCtx)
		if err != nil {
			return err
		}
		rows, err := sess.Eval(buf, true)
		if err != nil {
			return fmt.Errorf("generate: chunk %d: %w", c, err)
		}
		if len(rows) != nCtx {
			return fmt.Errorf("generate: chunk %d: %s returned %d rows of logits for %d tokens", c, eng.Backend(), len(rows), nCtx)
		}
		if err := fn(c, rows[first:nCtx-1]); err != nil {
			return err
		}
	}
	return nil
}
