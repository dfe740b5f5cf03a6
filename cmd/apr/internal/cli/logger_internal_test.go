package cli

import (
	"bytes"
	"strings"
	"testing"
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
