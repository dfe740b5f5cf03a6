package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/internal/testutil"
)

// run calls apr in-process and returns its exit code and streams.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(args, bytes.NewReader(nil), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTensorsJSONMatchesGGUFPy: `apr tensors --json` lists the same tensors
// (name, type, shape) that gguf-py's reader recorded for the same files.
func TestTensorsJSONMatchesGGUFPy(t *testing.T) {
	dir := testutil.Fixtures(t)
	type row struct {
		Name  string  `json:"name"`
		Type  string  `json:"type"`
		Shape []int64 `json:"shape"`
	}
	for _, name := range []string{"stories260K", "llama-2-tiny-random"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "expect", "tensors", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var want []row
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := run(t, "tensors", "--json", filepath.Join(dir, "models", name+".gguf"))
			if code != 0 || stderr != "" {
				t.Fatalf("apr tensors --json: exit %d, stderr %q", code, stderr)
			}
			var got []row
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("apr tensors --json printed invalid JSON: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("apr tensors --json %s mismatch (-gguf-py +apr):\n%s", name, diff)
			}
		})
	}
}
