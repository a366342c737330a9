package backends

import "testing"

// Scale returns full, or short when the tests run with -short (make
// test-short): the scale tests keep their shape (workers, clients, names,
// every backend, every check) with fewer rounds, for a quick loop during
// development. CI runs make test: the full sizes the issues ask for.
func Scale(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// ShortParallel runs a test that mostly waits (leases, timeouts, a private
// server) in parallel with the others under -short, the quick loop; the
// full run keeps it sequential, away from the parallel tests' load.
func ShortParallel(t *testing.T) {
	if testing.Short() {
		t.Parallel()
	}
}
