package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
)

//go:embed *.cue
var files embed.FS

// The definitions of the schema.
const (
	DefContracts = "#Contracts"
	DefModel     = "#Model"
	DefKernel    = "#Kernel"
	DefVerb      = "#Verb"
	DefFalsifier = "#Falsifier"
	DefTolerance = "#Tolerance"
	DefThreshold = "#Threshold"
	DefReceipt   = "#Receipt"
	DefCell      = "#Cell"
)

// FS returns the embedded schema files (the .cue files of package schema).
func FS() fs.FS { return files }

// Files returns the names of the embedded schema files, sorted.
func Files() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cue") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

var (
	compileOnce sync.Once
	mu          sync.Mutex // guards every use of ctx and schemaVal
	ctx         *cue.Context
	schemaVal   cue.Value
)

// compile builds the embedded schema package. A schema that does not compile
// is a programmer error: the binary cannot check anything, and the schema's
// own test catches it before it ships.
func compile() {
	ctx = cuecontext.New()
	insts := load.Instances([]string{"."}, &load.Config{
		FS:         files,
		FromFSPath: func(p string) string { return "schema/" + strings.TrimPrefix(p, "/") },
	})
	if len(insts) != 1 || insts[0].Err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not load: %v", Details(insts[0].Err)))
	}
	schemaVal = ctx.BuildInstance(insts[0])
	if err := schemaVal.Err(); err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not compile: %v", Details(err)))
	}
	if err := schemaVal.Validate(); err != nil {
		panic(fmt.Sprintf("schema: embedded schema is not valid: %v", Details(err)))
	}
}

// With runs f with the compiled schema and the context it lives in, holding
// the lock that serialises every use of that context. f may build values in
// ctx (compile data, load instances) and unify them with schema; none of those
// values may be used after f returns.
func With(f func(ctx *cue.Context, schema cue.Value) error) error {
	compileOnce.Do(compile)
	mu.Lock()
	defer mu.Unlock()
	return f(ctx, schemaVal)
}

// Def returns the definition name (e.g. DefModel) of schema. Call it inside With.
func Def(schema cue.Value, def string) (cue.Value, error) {
	v := schema.LookupPath(cue.ParsePath(def))
	if !v.Exists() {
		return cue.Value{}, fmt.Errorf("schema: no definition %s", def)
	}
	return v, nil
}

// Validate checks data (JSON or CUE, named filename in errors) against the
// definition def — unify, Validate(cue.Concrete(true)) — and, when out is not
// nil, decodes the unified value (with the schema's defaults filled in) into
// out. The error, if any, is CUE's, with positions in filename; format it
// with Details.
func Validate(def, filename string, data []byte, out any) error {
	return With(func(ctx *cue.Context, schema cue.Value) error {
		d, err := Def(schema, def)
		if err != nil {
			return err
		}
		v := ctx.CompileBytes(data, cue.Filename(filename))
		if err := v.Err(); err != nil {
			return err
		}
		u := d.Unify(v)
		if err := u.Validate(cue.Concrete(true)); err != nil {
			return err
		}
		if out == nil {
			return nil
		}
		return u.Decode(out)
	})
}

// Details formats err as CUE does: one line per error, each with its
// position ("schema/model.cue:12:3") where CUE knows it. A nil error gives "".
func Details(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimRight(cueerrors.Details(err, nil), "\n")
}
