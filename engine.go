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

// The acquisition engine: one acquire call of any primitive (a Lock of
// any kind, a semaphore's Acquire, a latch's Await), as a loop over
// explicit steps. Each step is one method that does one thing and returns
// the next; stepDone ends the call with a.err:
//
//	first ──▶ attempt ──acquired──▶ granted (done)
//	            │ ▲ ▲
//	   transient│ │ └─────────── retry ◀── sleep (wake-up or fallback timer)
//	      error ▼ │                           ▲
//	         backoff          not acquired ──▶ subscribe ──fresh──▶ retry
//
// A primitive gives the engine one thing, a contender: an attempt that
// returns an outcome value, how its waiters wait (waitSpec), and a
// give-up step. The engine owns every decision around them: the wait
// and its deadline, the backoff after transient errors, the
// subscription and its wake-ups, and at the end whether and where (inline
// or in the background) the give-up step runs: the undo of an attempt
// whose reply was lost, and leaving what a waiter left in Redis.

// contender is what the engine needs of a primitive that waits.
type contender interface {
	// try makes one attempt, with lease (0: the watchdog's), and says
	// what came of it.
	try(ctx context.Context, lease time.Duration) outcome
	// waitSpec is how the primitive's waiters wait between attempts.
	waitSpec() waitSpec
	// timer bounds the fallback timer of a waiter told to wait ttl.
	timer(ttl time.Duration) (floor, ceil time.Duration)
	// enter and exit bracket the call; exit reports whether another call
	// still waits as the same owner (then the give-up step must not leave
	// its place).
	enter()
	exit() (others bool)
	// giveUp cleans up after a call that did not succeed: g says what the
	// failed attempts may have left. The engine calls it once at most,
	// between holdOps and releaseOps, inline or in a client goroutine.
	giveUp(ctx context.Context, g leftover) error
	// holdOps and releaseOps keep the primitive's next call waiting while
	// its give-up step runs (a Lock's op lock); no-ops for the others.
	holdOps()
	releaseOps()
	// grants tells whether a successful attempt takes something (a hold,
	// permits) that the replicas must acknowledge (Options.ReplicaAck).
	grants() bool
	// revoke gives back what the last successful attempt took, and
	// whatever the primitive recorded of it: its replicas did not
	// acknowledge it.
	revoke(ctx context.Context) error
}

// outcome is what one attempt told the engine.
type outcome struct {
	acquired bool
	// wait is how long the reply says the caller should wait (the
	// holder's remaining lease, a permit's deadline): the fallback timer's
	// hint. Negative: no hint.
	wait time.Duration
	// poll, when positive, retries after that long even without a
	// message, on the waiter's own timer instead of the channel's shared
	// one (a semaphore waiter keeping its claim).
	poll time.Duration
	// sent tells what the attempt may have done in Redis.
	sent sent
	// undo is what to give back when the reply was lost (sent == sentUnknown).
	undo undo
	// queued: the attempt may have left the caller waiting in Redis (a
	// place in the fair queue, a semaphore's claim), which the give-up
	// step leaves.
	queued bool
	err    error
}

// sent tells what an attempt may have done in Redis.
type sent uint8

const (
	sentAnswered sent = iota // Redis answered (or an error it sent): the outcome is known
	sentNot                  // not sent: what an earlier attempt left stands
	sentRefused              // Redis refused it (an error reply): it changed nothing, what an earlier attempt left stands
	sentUnknown              // the reply was lost: it may have taken effect
)

// undo is what a Lock's give-up step needs to give back a hold that an
// attempt with a lost reply may have taken.
type undo struct {
	holds int           // the hold count it asked for
	lease time.Duration // the lease it set
}

// leftover is what the failed attempts of a call may have left in Redis,
// for the give-up step.
type leftover struct {
	unknown bool // the last attempt's reply was lost
	undo    undo // what it asked for
	queued  bool // an attempt may have left the caller waiting
}

// none reports whether there is nothing to clean up.
func (g leftover) none() bool { return !g.unknown && !g.queued }

// waitSpec is how a primitive's waiters wait between attempts.
type waitSpec struct {
	// channel is where a release is announced; "": no pub/sub, the waiter
	// backs off between attempts instead.
	channel string
	// mode is how a message wakes the client's waiters: one per message,
	// or every waiter in WakeAll or WakeShared mode (a release that may
	// serve several; WakeShared: one that gets the lock wakes the others).
	mode wake.Mode
	// spinFirst and spinMax bound the back-off of a waiter without a
	// channel; 0: Options.RetryMin and RetryMax.
	spinFirst, spinMax time.Duration
	// watch, when set, is a key whose every change wakes the channel's
	// waiters as a message would (the hold tracker's, holdwatch.go).
	watch string
}

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
	p        contender
	c        *Client
	ctx      context.Context // the caller's
	actx     context.Context // ctx bounded by the wait's deadline: the calls to Redis
	wait     time.Duration   // the caller's wait; negative: forever
	lease    time.Duration   // the lease asked for; 0: the watchdog's
	deadline time.Time       // zero: none
	bo       backoff
	sub      *wake.Waiter
	kw       *keyWatch // the waitSpec's key watch, from the subscription on

	tried    time.Time // when the last attempt began
	answered bool      // an attempt got Redis's reply
	lastErr  error     // the last transient error since the last answer
	last     outcome   // the last attempt's outcome (its hint and poll period)
	left     leftover  // what the give-up step must clean up
	acquired bool      // granted
	woken    bool      // a wake-up was taken and no attempt has used it yet
	spinning bool      // the backoff between attempts is the waitSpec's
	err      error     // the call's outcome, once done
}

// acquire runs p's attempts on the engine until one succeeds, waiting up
// to wait (forever when negative; one attempt when 0), with lease (0: the
// watchdog's). It returns ErrNotObtained when the wait runs out
// (ErrUnavailable when Redis never answered), ErrClosed, an error wrapping
// ctx's, or an attempt's error that no retry can mend; handoff reports a
// success after waiting for a wake-up. p's give-up step has run (or runs
// in the background) when it returns an error.
func (c *Client) acquire(ctx context.Context, p contender, wait, lease time.Duration) (handoff bool, err error) {
	if ctx == nil {
		return false, fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if ctx.Err() != nil {
		return false, ctxErr(ctx, nil)
	}
	if !c.enter() {
		return false, ErrClosed
	}
	defer c.bg.Done() // after a.end's clean-up, deferred below
	a := acquisition{p: p, c: c, ctx: ctx, actx: ctx, wait: wait, lease: lease, bo: c.newBackoff()}
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
	p.enter()
	defer a.end()
	a.run()
	return a.acquired && a.sub != nil, a.err
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
// ErrUnavailable when Redis never answered. The last transient error is
// joined to it (errors.Is and errors.As find both).
func (a *acquisition) notObtained(last error) step {
	s := ErrNotObtained
	if !a.answered {
		s = ErrUnavailable
	}
	return a.fail(withLast(fmt.Errorf("%w within %v", s, a.wait), last))
}

// withLast joins err and the last error an attempt met, if any, as
// errors.Join does (errors.Is and errors.As find both; Unwrap() []error
// returns them, the last error last), printed on one line.
func withLast(err, last error) error {
	if last == nil {
		return err
	}
	return &joined{err, last}
}

// joined is an error and the last error met on the way to it.
type joined struct{ err, last error }

func (e *joined) Error() string   { return e.err.Error() + " (last error: " + e.last.Error() + ")" }
func (e *joined) Unwrap() []error { return []error{e.err, e.last} }

// retry is attempt after a pause, unless the wait ran out meanwhile.
func (a *acquisition) retry() step {
	if a.over() {
		return a.notObtained(a.lastErr)
	}
	return stepAttempt
}

// attempt makes one attempt and chooses what follows from its outcome.
func (a *acquisition) attempt() step {
	a.tried = time.Now()
	o := a.try()
	if o.sent != sentNot {
		a.woken = false // this attempt acted on the wake-up, if any
	}
	a.note(o)
	err := o.err
	a.answered = a.answered || err == nil
	switch {
	case o.acquired:
		return a.granted()
	case err == nil:
		a.last = o
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

// try makes one attempt of the contender and, when it took something,
// waits for the replicas' acknowledgement (replica.go): the one place
// where every acquisition (each lock kind, re-entries, read and write
// holds, fenced tokens, both semaphores' permits, the multi-lock's
// members) is confirmed before granted makes it final. The attempt runs
// under a context that pins its acquire script's connection when that
// script's primary has replicas, and WAIT follows on that connection;
// without replicas (or with ReplicaAck off) nothing is pinned and nothing
// waits. An acquisition the replicas do not confirm is given back
// (revoke) and the attempt fails: with ErrNotReplicated, or, when WAIT
// got no reply, with WAIT's error, which the engine retries as any
// transient error.
func (a *acquisition) try() outcome {
	ctx, pin := a.actx, (*ackPin)(nil)
	if a.p.grants() {
		ctx, pin = a.c.ack.begin(ctx)
		defer pin.end()
	}
	o := a.p.try(ctx, a.lease)
	if !o.acquired {
		return o
	}
	err := pin.wait(a.actx)
	if err == nil {
		return o
	}
	if rerr := a.revoke(); rerr != nil {
		err = fmt.Errorf("%w: giving it back: %w (%w)", ErrNotReplicated, rerr, err)
	}
	return outcome{sent: sentAnswered, queued: o.queued, err: err}
}

// revoke gives back an acquisition its replicas did not confirm, before
// the attempt's outcome is acted on (within cleanupWait). When that
// fails, it goes on in a goroutine of the client, which Close waits for,
// and the call ends (the error wraps ErrNotReplicated): no attempt of the
// call runs beside it.
func (a *acquisition) revoke() error {
	p := a.p
	rctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), cleanupWait)
	err := p.revoke(rctx)
	cancel()
	if err == nil {
		return nil
	}
	a.c.background(func() {
		bctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		defer cancel()
		_ = p.revoke(bctx)
	})
	return err
}

// note records what attempt o may have left for the give-up step.
func (a *acquisition) note(o outcome) {
	switch o.sent {
	case sentAnswered:
		a.left.unknown = false
	case sentUnknown:
		a.left.unknown, a.left.undo = true, o.undo
	}
	a.left.queued = a.left.queued || o.queued
}

// granted is the one point where an acquisition becomes final: the
// attempt succeeded, and the call returns it to its caller.
func (a *acquisition) granted() step {
	a.acquired = true
	return stepDone
}

// backoff pauses after a transient error, then retries.
func (a *acquisition) backoff() step {
	return a.pause(a.bo.step())
}

// subscribe listens on the channel that announces a release to this
// waiter. A fresh subscription retries at once: a release before it was
// confirmed, or heard by other waiters since the last attempt began, may
// serve this one. A primitive with no channel backs off instead.
func (a *acquisition) subscribe() step {
	w := a.p.waitSpec()
	if w.channel == "" {
		// No pub/sub (a spin lock): back off, exponential and bounded,
		// between attempts, within the waitSpec's bounds when it has
		// them, Options.RetryMin and RetryMax otherwise.
		if w.spinMax > 0 && !a.spinning {
			a.spinning = true
			a.bo = backoff{luart.NewBackoff(w.spinFirst, w.spinMax)}
		}
		return a.pause(a.bo.step())
	}
	sub, fresh, err := a.c.hub.Subscribe(a.actx, w.channel, w.mode, a.tried)
	switch {
	case err == nil:
		a.sub = sub
		if w.watch != "" {
			a.kw = a.c.watchKey(w.watch, w.channel)
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

// sleep waits for a wake-up, or the fallback timer the primitive bounds
// (or, for a waiter that polls, its own period), then retries. Redis
// answered: the backoff starts over.
func (a *acquisition) sleep() step {
	a.bo = a.c.newBackoff()
	a.lastErr = nil
	if d := a.last.poll; d > 0 {
		// Its own timer, not the channel's shared one (which wakes
		// one waiter of the channel at a time): a message or d.
		if err := a.block(d, true); err != nil {
			return a.fail(a.waitErr(err))
		}
		return stepRetry
	}
	floor, ceil := a.p.timer(a.last.wait)
	a.sub.Hint(a.last.wait, floor, ceil)
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
// it has its own) recognisable with errors.Is; the last error an attempt
// met is joined to it.
func ctxErr(ctx context.Context, last error) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return withLast(err, last)
}

// cleanupWait bounds the clean-up that end does before the acquire call
// returns; what is not done by then goes on in the background. It is long
// enough for a Redis that answers slowly (a loaded machine took over
// 100ms for the leave, and a caller found a cancelled waiter still queued
// after the call returned), short enough that a Redis that stops
// answering at that moment does not hold the call up long.
const cleanupWait = time.Second

// end runs when the acquire call returns: it drops the subscription and,
// when the call did not succeed, runs the give-up step on what the
// attempts left (a hold a lost reply may have taken, a place in a queue,
// a claim). When Redis answered the last attempt, that is done when end
// returns. Otherwise (or when Redis does not answer within cleanupWait)
// the clean-up goes on in a goroutine of the client, which Close waits
// for; the primitive's next call waits for it too (holdOps).
func (a *acquisition) end() {
	if a.sub != nil {
		if a.woken {
			// The call ends without acting on a release it was told of:
			// hand it back so that release passes it to another waiter.
			a.sub.Signal()
		}
		a.sub.Release(a.acquired, cmp.Or(a.lease, a.c.cfg.WatchdogLease))
		a.c.unwatchKey(a.kw)
	}
	if a.p.exit() {
		// Another call waits as the same owner, in the same place in the
		// queue: leaving would send it to the back.
		a.left.queued = false
	}
	if a.acquired || a.left.none() {
		return
	}
	// The clean-up may outlive the call: it copies what it needs, so that
	// a stays on the caller's stack.
	p, left := a.p, a.left
	p.holdOps()
	if !left.unknown {
		// Redis answered the last attempt: clean up before returning, so
		// that the caller finds the queue without this waiter.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), cleanupWait)
		err := p.giveUp(sctx, left)
		cancel()
		if err == nil {
			p.releaseOps()
			return
		}
	}
	// Hand the primitive's ops to the goroutine: its next call waits
	// until the clean-up is over.
	a.c.background(func() {
		defer p.releaseOps()
		bctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		defer cancel()
		_ = p.giveUp(bctx, left)
	})
}
