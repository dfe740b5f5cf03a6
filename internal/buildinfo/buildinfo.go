// Package buildinfo says which apr binary is running: its module version,
// source revision and dirty flag, Go version, build tags and the sha256 of
// the executable file itself, so that a receipt names the exact binary that
// produced it.
//
// # Stamping the revision
//
// The revision and dirty flag come from, in order:
//
//  1. link-time stamps:
//     go build -ldflags "-X github.com/aprqa/apr/internal/buildinfo.revision=$(git rev-parse HEAD)
//     -X github.com/aprqa/apr/internal/buildinfo.dirty=$(test -z "$(git status --porcelain)" && echo false || echo true)"
//     (optionally also -X github.com/aprqa/apr/internal/buildinfo.version=v1.2.3);
//  2. the vcs.revision and vcs.modified settings that the go command records
//     when it builds with -buildvcs=true inside a checkout;
//  3. otherwise "unknown", said as such, never guessed.
//
// The executable's sha256 is always measured from os.Executable(), so two
// binaries that carry the same stamp but differ in content still differ.
package buildinfo

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/aprqa/apr/internal/regfile"
)

// Link-time stamps. Leave them empty in source; the Makefile sets them with
// -ldflags "-X github.com/aprqa/apr/internal/buildinfo.NAME=VALUE".
var (
	revision string // full commit hash
	dirty    string // "true" or "false"
	version  string // release version, e.g. v0.3.0; empty for development builds
)

// Unknown is written wherever a fact could not be established.
const Unknown = "unknown"

// Sources of the revision.
const (
	SourceLdflags = "ldflags" // stamped with -X at link time
	SourceVCS     = "vcs"     // recorded by the go command (-buildvcs=true)
	SourceNone    = "none"    // neither: Revision is "unknown"
)

// Identity describes one binary. Two runs with equal Identity ran the same
// executable bytes (equal SHA256); the other fields say where it came from.
type Identity struct {
	Module         string   `json:"module"`          // main module path
	Version        string   `json:"version"`         // stamped version, else the module version ("(devel)" for a checkout build)
	Revision       string   `json:"revision"`        // source revision, or "unknown"
	RevisionSource string   `json:"revision_source"` // ldflags, vcs or none
	Dirty          string   `json:"dirty"`           // "true", "false" or "unknown"
	VCSTime        string   `json:"vcs_time,omitempty"`
	GoVersion      string   `json:"go_version"`
	GOOS           string   `json:"goos"`
	GOARCH         string   `json:"goarch"`
	Tags           []string `json:"tags"`                   // -tags given to the build, sorted; empty when none
	Settings       []string `json:"settings,omitempty"`     // other build settings that change code: CGO_ENABLED, GOAMD64, -trimpath …
	Executable     string   `json:"executable"`             // path of the executable that ran
	SHA256         string   `json:"sha256"`                 // of the executable file's bytes
	Error          string   `json:"error,omitempty"`        // why SHA256 could not be measured, if it could not
	Deps           int      `json:"dependencies,omitempty"` // number of module dependencies linked in
}

// Short returns a one-line description: "module version rev[+dirty] sha256:…".
func (id Identity) Short() string {
	rev := id.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch id.Dirty {
	case "true":
		rev += "+dirty"
	case Unknown:
		rev += "(dirty?)"
	}
	sha := id.SHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	return fmt.Sprintf("%s %s %s %s sha256:%s", id.Module, id.Version, rev, id.GoVersion, sha)
}

var current = sync.OnceValue(func() Identity {
	exe, err := os.Executable()
	id := fromBuildInfo(debug.ReadBuildInfo())
	if err != nil {
		id.Executable, id.SHA256, id.Error = Unknown, "", err.Error()
		return id
	}
	id.Executable = exe
	sum, err := FileSHA256(exe)
	if err != nil {
		id.SHA256, id.Error = "", err.Error()
		return id
	}
	id.SHA256 = sum
	return id
})

// Current returns the identity of the running binary. The executable is
// hashed once per process.
func Current() Identity {
	id := current()
	id.Tags = slices.Clone(id.Tags)
	id.Settings = slices.Clone(id.Settings)
	return id
}

// fromBuildInfo fills everything but the executable fields, from the
// link-time stamps and bi (which may be nil).
func fromBuildInfo(bi *debug.BuildInfo, ok bool) Identity {
	id := Identity{
		Module: Unknown, Version: Unknown, Revision: Unknown, RevisionSource: SourceNone,
		Dirty: Unknown, GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		Tags: []string{},
	}
	var vcsRev, vcsModified string
	if ok && bi != nil {
		id.Module = bi.Main.Path
		if bi.Main.Version != "" {
			id.Version = bi.Main.Version
		}
		id.GoVersion = bi.GoVersion
		id.Deps = len(bi.Deps)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRev = s.Value
			case "vcs.modified":
				vcsModified = s.Value
			case "vcs.time":
				id.VCSTime = s.Value
			case "-tags":
				for t := range strings.SplitSeq(s.Value, ",") {
					if t = strings.TrimSpace(t); t != "" {
						id.Tags = append(id.Tags, t)
					}
				}
			case "GOOS":
				id.GOOS = s.Value
			case "GOARCH":
				id.GOARCH = s.Value
			case "CGO_ENABLED", "-trimpath", "-race", "-msan", "-asan", "-gcflags", "-asmflags",
				"-buildmode", "-compiler", "-pgo", "GOAMD64", "GOARM", "GOARM64", "GO386",
				"GORISCV64", "GOEXPERIMENT":
				id.Settings = append(id.Settings, s.Key+"="+s.Value)
			}
		}
		slices.Sort(id.Tags)
		slices.Sort(id.Settings)
	}
	if version != "" {
		id.Version = version
	}
	switch {
	case revision != "":
		id.Revision, id.RevisionSource = revision, SourceLdflags
		id.Dirty = normDirty(dirty)
	case vcsRev != "":
		id.Revision, id.RevisionSource = vcsRev, SourceVCS
		id.Dirty = normDirty(vcsModified)
	default:
		// No revision known: a dirty stamp alone says nothing trustworthy.
		id.Dirty = Unknown
	}
	return id
}

func normDirty(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "dirty":
		return "true"
	case "false", "0", "no", "clean":
		return "false"
	}
	return Unknown
}

// FileSHA256 returns the hex sha256 of the file's bytes (regfile.SHA256:
// a regular file, streamed).
func FileSHA256(path string) (string, error) {
	sum, _, err := regfile.SHA256(path)
	if err != nil {
		return "", fmt.Errorf("buildinfo: %w", err)
	}
	return sum, nil
}
