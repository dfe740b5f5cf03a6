package contracts

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/load"

	"github.com/aprqa/apr/golden"
	"github.com/aprqa/apr/schema"
)

//go:embed *.cue
var embedded embed.FS

// The contract groups, which prefix contract ids.
const (
	GroupModel  = "model"
	GroupKernel = "kernel"
	GroupVerb   = "verb"
)

// ErrInvalid is wrapped by every *Error.
var ErrInvalid = errors.New("contracts: invalid")

// Problem is one thing wrong with a contract set.
type Problem struct {
	Pos  string `json:"pos,omitempty"` // file:line:col where known
	ID   string `json:"id,omitempty"`  // the contract or falsifier at fault
	Rule string `json:"rule"`          // which check: "cue", "duplicate", "binds", "expr" …
	Msg  string `json:"msg"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Pos != "" {
		b.WriteString(p.Pos + ": ")
	}
	if p.ID != "" {
		b.WriteString(p.ID + ": ")
	}
	b.WriteString(p.Msg)
	fmt.Fprintf(&b, " [%s]", p.Rule)
	return b.String()
}

// Error lists every problem found; it wraps ErrInvalid.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "contracts: invalid:\n" + strings.Join(lines, "\n")
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Set is a loaded, validated contract set.
type Set struct {
	Source    string   // "embedded" or the directory loaded
	Files     []string // the .cue files, as named in positions
	Contracts schema.Contracts
	// Falsifiers lists every contract's falsifiers in id order, Binds
	// filled in (the listing contract when the falsifier names none).
	Falsifiers []schema.Falsifier

	owner map[string]string // falsifier id → listing contract id

	// Where each contract was written, its canonical text and the set's
	// digest are read from the evaluated CUE (u) when first asked for
	// (detail): a quarter of the set's load, which a command that only
	// reads the contracts (apr run's F2) need not wait for.
	u      cue.Value
	once   sync.Once
	pos    map[string]string // contract or falsifier id → position
	text   map[string]string // contract id → canonical CUE
	digest string
}

// Digest is the sha256 (hex) of the canonical formatted CUE of the set (its
// contracts, named tolerances and the reviewed goldens).
func (s *Set) Digest() string {
	s.detail()
	return s.digest
}

// detail reads pos, text and digest from the evaluated CUE, once; outside
// schema.With (it takes the CUE runtime itself).
func (s *Set) detail() {
	s.once.Do(func() {
		if !s.u.Exists() {
			return // not a loaded set
		}
		schema.With(func(*cue.Context, cue.Value) error {
			s.recordPos(s.u)
			s.recordText(s.u)
			return nil
		})
		s.u = cue.Value{}
	})
}

var embeddedOnce = sync.OnceValues(func() (*Set, error) {
	s, err := fromSnapshot(snapshotJSON)
	if err == nil {
		return s, nil
	}
	snapshotMiss = err
	return loadEmbedded()
})

// snapshotMiss is why Embedded evaluated the CUE instead of reading
// snapshot.json (nil when it read it).
var snapshotMiss error

// loadEmbedded evaluates the embedded CUE.
func loadEmbedded() (*Set, error) {
	return Load(embedded, "embedded", func(p string) string { return "contracts/" + strings.TrimPrefix(p, "/") })
}

// Embedded returns the contracts built into the binary, loaded once: from
// the snapshot of their evaluation when it was written from these sources
// (snapshot.go), otherwise by evaluating them.
func Embedded() (*Set, error) { return embeddedOnce() }

// EmbeddedFS returns the embedded contract files.
func EmbeddedFS() fs.FS { return embedded }

// LoadDir loads the .cue files of dir (package contracts) against the
// embedded schema. dir is a complete contract set, typically a checkout's
// contracts/ directory being edited.
func LoadDir(dir string) (*Set, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("contracts: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("contracts: %s is not a directory", dir)
	}
	// CUE says `"." matched no packages` for a directory without .cue
	// files: say it in the user's words.
	if cues, err := filepath.Glob(filepath.Join(dir, "*.cue")); err == nil && len(cues) == 0 {
		return nil, fmt.Errorf("contracts: %s holds no .cue files: no contracts to load", dir)
	}
	return Load(os.DirFS(dir), dir, func(p string) string { return filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, "/"))) })
}

// Load loads the CUE package at the root of fsys as a contract set. display
// maps a path inside fsys to the name positions show. Any problem — syntax,
// schema, or the checks CUE cannot make — is returned as an *Error listing
// them all.
func Load(fsys fs.FS, source string, display func(string) string) (*Set, error) {
	set := &Set{Source: source, owner: map[string]string{}, pos: map[string]string{}, text: map[string]string{}}
	var problems []Problem
	err := schema.With(func(ctx *cue.Context, sch cue.Value) error {
		insts := load.Instances([]string{"."}, &load.Config{FS: fsys, FromFSPath: display})
		if len(insts) != 1 {
			return fmt.Errorf("contracts: %s: %d CUE packages, want one", source, len(insts))
		}
		inst := insts[0]
		if inst.Err != nil {
			problems = append(problems, cueProblems(inst.Err)...)
			return nil
		}
		for _, f := range inst.Files {
			set.Files = append(set.Files, f.Filename)
		}
		sort.Strings(set.Files)
		problems = append(problems, duplicateContracts(inst)...)
		v := ctx.BuildInstance(inst)
		if err := v.Err(); err != nil {
			problems = append(problems, cueProblems(err)...)
			return nil
		}
		def, err := schema.Def(sch, schema.DefContracts)
		if err != nil {
			return err
		}
		u := def.Unify(v)
		if err := u.Validate(cue.Concrete(true)); err != nil {
			problems = append(problems, cueProblems(err)...)
			return nil
		}
		if err := u.Decode(&set.Contracts); err != nil {
			problems = append(problems, cueProblems(err)...)
			return nil
		}
		set.index()
		if ps := check(set); len(ps) > 0 {
			// Name where each problem was written.
			set.recordPos(u)
			for i := range ps {
				ps[i].Pos = set.pos[ps[i].ID]
			}
			problems = append(problems, ps...)
			return nil
		}
		set.u = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return set, nil
}

// cueProblems turns a CUE error into problems, one per error, each with
// CUE's position and message.
func cueProblems(err error) []Problem {
	var out []Problem
	for _, e := range cueerrors.Errors(err) {
		p := Problem{Rule: "cue", Msg: e.Error()}
		if pos := e.Position(); pos.IsValid() {
			p.Pos = pos.String()
		} else if ps := cueerrors.Positions(e); len(ps) > 0 {
			p.Pos = ps[0].String()
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		out = append(out, Problem{Rule: "cue", Msg: err.Error()})
	}
	return out
}

// duplicateContracts finds a contract declared twice (in one file or two):
// CUE would unify the two silently, so this reads the files themselves.
func duplicateContracts(inst *build.Instance) []Problem {
	seen := map[string]string{}
	var out []Problem
	for _, f := range inst.Files {
		for _, d := range f.Decls {
			group, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			g, _, err := ast.LabelName(group.Label)
			if err != nil || (g != GroupModel && g != GroupKernel && g != GroupVerb) {
				continue
			}
			st, ok := group.Value.(*ast.StructLit)
			if !ok {
				continue
			}
			for _, e := range st.Elts {
				c, ok := e.(*ast.Field)
				if !ok {
					continue
				}
				name, _, err := ast.LabelName(c.Label)
				if err != nil {
					continue
				}
				id := g + "." + name
				pos := c.Pos().String()
				if first, dup := seen[id]; dup {
					out = append(out, Problem{Pos: pos, ID: id, Rule: "duplicate",
						Msg: fmt.Sprintf("contract %s is declared again (first at %s); two contracts may not share an id", id, first)})
					continue
				}
				seen[id] = pos
			}
		}
	}
	return out
}

// recordPos keeps, while the value is at hand, where each contract and
// falsifier was written.
func (s *Set) recordPos(u cue.Value) {
	s.eachContract(u, func(id string, cv cue.Value) {
		s.pos[id] = firstPos(cv)
		fl, err := cv.LookupPath(cue.MakePath(cue.Str("falsifiers"))).List()
		if err != nil {
			return
		}
		for fl.Next() {
			fid, err := fl.Value().LookupPath(cue.MakePath(cue.Str("id"))).String()
			if _, seen := s.pos[fid]; err == nil && !seen {
				s.pos[fid] = firstPos(fl.Value())
			}
		}
	})
}

// recordText keeps each contract's canonical CUE and computes the digest
// over every contract's and named tolerance's canonical text, in id order.
func (s *Set) recordText(u cue.Value) {
	s.eachContract(u, func(id string, cv cue.Value) { s.text[id] = canonical(cv) })
	h := sha256.New()
	for _, id := range s.IDs() {
		fmt.Fprintf(h, "%s\n%s\n", id, s.text[id])
	}
	fmt.Fprintf(h, "tolerances\n%s\n", canonical(u.LookupPath(cue.MakePath(cue.Str("tolerances")))))
	// The reviewed goldens golden falsifiers compare against are part of
	// what a verdict was judged under.
	names, _ := fs.Glob(golden.FS(), "data/*.json")
	for _, name := range names {
		b, _ := fs.ReadFile(golden.FS(), name)
		fmt.Fprintf(h, "golden/%s\n%x\n", name, sha256.Sum256(b))
	}
	s.digest = hex.EncodeToString(h.Sum(nil))
}

func (s *Set) eachContract(u cue.Value, fn func(id string, v cue.Value)) {
	for _, g := range []string{GroupModel, GroupKernel, GroupVerb} {
		it, err := u.LookupPath(cue.MakePath(cue.Str(g))).Fields()
		if err != nil {
			continue
		}
		for it.Next() {
			fn(g+"."+it.Selector().Unquoted(), it.Value())
		}
	}
}

// firstPos returns the position of the first conjunct of v that is not in
// the schema: where the contract author wrote it.
func firstPos(v cue.Value) string {
	if p := v.Pos(); p.IsValid() && !strings.HasPrefix(p.Filename(), "schema/") {
		return p.String()
	}
	if op, args := v.Expr(); op == cue.AndOp {
		for _, c := range args {
			if p := c.Pos(); p.IsValid() && !strings.HasPrefix(p.Filename(), "schema/") {
				return p.String()
			}
		}
	}
	if p := v.Pos(); p.IsValid() {
		return p.String()
	}
	return ""
}

// canonical formats v as CUE with every struct's fields sorted, no comments
// and no attributes: the same meaning always gives the same text.
func canonical(v cue.Value) string {
	n := v.Syntax(cue.Final(), cue.Concrete(true), cue.Docs(false), cue.Attributes(false), cue.Optional(false))
	sortFields(n)
	b, err := format.Node(n, format.Simplify())
	if err != nil {
		return fmt.Sprintf("/* format: %v */", err)
	}
	return string(b)
}

// sortFields sorts every struct's fields by label and drops comments (the
// schema's documentation comes along with the value).
func sortFields(n ast.Node) {
	ast.Walk(n, func(n ast.Node) bool {
		ast.SetComments(n, nil)
		var elts []ast.Decl
		switch x := n.(type) {
		case *ast.StructLit:
			elts = x.Elts
		case *ast.File:
			elts = x.Decls
		default:
			return true
		}
		sort.SliceStable(elts, func(i, j int) bool {
			a, aok := elts[i].(*ast.Field)
			b, bok := elts[j].(*ast.Field)
			if !aok || !bok {
				return false
			}
			an, _, _ := ast.LabelName(a.Label)
			bn, _, _ := ast.LabelName(b.Label)
			return an < bn
		})
		var kept []ast.Decl
		for _, d := range elts {
			if _, isComment := d.(*ast.CommentGroup); !isComment {
				kept = append(kept, d)
			}
		}
		switch x := n.(type) {
		case *ast.StructLit:
			x.Elts = kept
		case *ast.File:
			x.Decls = kept
		}
		return true
	}, nil)
}

// index fills Falsifiers (Binds defaulted) and their owners.
func (s *Set) index() {
	add := func(owner string, fs []schema.Falsifier) {
		for _, f := range fs {
			if f.Binds == "" {
				f.Binds = owner
			}
			s.Falsifiers = append(s.Falsifiers, f)
			if _, dup := s.owner[f.ID]; !dup {
				s.owner[f.ID] = owner
			}
		}
	}
	for name, m := range s.Contracts.Model {
		add(GroupModel+"."+name, m.Falsifiers)
	}
	for name, k := range s.Contracts.Kernel {
		add(GroupKernel+"."+name, k.Falsifiers)
	}
	for name, v := range s.Contracts.Verb {
		add(GroupVerb+"."+name, v.Falsifiers)
	}
	sort.SliceStable(s.Falsifiers, func(i, j int) bool { return s.Falsifiers[i].ID < s.Falsifiers[j].ID })
}
