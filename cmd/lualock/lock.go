package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

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
	name        string
	command     []string
	wait        optDuration
	lease       optDuration
	grace       time.Duration
	fair        bool
	read        bool // the read lock of a read-write lock
	write       bool // the write lock of a read-write lock
	fenced      bool // a fenced lock: the token goes to the command
	quiet       bool
	notObtained int
	permits     int // -semaphore N: take one permit of N (semaphore.go)
}

func runLock(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	begin := time.Now() // -wait counts from here
	fs := newFlagSet("lock", "[-addr URL] [-wait D | -n] [-lease D] [-grace D] [-fair | -read | -write | -fenced | -semaphore N] [-q] [-E N] [-pubsub KIND] NAME -- COMMAND [ARG...]", stderr)
	var a lockArgs
	addr := addrFlag(fs)
	pubsub := newPubsubFlag(fs)
	deploy := newDeployFlags(fs)
	fs.Var(&a.wait, "wait", "give up when the lock is not obtained within `D`, counted from lualock's start (0: one attempt; default: wait until obtained)")
	noWait := fs.Bool("n", false, "same as -wait 0: one attempt, do not wait")
	fs.Var(&a.lease, "lease", "hold the lock with a fixed lease `D`, not renewed; the command is stopped if it runs longer (default: watchdog)")
	fs.DurationVar(&a.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL to the command when the lock is lost")
	fs.BoolVar(&a.fair, "fair", false, "take a fair (FIFO) lock, Redisson's RFairLock")
	fs.BoolVar(&a.read, "read", false, "take the read lock of a read-write lock, Redisson's RReadWriteLock (shared with other readers)")
	fs.BoolVar(&a.write, "write", false, "take the write lock of a read-write lock, Redisson's RReadWriteLock")
	fs.BoolVar(&a.fenced, "fenced", false, "take a fenced lock, Redisson's RFencedLock: the command gets its token in $"+envToken)
	fs.IntVar(&a.permits, "semaphore", 0, "take one permit of the permit-expirable semaphore NAME (Redisson's RPermitExpirableSemaphore), setting it to `N` permits if it does not exist; the permit is renewed like a lock, and comes back when lualock dies")
	fs.BoolVar(&a.quiet, "q", false, "say nothing on stderr while waiting, nor when the lock is not obtained; errors are still said")
	fs.IntVar(&a.notObtained, "E", exitNotObtained, "exit status `N` when the lock is not obtained within -wait")

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
	if *noWait {
		if a.wait.set && a.wait.d != 0 {
			return usagef(stderr, "lock: -n and -wait %v disagree", a.wait.d)
		}
		a.wait = optDuration{0, true}
	}
	switch {
	case len(a.command) == 0 || a.command[0] == "":
		return usagef(stderr, `lock: missing COMMAND after "--"`)
	case a.wait.set && a.wait.d < 0:
		return usagef(stderr, "lock: -wait %v is negative", a.wait.d)
	case a.lease.set && a.lease.d < time.Millisecond:
		return usagef(stderr, "lock: -lease %v, want at least 1ms", a.lease.d)
	case a.grace < 0:
		return usagef(stderr, "lock: -grace %v is negative", a.grace)
	case a.notObtained < 0 || a.notObtained > 255:
		return usagef(stderr, "lock: -E %d, want 0..255", a.notObtained)
	case b2i(a.fair)+b2i(a.read)+b2i(a.write)+b2i(a.fenced)+b2i(a.permits > 0) > 1:
		return usagef(stderr, "lock: -fair, -read, -write, -fenced and -semaphore exclude each other")
	case a.permits < 0:
		return usagef(stderr, "lock: -semaphore %d, want N >= 1", a.permits)
	}
	if err := lualock.CheckName(a.name); err != nil {
		return usagef(stderr, "lock: %v", clean(err))
	}
	opts, resolved, err := redisOptions(fs, *addr)
	if err != nil {
		return usagef(stderr, "lock: bad -addr: %v", err)
	}
	copts, err := clientOptions(pubsub)
	if err == nil {
		err = deploy.options(&copts)
	}
	var fo *redis.FailoverOptions
	if err == nil {
		fo, err = deploy.failover(opts)
	}
	if err != nil {
		return usagef(stderr, "lock: %v", err)
	}
	path, err := exec.LookPath(a.command[0])
	if err != nil {
		switch {
		case errors.Is(err, exec.ErrNotFound):
			return errorf(stderr, exitNotFound, "%s: command not found", a.command[0])
		case errors.Is(err, iofs.ErrNotExist):
			return errorf(stderr, exitNotFound, "%s: no such file", a.command[0])
		}
		return errorf(stderr, exitCannotExec, "%s: %v", a.command[0], errors.Unwrap(err))
	}

	// Everything up to the lock, connecting included, fits in -wait.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deadline time.Time
	if a.wait.set {
		deadline = begin.Add(a.wait.d)
	}
	// The first contact with Redis is tried again, so that a blip does not
	// fail a cron job: within -wait, else (-n, or no -wait) for up to
	// connectTimeout.
	connectBy, retryBy := deadline, deadline
	if !a.wait.set || a.wait.d == 0 {
		connectBy, retryBy = time.Time{}, begin.Add(connectTimeout)
	}
	var rdb redis.UniversalClient
	if fo != nil {
		rdb, err = dialFailover(ctx, fo, connectBy, retryBy)
	} else {
		rdb, err = connect(ctx, opts, connectBy, retryBy)
	}
	if errors.Is(err, errWaitOver) {
		// "Redis at ADDR did not answer", or the Sentinels' primary.
		who := strings.TrimSuffix(err.Error(), ": "+errWaitOver.Error())
		return errorf(stderr, exitError, "%s within -wait %v: lock %s not obtained", who, a.wait.d, a.name)
	}
	if err != nil {
		return errorf(stderr, exitError, "%v", clean(err))
	}
	client, err := lualock.New(rdb, copts)
	if err != nil {
		rdb.Close()
		return errorf(stderr, exitError, "%v", clean(err))
	}
	// What the supervisor needs to give the hold back should lualock die.
	ho := handover{Addr: resolved, PubSub: copts.PubSub, FairWait: copts.FairWait, Kind: kindOf(&a), Name: a.name, Client: client.ID()}
	if fo != nil {
		ho.Sentinels = sentinels(fo)
	}
	if a.permits > 0 {
		defer rdb.Close()
		defer client.Close()
		return runPermit(ctx, rdb, client, &a, path, deadline, copts.WatchdogLease, ho, stdin, stdout, stderr)
	}
	lock, token := newKindLock(client, &a)
	// From here on the signals are ours: they stop the wait, or go to the
	// command. Before, their default action ends lualock, holding nothing.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	code, leave := acquire(ctx, rdb, client, lock, &a, deadline, sigs, stderr)
	if leave {
		// Redis did not answer within -wait: do not stay for the clean-up
		// (a hold an unanswered attempt may have taken expires with its
		// lease).
		return code
	}
	defer rdb.Close()
	defer client.Close()
	if code >= 0 {
		return code
	}
	hold := lock.Context() // ends when the hold is lost or its lease runs out
	lease := copts.WatchdogLease
	if a.lease.set {
		lease = a.lease.d
	} else if lease == 0 {
		lease = defaultWatchdogLease
	}
	info := startHolderInfo(rdb, holderKey(a.name, lock.Field()), hold, a.command, lease, !a.lease.set)
	defer info.stop()

	env := append(os.Environ(),
		envName+"="+a.name,
		envHolder+"="+lock.Field(),
		envLease+"="+lease.String(),
	)
	if token != nil {
		env = append(env, envToken+"="+strconv.FormatInt(token(), 10))
	}
	sup, code, err := startSupervised(path, a.command, env, a.grace, stdin, stdout, stderr)
	if err != nil {
		release(lock, a.name, stderr)
		return errorf(stderr, code, "%v", err)
	}
	ho.Field = lock.Field()
	sup.send(handoverLine(ho))
	return supervise(sup, func() error { return release(lock, a.name, stderr) }, hold, &a, sigs, stderr)
}

// acquire takes the lock as the flags say, within deadline when it is set.
// It returns -1 once the lock is held, else the exit code; leave is set when
// lualock should exit at once without waiting for the client's clean-up.
func acquire(ctx context.Context, rdb redis.UniversalClient, client *lualock.Client, lock *lualock.Lock, a *lockArgs, deadline time.Time, sigs <-chan os.Signal, stderr io.Writer) (int, bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	wait := time.Duration(-1)
	if a.wait.set {
		wait = max(time.Until(deadline), 0)
	}
	if wait == 0 {
		// One attempt: bound it by the connection timeout.
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, connectTimeout)
		defer c2()
	}
	started := time.Now()
	go func() {
		switch {
		case wait >= 0 && a.lease.set:
			res <- lock.TryLockLease(ctx, wait, a.lease.d)
		case wait >= 0:
			res <- lock.TryLock(ctx, wait)
		case a.lease.set:
			res <- lock.LockLease(ctx, a.lease.d)
		default:
			res <- lock.Lock(ctx)
		}
	}()
	var told *waitNotice
	if !a.quiet {
		told = startWaitNotice(rdb, client, lock, a, stderr)
		defer told.stop()
	}
	var sig os.Signal
	for {
		select {
		case s := <-sigs:
			if sig == nil {
				sig = s
				cancel()
			}
		case err := <-res:
			told.stop()
			switch {
			case sig != nil:
				if err == nil { // obtained as the signal came
					release(lock, a.name, stderr)
				}
				return errorf(stderr, 128+signum(sig), "%v while waiting for lock %s", sig, a.name), false
			case err == nil:
				if told.said() {
					fmt.Fprintf(stderr, "lualock: lock %s obtained after %v\n", a.name, time.Since(started).Round(time.Millisecond))
				}
				return -1, false
			case errors.Is(err, lualock.ErrUnavailable) || (wait == 0 && errors.Is(err, context.DeadlineExceeded)):
				return errorf(stderr, exitError, "Redis did not answer within -wait %v: lock %s not obtained (%v)", a.wait.d, a.name, clean(err)), true
			case errors.Is(err, lualock.ErrNotObtained) && a.quiet:
				return a.notObtained, false // as flock -n: the status says it
			case errors.Is(err, lualock.ErrNotObtained):
				return errorf(stderr, a.notObtained, "lock %s not obtained within %v%s", a.name, a.wait.d, lastError(err)), false
			case errors.Is(err, lualock.ErrInvalid):
				return usagef(stderr, "lock: %v", clean(err)), false
			default:
				return errorf(stderr, exitError, "%v", clean(err)), false
			}
		}
	}
}

// supervise waits for the command while forwarding signals to its process
// group and watching the hold, then releases the lock (or permit) with
// release. It returns the exit code.
func supervise(sup *supervisor, release func() error, hold context.Context, a *lockArgs, sigs <-chan os.Signal, stderr io.Writer) int {
	var lost error
	holdDone := hold.Done()
	status := -1
	for status < 0 {
		select {
		case s := <-sigs:
			sup.send(fmt.Sprintf("signal %d", signum(s)))
		case <-holdDone:
			holdDone = nil
			lost = context.Cause(hold)
			fmt.Fprintf(stderr, "lualock: lock %s lost: %v\n", a.name, clean(lost))
			sup.send("stop")
		case line, ok := <-sup.events:
			switch {
			case !ok:
				// The supervisor died (killed from outside): take the
				// command's group down ourselves.
				sup.close()
				sup.killTree()
				fmt.Fprintf(stderr, "lualock: the supervisor of %s died; the command's processes were killed\n", a.command[0])
				_ = release()
				return exitError
			case strings.HasPrefix(line, "exit "):
				status, _ = strconv.Atoi(strings.TrimPrefix(line, "exit "))
			}
		}
	}
	sup.close()
	if lost == nil && hold.Err() != nil { // lost as the command exited
		lost = context.Cause(hold)
		fmt.Fprintf(stderr, "lualock: lock %s lost: %v\n", a.name, clean(lost))
	}
	if lost != nil {
		return exitLost
	}
	// The hold was live when the command exited: it ran under the lock.
	// Only a loss the release finds (taken away before a renewal or the
	// tracker noticed) may have come while it ran; a release held up
	// past the lease, or unconfirmed, is a warning.
	if err := release(); errors.Is(err, lualock.ErrLockLost) {
		return exitLost
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
	case errors.Is(err, lualock.ErrLockLost):
		fmt.Fprintf(stderr, "lualock: lock %s lost: %v\n", name, clean(err))
	case errors.Is(err, lualock.ErrNotHeld):
		fmt.Fprintf(stderr, "lualock: warning: lock %s was gone when its release landed: %v\n", name, clean(err))
	default:
		fmt.Fprintf(stderr, "lualock: release lock %s: %v (it expires when its lease runs out)\n", name, clean(err))
	}
	return err
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

// lastError returns " (last error: E)" for the last Redis error a wait
// met, which lualock joins to ErrNotObtained (its Unwrap() []error lists
// it last), or "" when there was none.
func lastError(err error) string {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return ""
	}
	errs := joined.Unwrap()
	if len(errs) < 2 {
		return ""
	}
	return " (last error: " + clean(errs[len(errs)-1]) + ")"
}
