package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

type kernelsRow struct {
	Op             string `json:"op"`
	Type           string `json:"type"`
	ISA            string `json:"isa"`
	Backend        string `json:"backend"`
	Contract       string `json:"contract"`
	Runnable       bool   `json:"runnable"`
	KernelContract string `json:"kernel_contract"`
	Unresolved     string `json:"unresolved"`
	Falsifiers     []struct {
		ID      string `json:"id"`
		Code    string `json:"code"`
		Verdict string `json:"verdict"`
		Reason  string `json:"reason"`
		Seed    *int64 `json:"seed"`
	} `json:"falsifiers"`
	FalsifierState string `json:"falsifier_state"`
}

func kernelsJSON(t *testing.T, args ...string) []kernelsRow {
	t.Helper()
	code, stdout, stderr := run(t, append([]string{"kernels", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("apr kernels --json %v: exit %d, stderr %q", args, code, stderr)
	}
	var rows []kernelsRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("apr kernels --json %v printed invalid JSON: %v", args, err)
	}
	if len(rows) == 0 {
		t.Fatalf("apr kernels --json %v: no kernels listed", args)
	}
	return rows
}

// TestKernelsListing: apr kernels --json --no-run lists the registry with a
// Go kernel of every op for every type it lists, each resolved to its kernel
// contract, and reports every falsifier as "not run", never as passed.
func TestKernelsListing(t *testing.T) {
	rows := kernelsJSON(t, "--no-run")
	goKernel := map[string]bool{}
	types := map[string]bool{}
	for _, r := range rows {
		if r.Backend == "cpu" {
			types[r.Type] = true
		}
		if r.ISA == "go" {
			goKernel[r.Op+"/"+r.Type] = true
			if !r.Runnable {
				t.Errorf("%s: a portable Go kernel is not runnable", r.Contract)
			}
		}
		if want := "kernel." + r.Op + "." + r.Type + "." + r.Backend + "." + r.ISA; r.Contract != want {
			t.Errorf("contract %q, want %q", r.Contract, want)
		}
		if r.KernelContract == "" && r.Unresolved == "" {
			t.Errorf("%s: neither a kernel contract nor a reason", r.Contract)
		}
		for _, f := range r.Falsifiers {
			if f.Verdict != "not run" {
				t.Errorf("--no-run: %s: falsifier %s verdict %q", r.Contract, f.ID, f.Verdict)
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
	code, human, stderr := run(t, "kernels", "--no-run")
	if code != 0 || len(strings.Split(strings.TrimSpace(human), "\n")) < len(rows)+1 || strings.Contains(human, "pass") {
		t.Errorf("apr kernels --no-run: exit %d, %d lines for %d kernels, stderr %q", code, len(strings.Split(human, "\n")), len(rows), stderr)
	}
	if code, _, _ := run(t, "kernels", "--no-run", "--seed", "3"); code != 2 {
		t.Errorf("apr kernels --no-run --seed 3: exit %d, want 2 (nothing to seed)", code)
	}
}

// TestKernelsVerdicts: without --no-run, apr kernels runs the kernel
// contracts' falsifiers: every kernel this machine runs has a kernel_dot
// verdict of pass (on this healthy tree), a kernel it cannot run "not run",
// and a falsifier that needs the fixtures (not given) "not run" with that
// reason. No falsifier is left without one of the four verdicts.
func TestKernelsVerdicts(t *testing.T) {
	rows := kernelsJSON(t, "--seed", "7")
	ran := 0
	for _, r := range rows {
		if r.KernelContract == "" {
			continue
		}
		for _, f := range r.Falsifiers {
			switch f.Verdict {
			case "pass":
				ran++
			case "fail", "refused":
				t.Errorf("%s: %s: %s: %s", r.Contract, f.ID, f.Verdict, f.Reason)
			case "not run":
				if f.Reason == "" {
					t.Errorf("%s: %s not run without a reason", r.Contract, f.ID)
				}
			default:
				t.Errorf("%s: %s: verdict %q", r.Contract, f.ID, f.Verdict)
			}
			switch {
			case f.Code == "kernel_dot" && !r.Runnable && f.Verdict != "not run":
				t.Errorf("%s cannot run here but kernel_dot's verdict is %q", r.Contract, f.Verdict)
			case f.Code == "dequant_golden" && (f.Verdict != "not run" || !strings.Contains(f.Reason, "fixtures")):
				t.Errorf("%s: %s without --fixtures: %q (%s)", r.Contract, f.ID, f.Verdict, f.Reason)
			case f.Code == "kernel_dot" && f.Verdict == "pass" && (f.Seed == nil || *f.Seed != 7):
				t.Errorf("%s: kernel_dot's seed %v, want 7", r.Contract, f.Seed)
			}
		}
		if r.Runnable && (r.Type == "Q8_0" || r.Type == "Q4_K") {
			found := false
			for _, f := range r.Falsifiers {
				found = found || f.Code == "kernel_dot" && f.Verdict == "pass"
			}
			if !found {
				t.Errorf("%s: no passing kernel_dot (falsifiers %+v)", r.Contract, r.Falsifiers)
			}
		}
	}
	if ran == 0 {
		t.Fatal("no falsifier passed: apr kernels ran nothing")
	}
}
