package buildinfo_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/internal/buildinfo"
)

const pkg = "github.com/aprqa/apr/internal/buildinfo"

// buildPrintID builds testdata/printid with ldflags and returns the identity
// the resulting binary reports about itself.
func buildPrintID(t *testing.T, ldflags string) buildinfo.Identity {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("SKIP (not a pass): no go command at %s to rebuild a test binary", goBin)
	}
	exe := filepath.Join(t.TempDir(), "printid")
	cmd := exec.Command(goBin, "build", "-o", exe, "-ldflags", ldflags, "./testdata/printid")
	// The environment of this repository sets GOFLAGS=-buildvcs=false; keep
	// it so the link-time stamp is the only source of the revision.
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("running %s: %v", exe, err)
	}
	var id buildinfo.Identity
	if err := json.Unmarshal(out, &id); err != nil {
		t.Fatalf("decoding printid output %q: %v", out, err)
	}
	sum, err := buildinfo.FileSHA256(exe)
	if err != nil {
		t.Fatal(err)
	}
	if id.SHA256 != sum {
		t.Errorf("printid reported sha256 %s, the file hashes to %s", id.SHA256, sum)
	}
	return id
}

func TestRebuiltBinaryHasDifferentIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (not a pass): -short: rebuilding test binaries takes seconds")
	}
	a := buildPrintID(t, "-X "+pkg+".revision=1111111111111111111111111111111111111111 -X "+pkg+".dirty=false")
	b := buildPrintID(t, "-X "+pkg+".revision=2222222222222222222222222222222222222222 -X "+pkg+".dirty=true -X "+pkg+".version=v9.9.9")
	plain := buildPrintID(t, "")

	type stamp struct{ Revision, Source, Dirty, Version string }
	tests := []struct {
		name string
		got  buildinfo.Identity
		want stamp
	}{
		{"stamped clean", a, stamp{"1111111111111111111111111111111111111111", buildinfo.SourceLdflags, "false", "(devel)"}},
		{"stamped dirty", b, stamp{"2222222222222222222222222222222222222222", buildinfo.SourceLdflags, "true", "v9.9.9"}},
		{"unstamped, no vcs info", plain, stamp{buildinfo.Unknown, buildinfo.SourceNone, buildinfo.Unknown, "(devel)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := stamp{tc.got.Revision, tc.got.RevisionSource, tc.got.Dirty, tc.got.Version}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Current() stamp mismatch (-want +got):\n%s", diff)
			}
			if tc.got.Module != "github.com/aprqa/apr" {
				t.Errorf("Current().Module = %q, want github.com/aprqa/apr", tc.got.Module)
			}
		})
	}
	if a.SHA256 == b.SHA256 || a.SHA256 == plain.SHA256 || b.SHA256 == plain.SHA256 {
		t.Errorf("executables with different stamps hash alike: %s %s %s", a.SHA256, b.SHA256, plain.SHA256)
	}
	if a.Short() == b.Short() {
		t.Errorf("Short() does not tell the binaries apart: %q", a.Short())
	}
}

func TestCurrentHashesThisExecutable(t *testing.T) {
	id := buildinfo.Current()
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("SKIP (not a pass): os.Executable: %v", err)
	}
	sum, err := buildinfo.FileSHA256(exe)
	if err != nil {
		t.Fatal(err)
	}
	if id.SHA256 != sum || id.Executable != exe {
		t.Errorf("Current() = {Executable %q, SHA256 %s}, want {%q, %s}", id.Executable, id.SHA256, exe, sum)
	}
	if id.GoVersion != runtime.Version() {
		t.Errorf("Current().GoVersion = %q, want %q", id.GoVersion, runtime.Version())
	}
}
