package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/refuse"
)

func init() { register(11, newTensorsCmd) }

type tensorsOptions struct {
	Path    string
	JSON    bool
	Dequant string
}

// TensorRow is one row of `apr tensors`.
type TensorRow struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"` // file offset of the tensor's data
	Bytes  uint64  `json:"bytes"`
}

func newTensorsCmd(env *Env) *cobra.Command {
	var opts tensorsOptions
	c := &cobra.Command{
		Use:   "tensors FILE",
		Short: "List a GGUF file's tensors, or print one tensor's values",
		Long: `tensors lists every tensor of a GGUF file: name, ggml type, shape (ggml
order, ne0 first), file offset of its data and its size in bytes.

With --dequant NAME it prints that tensor's values dequantized to float32
instead (--json: {"name","type","shape","values"}), so that what a tensor
holds can be compared with another tool.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Path = args[0]
			return runTensors(env, opts)
		},
	}
	jsonFlag(c, &opts.JSON)
	c.Flags().StringVar(&opts.Dequant, "dequant", "", "print the values of the named tensor as float32")
	return c
}

func runTensors(env *Env, opts tensorsOptions) error {
	f, err := gguf.Open(opts.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	if opts.Dequant != "" {
		return dequantTensor(env, f, opts)
	}
	rows := make([]TensorRow, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		rows[i] = TensorRow{Name: t.Name, Type: t.Type.String(), Shape: t.Shape, Offset: f.DataOffset + int64(t.Offset), Bytes: t.Size}
		if rows[i].Shape == nil {
			rows[i].Shape = []int64{}
		}
	}
	if opts.JSON {
		return writeJSON(env.Stdout, rows)
	}
	w := bufio.NewWriter(env.Stdout)
	fmt.Fprintf(w, "%-48s %-8s %-24s %14s %14s\n", "NAME", "TYPE", "SHAPE", "OFFSET", "BYTES")
	for _, r := range rows {
		fmt.Fprintf(w, "%-48s %-8s %-24s %14d %14d\n", r.Name, r.Type, fmt.Sprint(r.Shape), r.Offset, r.Bytes)
	}
	return w.Flush()
}

// maxDequantValues bounds --dequant so that a request for a huge tensor is
// refused instead of filling memory and the terminal.
const maxDequantValues = 64 << 20

func dequantTensor(env *Env, f *gguf.File, opts tensorsOptions) error {
	t, ok := f.Tensor(opts.Dequant)
	if !ok {
		return badInputf("%s: no tensor named %q", f.Path, opts.Dequant)
	}
	n := t.Elems()
	if n > maxDequantValues {
		return refuse.New("tensors", "tensor %q has %d values; --dequant prints at most %d", t.Name, n, maxDequantValues)
	}
	vals := make([]float32, n)
	if err := quant.Dequantize(t.Type, f.Data(t), vals); err != nil {
		return refuse.Wrap("engine/quant", fmt.Errorf("tensor %q: %w", t.Name, err))
	}
	w := bufio.NewWriterSize(env.Stdout, 1<<16)
	if opts.JSON {
		// Streamed by hand: a large tensor should not be built twice in memory.
		name, _ := json.Marshal(t.Name)
		shape, _ := json.Marshal(t.Shape)
		fmt.Fprintf(w, "{\"name\":%s,\"type\":%q,\"shape\":%s,\"values\":[", name, t.Type.String(), shape)
		for i, v := range vals {
			if i > 0 {
				w.WriteByte(',')
			}
			writeJSONFloat32(w, v)
		}
		w.WriteString("]}\n")
		return w.Flush()
	}
	for _, v := range vals {
		w.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
		w.WriteByte('\n')
	}
	return w.Flush()
}

// writeJSONFloat32 writes v with the fewest digits that read back to the same
// float32; non-finite values, which JSON cannot hold, are written as strings.
func writeJSONFloat32(w io.Writer, v float32) {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		io.WriteString(w, `"NaN"`)
	case math.IsInf(f, 1):
		io.WriteString(w, `"+Inf"`)
	case math.IsInf(f, -1):
		io.WriteString(w, `"-Inf"`)
	default:
		io.WriteString(w, strconv.FormatFloat(f, 'g', -1, 32))
	}
}
