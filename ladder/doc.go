// Package ladder runs every model of a directory tree through every verb on
// every backend (each a cell) and records the verdicts in a receipt.
//
// A cell ends pass, fail{reason} or refused{removed_by, reason}; there is no
// skipped. A cell is refused when its model cannot take part (ByUniverse:
// dangling link, not a model), when a contract excludes its backend or quant
// type (Gate, by the contract's id), or when no executor is registered for its
// verb and backend (ByLadder, "no executor for verb X"). Executors are
// CellFuncs registered per (verb, backend) in an Executors value, so verbs
// plug in as their code lands and tests plant panics, hangs and failures.
//
// # Models
//
// Discover finds GGUF files by their magic bytes, not their names; a file
// named *.gguf without the magic and a dangling symlink are refused models,
// so nothing is left out silently. A model's bytes, sha256 and header
// describe the object its path resolves to. Types come from the tensor infos
// (ReadHeader): the dominant type is the one holding most layer-weight
// elements.
//
// # Running
//
// Run keeps a model mapped while its cells run and the objects an executor
// keeps with Model.Keep (an engine) while the model's cells on one backend
// run. Each cell runs in its own goroutine under a deadline: a panic is that
// cell's fail, and an executor that ignores its deadline is abandoned after a
// grace period (a goroutine cannot be killed; the model stays mapped) and
// recorded as a fail while the rest continue.
//
// With Config.Worker set (the CLI's default, --isolate process) the cells of
// each model run instead in a child process of the same binary (ServeWorker,
// `apr ladder worker`), which keeps the model resident across its cells. A
// crash no recover can catch (a fatal runtime error, a driver segfault, an
// exit) or a hang of the whole process then fails that one cell, with the
// worker's exit status and first stderr line as the reason, and a fresh
// worker takes the next cell.
//
// Every decided cell is written atomically (temporary file, then rename) to
// OutDir/cells/. A run interrupted half-way is resumed by running it again:
// a cell whose result exists with the same binary sha256, model sha256 and
// contracts digest is reused, not re-run. The receipt is then assembled from
// the cells and written atomically to OutDir/receipt.json.
//
// # Shards
//
// Shard K/N runs the models AssignShards gives to K (whole models,
// balanced by bytes; deterministic from model keys and sizes). Merge combines
// the shards' receipts, refusing receipts of another binary, other contracts
// or another universe, and any gap. Matrix lists the shards for a CI matrix.
//
// # Conventions
//
// A model key is the root's base name and the path under it, slash-separated
// ("models/synth/qwen2-tiny-Q4_0.gguf"), so keys, cell ids and shard slices
// are the same on every machine that holds the same tree. A cell id is
// "key|verb|backend".
package ladder
