package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestKernelsListing: apr kernels --json lists the registry with a Go
// kernel of every op for every type it lists, each resolved to its kernel
// contract, and reports every falsifier as "not run", never as passed.
func TestKernelsListing(t *testing.T) {
	code, stdout, stderr := run(t, "kernels", "--json")
	if code != 0 {
		t.Fatalf("apr kernels --json: exit %d, stderr %q", code, stderr)
	}
	var rows []struct {
		Op             string `json:"op"`
		Type           string `json:"type"`
		ISA            string `json:"isa"`
		Contract       string `json:"contract"`
		Runnable       bool   `json:"runnable"`
		KernelContract string `json:"kernel_contract"`
		Unresolved     string `json:"unresolved"`
		Falsifiers     []struct {
			ID      string `json:"id"`
			Verdict string `json:"verdict"`
		} `json:"falsifiers"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("apr kernels --json printed invalid JSON: %v", err)
	}
	if len(rows) == 0 {
		t.Fatal("no kernels listed")
	}
	goKernel := map[string]bool{}
	types := map[string]bool{}
	for _, r := range rows {
		types[r.Type] = true
		if r.ISA == "go" {
			goKernel[r.Op+"/"+r.Type] = true
			if !r.Runnable {
				t.Errorf("%s: a portable Go kernel is not runnable", r.Contract)
			}
		}
		if want := "kernel." + r.Op + "." + r.Type + ".cpu." + r.ISA; r.Contract != want {
			t.Errorf("contract %q, want %q", r.Contract, want)
		}
		if r.KernelContract == "" && r.Unresolved == "" {
			t.Errorf("%s: neither a kernel contract nor a reason", r.Contract)
		}
		for _, f := range r.Falsifiers {
			if f.Verdict != "not run" {
				t.Errorf("%s: falsifier %s verdict %q; apr kernels runs no falsifier", r.Contract, f.ID, f.Verdict)
			}
		}
	}
	for ty := range types {
		for _, op := range []string{"matvec", "matmul"} {
			if !goKernel[op+"/"+ty] {
				t.Errorf("no portable Go %s kernel for %s", op, ty)
			}
		}
	}
	code, human, stderr := run(t, "kernels")
	if code != 0 || len(strings.Split(strings.TrimSpace(human), "\n")) < len(rows)+1 || strings.Contains(human, "pass") {
		t.Errorf("apr kernels: exit %d, %d lines for %d kernels, stderr %q", code, len(strings.Split(human, "\n")), len(rows), stderr)
	}
}
