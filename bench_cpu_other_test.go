//go:build !unix

package lualock_test

import "time"

// processCPU reports that this platform's process CPU time is not read:
// the benchmarks then leave out the client's CPU per op.
func processCPU() (time.Duration, bool) { return 0, false }
