// Package contracts holds apr's contract instances — one per architecture
// (model.*), per ggml type the engines support (kernel.*), and per verb
// (verb.*) — embedded in the binary, and loads them (or a contract author's
// directory) against the embedded schema: unify with #Contracts, validate as
// concrete, decode into Go types, then check what CUE cannot (duplicate ids,
// expressions, layouts against the ggml type registry).
//
// It also checks a GGUF file against a model contract (CheckModel): the
// hyper-parameters, their ranges and constraints, and every tensor's presence,
// shape and type. Engines may use it; it knows nothing of falsifiers' code.
//
// # Conventions
//
// A Set is plain Go data, safe to share once loaded; no cue.Value outlives
// Load. Ids are "model.<name>", "kernel.<name>", "verb.<name>"; falsifier
// ids are unique across the set. The digest is the sha256 of the evaluated
// contracts (each formatted as canonical CUE: fields sorted, no comments,
// defaults filled in; in id order; then the named tolerances), so a comment or
// a file split does not change it and any change of meaning does; the
// sha256 of every reviewed golden (package golden, which golden falsifiers
// compare against) is part of it too.
//
// The embedded set is read from snapshot.json, its evaluation written by
// `go test ./contracts -run TestSnapshotCurrent -update` (snapshot.go): a
// cache keyed by the sha256 of the CUE and the goldens it came from, used
// only when those are this binary's, so that a process does not spend
// ~150 ms evaluating CUE before it can read a tier. The CUE stays the one
// source; TestSnapshotCurrent fails while the two differ.
package contracts
