// Package qa is apr's release gate: it runs a fixed sequence of gates, each
// held to a falsifier of the contract set, over one model (or, with no
// model, a small model of every architecture that it synthesizes itself)
// and every gated backend, and reports each gate's verdict with what it
// measured, the threshold it was held to and how long it took.
//
// The gates, in order: tensor_contract, metadata_plausibility, tokenizer,
// template, golden_output (per backend), parity and failclosed (per
// non-reference backend), timing and throughput (per backend).
//
// # Conventions
//
// A verdict is pass, fail or refused{code, by, reason}; nothing is skipped.
// A refusal counts as not passed unless the gate's contract falsifier lists
// its code in params.optional_refusals (for example throughput without a
// recorded baseline, or a base model without a chat template): such a gate
// is reported as "refused-optional", never as pass. Thresholds, parameters
// and optional refusals come from the contracts; a gate whose falsifier the
// contract set does not hold is refused by name (fail closed).
//
// Engines are run only through engine/generate (the one generation loop and
// its logits entry point) by backend name; the reference is the "ref"
// backend unless Options.Reference names another. Every figure in a report
// was measured in the run that produced it.
package qa
