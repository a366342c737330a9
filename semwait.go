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

// The waiting and calling of the semaphores and the count-down latch
// (issue 15). The lock engine (engine.go) is built around a Lock's owner
// field, hold count and hold; these objects have none, so they share this
// smaller loop over the same pieces: the client's wake-up hub (one
// subscription per channel, a waiter woken per message), its backoff and
// transient-error rule, and its Close.

// Operations named by the errors of the semaphores and the latch.
const (
	verbAcquire    = "acquire"
	verbRelease    = "release"
	verbSetPermits = "set permits"
	verbAddPermits = "add permits"
	verbDrain      = "drain permits"
	verbAvailable  = "available permits"
	verbExtend     = "extend permit"
	verbSetCount   = "set count"
	verbCountDown  = "count down"
	verbCount      = "count"
	verbAwait      = "await"
)

const (
	// semPoll bounds how long a semaphore or latch waiter sleeps between
	// attempts without a message (a missed message must not hang it), at
	// most Options.MaxWaitTimer.
	semPoll = time.Second
	// claimPolls: a waiter's claim lives this many polls, so that it
	// outlives the waiter's pauses and lapses soon after a dead waiter's.
	claimPolls = 3
)

// Prefixes of the keys only lualock uses (PROTOCOL-FAMILY: Redisson's
// clients never read them).
const (
	requestPrefix = "lualock_request"
	claimPrefix   = "lualock_semaphore_claim"
	semChanPrefix = "redisson_sc"
	latchChannelP = "redisson_countdownlatch__channel__"
)

// newRequest returns a new request latch key of name: the request id is
// 32 hex characters, as Redisson's.
func newRequest(name string) (key, id string) {
	var b [16]byte
	_, _ = crand.Read(b[:])
	id = hex.EncodeToString(b[:])
	return keys.Tag(requestPrefix, name) + ":" + id, id
}

// dropLatch has the sweeper delete the request latch req once its call
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

// call runs f, resending it after a transient error (f's request latch
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

// tryFunc is one attempt of a waiter: whether it succeeded, and how long to
// wait at most before the next attempt when it did not (<= 0: the poll).
type tryFunc func(ctx context.Context) (ok bool, next time.Duration, err error)

// waitFor runs try until it succeeds, waiting up to wait between attempts
// (forever when negative; one attempt when 0) for a message on channel or
// the attempt's own timer. Every message wakes every waiter of the
// channel in this client. It returns
// ErrNotObtained when the wait runs out (ErrUnavailable when Redis never
// answered), ErrClosed, ctx's error, or try's non-transient error.
// unknown reports whether the last attempt's outcome is unknown (a lost
// reply), for the caller's clean-up.
func (c *Client) waitFor(ctx context.Context, channel string, wait time.Duration, try tryFunc) (unknown bool, err error) {
	if ctx == nil {
		return false, fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if ctx.Err() != nil {
		return false, ctxErr(ctx, nil)
	}
	if !c.enter() {
		return false, ErrClosed
	}
	defer c.bg.Done()
	actx := ctx
	var deadline time.Time
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	over := func() bool { return !deadline.IsZero() && !time.Now().Before(deadline) }
	var (
		sub      interface{ Signal() bool }
		release  func(acquired bool)
		woke     <-chan struct{}
		woken    bool
		answered bool
		lastErr  error
		ok       bool
		bo       = c.newBackoff()
	)
	defer func() {
		if release == nil {
			return
		}
		if woken {
			sub.Signal() // unused: Release passes it to another waiter
		}
		release(ok)
	}()
	poll := min(semPoll, c.cfg.MaxWaitTimer)
	for {
		woken = false
		var next time.Duration
		var err error
		ok, next, err = try(actx)
		switch {
		case ok:
			return false, nil
		case err == nil:
			answered, lastErr, unknown = true, nil, false
			bo = c.newBackoff()
		case ctx.Err() != nil:
			return !isRedisError(err), ctxErr(ctx, lastErr)
		case actx.Err() != nil:
			return !isRedisError(err), notObtained(answered, wait, lastErr)
		case !transient(err):
			return !isRedisError(err), err
		default:
			lastErr, unknown = err, true
		}
		if over() {
			return unknown, notObtained(answered, wait, lastErr)
		}
		d := poll
		switch {
		case lastErr != nil:
			d = bo.step()
		case next > 0:
			d = min(next+time.Millisecond, poll)
		}
		if release == nil && lastErr == nil {
			w, fresh, err := c.hub.Subscribe(actx, channel)
			switch {
			case err == nil:
				// Every message wakes every waiter of the channel in this
				// client (the hub wakes one per message, as a lock's
				// release serves one waiter): a release may serve several
				// waiters, or only a waiter that another's claim favours.
				watch := c.hub.Watch(channel, func() { w.Signal() })
				sub, woke = w, w.C()
				release = func(acquired bool) {
					if watch != nil {
						watch.Stop()
					}
					w.Release(acquired, 0)
				}
				if fresh {
					continue // a release before the subscription went unheard
				}
			case ctx.Err() != nil:
				return false, ctxErr(ctx, lastErr)
			case actx.Err() != nil:
				return false, notObtained(answered, wait, lastErr)
			case errors.Is(err, ErrClosed):
				return false, fmt.Errorf("%w while waiting", ErrClosed)
			}
		}
		if !deadline.IsZero() {
			d = min(d, max(time.Until(deadline), 0))
		}
		t := time.NewTimer(d)
		select {
		case <-woke:
			woken = true
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctxErr(ctx, lastErr)
		case <-c.closing:
			t.Stop()
			return false, fmt.Errorf("%w while waiting", ErrClosed)
		}
		t.Stop()
	}
}

// notObtained is the error of a wait that ran out.
func notObtained(answered bool, wait time.Duration, last error) error {
	s := ErrNotObtained
	if !answered {
		s = ErrUnavailable
	}
	if last != nil {
		return fmt.Errorf("%w within %v (last error: %w)", s, wait, last)
	}
	return fmt.Errorf("%w within %v", s, wait)
}

// isRedisError reports whether err is Redis's reply (the script ran, or
// was refused): its outcome is known.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
