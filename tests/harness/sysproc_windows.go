//go:build windows

package harness

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
