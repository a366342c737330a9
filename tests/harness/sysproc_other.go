//go:build !linux && !windows

package harness

import "syscall"

// sysProcAttr: no Pdeathsig outside Linux; servers of a killed test binary
// may outlive it there.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
