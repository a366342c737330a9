package lualock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lualock/lualock/internal/wake"
	"github.com/lualock/lualock/luart"
)

// The acquisition engine: one acquire call of a handle, whatever its
// protocol, as a loop over explicit steps. Each step is one method that
// does one thing and returns the next; stepDone ends the call with a.err:
//
//	first ──▶ attempt ──acquired──▶ (done)
//	            │ ▲ ▲
//	   transient│ │ └─────────── retry ◀── sleep (wake-up or fallback timer)
//	      error ▼ │                           ▲
//	         backoff          not acquired ──▶ subscribe ──fresh──▶ retry
//
// The engine owns the wait budget and its deadline, the backoff after
// transient errors, the subscription and its wake-ups, the undo of an
// attempt whose reply was lost and the give-up clean-up (protocol.leave).
// What an attempt does in Redis is the protocol's; what a hold is, the
// hold's.

// step names one step of an acquisition. (Steps are named rather than
// func values so that the acquisition, which they all share, stays on the
// caller's stack: an indirect call would move it to the heap, one
// allocation per call.)
type step uint8

const (
	stepDone      step = iota // the call is over: a.err says how
	stepAttempt               // one attempt
	stepRetry                 // an attempt after a pause, unless the wait ran out
	stepBackoff               // a pause after a transient error
	stepSubscribe             // listen for the release that wakes this waiter
	stepSleep                 // wait for a wake-up or the fallback timer
)

// run runs the steps from the first attempt until the call is over.
func (a *acquisition) run() {
	for s := stepAttempt; s != stepDone; {
		switch s {
		case stepAttempt:
			s = a.attempt()
		case stepRetry:
			s = a.retry()
		case stepBackoff:
			s = a.backoff()
		case stepSubscribe:
			s = a.subscribe()
		case stepSleep:
			s = a.sleep()
		}
	}
}

// acquisition is the state of one acquire call between its steps.
type acquisition struct {
	l        *Lock
	c        *Client
	o        waitable        // a primitive without a Lock (semaphores, latch; semwait.go): nil for a Lock
	watch    *wake.Watch     // o's: every message wakes this waiter too
	ctx      context.Context // the caller's
	actx     context.Context // ctx bounded by the wait's deadline: the calls to Redis
	wait     time.Duration   // the budget; negative: forever
	lease    time.Duration   // the lease asked for; 0: the watchdog's
	deadline time.Time       // zero: none
	bo       backoff
	sub      *wake.Waiter

	answered bool          // an attempt got Redis's reply
	lastErr  error         // the last transient error since the last answer
	ttl      time.Duration // what the last answered attempt said to wait
	err      error         // the call's outcome, once done

	// What the clean-up at the end needs.
	queued      bool          // an attempt for a first hold may have put the owner in the protocol's queue
	maybeHeld   int           // the hold count an attempt with a lost reply may have reached
	undoLease   time.Duration // the lease that attempt set
	unreachable bool          // the last attempt failed on the network: Redis seems down
	acquired    bool
	leaseSet    time.Duration // the lease the acquisition set
	woken       bool          // a wake-up was taken and no attempt has used it yet
	spinning    bool          // the backoff between attempts is the protocol's (spinner)
	unknown     bool          // o's last attempt got no reply: its outcome is unknown
}

// spinner is implemented by the protocols without pub/sub whose waiters
// back off within bounds of their own (the spin lock's).
type spinner interface {
	spinBackoff() (first, max time.Duration)
}

// acquire takes the lock, waiting up to wait (forever when negative), with
// a fixed lease or, when lease is 0, the watchdog.
func (l *Lock) acquire(ctx context.Context, wait, lease time.Duration) (err error) {
	a := acquisition{l: l, c: l.c, ctx: ctx, actx: ctx, wait: wait, lease: lease}
	if l.c.cfg.Observer.Acquire != nil || l.c.cfg.Logger != nil {
		start := time.Now()
		// Handoff: obtained after waiting for another holder.
		defer func() { l.acquireEnded(ctx, start, wait, a.acquired && a.sub != nil, err) }()
	}
	if err := l.usable(ctx); err != nil {
		return wrapErr(verbLock, l.name, err)
	}
	if ctx.Err() != nil {
		return wrapErr(verbLock, l.name, ctxErr(ctx, nil))
	}
	if !l.c.enter() {
		return wrapErr(verbLock, l.name, ErrClosed)
	}
	defer l.c.bg.Done() // after a.end's clean-up, deferred below
	a.bo = l.c.newBackoff()
	// Calls to Redis run under the wait's deadline too, so that a TryLock
	// on an unreachable Redis returns when its wait is over. A wait of 0
	// makes one attempt, bounded by ctx alone.
	if wait >= 0 {
		a.deadline = time.Now().Add(wait)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		a.actx, cancel = context.WithDeadline(ctx, a.deadline)
		defer cancel()
	}
	l.h.enter()
	defer a.end()
	a.run()
	return wrapErr(verbLock, l.name, a.err)
}

// over reports whether the wait's deadline has passed.
func (a *acquisition) over() bool {
	return !a.deadline.IsZero() && !time.Now().Before(a.deadline)
}

// fail ends the call with err.
func (a *acquisition) fail(err error) step {
	a.err = err
	return stepDone
}

// notObtained ends the call whose wait ran out: ErrNotObtained, or
// ErrUnavailable when Redis never answered.
func (a *acquisition) notObtained(last error) step {
	s := ErrNotObtained
	if !a.answered {
		s = ErrUnavailable
	}
	if last != nil {
		return a.fail(fmt.Errorf("%w within %v (last error: %w)", s, a.wait, last))
	}
	return a.fail(fmt.Errorf("%w within %v", s, a.wait))
}

// retry is attempt after a pause, unless the wait ran out meanwhile.
func (a *acquisition) retry() step {
	if a.over() {
		return a.notObtained(a.lastErr)
	}
	return stepAttempt
}

// attempt makes one attempt and chooses what follows from its outcome.
func (a *acquisition) attempt() step {
	var res attemptResult
	var err error
	if a.o != nil {
		res.acquired, res.wait, err = a.tryWaitable()
	} else {
		res, err = a.l.attempt(a.actx, a)
	}
	a.answered = a.answered || err == nil
	switch {
	case res.acquired:
		a.acquired, a.leaseSet = true, cmp.Or(a.lease, a.c.cfg.WatchdogLease)
		return stepDone
	case err == nil:
		a.ttl = res.wait
	case a.ctx.Err() != nil:
		return a.fail(ctxErr(a.ctx, a.lastErr))
	case errors.Is(err, ErrLockLost), errors.Is(err, ErrNotReplicated):
		return a.fail(err)
	case a.actx.Err() != nil:
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = nil // the wait's own deadline: not a Redis error
		}
		return a.notObtained(cmp.Or(a.lastErr, err))
	case !transient(err) && !a.c.redirected(err):
		return a.fail(err)
	default:
		a.lastErr = err
		a.c.followCluster(err)
	}
	switch {
	case a.over():
		return a.notObtained(a.lastErr)
	case err != nil:
		return stepBackoff
	case a.sub == nil:
		return stepSubscribe
	}
	return stepSleep
}

// tryWaitable makes one attempt of a.o and, when it granted something,
// waits for the replicas' acknowledgement (replica.go); without it, the
// grant is given back and the attempt fails with ErrNotReplicated.
func (a *acquisition) tryWaitable() (bool, time.Duration, error) {
	ctx, pin := a.actx, (*ackPin)(nil)
	if a.o.grants() {
		ctx, pin = a.c.ack.begin(ctx)
		defer pin.end()
	}
	ok, wait, err := a.o.try(ctx)
	a.unknown = err != nil && !isRedisError(err)
	if ok {
		if aerr := pin.wait(a.actx); aerr != nil {
			o := a.o
			a.c.background(func() {
				bctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
				defer cancel()
				_ = o.giveBack(bctx)
			})
			return false, 0, aerr
		}
	}
	return ok, wait, err
}

// backoff pauses after a transient error, then retries.
func (a *acquisition) backoff() step {
	return a.pause(a.bo.step())
}

// subscribe listens on the channel that announces a release to this
// waiter. A fresh subscription retries at once: a release before it was
// confirmed went unheard. A protocol with no channel is polled instead.
func (a *acquisition) subscribe() step {
	var ch string
	if a.o != nil {
		ch = a.o.channel()
	} else {
		ch = a.l.p.channel(a.l.field)
	}
	if ch == "" {
		// A protocol without pub/sub (a spin lock): back off, exponential
		// and bounded, between attempts: within the protocol's bounds
		// when it has its own (spinner), Options.RetryMin and RetryMax
		// otherwise.
		if s, ok := a.spinner(); ok && !a.spinning {
			a.spinning = true
			lo, hi := s.spinBackoff()
			a.bo = backoff{luart.NewBackoff(lo, hi)}
		}
		return a.pause(a.bo.step())
	}
	sub, fresh, err := a.c.hub.Subscribe(a.actx, ch)
	switch {
	case err == nil:
		a.sub = sub
		if a.o != nil && a.o.wakeAll() {
			a.watch = a.c.hub.Watch(ch, func() { sub.Signal() })
		}
		if fresh {
			return stepRetry
		}
		return stepSleep
	case a.ctx.Err() != nil:
		return a.fail(ctxErr(a.ctx, a.lastErr))
	case a.actx.Err() != nil:
		return a.notObtained(a.lastErr)
	case errors.Is(err, ErrClosed) || !transient(err):
		return a.fail(a.waitErr(err))
	}
	a.lastErr = err
	return a.pause(a.bo.step())
}

// sleep waits for a wake-up, or the fallback timer the protocol bounds,
// then retries. Redis answered: the backoff starts over.
func (a *acquisition) sleep() step {
	a.bo = a.c.newBackoff()
	a.lastErr = nil
	if a.o != nil {
		if d := a.o.poll(); d > 0 {
			// Its own timer, not the channel's shared one (which wakes
			// one waiter of the channel at a time): a message or d.
			if err := a.block(d, true); err != nil {
				return a.fail(a.waitErr(err))
			}
			return stepRetry
		}
	}
	var floor, ceil time.Duration
	if a.o != nil {
		floor, ceil = a.o.timer(a.ttl)
	} else {
		floor, ceil = a.l.p.timer(a.ttl)
	}
	a.sub.Hint(a.ttl, floor, ceil)
	return a.pause(-1)
}

// pause waits for a wake-up (when d < 0) or for d, never past the
// deadline, then retries.
func (a *acquisition) pause(d time.Duration) step {
	if err := a.block(d, d < 0); err != nil {
		return a.fail(a.waitErr(err))
	}
	return stepRetry
}

// block waits for a wake-up on the subscription (when wake) or for pause
// (when pause >= 0), and never past the deadline. It returns ctx's error
// when ctx ends and ErrClosed when the client closes.
func (a *acquisition) block(pause time.Duration, wake bool) error {
	d := pause
	if !a.deadline.IsZero() {
		if until := time.Until(a.deadline); d < 0 || until < d {
			d = max(until, 0)
		}
	}
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var woke <-chan struct{}
	if wake && a.sub != nil {
		woke = a.sub.C()
	}
	select {
	case <-woke:
		a.woken = true
	case <-timeout:
	case <-a.ctx.Done():
		return a.ctx.Err()
	case <-a.c.closing:
		return ErrClosed
	}
	return nil
}

// waitErr turns the error that ended a wait into the call's error.
func (a *acquisition) waitErr(err error) error {
	if errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w while waiting", ErrClosed)
	}
	if a.ctx.Err() != nil {
		return ctxErr(a.ctx, nil)
	}
	return err
}

// ctxErr reports that ctx ended, keeping ctx's error (and its cause, when
// it has its own) recognisable with errors.Is.
func ctxErr(ctx context.Context, last error) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	if last != nil {
		return fmt.Errorf("%w (last error: %w)", err, last)
	}
	return err
}

// cleanupWait bounds the clean-up that end does before the acquire call
// returns; what is not done by then goes on in the background.
const cleanupWait = 100 * time.Millisecond

// end runs when the acquire call returns: it drops the subscription and,
// when the lock was not obtained, gives back a hold that an attempt with a
// lost reply may have taken, and leaves the protocol's queue. When Redis
// answered the last attempt, that is done when end returns. Otherwise (or
// when Redis does not answer within cleanupWait) the clean-up goes on in a
// goroutine of the client, which Close waits for; the handle's next call
// waits for it too.
func (a *acquisition) end() {
	if a.watch != nil {
		a.watch.Stop() // before Release: the hub idles a channel only once no watch is left
	}
	if a.sub != nil {
		if a.woken {
			// The call ends without acting on a release it was told of:
			// hand it back so that release passes it to another waiter.
			a.sub.Signal()
		}
		a.sub.Release(a.acquired, a.leaseSet)
	}
	if a.o != nil {
		if !a.acquired {
			a.o.giveUp(a.unknown)
		}
		return
	}
	l := a.l
	if l.h.exit() {
		// Another call of this handle waits as the same owner, in the
		// same place in the queue: leaving would send it to the back.
		a.queued = false
	}
	if a.acquired || (a.maybeHeld == 0 && !a.queued) {
		return
	}
	// The clean-up may outlive the call: it copies what it needs, so that
	// a stays on the caller's stack.
	maybeHeld, lease, queued := a.maybeHeld, a.undoLease, a.queued
	clean := func(ctx context.Context) error {
		if maybeHeld > 0 {
			if err := l.undo(ctx, maybeHeld, lease); err != nil {
				return err
			}
		}
		if queued {
			return l.p.leave(ctx, l.field)
		}
		return nil
	}
	l.op.lockAlways()
	if a.maybeHeld == 0 && !a.unreachable {
		// Redis answered the last attempt: clean up before returning, so
		// that the caller finds the queue without this waiter.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), cleanupWait)
		err := clean(sctx)
		cancel()
		if err == nil {
			l.op.unlock()
			return
		}
	}
	// Hand the handle's op lock to the goroutine: the handle's next call
	// waits until the clean-up is over.
	l.c.background(func() {
		defer l.op.unlock()
		bctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		defer cancel()
		_ = clean(bctx)
	})
}

// spinner returns the lock protocol's own backoff bounds, if it has them;
// the semaphores and the latch (a.o) always have a channel.
func (a *acquisition) spinner() (spinner, bool) {
	if a.o != nil {
		return nil, false
	}
	s, ok := a.l.p.(spinner)
	return s, ok
}
