//go:build unix

package lualock_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used,
// and true; the benchmarks report it per op as the client's CPU.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
