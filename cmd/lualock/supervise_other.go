//go:build unix && !linux

package main

import "syscall"

// becomeSubreaper does nothing here: only Linux has child subreapers, so a
// process that leaves the command's process group escapes the clean-up.
func becomeSubreaper() {}

// setParentDeathSignal does nothing here: only Linux has a parent-death
// signal. The supervisor's own clean-up (on the end of its control pipe)
// still covers the death of lualock.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// descendants is not known here: the process group stands for the tree.
func descendants(int) []int { return nil }

// anyDescendant is not known here: the process group stands for the tree.
func anyDescendant(int) bool { return false }
