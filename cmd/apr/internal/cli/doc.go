// Package cli is apr's command line: one file per verb, each with an options
// struct filled by flags and a run function that tests call directly.
//
// # Conventions
//
// stdout carries data (with --json, exactly one JSON document); stderr
// carries logs, progress and human text. Exit codes are the Exit* constants.
// A verb file registers its command constructor with register in an init
// function, so adding a verb touches no other file.
package cli
