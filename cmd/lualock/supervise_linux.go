package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, Linux 3.4

// becomeSubreaper makes the supervisor a child subreaper: the command's
// orphaned descendants become its children instead of init's, so that none
// of them can leave the tree the supervisor cleans up.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// setParentDeathSignal makes the kernel SIGKILL the command when the thread
// that started it (kept alive for the command's life) ends, as it does when
// the supervisor dies.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// descendants returns the live (not zombie) processes descended from root,
// read from /proc.
func descendants(root int) []int { return walk(root, false) }

// anyDescendant reports whether a process descended from root is left, a
// zombie not reaped yet included: to another process it still looks alive
// (kill -0 succeeds), so the command is not gone until it is reaped.
func anyDescendant(root int) bool { return len(walk(root, true)) > 0 }

// walk returns the processes descended from root, read from /proc, with the
// zombies when zombies is set.
func walk(root int, zombies bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "X" || f[0] == "Z" && !zombies {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
