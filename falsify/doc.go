// Package falsify runs the falsifiers that contracts name: a registry of Go
// code by id (Register), a runner that selects the falsifiers that apply to
// the inputs (a model, the shared fixtures) and turns each into a Result with
// a verdict — pass, fail{reason} or refused{removed_by, reason}, never a skip
// that reads as a pass — and Vet, which proves every contract's code resolves
// and every registered code is used.
//
// # Conventions
//
// A falsifier's code measures (Check.Measure) and returns nil; the runner
// compares every measured value against the contract's thresholds. Code
// returns Fail for a defect it found without a threshold, a refusal
// (refuse.New) when it cannot decide, and any other error is a refusal by
// the falsifier: a check that could not run never passes. Code that consults a
// reference (another implementation, a golden file) goes through Check.Ref or
// Check.CallRef, so that the failclosed kind can withdraw the reference and
// prove the check refuses.
//
// Engines know nothing of this package; code is registered here (builtin
// kinds) or by the packages that wire engines to apr (cmd/apr/internal/cli).
package falsify
