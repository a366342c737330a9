//go:build unix

package main

// The command runs under a supervisor: a second lualock process (this
// binary, re-executed with the hidden subcommand superviseCmd) that starts
// the command as its own child, in a process group of the command's own, and
// outlives it. The lualock process that holds the lock (the holder) talks to
// the supervisor over two pipes:
//
//   - control, holder -> supervisor: "hold JSON" (what the holder holds, a
//     handover: see handover.go), "signal N" (forward signal N to the
//     command's process group) and "stop" (the lock is lost: SIGTERM to every
//     process of the command, SIGKILL after the grace time). End of file,
//     which the kernel delivers whenever the holder dies, even by SIGKILL,
//     means "the holder is gone": SIGKILL to every process of the command,
//     at once, and once none is left the supervisor releases the hold the
//     holder told it of, so that the next waiter gets it at once.
//   - events, supervisor -> holder: "started PID", "error CODE MESSAGE" (the
//     command could not be started), "exit STATUS" (the command and
//     everything it started are gone; STATUS is the shell's view of the
//     command's end).
//
// "Every process of the command" is its process group and, on Linux, every
// process descended from the supervisor, which is a child subreaper
// (PR_SET_CHILD_SUBREAPER): a process that leaves the group (setsid, a
// double fork) stays its descendant. When the command exits, what it left
// running is stopped the same way (SIGTERM, SIGKILL after the grace time)
// before the lock is released. The supervisor sits in a process group of its
// own, so a signal to the holder's group (kill -9 -PGID of a cron job) does
// not reach it. On Linux the command also gets SIGKILL from the kernel if the
// supervisor itself dies (a parent-death signal, from an OS thread that stays
// locked to the goroutine waiting for the command).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// superviseCmd is the hidden subcommand that makes this binary the
// supervisor.
const superviseCmd = "__supervise"

// supervisor is the holder's side of a running supervisor.
type supervisor struct {
	proc    *os.Process
	ctl     *os.File
	events  chan string   // lines from the supervisor; closed at end of file
	exited  chan struct{} // closed when the supervisor process has been waited for
	pgid    int           // the command's process group, once started
	restore func()        // gives the terminal back to lualock's group
}

// startSupervised starts the supervisor, which starts path with argv and
// env. It returns once the supervisor has reported the command started, or
// the exit code and message of a command that could not be started.
func startSupervised(path string, argv, env []string, grace time.Duration, stdin io.Reader, stdout, stderr io.Writer) (*supervisor, int, error) {
	self, err := selfExe()
	if err != nil {
		return nil, exitError, err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, exitError, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, exitError, err
	}
	// lualock is a subreaper too: should the supervisor be killed, what it
	// leaves becomes lualock's, which kills it (killTree).
	becomeSubreaper()
	fg := foreground()
	args := []string{self, superviseCmd, "-grace", grace.String()}
	if fg {
		args = append(args, "-fg")
	}
	args = append(args, "--", path)
	args = append(args, argv...)
	cmd := &exec.Cmd{
		Path:       self,
		Args:       args,
		Env:        env,
		Stdin:      stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{ctlR, evW}, // fds 3 and 4
		// A group of its own: signals to lualock's group do not reach it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	ctlR.Close()
	evW.Close()
	if err != nil {
		ctlW.Close()
		evR.Close()
		return nil, exitError, fmt.Errorf("start the supervisor: %w", err)
	}
	s := &supervisor{proc: cmd.Process, ctl: ctlW, events: make(chan string, 4), exited: make(chan struct{})}
	if fg {
		s.restore = reclaimTerminal
	}
	go func() {
		defer evR.Close()
		sc := bufio.NewScanner(evR)
		for sc.Scan() {
			s.events <- sc.Text()
		}
		close(s.events)
	}()
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	line, ok := <-s.events
	switch {
	case ok && strings.HasPrefix(line, "started "):
		s.pgid, _ = strconv.Atoi(strings.TrimPrefix(line, "started "))
		return s, -1, nil
	case ok && strings.HasPrefix(line, "error "):
		code, msg, _ := strings.Cut(strings.TrimPrefix(line, "error "), " ")
		n, _ := strconv.Atoi(code)
		s.close()
		return nil, n, errors.New(msg)
	default:
		s.close()
		// It may have died after starting the command and before saying
		// so: what it started is lualock's now (a subreaper on Linux).
		s.killTree()
		return nil, exitError, errors.New("the supervisor ended before starting the command")
	}
}

// send writes one control line; errors mean the supervisor is gone, which
// the events channel reports.
func (s *supervisor) send(line string) { _, _ = io.WriteString(s.ctl, line+"\n") }

// close closes the control pipe (which, while the command runs, makes the
// supervisor kill it) and waits for the supervisor.
func (s *supervisor) close() {
	s.ctl.Close()
	<-s.exited
	for range s.events {
	}
	if s.restore != nil {
		s.restore()
	}
}

// killTree is the holder's last resort when the supervisor died: SIGKILL
// to the command's process group and, on Linux, to every process descended
// from lualock (the supervisor's orphans became lualock's children), until
// none is left or a second has passed.
func (s *supervisor) killTree() {
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		left := false
		if s.pgid > 1 && syscall.Kill(-s.pgid, syscall.SIGKILL) == nil {
			left = true
		}
		for _, pid := range descendants(os.Getpid()) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			left = true
		}
		for { // reap the orphans
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		if !left {
			return
		}
	}
}

// runSupervisor is the supervisor's main: args are its flags, "--", the
// command's path and argv. Its exit code matters to nobody: it reports on
// fd 4.
func runSupervisor(args []string) int {
	ctl := os.NewFile(3, "control")
	ev := os.NewFile(4, "events")
	if ctl == nil || ev == nil {
		fmt.Fprintln(os.Stderr, "lualock: "+superviseCmd+" is internal to lualock lock")
		return exitUsage
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	var grace time.Duration
	fg := false
	for len(args) > 0 && args[0] != "--" {
		switch args[0] {
		case "-grace":
			if len(args) > 1 {
				grace, _ = time.ParseDuration(args[1])
				args = args[1:]
			}
		case "-fg":
			fg = true
		}
		args = args[1:]
	}
	if len(args) < 3 {
		fmt.Fprintln(ev, "error 1 supervisor: no command")
		return exitUsage
	}
	path, argv := args[1], args[2:]

	// Catch (not ignore: an ignored signal stays ignored in the command)
	// what a terminal or the holder's group may send; the command gets its
	// own copy through its group.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	becomeSubreaper()

	sv := &superv{grace: grace}
	started := make(chan error, 1)
	go sv.startCommand(path, argv, fg, started)
	if err := <-started; err != nil {
		code := exitCannotExec
		if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintf(ev, "error %d %s: %v\n", code, argv[0], err)
		return exitError
	}
	fmt.Fprintf(ev, "started %d\n", sv.pgid)

	ctlLines := make(chan string)
	go func() {
		sc := bufio.NewScanner(ctl)
		sc.Buffer(nil, 1<<20) // a "hold" line carries NAME, up to 64 KiB
		for sc.Scan() {
			ctlLines <- sc.Text()
		}
		close(ctlLines)
	}()

	// Phases: running; stopping (TERM sent, KILL at killAt); killing (KILL
	// until nothing is left). The command exiting while running starts
	// stopping for what it left behind.
	// SIGCHLD reports the command's end; the ticker is a safety net while
	// it runs, and paces the clean-up after.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	cleaning := false
	var killAt time.Time
	stopping, killing, orphaned := false, false, false
	var held *handover // what the holder holds, once it said so
	stop := func() {
		if !stopping && !killing {
			stopping = true
			sv.signalAll(syscall.SIGTERM)
			killAt = time.Now().Add(sv.grace)
		}
	}
	for {
		select {
		case <-sigs:
		case <-chld:
			sv.reap()
		case line, ok := <-ctlLines:
			switch {
			case !ok:
				ctlLines = nil
				orphaned, killing = true, true
				sv.signalAll(syscall.SIGKILL)
			case strings.HasPrefix(line, "signal "):
				if n, err := strconv.Atoi(strings.TrimPrefix(line, "signal ")); err == nil {
					_ = syscall.Kill(-sv.pgid, syscall.Signal(n))
				}
			case line == "stop":
				stop()
			case strings.HasPrefix(line, "hold "):
				if h, err := parseHandover(strings.TrimPrefix(line, "hold ")); err == nil {
					held = h
				}
			}
		case <-tick.C:
			sv.reap()
		}
		if sv.status >= 0 && !stopping && !killing && sv.alive() {
			stop() // the command exited; stop what it left running
		}
		if stopping && !killing && time.Now().After(killAt) && sv.alive() {
			if sv.status < 0 {
				fmt.Fprintf(os.Stderr, "lualock: %s still running %v after SIGTERM: sending SIGKILL\n", argv[0], sv.grace)
			} else {
				fmt.Fprintf(os.Stderr, "lualock: processes %s left behind still running %v after SIGTERM: sending SIGKILL\n", argv[0], sv.grace)
			}
			killing = true
		}
		if killing {
			sv.signalAll(syscall.SIGKILL)
		}
		if !cleaning && (stopping || killing || sv.status >= 0) {
			cleaning = true
			tick.Reset(10 * time.Millisecond)
		}
		if sv.status >= 0 && !sv.alive() {
			break
		}
	}
	if !orphaned {
		fmt.Fprintf(ev, "exit %d\n", sv.status)
	} else if held != nil {
		// lualock died: nothing of the command is left, so the hold can go
		// to the next waiter now rather than when its lease runs out.
		held.giveBack(os.Stderr)
	}
	return exitOK
}

// superv is the supervisor's own state.
type superv struct {
	grace  time.Duration
	pid    int // the command; its process group has the same id
	pgid   int
	status int // the command's exit status, -1 while it runs
}

// startCommand starts the command and then keeps its goroutine, and so its
// locked OS thread, alive as long as the command runs: the command's
// parent-death signal fires when that thread exits.
func (sv *superv) startCommand(path string, argv []string, fg bool, started chan<- error) {
	runtime.LockOSThread()
	// Never unlocked: the thread ends with the supervisor.
	attr := &syscall.SysProcAttr{Setpgid: true}
	if fg {
		attr.Foreground, attr.Ctty = true, 0
	}
	setParentDeathSignal(attr)
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, SysProcAttr: attr}
	sv.status = -1
	if err := cmd.Start(); err != nil {
		started <- err
		return
	}
	sv.pid, sv.pgid = cmd.Process.Pid, cmd.Process.Pid
	started <- nil
	select {} // hold the thread; the reaper waits for the command
}

// reap collects every child that has exited: the command (whose status it
// records) and the orphans a subreaper inherits.
func (sv *superv) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if pid == sv.pid {
			switch {
			case ws.Signaled():
				sv.status = 128 + int(ws.Signal())
			default:
				sv.status = ws.ExitStatus()
			}
		}
	}
}

// signalAll sends sig to the command's process group and to every process
// descended from the supervisor.
func (sv *superv) signalAll(sig syscall.Signal) {
	_ = syscall.Kill(-sv.pgid, sig)
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// alive reports whether a process of the command is left: one in its
// group, or a descendant of the supervisor, even a zombie not reaped yet
// (it still looks alive to others: the next holder must not see it).
func (sv *superv) alive() bool {
	sv.reap()
	if anyDescendant(os.Getpid()) {
		return true
	}
	return groupAlive(sv.pgid)
}

// foreground reports whether lualock's process group owns the terminal on
// its stdin: the command's group then takes it over while it runs, so that
// it can read the terminal and Ctrl-C reaches it.
func foreground() bool {
	pg, err := tcgetpgrp(0)
	return err == nil && pg == syscall.Getpgrp()
}

// reclaimTerminal gives the terminal back to lualock's process group.
func reclaimTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = tcsetpgrp(0, syscall.Getpgrp())
}

// groupAlive reports whether process group pgid has a member left.
func groupAlive(pgid int) bool {
	return pgid > 1 && syscall.Kill(-pgid, 0) == nil
}

func tcgetpgrp(fd int) (int, error) {
	var pg int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pg))); e != 0 {
		return 0, e
	}
	return int(pg), nil
}

func tcsetpgrp(fd, pgid int) error {
	pg := int32(pgid)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pg))); e != 0 {
		return e
	}
	return nil
}

// selfExe is this binary's path; on Linux, when it was removed or replaced
// on disk since lualock started (a deploy), /proc/self/exe, which still
// runs the same binary.
func selfExe() (string, error) {
	p, err := os.Executable()
	if runtime.GOOS == "linux" {
		if err != nil {
			return "/proc/self/exe", nil
		}
		if a, aerr := os.Stat(p); aerr != nil || !sameFile(a, "/proc/self/exe") {
			return "/proc/self/exe", nil
		}
	}
	return p, err
}

func sameFile(a os.FileInfo, path string) bool {
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
