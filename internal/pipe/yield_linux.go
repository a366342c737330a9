package pipe

import "syscall"

// yield gives the CPU to another thread that is ready to run on it, if
// any (sched_yield).
func yield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
