// Package qa is apr's release gate: it runs a fixed sequence of gates over
// one model (or, with no model, a tiny model of every architecture that it
// synthesizes itself) and every gated backend, and reports each gate's
// verdict with what it measured, the threshold it was held to and how long
// it took.
//
// The gates, in order, and the contract falsifiers (by code) they run:
//
//	tensor_contract        tensor_contract + tensor_values (NaN/Inf/all-zero scan of the mapping)
//	metadata_plausibility  metadata_plausibility
//	tokenizer              tokenizer_roundtrip
//	template               chat_template
//	golden_output          golden_output, per backend
//	parity                 engine_parity (the model's weight tier; MoE router near-ties excluded), per non-reference backend
//	failclosed             failclosed targeting that parity, plus garbage-reference probes
//	timing                 timing (verb run's run.timing), per backend
//	throughput             throughput, per backend
//
// Every gate runs through falsify.Run: the falsifier's parameters and
// thresholds come from the contract set, with the gated backend (and the
// reference, the baseline file, the threads) set over its params, and the
// model opened once (engine/loaded) handed to falsify. Every falsifier's code
// is falsify's; qa holds none (Register adds only serve_parity's server,
// package serve, which falsify cannot import). What qa owns is what a release
// gate is: which gates, in which order, on which backends, the failclosed
// gate's garbage-reference probes, the run loop and the report. Its tests
// plant engines (hooks) through falsify.Engines, bound to the run in a clone
// of the registry, never through a context. Verdicts, values and thresholds
// are package verdict's.
//
// # Conventions
//
// A verdict is pass, fail or refused{code, by, reason}; nothing is skipped.
// A refusal counts as not passed unless the gate's falsifier lists its code
// in params.optional_refusals (a base model without a chat template, no
// throughput baseline yet, the reference's golden_output without a reviewed
// golden): such a gate is "refused-optional", never pass. A gate whose
// falsifier the contract set lacks is refused (fail closed).
//
// Engines run only through engine/generate, by backend name; the reference
// is "ref" unless Options.Reference names another, and it is consulted
// through falsify.Check.CallRef so that failclosed can withdraw it. Every
// figure in a report was measured by the run that produced it. Throughput
// baselines live in a JSON file keyed by (model sha256, host fingerprint,
// backend), written atomically, raised only with AcceptBaseline.
package qa
