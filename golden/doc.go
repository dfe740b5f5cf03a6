// Package golden holds apr's reviewed golden outputs — greedy generations of
// known models, keyed by the sha256 of the model file — embedded in the
// binary, with their strict reader and canonical writer.
//
// A golden file is produced by the FP32 reference engine through the one
// generation loop (engine/generate) and reviewed before it is committed: the
// golden package's own test regenerates every file and shows any difference
// (go test ./golden -update rewrites them), and checks each against what an
// independent implementation produced where one exists (llama.cpp's greedy
// outputs in the shared fixtures). apr qa's golden_output gate compares every
// backend's greedy output with the golden of the model it gates.
//
// # Conventions
//
// Files live in data/<name>.json. Token ids are exact; a step's
// top1_top2_margins entry is the reference's logit gap between its best and
// second-best token, so a reader knows which steps numerical noise may flip.
// Encode writes the canonical form: parsing and re-encoding a file gives the
// same bytes.
package golden
