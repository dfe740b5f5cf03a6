package cpu_test

import (
	"path/filepath"
	"testing"

	"github.com/aprqa/apr/engine/internal/enginetest"
	"github.com/aprqa/apr/internal/testutil"
)

// TestEvalLast: a session fed through model.EvalLast (the last row in the
// caller's buffer) gives the logits Eval gives, bit for bit, for a prompt
// longer than one pass (130 tokens: two pieces) and decode steps.
func TestEvalLast(t *testing.T) {
	m := enginetest.Open(t, filepath.Join(testutil.Fixtures(t), "models", "stories260K.gguf"), "cpu", 0)
	enginetest.EvalLastMatchesEval(t, m.Eng, 130, 4)
}
