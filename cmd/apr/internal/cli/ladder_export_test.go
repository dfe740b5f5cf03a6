package cli

import "github.com/aprqa/apr/ladder"

// SetLadderExecutors replaces the ladder's executors for a test and returns
// a function that restores them.
func SetLadderExecutors(f func(ladder.ExecOptions) *ladder.Executors) (restore func()) {
	old := ladderExecutors
	ladderExecutors = f
	return func() { ladderExecutors = old }
}
