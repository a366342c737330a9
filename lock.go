package lualock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/renew"
)

// NoExpiry is what RemainingLease returns for a lock that exists without an
// expiry (set by a tool other than this package or Redisson).
const NoExpiry time.Duration = -1

// undoTimeout bounds the clean-up calls that run after a caller's context
// ended, under context.WithoutCancel.
const undoTimeout = 2 * time.Second

// Lock is a handle on a distributed lock: reentrant (Client.NewLock) or fair
// (Client.NewFairLock). The handle is the owner of its holds, with its own
// holder id H in the owner field C:H. While it holds the lock it may lock
// again (re-entry), and must unlock as many times; other handles wait.
//
// A Lock's methods are safe for concurrent use, but goroutines that share one
// handle share its ownership: to exclude each other they need a handle each.
//
// A hold taken without a lease (Lock, TryLock) is renewed by the client's
// watchdog until the last Unlock. A hold with a lease (LockLease,
// TryLockLease) expires after it unless unlocked first; the lease of the
// latest acquisition applies to the whole hold.
type Lock struct {
	c       *Client
	name    string
	p       *protocol
	field   string       // owner field C:H
	latch   string       // unlock latch prefix: tag(keys.UnlockLatchPrefix, name) + ":" + C + ":"
	invalid error        // set by a bad name
	op      opLock       // one acquisition or release of this handle at a time
	h       hold         // the ownership state
	token   atomic.Int64 // the fencing token of the latest acquisition (fenced lock); 0 for the others
	// entry is the watchdog entry of the handle's holds (the hold's
	// lifetime's), and entryEnd its end callback, set by the first renew.
	entry    renew.Entry
	entryEnd func(gen uint64, how renew.End)
}

// opLock serializes the calls of one handle that change its holds. Unlike
// a sync.Mutex, a caller waiting for it gives up when its context ends.
type opLock struct{ ch chan struct{} }

func newOpLock() opLock { return opLock{ch: make(chan struct{}, 1)} }

// lock takes the lock, or returns ctx's error when ctx ends first.
func (o opLock) lock(ctx context.Context) error {
	select {
	case o.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case o.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockAlways takes the lock whatever happens: for clean-ups that must run.
func (o opLock) lockAlways() { o.ch <- struct{}{} }

func (o opLock) unlock() { <-o.ch }

// Name returns the lock's name, its key in Redis.
func (l *Lock) Name() string { return l.name }

// Lock blocks until the handle holds the lock or ctx ends. The watchdog
// renews the hold until the last Unlock.
//
// It returns ErrInvalid for a nil ctx or a bad name, ErrClosed after
// Client.Close, an error wrapping ctx's error when ctx ends first, ErrLockLost when this
// handle's current hold was lost, or a non-transient Redis error. Transient
// Redis errors, connection refused among them, are retried with backoff
// until ctx ends: give ctx a deadline to bound a wait on an unreachable
// Redis.
func (l *Lock) Lock(ctx context.Context) error {
	return l.acquire(ctx, -1, 0)
}

// LockLease is Lock with a fixed lease: the hold expires lease after it was
// taken unless unlocked first, and no watchdog renews it. The hold's Context
// ends 1% of the lease plus 2ms before that (see the package doc, Losing a
// lock). A lease that is not
// positive returns ErrInvalid.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	if err := l.checkLease(lease); err != nil {
		return err
	}
	return l.acquire(ctx, -1, lease)
}

// TryLock is Lock that gives up after wait, returning ErrNotObtained (or
// ErrUnavailable when Redis never answered in that time). A wait of 0 makes
// one attempt; a negative one returns ErrInvalid.
func (l *Lock) TryLock(ctx context.Context, wait time.Duration) error {
	if err := l.checkWait(wait); err != nil {
		return err
	}
	return l.acquire(ctx, wait, 0)
}

// TryLockLease is TryLock with a fixed lease, as LockLease.
func (l *Lock) TryLockLease(ctx context.Context, wait, lease time.Duration) error {
	if err := l.checkWait(wait); err != nil {
		return err
	}
	if err := l.checkLease(lease); err != nil {
		return err
	}
	return l.acquire(ctx, wait, lease)
}

// acquire takes the lock on the engine (engine.go), waiting up to wait
// (forever when negative), with a fixed lease or, when lease is 0, the
// watchdog.
func (l *Lock) acquire(ctx context.Context, wait, lease time.Duration) error {
	observed := l.c.cfg.Observer.Acquire != nil || l.c.cfg.Logger != nil
	var start time.Time
	if observed {
		start = time.Now()
	}
	handoff, err := false, l.usable(ctx)
	if err == nil {
		handoff, err = l.c.acquire(ctx, l, wait, lease)
	}
	err = wrapErr(verbLock, l.name, err)
	if observed {
		// Handoff: obtained after waiting for another holder.
		l.acquireEnded(ctx, start, wait, handoff, err)
	}
	return err
}

func (l *Lock) checkLease(lease time.Duration) error {
	if lease < time.Millisecond {
		return wrapErr(verbLock, l.name, fmt.Errorf("%w: lease %v, want at least 1ms", ErrInvalid, lease))
	}
	return nil
}

func (l *Lock) checkWait(wait time.Duration) error {
	if wait < 0 {
		return wrapErr(verbLock, l.name, fmt.Errorf("%w: wait %v, want >= 0", ErrInvalid, wait))
	}
	return nil
}

// usable returns the error of a call with ctx on a handle that cannot
// reach Redis: a nil ctx and a bad name are ErrInvalid.
func (l *Lock) usable(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if l.invalid != nil {
		return l.invalid
	}
	if l.c.closed() {
		return ErrClosed
	}
	return nil
}

// try is the handle's attempt (contender): under the handle's op lock it
// settles a release whose outcome is unknown first, refuses a re-entry
// into a lost hold, runs the protocol's acquire and records the hold when
// it was acquired. Its outcome tells the engine what a lost reply may
// have taken (the hold count and lease it asked for) and whether a first
// hold may have queued.
func (l *Lock) try(ctx context.Context, lease time.Duration) outcome {
	if err := l.op.lock(ctx); err != nil {
		return outcome{sent: sentNot, err: err}
	}
	defer l.op.unlock()
	want, err := l.ready(ctx)
	if err != nil {
		return outcome{sent: sentNot, err: err}
	}
	set := cmp.Or(lease, l.c.cfg.WatchdogLease)
	if lease != 0 {
		if err := l.h.pauseRenewal(ctx); err != nil {
			return outcome{sent: sentNot, err: err}
		}
		defer l.h.resumeRenewal()
	}
	queued := want == 1 && l.p.leave != nil // from now on the owner may stand in the queue
	start := time.Now()
	res, err := l.p.acquire(ctx, attemptArgs{field: l.field, lease: set, holds: want})
	if err != nil {
		return l.attemptFailed(err, want, set, queued)
	}
	if !res.acquired {
		return outcome{wait: res.wait, queued: queued}
	}
	switch err := l.h.acquired(want, lease, start); {
	case errors.Is(err, ErrClosed):
		// The client closed meanwhile: nothing would renew the hold. Give it
		// back rather than hand out a lock that lapses unnoticed.
		uctx, cancel := detached(ctx)
		_ = l.undo(uctx, want, set)
		cancel()
		return outcome{queued: queued, err: ErrClosed}
	case err != nil:
		// A re-entry into a hold reported lost while it ran: the handle
		// counts it, and Unlock reports the loss for each hold.
		return outcome{err: err}
	}
	if res.token != 0 {
		l.token.Store(res.token)
	}
	return outcome{acquired: true}
}

// ready prepares an attempt: it settles a release whose outcome is
// unknown (its reply was lost), replaying it (by its latch, or past the
// latch by the hold count it names), so that the hold count is known (the
// caller asked for that release; when it finds the lock gone, a re-entry,
// with holds left after it, is into a lost hold). It returns the hold
// count the attempt asks for, or why it must not be sent.
func (l *Lock) ready(ctx context.Context) (int, error) {
	if s := l.h.snapshot(); s.state == unsettled {
		switch err := l.unlock(ctx); {
		case err == nil:
		case errors.Is(err, ErrLockLost):
			return 0, err
		case errors.Is(err, ErrNotHeld) && s.holds > 1:
			return 0, fmt.Errorf("%w: a re-entry found the earlier holds gone (%w)", ErrLockLost, err)
		case errors.Is(err, ErrNotHeld):
		default:
			return 0, err
		}
	}
	s := l.h.snapshot()
	switch {
	case s.state == lost:
		return 0, s.cause
	case l.c.closed():
		return 0, ErrClosed
	}
	return s.holds + 1, ctx.Err() // on ctx's error, not sent: nothing to give back
}

// attemptFailed classifies an attempt's error: a re-entry the script
// refused (LOST) loses the hold; an unknown reply (the script may have
// run) is replayed by the next attempt, which names the same hold count,
// or given back by the call's give-up step when none comes.
func (l *Lock) attemptFailed(err error, want int, set time.Duration, queued bool) outcome {
	if redis.HasErrorPrefix(err, "LOST") {
		l.h.lose(l.h.generation(), fmt.Errorf("%w: %w", ErrLockLost, errLostOnReentry))
		return outcome{err: l.h.lostCause()}
	}
	if isRedisError(err) {
		// Redis refused the script (or did not run it: BUSY, LOADING):
		// it changed nothing, and what an earlier lost reply may have
		// taken still stands.
		return outcome{sent: sentRefused, queued: queued, err: err}
	}
	return outcome{sent: sentUnknown, undo: undo{holds: want, lease: set}, queued: queued, err: err}
}

// The handle as the engine's contender (engine.go).

func (l *Lock) waitSpec() waitSpec {
	w := waitSpec{channel: l.p.waitChannel(l.field), mode: l.p.mode, spinFirst: l.p.spinFirst, spinMax: l.p.spinMax}
	if l.p.watchKey {
		w.watch = l.name
	}
	return w
}
func (l *Lock) timer(ttl time.Duration) (floor, ceil time.Duration) { return l.p.timer(ttl) }
func (l *Lock) enter()                                              { l.h.enter() }
func (l *Lock) exit() bool                                          { return l.h.exit() }
func (l *Lock) holdOps()                                            { l.op.lockAlways() }
func (l *Lock) releaseOps()                                         { l.op.unlock() }

// giveUp gives back the hold an attempt with a lost reply may have taken,
// and leaves the protocol's queue.
func (l *Lock) giveUp(ctx context.Context, g leftover) error {
	if g.unknown {
		if err := l.undo(ctx, g.undo.holds, g.undo.lease); err != nil {
			return err
		}
	}
	if g.queued && l.p.leave != nil {
		return l.p.leave(ctx, l.field)
	}
	return nil
}

// grants: every acquisition of a lock takes a hold (contender).
func (l *Lock) grants() bool { return true }

// revoke gives back the hold the last attempt took and recorded (a
// re-entry's, not the earlier ones), as Unlock does: its replicas did not
// acknowledge it. A release whose reply is lost stays with the handle, as
// for Unlock (the next call replays it, or the lease runs out), so it
// reports no error: a second release sent later could free a hold taken
// since.
func (l *Lock) revoke(ctx context.Context) error {
	l.op.lockAlways()
	defer l.op.unlock()
	_ = l.unlock(ctx)
	return nil
}

// undo releases the hold that an acquisition with an unknown outcome may
// have taken (want holds), if it did.
//
// It reads the count with a plain HGET on the primary of the lock's slot
// (a read-only script, or a read on a cluster client set to read from
// replicas, may be routed to a replica and see an old count).
func (l *Lock) undo(ctx context.Context, want int, lease time.Duration) error {
	n, err := l.c.primary(ctx, l.name).HGet(ctx, l.name, l.countField()).Int()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil || n != want {
		return err
	}
	latch := l.latchKey()
	res, err := l.p.release(ctx, releaseArgs{field: l.field, lease: lease, latch: latch, holds: want})
	if err == nil {
		l.c.latches.dropIfWritten(latch, res, want)
	}
	return err
}

// The hold's environment (holdEnv): the watchdog, the hold watcher and the
// observer of this handle.

func (l *Lock) watch(gen uint64) *holdWatcher { return l.c.watchHold(l, gen) }

// Unlock releases one hold. The lock is free for others when the last hold
// is released; the watchdog has stopped renewing it when Unlock returns.
//
// Unlock works with a ctx that has already ended, as in a deferred Unlock
// at the end of a request whose context is done: the release is then sent
// under a short context of its own (context.WithoutCancel(ctx), 2s), and
// when it ends the last hold the watchdog stops renewing the lock at once,
// before the release is sent. If ctx ends while Unlock waits for Redis, the
// release is sent again the same way (a resend replays the first one's
// outcome, see Options.UnlockLatch). When even that release gets no answer,
// the hold ends anyway for a last hold: Unlock returns an error wrapping the
// Redis error that says the release was not confirmed and that the lock
// expires within its lease (nothing renews it any more), and the hold's
// Context ends with ErrNotHeld. Unlock on a handle whose other call (a Lock
// of another goroutine) holds it up waits for that call until ctx ends, or
// up to that same 2s when ctx had already ended.
//
// It returns ErrInvalid for a nil ctx, ErrNotHeld when the handle holds
// nothing (never locked, already unlocked, or its fixed lease ran out, or
// the release of its last hold, sent again after a lost reply past the
// unlock latch, found the lock gone: see Options.UnlockLatch; or the
// network held the release of the last hold up until its lease ran out),
// ErrLockLost for each hold of a hold that was lost (a hold under the
// watchdog found gone at Unlock, renewed until then, was lost too: taken
// away before a renewal noticed), ErrClosed after Client.Close, or the Redis error. After a Redis
// error with a live ctx, and for a hold that is not the last, the outcome
// is unknown: calling Unlock again is safe, it replays the first call's
// outcome instead of releasing a second hold; so does the handle's next
// Lock, before it re-enters.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.usable(ctx); err != nil {
		return wrapErr(verbUnlock, l.name, err)
	}
	octx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		octx, cancel = detached(ctx)
		defer cancel()
	}
	if err := l.op.lock(octx); err != nil {
		return wrapErr(verbUnlock, l.name, err)
	}
	defer l.op.unlock()
	return wrapErr(verbUnlock, l.name, l.unlock(ctx))
}

// detached is the short context of a clean-up that must run after ctx
// ended.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
}

// unlock is Unlock under the handle's op lock: the hold goes to releasing,
// the protocol's release is sent (again, under a context of its own, when
// ctx ends before or during the call: the latch replays it), and its reply
// moves the hold on.
func (l *Lock) unlock(ctx context.Context) error {
	ended := ctx.Err() != nil
	r, err := l.h.beginRelease(l.latchKey, ended)
	if err != nil {
		return err
	}
	args := releaseArgs{field: l.field, lease: r.lease, latch: r.latch, holds: r.holds}
	var res releaseOutcome
	if !ended {
		res, err = l.p.release(ctx, args)
	}
	if ended || (err != nil && ctx.Err() != nil) {
		if !ended {
			l.h.stopRenewingLast(r)
		}
		rctx, cancel := detached(ctx)
		res, err = l.p.release(rctx, args)
		cancel()
		ended = true
	}
	if err != nil {
		return l.h.unconfirmed(r, err, ended)
	}
	l.c.latches.dropIfWritten(r.latch, res, r.holds) // the reply is in: nothing will resend this request
	return l.h.released(r, res)
}

// latchKey returns the unlock latch of a new release: the lock's unlock
// latch prefix, the client id and a number no other release of the client
// has.
func (l *Lock) latchKey() string {
	var num [20]byte
	var b strings.Builder
	b.Grow(len(l.latch) + len(num))
	b.WriteString(l.latch)
	b.Write(strconv.AppendUint(num[:0], l.c.reqs.Add(1), 10))
	return b.String()
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It
// reports whether there was a lock to delete. Other owners find their hold
// lost within milliseconds through their client's hold tracker (at their
// next renewal with Options.NoHoldTracking); this handle's own hold ends
// with ErrNotHeld.
// A resend of the call after a lost reply (by go-redis or the script
// runner) replays its outcome; calling ForceUnlock again is a new request.
// A key that is not this kind of lock (another type, or a hash of another
// shape) is left as it is, with ErrWrongType saying what it is.
// It returns ErrWrongType, ErrInvalid, ErrClosed, an error wrapping ctx's error when
// another call of this handle holds it up until ctx ends, or the Redis
// error.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.usable(ctx); err != nil {
		return false, wrapErr(verbForceUnlock, l.name, err)
	}
	if err := l.op.lock(ctx); err != nil {
		return false, wrapErr(verbForceUnlock, l.name, err)
	}
	defer l.op.unlock()
	// A force release publishes on the lock's channel: the handle's own
	// hold watcher must not take it for another client's.
	l.h.stopWatching()
	latch := l.latchKey()
	deleted, err := l.p.forceRelease(ctx, latch)
	if err != nil {
		return false, wrapErr(verbForceUnlock, l.name, wrongType(err))
	}
	l.c.latches.drop(latch)
	l.h.forceFreed(fmt.Errorf("%w: force unlocked", ErrNotHeld))
	return deleted, nil
}

// Status is the state of a lock as one handle sees it.
type Status struct {
	Locked bool          // some owner holds the lock
	Holds  int           // hold count of this handle
	Lease  time.Duration // remaining lease; NoExpiry when it has none; 0 when not locked
}

// Status reads the lock's state in one round trip (EVALSHA_RO). It returns
// ErrInvalid, ErrClosed or the Redis error.
func (l *Lock) Status(ctx context.Context) (Status, error) {
	if err := l.usable(ctx); err != nil {
		return Status{}, wrapErr(verbStatus, l.name, err)
	}
	s, err := l.p.status(ctx, l.field)
	return s, wrapErr(verbStatus, l.name, err)
}

// IsLocked reports whether any owner holds the lock. It returns ErrInvalid,
// ErrClosed or the Redis error.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	s, err := l.Status(ctx)
	return s.Locked, err
}

// IsHeld reports whether this handle holds the lock, as Redis sees it. It
// returns ErrInvalid, ErrClosed or the Redis error.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	s, err := l.Status(ctx)
	return s.Holds > 0, err
}

// HoldCount returns this handle's hold count, as Redis sees it. It returns
// ErrInvalid, ErrClosed or the Redis error.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	s, err := l.Status(ctx)
	return s.Holds, err
}

// RemainingLease returns the lock's remaining lease, whoever holds it:
// NoExpiry for a lock without one, and ErrNotLocked when nobody holds it.
// It also returns ErrInvalid, ErrClosed or the Redis error.
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	s, err := l.Status(ctx)
	if err != nil {
		return 0, err
	}
	if !s.Locked {
		return 0, wrapErr(verbStatus, l.name, ErrNotLocked)
	}
	return s.Lease, nil
}

// Context returns a context that lives as long as the handle's current
// hold: it is cancelled when the last Unlock releases it (cause ErrNotHeld),
// a margin before a fixed lease runs out (cause wraps ErrNotHeld), when the
// hold is lost (cause wraps ErrLockLost; for failed renewals, that margin
// before the lease runs out) and, for a hold under the watchdog, when the
// client closes (cause wraps ErrClosed). Read the cause with context.Cause. Without a hold it returns a
// context already cancelled with ErrNotHeld.
func (l *Lock) Context() context.Context { return l.h.context() }

// Done is Context().Done(): closed when the current hold ends.
func (l *Lock) Done() <-chan struct{} { return l.Context().Done() }
