package lualock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
)

type kind int

const (
	reentrant kind = iota
	fair
)

// NoExpiry is what RemainingLease returns for a lock that exists without an
// expiry (set by a tool other than this package or Redisson).
const NoExpiry time.Duration = -1

// undoTimeout bounds the clean-up calls that run after a caller's context
// ended, under context.WithoutCancel.
const undoTimeout = 2 * time.Second

// notHeld is the Context of a handle that holds nothing.
var notHeld = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

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
	c        *Client
	name     string
	kind     kind
	field    string        // owner field C:H
	channel  string        // release channel of the reentrant lock
	fairWait time.Duration // fair lock: the wait budget of each waiter
	latch    string        // unlock latch prefix: tag(latchPrefix, name) + ":" + C + ":"
	invalid  error         // set by a bad name

	op opLock // one acquisition or release of this handle at a time

	mu        sync.Mutex
	acquiring int             // acquire calls of this handle under way
	holds     int             // hold count this handle has in Redis
	gen       uint64          // counts holds from first lock to last unlock
	lease     time.Duration   // lease of the current hold
	since     time.Time       // when the current hold's first acquisition began
	watched   bool            // the watchdog renews the hold
	lost      error           // why the hold was lost, until its holds are unlocked
	ended     error           // why the last hold ended, for a Context asked for afterwards
	ctx       context.Context // made on demand by Context
	cancel    context.CancelCauseFunc
	expiry    *time.Timer // fixed lease: ends ctx when the lease runs out
	unlockReq string      // latch key of an Unlock whose outcome is unknown
	releasing bool        // an Unlock is waiting for its release's reply
	// lostWhileReleasing is a loss reported during that wait: the reply
	// decides whether it stands.
	lostWhileReleasing error
	watcher            *holdWatcher // Options.WatchHolds: the hold listens on its channel
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
	if err := checkLease(lease); err != nil {
		return err
	}
	return l.acquire(ctx, -1, lease)
}

// TryLock is Lock that gives up after wait, returning ErrNotObtained (or
// ErrUnavailable when Redis never answered in that time). A wait of 0 makes
// one attempt; a negative one returns ErrInvalid.
func (l *Lock) TryLock(ctx context.Context, wait time.Duration) error {
	if err := checkWait(wait); err != nil {
		return err
	}
	return l.acquire(ctx, wait, 0)
}

// TryLockLease is TryLock with a fixed lease, as LockLease.
func (l *Lock) TryLockLease(ctx context.Context, wait, lease time.Duration) error {
	if err := checkWait(wait); err != nil {
		return err
	}
	if err := checkLease(lease); err != nil {
		return err
	}
	return l.acquire(ctx, wait, lease)
}

func checkLease(lease time.Duration) error {
	if lease < time.Millisecond {
		return fmt.Errorf("%w: lease %v, want at least 1ms", ErrInvalid, lease)
	}
	return nil
}

func checkWait(wait time.Duration) error {
	if wait < 0 {
		return fmt.Errorf("%w: wait %v, want >= 0", ErrInvalid, wait)
	}
	return nil
}

// usable returns the error of a call with ctx on a handle that cannot
// reach Redis: a nil ctx and a bad name are ErrInvalid.
func (l *Lock) usable(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context (lock %q)", ErrInvalid, l.name)
	}
	if l.invalid != nil {
		return l.invalid
	}
	if l.c.closed() {
		return ErrClosed
	}
	return nil
}

// acquire takes the lock, waiting up to wait (forever when negative), with
// a fixed lease or, when lease is 0, the watchdog.
func (l *Lock) acquire(ctx context.Context, wait, lease time.Duration) (err error) {
	handoff := false // obtained after waiting for another holder
	if l.c.cfg.Observer.Acquire != nil || l.c.cfg.Logger != nil {
		start := time.Now()
		defer func() { l.acquired(ctx, start, wait, handoff, err) }()
	}
	if err := l.usable(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return l.ctxErr(ctx, nil)
	}
	if !l.c.enter() {
		return ErrClosed
	}
	defer l.c.bg.Done() // after w.end's clean-up, deferred below
	// Calls to Redis run under the wait's deadline too, so that a TryLock
	// on an unreachable Redis returns when its wait is over. A wait of 0
	// makes one attempt, bounded by ctx alone.
	var deadline time.Time
	actx := ctx
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	l.mu.Lock()
	l.acquiring++
	l.mu.Unlock()
	w := waiting{l: l}
	defer w.end(ctx)
	answered := false // an attempt got Redis's reply
	notObtained := func(last error) error {
		if !answered {
			if last != nil {
				return fmt.Errorf("%w: lock %q: no answer within %v (last error: %w)", ErrUnavailable, l.name, wait, last)
			}
			return fmt.Errorf("%w: lock %q: no answer within %v", ErrUnavailable, l.name, wait)
		}
		if last != nil {
			return fmt.Errorf("%w: lock %q within %v (last error: %w)", ErrNotObtained, l.name, wait, last)
		}
		return fmt.Errorf("%w: lock %q within %v", ErrNotObtained, l.name, wait)
	}
	ceil := l.c.cfg.MaxWaitTimer
	if l.kind == fair {
		ceil = l.fairMaxTimer()
	}
	bo := l.c.newBackoff()
	var lastErr error
	for first := true; ; first = false {
		if !first && !deadline.IsZero() && !time.Now().Before(deadline) {
			return notObtained(lastErr)
		}
		acquired, ttl, err := l.attempt(actx, lease, &w)
		answered = answered || err == nil
		if acquired {
			w.acquired, w.leaseSet = true, cmp.Or(lease, l.c.cfg.WatchdogLease)
			handoff = w.sub != nil
			return nil
		}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return l.ctxErr(ctx, lastErr)
			case errors.Is(err, ErrLockLost):
				return l.errorf("lock", err)
			case actx.Err() != nil:
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					err = nil // the wait's own deadline: not a Redis error
				}
				return notObtained(cmp.Or(lastErr, err))
			case !transient(err):
				return l.errorf("lock", err)
			}
			lastErr = err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return notObtained(lastErr)
		}
		pause := time.Duration(-1) // wait for a wake-up
		switch {
		case err != nil:
			pause = bo.step()
		case w.sub == nil:
			fresh, err := w.subscribe(actx)
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return l.ctxErr(ctx, lastErr)
				case actx.Err() != nil:
					return notObtained(lastErr)
				case errors.Is(err, ErrClosed) || !transient(err):
					return l.waitErr(ctx, err)
				}
				lastErr, pause = err, bo.step()
				break
			}
			if fresh {
				continue // a release before the subscription was confirmed went unheard: try again now
			}
			fallthrough
		default:
			bo = l.c.newBackoff()
			lastErr = nil
			w.sub.hint(ttl, l.timerFloor(ttl), ceil)
		}
		if err := w.sleep(ctx, pause, deadline); err != nil {
			return l.waitErr(ctx, err)
		}
	}
}

// timerFloor is the shortest fallback timer for a wait of ttl that a script
// told: 1ms for the reentrant lock; for the fair lock fairMinRetry when told
// "wait 0" (as 1ms), else fairMinWait, so that a waiter follows a real wait
// and is not late for the deadline it waits for.
func (l *Lock) timerFloor(ttl time.Duration) time.Duration {
	switch {
	case l.kind != fair:
		return time.Millisecond
	case ttl <= time.Millisecond:
		return fairMinRetry
	default:
		return fairMinWait
	}
}

// waitErr turns the error that ended a wait into the error acquire returns.
func (l *Lock) waitErr(ctx context.Context, err error) error {
	if errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: lock %q: closed while waiting", ErrClosed, l.name)
	}
	if ctx.Err() != nil {
		return l.ctxErr(ctx, nil)
	}
	return l.errorf("lock", err)
}

// ctxErr reports that ctx ended, keeping ctx's error (and its cause, when
// it has its own) recognisable with errors.Is.
func (l *Lock) ctxErr(ctx context.Context, last error) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	if last != nil {
		return fmt.Errorf("lualock: lock %q: %w (last error: %w)", l.name, err, last)
	}
	return fmt.Errorf("lualock: lock %q: %w", l.name, err)
}

// errorf names the operation and the lock in err. Errors of this package
// keep their own text first ("lualock: lock lost: ..."); others get the
// package's prefix.
func (l *Lock) errorf(op string, err error) error {
	for _, own := range []error{ErrLockLost, ErrNotHeld, ErrClosed, ErrInvalid, ErrNotObtained, ErrUnavailable, ErrNotLocked} {
		if errors.Is(err, own) {
			return fmt.Errorf("%w (%s %q)", err, op, l.name)
		}
	}
	return fmt.Errorf("lualock: %s %q: %w", op, l.name, err)
}

// attempt runs the acquire script once. It reports the lock's remaining
// lease (the time to wait) when another owner holds it.
func (l *Lock) attempt(ctx context.Context, lease time.Duration, w *waiting) (bool, time.Duration, error) {
	if err := l.op.lock(ctx); err != nil {
		return false, 0, err // not sent: nothing to give back
	}
	defer l.op.unlock()
	l.mu.Lock()
	pending, before := l.unlockReq != "", l.holds
	l.mu.Unlock()
	if pending {
		// An Unlock whose outcome is unknown (its reply was lost): settle
		// it first, replaying it (by its latch, or past the latch by the
		// hold count it names), so that the hold count is known. The caller
		// asked for that release. When it finds the lock gone, a re-entry
		// (holds left after it) is into a lost hold.
		switch err := l.unlock(ctx); {
		case err == nil:
		case errors.Is(err, ErrLockLost):
			return false, 0, err
		case errors.Is(err, ErrNotHeld) && before > 1:
			return false, 0, fmt.Errorf("%w: a re-entry found the earlier holds gone (%w)", ErrLockLost, err)
		case errors.Is(err, ErrNotHeld):
		default:
			return false, 0, err
		}
	}
	l.mu.Lock()
	lost, want := l.lost, l.holds+1
	l.mu.Unlock()
	if lost != nil {
		return false, 0, lost
	}
	if l.c.closed() {
		return false, 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, 0, err // not sent: nothing to give back
	}
	set := lease
	if set == 0 {
		set = l.c.cfg.WatchdogLease
	} else {
		resume, err := l.c.wd.quiesce(ctx, l)
		if err != nil {
			return false, 0, err // not sent
		}
		defer resume()
	}
	w.woken = false // this attempt acts on the wake-up, if any
	start := time.Now()
	wait, err := l.runAcquire(ctx, set, want, w)
	if err != nil && redis.HasErrorPrefix(err, "LOST") {
		l.endHold(l.generation(), fmt.Errorf("%w: %w", ErrLockLost, errLostOnReentry), true)
		return false, 0, l.lostCause()
	}
	if err != nil {
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			// The reply is unknown: the script may have run. The next
			// attempt replays it (it names the same hold count); if none
			// comes, the acquire call gives it back on its way out.
			w.maybeHeld, w.lease = want, set
			if ctx.Err() == nil {
				w.unreachable = transient(err)
			}
		}
		return false, 0, err
	}
	w.maybeHeld, w.unreachable = 0, false
	if wait != 0 {
		return false, time.Duration(wait) * time.Millisecond, nil
	}
	if !l.held(want, lease, start) {
		// The client closed meanwhile: nothing would renew the hold. Give it
		// back rather than hand out a lock that lapses unnoticed.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		_ = l.undo(uctx, want, set)
		cancel()
		return false, 0, ErrClosed
	}
	return true, 0, nil
}

func (l *Lock) runAcquire(ctx context.Context, lease time.Duration, want int, w *waiting) (int64, error) {
	switch l.kind {
	case fair:
		return l.runFairAcquire(ctx, lease, want, w)
	default:
		return generated.LockAcquire(ctx, l.c.scripts,
			generated.LockAcquireKeys{Lock: l.name},
			generated.LockAcquireArgs{LeaseMS: lease.Milliseconds(), Field: l.field, Holds: int64(want)})
	}
}

// undo releases the hold that an acquisition with an unknown outcome may
// have taken (want holds), if it did.
//
// It reads the count with a plain HGET on the primary of the lock's slot
// (a read-only script, or a read on a cluster client set to read from
// replicas, may be routed to a replica and see an old count).
func (l *Lock) undo(ctx context.Context, want int, lease time.Duration) error {
	n, err := l.c.primary(ctx, l.name).HGet(ctx, l.name, l.field).Int()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil || n != want {
		return err
	}
	latch := l.latchKey()
	if _, err = l.runRelease(ctx, lease, latch, want); err == nil {
		l.c.latches.drop(latch)
	}
	return err
}

func (l *Lock) generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// lostCause is the error of a lost hold.
func (l *Lock) lostCause() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	return ErrLockLost
}

// held records a successful acquisition that left want holds, whose lease
// was set at start or later. It returns false, recording nothing, when the
// hold needs the watchdog and the client has closed.
func (l *Lock) held(want int, lease time.Duration, start time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gen := l.gen
	if want == 1 {
		gen++
	}
	if lease == 0 && !l.watched && !l.c.wd.add(l, gen, start) {
		return false
	}
	l.holds, l.gen = want, gen
	if want == 1 {
		l.ctx, l.cancel, l.ended, l.unlockReq = nil, nil, nil, ""
		l.since = start
		l.watchHold(gen)
	}
	if lease == 0 {
		l.stopExpiry()
		l.lease = l.c.cfg.WatchdogLease
		l.watched = true
		return true
	}
	if l.watched {
		l.watched = false
		l.c.wd.remove(l)
	}
	l.lease = lease
	l.startExpiry(start)
	return true
}

// startExpiry ends the hold's context when its fixed lease, set in Redis at
// start or later, runs out, less lossMargin. l.mu is held.
func (l *Lock) startExpiry(start time.Time) {
	l.stopExpiry()
	gen, lease := l.gen, l.lease
	l.expiry = time.AfterFunc(time.Until(start.Add(lease-lossMargin(lease))), func() {
		l.endHold(gen, fmt.Errorf("%w: the lease of %v ran out", ErrNotHeld, lease), false)
	})
}

func (l *Lock) stopExpiry() {
	if l.expiry != nil {
		l.expiry.Stop()
		l.expiry = nil
	}
}

// endHold ends hold gen with cause. When lost is true the handle remembers
// the loss, so that its outstanding holds' Unlock and re-entry report it.
func (l *Lock) endHold(gen uint64, cause error, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endHoldLocked(gen, cause, lost)
}

// endHoldLocked is endHold with l.mu held.
func (l *Lock) endHoldLocked(gen uint64, cause error, lost bool) {
	if l.gen != gen || l.holds == 0 || l.lost != nil {
		return
	}
	if lost && l.releasing {
		l.lostWhileReleasing = cause // Unlock decides
		return
	}
	if lost && l.unlockReq != "" && l.holds == 1 {
		// A release of this last hold got no reply: it may be what
		// removed the lock. The hold is over either way; the next Unlock
		// (or Lock) settles the release and tells what it found.
		if l.watched {
			l.watched = false
			l.c.wd.remove(l)
		}
		l.endContext(fmt.Errorf("%w: the lock is gone while its release, sent without a reply, is unsettled (that release removed it, or it was lost: %v)", ErrNotHeld, cause))
		return
	}
	if lost {
		l.lost = cause
	}
	l.finish(cause)
}

// expired ends hold gen, under the watchdog, whose lease ran out by the
// client's clock (less the margin) with no renewal confirmed. Unlike a
// renewal that finds the lock gone, which may be the handle's own release
// in flight and waits for its outcome (see unlock), an expiry ends the
// hold's Context at once even then: the lease is over either way.
func (l *Lock) expired(gen uint64, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen || l.holds == 0 || l.lost != nil {
		return
	}
	if l.releasing {
		l.lostWhileReleasing = cause // Unlock decides what it returns
		l.endContext(cause)
		return
	}
	l.lost = cause
	l.finish(cause)
}

// finish stops the renewal and the expiry of the current hold and cancels
// its context. l.mu is held.
func (l *Lock) finish(cause error) {
	l.unlockReq = ""
	l.unwatchHold()
	l.stopExpiry()
	if l.watched {
		l.watched = false
		l.c.wd.remove(l)
	}
	l.endContext(cause)
}

// endContext cancels the current hold's context with cause, unless it has
// ended already (the first cause stands). l.mu is held.
func (l *Lock) endContext(cause error) {
	if l.ended != nil {
		return
	}
	l.ended = cause
	if l.cancel != nil {
		l.cancel(cause)
	}
	l.holdEnded(cause)
}

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
// unlock latch, found the lock gone: see Options.UnlockLatch),
// ErrLockLost for each hold of a hold that was lost (a hold under the
// watchdog found gone at Unlock was lost too: taken away before a renewal
// noticed), ErrClosed after Client.Close, or the Redis error. After a Redis
// error with a live ctx, and for a hold that is not the last, the outcome
// is unknown: calling Unlock again is safe, it replays the first call's
// outcome instead of releasing a second hold; so does the handle's next
// Lock, before it re-enters.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	octx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		octx, cancel = detached(ctx)
		defer cancel()
	}
	if err := l.op.lock(octx); err != nil {
		return l.errorf("unlock", err)
	}
	defer l.op.unlock()
	return l.unlock(ctx)
}

// detached is the short context of a clean-up that must run after ctx
// ended.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
}

// unlock is Unlock under the handle's op lock.
func (l *Lock) unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.holds == 0 {
		l.mu.Unlock()
		return fmt.Errorf("%w: unlock %q", ErrNotHeld, l.name)
	}
	if l.lost != nil {
		err := l.lost
		l.holds--
		if l.holds == 0 {
			l.lost = nil
		}
		l.mu.Unlock()
		return l.errorf("unlock", err)
	}
	lease, watched, holds := l.lease, l.watched, l.holds
	ended := ctx.Err() != nil
	if ended && holds == 1 && watched {
		// The caller is gone: whatever the release's fate, nothing renews
		// the lock any more, so it expires within one lease at worst. The
		// watchdog still ends the hold's Context when that lease runs out.
		l.c.wd.stopRenewing(l)
	}
	resend := l.unlockReq != "" // an earlier send of this release got no reply
	if !resend {
		l.unlockReq = l.latchKey()
	}
	latch, start := l.unlockReq, time.Now()
	// The watchdog keeps renewing during the release. A renewal racing the
	// last release finds the lock gone: such a loss waits for the release's
	// outcome, which decides whether it stands (Redisson #7272).
	l.releasing = true
	if holds == 1 {
		// The last release publishes on the lock's channel: the handle's
		// own hold watcher (Options.WatchHolds) must not take it for a
		// force unlock.
		l.unwatchHold()
	}
	l.mu.Unlock()

	var res *int64
	var err error
	if !ended {
		res, err = l.runRelease(ctx, lease, latch, holds)
	}
	if ended || (err != nil && ctx.Err() != nil) {
		// ctx ended before or during the call: send the release (again,
		// replayed by its latch) under a context of its own.
		if !ended && holds == 1 && watched {
			l.c.wd.stopRenewing(l)
		}
		rctx, cancel := detached(ctx)
		res, err = l.runRelease(rctx, lease, latch, holds)
		cancel()
		ended = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releasing = false
	lostMeanwhile := l.lostWhileReleasing
	l.lostWhileReleasing = nil
	if err != nil {
		if ended && holds == 1 && l.lost == nil {
			// Nobody will call again: end the hold here. Its renewal
			// has stopped, so the lock is gone within its lease at worst.
			l.holds = 0
			if lostMeanwhile != nil {
				l.finish(lostMeanwhile)
				return fmt.Errorf("lualock: unlock %q: the release was not confirmed (%w), and the lease ran out meanwhile (%w)", l.name, err, lostMeanwhile)
			}
			l.finish(fmt.Errorf("%w: unlocked after its context ended; the release was not confirmed", ErrNotHeld))
			return fmt.Errorf("lualock: unlock %q: the release was not confirmed (%w); nothing renews the lock, so it expires within its lease (%v) at most", l.name, err, lease)
		}
		if lostMeanwhile != nil && l.lost == nil {
			l.lost = lostMeanwhile
			l.finish(lostMeanwhile)
		}
		return l.errorf("unlock", err)
	}
	l.unlockReq = ""
	l.c.latches.drop(latch) // the reply is in: nothing will resend this request
	switch {
	case res == nil && resend && holds == 1:
		// The release was sent before without a reply, and its latch has
		// expired: the lock is gone because that send released it, or
		// because it was lost before. Either way this hold has ended, as
		// the caller asked; nothing says it was taken away.
		l.holds = 0
		cause := fmt.Errorf("%w: the lock was gone when its release was sent again past the unlock latch (released by the first send, whose reply was lost, or lost before it)", ErrNotHeld)
		l.finish(cause)
		return l.errorf("unlock", cause)
	case res == nil && watched:
		// The watchdog kept the lease: the lock was taken away (deleted,
		// force-unlocked, wiped by Redis) before a renewal noticed. Each
		// remaining hold's Unlock reports the loss too.
		cause := fmt.Errorf("%w: %w", ErrLockLost, errLostAtUnlock)
		if l.holds--; l.holds > 0 {
			l.lost = cause
		}
		l.finish(cause)
		return l.errorf("unlock", cause)
	case res == nil:
		l.holds = 0
		l.finish(fmt.Errorf("%w: the lock was gone at unlock", ErrNotHeld))
		return fmt.Errorf("%w: unlock %q: its lease ran out or it was deleted", ErrNotHeld, l.name)
	case *res == 0 && lostMeanwhile != nil:
		// A replayed partial release, but the lock was lost meanwhile.
		l.holds--
		l.lost = lostMeanwhile
		l.finish(lostMeanwhile)
	case *res == 0 && l.holds > 1:
		l.holds--
		if !l.watched {
			l.startExpiry(start) // the release set the fixed lease again
		}
	default:
		l.holds, l.lost = 0, nil
		l.finish(ErrNotHeld)
	}
	return nil
}

// latchKey returns the latch key of a new release request: the lock's latch
// prefix, the client id and a number no other request of the client has.
func (l *Lock) latchKey() string {
	var num [20]byte
	var b strings.Builder
	b.Grow(len(l.latch) + len(num))
	b.WriteString(l.latch)
	b.Write(strconv.AppendUint(num[:0], l.c.reqs.Add(1), 10))
	return b.String()
}

// runRelease releases one hold of the holds the handle has (the script
// takes the count so that a release resent after its latch expired is not
// applied twice).
func (l *Lock) runRelease(ctx context.Context, lease time.Duration, latch string, holds int) (*int64, error) {
	if l.kind == fair {
		return l.runFairRelease(ctx, lease, latch, holds)
	}
	return generated.LockRelease(ctx, l.c.calls,
		generated.LockReleaseKeys{Lock: l.name, Channel: l.channel, Latch: latch},
		generated.LockReleaseArgs{LeaseMS: lease.Milliseconds(), Field: l.field, LatchMS: l.c.cfg.UnlockLatch.Milliseconds(),
			Publish: l.c.cfg.publish, Holds: int64(holds)})
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It
// reports whether there was a lock to delete. Other owners find their hold
// lost at their next renewal, or within milliseconds when their client has
// Options.WatchHolds (it publishes on the lock's channel, for the fair lock
// too); this handle's own hold ends with ErrNotHeld.
// A resend of the call after a lost reply (by go-redis or the script
// runner) replays its outcome; calling ForceUnlock again is a new request.
// It returns ErrInvalid, ErrClosed, an error wrapping ctx's error when
// another call of this handle holds it up until ctx ends, or the Redis
// error.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.usable(ctx); err != nil {
		return false, err
	}
	if err := l.op.lock(ctx); err != nil {
		return false, l.errorf("force unlock", err)
	}
	defer l.op.unlock()
	// A force release publishes on the lock's channel: the handle's own
	// hold watcher must not take it for another client's.
	l.mu.Lock()
	l.unwatchHold()
	l.mu.Unlock()
	latch := l.latchKey()
	deleted, err := l.runForceRelease(ctx, latch)
	if err != nil {
		return false, l.errorf("force unlock", err)
	}
	l.c.latches.drop(latch)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds > 0 {
		l.holds, l.lost = 0, nil
		l.finish(fmt.Errorf("%w: force unlocked", ErrNotHeld))
	}
	return deleted, nil
}

func (l *Lock) runForceRelease(ctx context.Context, latch string) (bool, error) {
	if l.kind == fair {
		return l.runFairForceRelease(ctx, latch)
	}
	return generated.LockForceRelease(ctx, l.c.calls,
		generated.LockForceReleaseKeys{Lock: l.name, Channel: l.channel, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: l.c.cfg.UnlockLatch.Milliseconds(), Publish: l.c.cfg.publish})
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
		return Status{}, err
	}
	st, err := generated.LockStatus(ctx, l.c.calls, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: l.field})
	if err != nil {
		return Status{}, l.errorf("status", err)
	}
	if len(st) != 3 {
		return Status{}, l.errorf("status", fmt.Errorf("reply has %d elements, want 3", len(st)))
	}
	s := Status{Locked: st[0] == 1, Holds: int(st[1])}
	switch {
	case st[2] >= 0:
		s.Lease = time.Duration(st[2]) * time.Millisecond
	case st[2] == -1:
		s.Lease = NoExpiry
	}
	return s, nil
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
		return 0, fmt.Errorf("%w: %q", ErrNotLocked, l.name)
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
func (l *Lock) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 {
		return notHeld
	}
	if l.ctx == nil {
		// Made on first use: most holds never ask for it.
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.ended != nil {
			l.cancel(l.ended)
		}
	}
	return l.ctx
}

// Done is Context().Done(): closed when the current hold ends.
func (l *Lock) Done() <-chan struct{} { return l.Context().Done() }
