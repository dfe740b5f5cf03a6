package cli_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aprqa/apr/internal/testutil"
	"github.com/rogpeppe/go-internal/testscript"
)

// readmeLine is one command line of the README, as the test runs it.
type readmeLine struct {
	where string // README.md:LINE
	args  string // the apr command line, without "apr"
	code  int    // the exit code its comment promises (0 unless "exits N")
}

var exitsComment = regexp.MustCompile(`\bexits (\d+)\b`)

// readmeLines returns every apr command line in README.md's sh and plain
// code blocks: `make demo` becomes the Makefile's recipe, `go run ./cmd/apr`
// becomes apr; `go test` and `make test` lines are the test suite itself and
// are not re-run. Any other line is an error: the README must not hold a
// command line this test cannot run.
func readmeLines(t *testing.T, readme, makefile string) []readmeLine {
	t.Helper()
	demo := makeRecipe(t, makefile, "demo")
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeLine
	in, run := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if in {
				in = false
				continue
			}
			in = true
			lang := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			run = lang == "" || lang == "sh"
			continue
		}
		if !in || !run || strings.TrimSpace(line) == "" {
			continue
		}
		cmd, comment, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		where := fmt.Sprintf("README.md:%d", n)
		code := 0
		if m := exitsComment.FindStringSubmatch(comment); m != nil {
			fmt.Sscan(m[1], &code)
		}
		switch {
		case cmd == "make demo":
			for _, r := range demo {
				out = append(out, readmeLine{where + " (make demo)", r, 0})
			}
		case cmd == "make test", strings.HasPrefix(cmd, "go test "):
		case strings.HasPrefix(cmd, "go run ./cmd/apr "):
			out = append(out, readmeLine{where, strings.TrimPrefix(cmd, "go run ./cmd/apr "), code})
		case strings.HasPrefix(cmd, "apr "):
			out = append(out, readmeLine{where, strings.TrimPrefix(cmd, "apr "), code})
		default:
			t.Errorf("%s: a command line the README test cannot run: %q", where, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// makeRecipe returns the apr command lines of a Makefile target's recipe
// ("$(BIN) synth …" → "synth …").
func makeRecipe(t *testing.T, makefile, target string) []string {
	t.Helper()
	b, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, target+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			if r, ok := strings.CutPrefix(strings.TrimSpace(line), "$(BIN) "); ok {
				out = append(out, r)
			}
		case in:
			return out
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: target %s has no $(BIN) lines", makefile, target)
	}
	return out
}

// TestREADME runs every command line of README.md, so the README cannot
// drift from the program: each must exit as its comment says (0 unless
// "exits N"). m.gguf and models/ (the README's stand-ins for the user's
// models) are written with apr synth: no GPU, no ../shared.
func TestREADME(t *testing.T) {
	root := testutil.RepoRoot(t)
	lines := readmeLines(t, filepath.Join(root, "README.md"), filepath.Join(root, "Makefile"))
	if len(lines) < 5 {
		t.Fatalf("found only %d command lines in README.md", len(lines))
	}
	contractsDir, err := filepath.Abs(filepath.Join(root, "contracts"))
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("# generated from README.md by TestREADME\n")
	script.WriteString("exec apr synth --quiet -o m.gguf\n")
	script.WriteString("mkdir models\nexec apr synth --quiet --arch qwen3 -o models/tiny-qwen3.gguf\n")
	script.WriteString("symlink contracts -> " + contractsDir + "\n")
	for _, l := range lines {
		fmt.Fprintf(&script, "\n# %s\nexits %d apr %s\n", l.where, l.code, l.args)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "readme.txtar")
	if err := os.WriteFile(file, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d README command lines", len(lines))
	testscript.Run(t, testscript.Params{
		Files: []string{file},
		Cmds:  scriptCommands(),
	})
}
