package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestProgressOnTerminal runs long commands as a user would, with stderr on a
// pseudo-terminal: progress is drawn there as a status line rewritten in
// place; stdout (the --json document) carries none of it. With stderr not a
// terminal, progress is plain lines (no carriage returns, no escapes); with
// --quiet there is none.
func TestProgressOnTerminal(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if out, err := exec.Command("apr", "synth", "--quiet", "-o", model).CombinedOutput(); err != nil {
		t.Fatalf("apr synth: %v\n%s", err, out)
	}
	tests := []struct {
		name string
		args []string
		step string // what a progress step says
	}{
		{"synth", []string{"synth", "--arch", "qwen3", "-o", filepath.Join(dir, "q.gguf")}, "synth: [1/"},
		{"bench", []string{"bench", model, "-p", "8", "-n", "4", "--reps", "2"}, "bench: cpu tg4: repetition 2 of 2"},
		{"qa", []string{"qa", model, "--gate", "tensor_contract,tokenizer", "--backend", "ref"}, "qa: tiny.gguf: gate 2 tokenizer pass"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--json")

			// stderr on a terminal: a status line, redrawn with \r and erased.
			stdout, tty := runOnPTY(t, args)
			if !strings.Contains(tty, tc.step) || !strings.Contains(tty, "\r\x1b[K") {
				t.Errorf("apr %v on a terminal: stderr lacks the status line %q drawn in place:\n%q", args, tc.step, tty)
			}
			checkJSON(t, args, stdout)

			// stderr not a terminal: one plain line per step.
			var out, errb bytes.Buffer
			cmd := exec.Command("apr", args...)
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("apr %v: %v\n%s", args, err, errb.String())
			}
			if !strings.Contains(errb.String(), "\n"+tc.step) && !strings.HasPrefix(errb.String(), tc.step) {
				t.Errorf("apr %v, stderr a pipe: no plain line %q:\n%s", args, tc.step, errb.String())
			}
			if strings.ContainsAny(errb.String(), "\r\x1b") {
				t.Errorf("apr %v, stderr a pipe: terminal control characters in the log:\n%q", args, errb.String())
			}
			checkJSON(t, args, out.String())

			// --quiet: no progress at all, the same document.
			quiet := append(args, "--quiet")
			stdout, tty = runOnPTY(t, quiet)
			if strings.Contains(tty, tc.step) || strings.Contains(tty, "\x1b[K") {
				t.Errorf("apr %v: progress shown despite --quiet:\n%q", quiet, tty)
			}
			checkJSON(t, quiet, stdout)
		})
	}
}

// runOnPTY runs apr with stderr on a new pseudo-terminal and stdout on a
// pipe; it returns both as read.
func runOnPTY(t *testing.T, args []string) (stdout, tty string) {
	t.Helper()
	ptmx, pts, err := pty.Open()
	if err != nil {
		t.Skipf("SKIP (not a pass): no pseudo-terminal on this machine: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command("apr", args...)
	cmd.Stdout, cmd.Stderr = &out, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var ttyBuf bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&ttyBuf, ptmx); close(read) }() // ends with EIO once the child closed its end
	werr := cmd.Wait()
	<-read
	if werr != nil {
		t.Fatalf("apr %v: %v\n%s", args, werr, ttyBuf.String())
	}
	return out.String(), ttyBuf.String()
}

func checkJSON(t *testing.T, args []string, stdout string) {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&v); err != nil {
		t.Errorf("apr %v: stdout is not a JSON document: %v\n%q", args, err, stdout)
		return
	}
	if dec.More() || strings.ContainsAny(stdout, "\r\x1b") {
		t.Errorf("apr %v: stdout holds more than one JSON document:\n%q", args, stdout)
	}
}
