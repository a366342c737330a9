package lualock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"
)

// The waiting and calling of the semaphores and the count-down latch.
// They have no owner field, hold count or hold, so they are
// not *Lock handles: each call hands the acquisition engine (engine.go) a
// waitable (one attempt, its channel, whether a message wakes every local
// waiter, its timer bounds, its give-up clean-up and, for a semaphore
// waiter that holds the anti-starvation claim, its refresh period), and
// Client.waitFor runs the engine's loop over it.

const (
	// claimRefresh is how often, at most, the semaphore waiter that holds
	// the claim (its last refusal said so) attempts again without a
	// message, on a timer of its own, to keep its claim (capped by
	// Options.MaxWaitTimer); other waiters wait for a message or the hub's
	// fallback timer (Options.MaxWaitTimer, or the hint of the reply).
	claimRefresh = time.Second
	// claimPolls: a waiter's claim lives this many refreshes, so that it
	// outlives the waiter's pauses and lapses soon after a dead waiter's.
	claimPolls = 3
)

// newRequest returns a new unlock latch of a call on name: the request id is
// 32 hex characters, as Redisson's.
func newRequest(name string) (key, id string) {
	var b [16]byte
	_, _ = crand.Read(b[:])
	id = hex.EncodeToString(b[:])
	return keys.Tag(keys.RequestLatchPrefix, name) + ":" + id, id
}

// dropLatch has the sweeper delete the unlock latch req once its call
// got Redis's reply (err is nil or Redis's error): nothing resends it any
// more. Left alone it would live Options.UnlockLatch.
func (c *Client) dropLatch(err error, req string) {
	if err == nil || isRedisError(err) {
		c.latches.drop(req)
	}
}

// checkCount returns ErrInvalid unless n is at least min.
func checkCount(what string, n, min int64) error {
	if n < min {
		return fmt.Errorf("%w: %s %d, want at least %d", ErrInvalid, what, n, min)
	}
	return nil
}

// call runs f, resending it after a transient error (f's unlock latch
// replays a first send that took effect) with the client's backoff until
// ctx ends. When ctx ends with f's outcome unknown, f is sent once more
// under a short context of its own, so that a resend after a lost reply
// still happens within the latch's lifetime.
func (c *Client) call(ctx context.Context, f func(ctx context.Context) error) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if c.closed() {
		return ErrClosed
	}
	bo := c.newBackoff()
	for {
		err := f(ctx)
		if err == nil || !transient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return err
		}
		if ctx.Err() != nil {
			dctx, cancel := detached(ctx)
			if err2 := f(dctx); err2 == nil {
				cancel()
				return nil
			}
			cancel()
			return ctxErr(ctx, err)
		}
		t := time.NewTimer(bo.step())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		case <-c.closing:
			t.Stop()
			return ErrClosed
		}
	}
}

// waitable is what the acquisition engine (engine.go) needs of a
// primitive that has no Lock (the semaphores' acquires, the latch's
// Await): the engine runs the same loop as for a Lock (wait budget and
// deadline, backoff on transient errors, the hub's subscription confirmed
// before the first retry, fallback timer from the attempt's hint, the
// give-up clean-up, ErrNotObtained or ErrUnavailable) over it.
type waitable interface {
	// try makes one attempt: whether it succeeded and, when it did not,
	// the wait the reply hints at (negative: none, wait for a message).
	try(ctx context.Context) (ok bool, ttl time.Duration, err error)
	// channel is the channel whose messages wake the waiter.
	channel() string
	// wakeAll: every message wakes every waiter of the channel in this
	// client (a release may serve several waiters), not one.
	wakeAll() bool
	// timer bounds the fallback timer after an attempt that hinted ttl.
	timer(ttl time.Duration) (floor, ceil time.Duration)
	// poll, when positive, makes the waiter retry after that long even
	// without a message, on a timer of its own instead of the channel's
	// (the claimer of a semaphore keeping its claim alive); 0: none.
	poll() time.Duration
	// giveUp cleans up after a call that did not succeed; unknown tells
	// that the last attempt's outcome is unknown (its reply was lost).
	giveUp(unknown bool)
	// grants tells whether a successful attempt takes something (permits)
	// that the replicas must acknowledge (Options.ReplicaAck).
	grants() bool
	// giveBack gives back what a successful attempt took: its replicas
	// did not acknowledge it.
	giveBack(ctx context.Context) error
}

// waitFuncs is a waitable made of funcs.
type waitFuncs struct {
	ch       string
	attempt  func(ctx context.Context) (bool, time.Duration, error)
	maxTimer func() time.Duration            // the fallback timer's ceiling
	every    func() time.Duration            // the waiter's own retry period; nil or 0: none
	clean    func(unknown bool)              // nil: nothing to clean up
	undo     func(ctx context.Context) error // gives back what a successful attempt took; nil: it takes nothing
}

func (w *waitFuncs) try(ctx context.Context) (bool, time.Duration, error) { return w.attempt(ctx) }
func (w *waitFuncs) channel() string                                      { return w.ch }
func (w *waitFuncs) wakeAll() bool                                        { return true }
func (w *waitFuncs) timer(time.Duration) (floor, ceil time.Duration) {
	return time.Millisecond, w.maxTimer()
}
func (w *waitFuncs) poll() time.Duration {
	if w.every == nil {
		return 0
	}
	return w.every()
}
func (w *waitFuncs) grants() bool                       { return w.undo != nil }
func (w *waitFuncs) giveBack(ctx context.Context) error { return w.undo(ctx) }
func (w *waitFuncs) giveUp(unknown bool) {
	if w.clean != nil {
		w.clean(unknown)
	}
}

// waitFor runs w's attempts on the acquisition engine until one succeeds,
// waiting up to wait (forever when negative; one attempt when 0). It
// returns ErrNotObtained when the wait runs out (ErrUnavailable when Redis
// never answered), ErrClosed, an error wrapping ctx's, or a non-transient
// error of an attempt; w.giveUp has run (or runs in the background) then.
func (c *Client) waitFor(ctx context.Context, wait time.Duration, w waitable) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if ctx.Err() != nil {
		return ctxErr(ctx, nil)
	}
	if !c.enter() {
		return ErrClosed
	}
	defer c.bg.Done()
	a := acquisition{c: c, o: w, ctx: ctx, actx: ctx, wait: wait, bo: c.newBackoff()}
	if wait >= 0 {
		a.deadline = time.Now().Add(wait)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		a.actx, cancel = context.WithDeadline(ctx, a.deadline)
		defer cancel()
	}
	a.run()
	a.end()
	return a.err
}

// isRedisError reports whether err is Redis's reply (the script ran, or
// was refused): its outcome is known.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
