package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// envPermit names the permit's id in the command's environment.
const envPermit = "LUALOCK_PERMIT"

// runPermit is lualock lock -semaphore N: it takes one permit of the
// permit-expirable semaphore a.name (set to N permits if it does not
// exist), runs the command under it as under a lock, and gives the permit
// back. A permit-expirable semaphore rather than a plain one, because a
// plain semaphore's permit would be lost for good if lualock were killed;
// this one comes back when its lease runs out unrenewed. The permits are
// shared with Redisson's RPermitExpirableSemaphore (4.x) of the same name
// and counted with its RSemaphore.
func runPermit(ctx context.Context, rdb redis.UniversalClient, client *lualock.Client, a *lockArgs, path string, deadline time.Time, watchdog time.Duration, ho handover, stdin io.Reader, stdout, stderr io.Writer) int {
	sem := client.NewPermitExpirableSemaphore(a.name)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := time.Duration(-1)
	if a.wait.set {
		wait = max(time.Until(deadline), 0)
	}
	res := make(chan error, 1)
	var permit *lualock.Permit
	started := time.Now()
	go func() {
		if _, err := sem.TrySetPermits(ctx, a.permits); err != nil {
			res <- err
			return
		}
		var err error
		switch {
		case wait >= 0 && a.lease.set:
			permit, err = sem.TryAcquireLease(ctx, wait, a.lease.d)
		case wait >= 0:
			permit, err = sem.TryAcquire(ctx, wait)
		case a.lease.set:
			permit, err = sem.AcquireLease(ctx, a.lease.d)
		default:
			permit, err = sem.Acquire(ctx)
		}
		res <- err
	}()
	var told *time.Timer
	if !a.quiet {
		told = time.AfterFunc(time.Second, func() {
			fmt.Fprintf(stderr, "lualock: waiting for a permit of semaphore %s\n", a.name)
		})
	}
	var sig os.Signal
	var err error
wait:
	for {
		select {
		case s := <-sigs:
			if sig == nil {
				sig = s
				cancel()
			}
		case err = <-res:
			break wait
		}
	}
	if told != nil && !told.Stop() {
		fmt.Fprintf(stderr, "lualock: permit of semaphore %s obtained after %v\n", a.name, time.Since(started).Round(time.Millisecond))
	}
	releasePermit := func() error {
		rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		err := permit.Release(rctx)
		if err != nil {
			fmt.Fprintf(stderr, "lualock: permit of semaphore %s: %v\n", a.name, clean(err))
		}
		return err
	}
	switch {
	case sig != nil:
		if err == nil {
			_ = releasePermit()
		}
		return errorf(stderr, 128+signum(sig), "%v while waiting for a permit of semaphore %s", sig, a.name)
	case errors.Is(err, lualock.ErrNotObtained) && a.quiet:
		return a.notObtained // as flock -n: the status says it
	case errors.Is(err, lualock.ErrNotObtained):
		return errorf(stderr, a.notObtained, "no permit of semaphore %s within %v%s", a.name, a.wait.d, lastError(err))
	case errors.Is(err, lualock.ErrUnavailable):
		return errorf(stderr, exitError, "Redis did not answer within -wait %v: no permit of semaphore %s (%v)", a.wait.d, a.name, clean(err))
	case errors.Is(err, lualock.ErrInvalid):
		return usagef(stderr, "lock: %v", clean(err))
	case err != nil:
		return errorf(stderr, exitError, "%v", clean(err))
	}

	lease := watchdog
	if lease == 0 {
		lease = defaultWatchdogLease
	}
	if a.lease.set {
		lease = a.lease.d
	}
	info := startHolderInfo(rdb, holderKey(a.name, permit.ID()), permit.Context(), a.command, lease, !a.lease.set)
	defer info.stop()
	env := append(os.Environ(),
		envName+"="+a.name,
		envPermit+"="+permit.ID(),
		envLease+"="+lease.String(),
	)
	sup, code, err := startSupervised(path, a.command, env, a.grace, stdin, stdout, stderr)
	if err != nil {
		_ = releasePermit()
		return errorf(stderr, code, "%v", err)
	}
	ho.Permit = permit.ID()
	sup.send(handoverLine(ho))
	return supervise(sup, releasePermit, permit.Context(), a, sigs, stderr)
}
