package cli_test

import (
	"encoding/binary"
	"github.com/aprqa/apr/engine/backends"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/testutil"
)

func TestMain(m *testing.M) {
	backends.Register() // as the program's wiring does (tests of package cli call into it without NewRoot)
	testscript.Main(m, map[string]func(){
		"apr":             func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"interrupt-after": func() { os.Exit(interruptAfter()) },
	})
}

// TestScripts runs the CLI scripts in testdata/script: each is a txtar file
// of apr invocations and the output they must (or must not) give. $FIXTURES
// is ../shared/fixtures; scripts that need it begin with `[!fixtures] skip`.
func TestScripts(t *testing.T) {
	fixtures, ferr := testutil.FixturesDir()
	contractsDir := filepath.Join(testutil.RepoRoot(t), "contracts")
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(e *testscript.Env) error {
			e.Setenv("FIXTURES", fixtures)
			e.Setenv("CONTRACTS", contractsDir)
			return nil
		},
		Cmds: scriptCommands(),
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "fixtures":
				return ferr == nil, nil
			case "umask022":
				return umask() == 0o022, nil
			}
			return false, nil
		},
	})
}

func scriptCommands() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	m := map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"writebad": cmdWriteBad,
	}
	for k, v := range scriptCmds {
		m[k] = v
	}
	return m
}

// cmdWriteBad writes a GGUF file with one kind of defect:
// writebad KIND FILE. The file is built valid with apr's writer, then one
// field is corrupted, so the defect is the only thing wrong with it.
func cmdWriteBad(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: writebad KIND FILE")
	}
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.V("llama"))
	b.Set("general.name", gguf.V("bad"))
	if err := b.AddTensor("a", quant.F32, []int64{8}, make([]byte, 32)); err != nil {
		ts.Fatalf("%v", err)
	}
	if err := b.AddTensor("b", quant.F32, []int64{8}, make([]byte, 32)); err != nil {
		ts.Fatalf("%v", err)
	}
	data, lay, err := b.Encode()
	if err != nil {
		ts.Fatalf("%v", err)
	}
	le := binary.LittleEndian
	switch args[0] {
	case "v1":
		le.PutUint32(data[4:], 1)
	case "big-endian":
		binary.BigEndian.PutUint32(data[4:], 3)
	case "absurd-count":
		le.PutUint64(data[8:], 1<<62)
	case "truncated":
		data = data[:lay.TensorInfo[1]+3]
	case "past-eof":
		le.PutUint64(data[lay.TensorOffset[1]:], 1<<30)
	case "misaligned":
		le.PutUint64(data[lay.TensorOffset[1]:], 8)
	case "unknown-type":
		le.PutUint32(data[lay.TensorType[1]:], 1000)
	case "duplicate":
		data[lay.TensorInfo[1]+8] = 'a'
	default:
		ts.Fatalf("writebad: unknown kind %q", args[0])
	}
	if err := os.WriteFile(ts.MkAbs(args[1]), data, 0o644); err != nil {
		ts.Fatalf("%v", err)
	}
}
