package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lualock/lualock"
)

// forwarded are the signals lualock passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// optDuration is a duration flag that remembers whether it was given.
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 500ms, 10s or 2m")
	}
	o.d, o.set = d, true
	return nil
}

type lockArgs struct {
	name    string
	command []string
	wait    optDuration
	lease   optDuration
	grace   time.Duration
	fair    bool
}

func runLock(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("lock", "[-addr URL] [-wait D] [-lease D] [-grace D] [-fair] [-pubsub KIND] NAME -- COMMAND [ARG...]", stderr)
	var a lockArgs
	addr := addrFlag(fs)
	pubsub := newPubsubFlag(fs)
	fs.Var(&a.wait, "wait", "give up when the lock is not obtained within `D` (0: one attempt; default: wait until obtained)")
	fs.Var(&a.lease, "lease", "hold the lock with a fixed lease `D`, not renewed; the command is stopped if it runs longer (default: watchdog)")
	fs.DurationVar(&a.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL to the command when the lock is lost")
	fs.BoolVar(&a.fair, "fair", false, "take a fair (FIFO) lock, Redisson's RFairLock")

	flagArgs := args
	dash := slices.Index(args, "--")
	if dash >= 0 {
		flagArgs, a.command = args[:dash], args[dash+1:]
	}
	name, code := parseFlags(fs, flagArgs, stdout, func() int {
		if dash < 0 {
			return usagef(stderr, `lock: missing "--" before COMMAND (lualock lock NAME -- COMMAND [ARG...])`)
		}
		return -1
	})
	if code >= 0 {
		return code
	}
	a.name = name
	switch {
	case len(a.command) == 0 || a.command[0] == "":
		return usagef(stderr, `lock: missing COMMAND after "--"`)
	case a.wait.set && a.wait.d < 0:
		return usagef(stderr, "lock: -wait %v is negative", a.wait.d)
	case a.lease.set && a.lease.d < time.Millisecond:
		return usagef(stderr, "lock: -lease %v, want at least 1ms", a.lease.d)
	case a.grace < 0:
		return usagef(stderr, "lock: -grace %v is negative", a.grace)
	}
	opts, err := redisOptions(*addr)
	if err != nil {
		return usagef(stderr, "lock: bad -addr: %v", err)
	}
	copts, err := clientOptions(pubsub)
	if err != nil {
		return usagef(stderr, "lock: %v", err)
	}
	path, err := exec.LookPath(a.command[0])
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return errorf(stderr, exitNotFound, "%s: command not found", a.command[0])
		}
		return errorf(stderr, exitCannotExec, "%s: %v", a.command[0], err)
	}

	rdb, err := connect(context.Background(), opts)
	if err != nil {
		return errorf(stderr, exitError, "%v", clean(err))
	}
	defer rdb.Close()
	client, err := lualock.New(rdb, copts)
	if err != nil {
		return errorf(stderr, exitError, "%v", clean(err))
	}
	defer client.Close()
	lock := newLock(client, a.name, a.fair)

	// From here on the signals are ours: they stop the wait, or go to the
	// command. Before, their default action ends lualock, holding nothing.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if code := acquire(lock, &a, sigs, stderr); code >= 0 {
		return code
	}
	hold := lock.Context() // ends when the hold is lost or its lease runs out

	cmd := exec.Command(path, a.command[1:]...)
	cmd.Args[0] = a.command[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		release(lock, a.name, stderr)
		return errorf(stderr, exitCannotExec, "%s: %v", a.command[0], err)
	}
	return supervise(cmd, lock, hold, &a, sigs, stderr)
}

// acquire takes the lock as the flags say. It returns -1 once the lock is
// held, else the exit code.
func acquire(lock *lualock.Lock, a *lockArgs, sigs <-chan os.Signal, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		switch {
		case a.wait.set && a.lease.set:
			res <- lock.TryLockLease(ctx, a.wait.d, a.lease.d)
		case a.wait.set:
			res <- lock.TryLock(ctx, a.wait.d)
		case a.lease.set:
			res <- lock.LockLease(ctx, a.lease.d)
		default:
			res <- lock.Lock(ctx)
		}
	}()
	var sig os.Signal
	for {
		select {
		case s := <-sigs:
			if sig == nil {
				sig = s
				cancel()
			}
		case err := <-res:
			switch {
			case sig != nil:
				if err == nil { // obtained as the signal came
					release(lock, a.name, stderr)
				}
				return errorf(stderr, 128+signum(sig), "%v while waiting for lock %s", sig, a.name)
			case err == nil:
				return -1
			case errors.Is(err, lualock.ErrNotObtained):
				detail := "" // Redis errors met while waiting
				if i := strings.Index(err.Error(), " (last error: "); i >= 0 {
					detail = err.Error()[i:]
				}
				return errorf(stderr, exitNotObtained, "lock %s not obtained within %v%s", a.name, a.wait.d, detail)
			case errors.Is(err, lualock.ErrInvalid):
				return usagef(stderr, "lock: %v", clean(err))
			default:
				return errorf(stderr, exitError, "%v", clean(err))
			}
		}
	}
}

// supervise waits for the command while forwarding signals to it and
// watching the hold, then releases the lock. It returns the exit code.
func supervise(cmd *exec.Cmd, lock *lualock.Lock, hold context.Context, a *lockArgs, sigs <-chan os.Signal, stderr io.Writer) int {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(exited)
	}()
	var lost error
	holdDone := hold.Done()
	var kill <-chan time.Time
	for running := true; running; {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case <-holdDone:
			holdDone = nil
			lost = context.Cause(hold)
			fmt.Fprintf(stderr, "lualock: lock %s lost: %v\n", a.name, clean(lost))
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(a.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(stderr, "lualock: %s still running %v after SIGTERM: sending SIGKILL\n", a.command[0], a.grace)
			_ = cmd.Process.Kill()
		case <-exited:
			running = false
		}
	}
	status := exitStatus(cmd.ProcessState)
	if lost == nil && hold.Err() != nil { // lost as the command exited
		lost = context.Cause(hold)
		fmt.Fprintf(stderr, "lualock: lock %s lost: %v\n", a.name, clean(lost))
	}
	if lost != nil {
		return exitLost
	}
	if err := release(lock, a.name, stderr); err != nil && (errors.Is(err, lualock.ErrLockLost) || errors.Is(err, lualock.ErrNotHeld)) {
		return exitLost // gone before the release: the command may have run without it
	}
	return status
}

// release unlocks under a fresh context, reporting failures on stderr.
func release(lock *lualock.Lock, name string, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := lock.Unlock(ctx)
	switch {
	case err == nil:
	case errors.Is(err, lualock.ErrLockLost) || errors.Is(err, lualock.ErrNotHeld):
		fmt.Fprintf(stderr, "lualock: lock %s lost: %v\n", name, clean(err))
	default:
		fmt.Fprintf(stderr, "lualock: release lock %s: %v (it expires when its lease runs out)\n", name, clean(err))
	}
	return err
}

// exitStatus is the shell's view of how a process ended: its exit code, or
// 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	return exitError
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// clean drops the "lualock: " prefixes that the library's errors repeat at
// each level of wrapping, since lualock prints its own.
func clean(err error) string {
	return strings.ReplaceAll(err.Error(), "lualock: ", "")
}
