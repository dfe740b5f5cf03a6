// Package falsify holds every falsifier's code and runs the falsifiers that
// contracts name: a registry of Go code by id (Registry; Builtins is this
// package's code, which is all of it but for the few functions only the
// command line or package serve can supply: verb_fields' runner,
// serve_responses' and serve_parity's server), a runner that selects the
// falsifiers that apply to the inputs (a model opened once, engine/loaded;
// the shared fixtures) and turns each into a Result with a verdict
// (package verdict: pass, fail{reason} or refused{removed_by, reason}, never
// a skip that reads as a pass), and Vet, which proves every contract's code
// resolves and every registered code is used. apr qa's gates are this
// package's code run under qa's order; its tests plant engines through
// Engines and RunFunc, bound in a clone of the registry (Clone, Rebind).
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
// Engines know nothing of this package; code is registered here
// (RegisterBuiltins) and, for what needs the command line or package serve,
// in apr's one wiring place (cmd/apr/internal/cli/wire.go) and qa.Register.
package falsify
