// Package schema holds apr's CUE schema, embedded in the binary: #Model (an
// architecture), #Kernel (a quant format or op), #Verb (a command's output),
// #Falsifier, #Receipt and #Cell, and #Contracts (the top level of a contract
// set); with the Go types its values decode into.
//
// # Conventions
//
// The schema is compiled once, into one cue.Context. A cue.Value is not safe
// for concurrent use, so every use of that context goes through With, which
// holds a lock; no cue.Value leaves this package or the function given to
// With. Data is validated the CUE way: unified with a definition, validated
// with cue.Concrete(true), then decoded into Go types. Errors are CUE's own,
// with positions; Details formats them one per line.
package schema
