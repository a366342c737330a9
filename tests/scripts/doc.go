// Package scripts tests the generated script wrappers (package generated)
// on every backend: what each script returns, as its header and
// docs/PROTOCOL.md say, and exactly which keys, values, expiries
// and messages it leaves behind. The fair scripts get a sanity check of the
// wrapper contract only; the fair lock's algorithm has its own suite
// (tests/fair).
//
// Files: keys_test.go (key names and calls of the protocol),
// inspect_test.go (what Redis holds), reentrant_test.go and fair_test.go
// (the scripts of each lock), cache_test.go (NOSCRIPT recovery, LoadAll,
// pipelines), cluster_test.go (cluster key layout), generated_test.go
// (constants, retries, errors).
package scripts
