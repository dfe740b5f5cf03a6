package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/testutil"
)

// TestLoggerPlain: the CLI's warnings carry no timestamp, and nothing below
// warning level is printed.
func TestLoggerPlain(t *testing.T) {
	var b bytes.Buffer
	log := newLogger(&b)
	log.Info("hidden")
	log.Warn("tokenizer", "warning", "bad special token")
	got := b.String()
	if strings.Contains(got, "time=") || strings.Contains(got, "hidden") || !strings.HasPrefix(got, `level=WARN msg=tokenizer warning="bad special token"`) {
		t.Errorf("newLogger wrote %q, want one line without a timestamp", got)
	}
}

// TestLogLevelFlag: --log-level lowers what reaches stderr (debug shows
// bench's repetitions, which the default hides); a level that is none is
// bad usage.
func TestLogLevelFlag(t *testing.T) {
	model := filepath.Join(testutil.Fixtures(t), "models", "stories260K.gguf")
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errb)
		return code, errb.String()
	}
	bench := []string{"bench", model, "-p", "4", "-n", "2", "--reps", "1", "--warmup", "0", "-q"}
	if code, stderr := run(append([]string{"--log-level", "debug"}, bench...)...); code != 0 || !strings.Contains(stderr, `level=DEBUG msg="bench repetition"`) {
		t.Errorf("--log-level debug: exit %d, stderr lacks the debug lines:\n%s", code, stderr)
	}
	if code, stderr := run(bench...); code != 0 || strings.Contains(stderr, "level=DEBUG") {
		t.Errorf("default level: exit %d, stderr:\n%s", code, stderr)
	}
	if code, stderr := run("--log-level", "loud", "devices"); code != 2 || !strings.Contains(stderr, "--log-level") {
		t.Errorf("--log-level loud: exit %d (want 2), stderr:\n%s", code, stderr)
	}
}
