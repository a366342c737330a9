//go:build linux

package harness

import "syscall"

// sysProcAttr puts the child in its own process group (so terminal signals
// aimed at `go test` do not hit it directly) and makes the kernel SIGKILL it
// when the test process goes away.
//
// Pdeathsig fires when the thread that forked the child exits. The Go
// runtime only lets threads exit when a goroutine exits while locked to its
// thread (runtime.LockOSThread); the harness itself never does that.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
