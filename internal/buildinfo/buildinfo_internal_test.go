package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/aprqa/apr", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "-tags", Value: "noasm,cuda"},
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "abcdef"},
			{Key: "vcs.time", Value: "2026-01-01T00:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	type got struct {
		Revision, Source, Dirty string
		Tags, Settings          []string
	}
	tests := []struct {
		name          string
		rev, dirtyArg string
		bi            *debug.BuildInfo
		want          got
	}{
		{"vcs settings", "", "", vcs, got{"abcdef", SourceVCS, "true", []string{"cuda", "noasm"}, []string{"CGO_ENABLED=0"}}},
		{"ldflags win over vcs", "123", "false", vcs, got{"123", SourceLdflags, "false", []string{"cuda", "noasm"}, []string{"CGO_ENABLED=0"}}},
		{"ldflags with garbage dirty", "123", "maybe", nil, got{"123", SourceLdflags, Unknown, []string{}, nil}},
		{"nothing known", "", "true", nil, got{Unknown, SourceNone, Unknown, []string{}, nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			oldRev, oldDirty := revision, dirty
			t.Cleanup(func() { revision, dirty = oldRev, oldDirty })
			revision, dirty = tc.rev, tc.dirtyArg
			id := fromBuildInfo(tc.bi, tc.bi != nil)
			g := got{id.Revision, id.RevisionSource, id.Dirty, id.Tags, id.Settings}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("fromBuildInfo(%s) mismatch (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}
