package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
)

// Semaphore is a handle on Redisson's RSemaphore: a count of permits under
// one name, shared with Redisson's clients (3.16 and 4.x) on the same keys
// and messages. Acquire takes permits, Release gives them back; anyone may
// release, and releasing adds permits whether or not they were taken.
//
// Permits leak when a holder dies: a plain semaphore has no owner, lease or
// watchdog, so permits taken by a process that stops are gone until
// someone adds them back (AddPermits, Release). When holders can die, use
// the PermitExpirableSemaphore, whose permits expire unless renewed.
//
// Waiters are woken by the release messages Redisson's clients and lualock
// publish (each message wakes every waiter of the client), and retry on
// a fallback timer of Options.MaxWaitTimer in case a message is missed;
// only the waiter that holds the claim below (the script's refusal tells
// it) retries at most every second, to keep it. A waiter for
// many permits is not starved by lualock waiters for fewer: a refused
// waiter claims its permits when no larger claim exists, and lualock's
// other acquisitions must then leave them (Redisson's clients ignore the
// claim and may still overtake it; Redisson's own waiters have no such
// rule: a waiter for n permits can lose every race to waiters for fewer).
//
// A Semaphore's methods are safe for concurrent use.
type Semaphore struct {
	c       *Client
	name    string
	channel string
	claim   string
	invalid error
}

// NewSemaphore returns a handle on the semaphore name (its key in Redis, as
// Redisson names it). Nothing is sent to Redis. A bad name (see CheckName)
// makes every call return ErrInvalid.
func (c *Client) NewSemaphore(name string) *Semaphore {
	return &Semaphore{
		c:       c,
		name:    name,
		channel: keys.Tag(keys.SemaphoreChannelPrefix, name),
		claim:   keys.Tag(keys.ClaimPrefix, name),
		invalid: CheckName(name),
	}
}

// Name returns the semaphore's name, its key in Redis.
func (s *Semaphore) Name() string { return s.name }

func (s *Semaphore) usable(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	return s.invalid
}

// TrySetPermits sets the number of permits if the semaphore has none yet
// (its key does not exist) and reports whether it did. It returns
// ErrInvalid for a negative count, ErrClosed, ctx's error or the Redis
// error.
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int) (bool, error) {
	return s.trySet(ctx, permits, 0)
}

// TrySetPermitsTTL is TrySetPermits that also gives the semaphore's key a
// time to live (Redisson 4.x's trySetPermits(permits, ttl)); AddPermits and
// DrainPermits drop it, as Redisson's do. A ttl under 1ms returns
// ErrInvalid.
func (s *Semaphore) TrySetPermitsTTL(ctx context.Context, permits int, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, wrapErr(verbSetPermits, s.name, fmt.Errorf("%w: ttl %v, want at least 1ms", ErrInvalid, ttl))
	}
	return s.trySet(ctx, permits, ttl)
}

func (s *Semaphore) trySet(ctx context.Context, permits int, ttl time.Duration) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, wrapErr(verbSetPermits, s.name, err)
	}
	if err := checkCount("permits", int64(permits), 0); err != nil {
		return false, wrapErr(verbSetPermits, s.name, err)
	}
	req, _ := newRequest(s.name)
	var v int64
	err := s.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.SemaphoreTrySetPermits(ctx, s.c.env.calls,
			generated.SemaphoreTrySetPermitsKeys{Sem: s.name, Channel: s.channel, Request: req},
			generated.SemaphoreTrySetPermitsArgs{Permits: int64(permits), TTLMS: ttl.Milliseconds(), LatchMS: s.c.env.latchMS, Publish: s.c.env.publish})
		return err
	})
	s.c.dropLatch(err, req)
	return v == 1, wrapErr(verbSetPermits, s.name, err)
}

// AddPermits adds n permits (n may be negative, and the count may go below
// zero) and returns the new count. It drops a TTL set by
// TrySetPermitsTTL, as Redisson's does. It returns ErrInvalid, ErrClosed,
// ctx's error or the Redis error.
func (s *Semaphore) AddPermits(ctx context.Context, n int) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, wrapErr(verbAddPermits, s.name, err)
	}
	req, _ := newRequest(s.name)
	var v int64
	err := s.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.SemaphoreAddPermits(ctx, s.c.env.calls,
			generated.SemaphoreAddPermitsKeys{Sem: s.name, Channel: s.channel, Request: req},
			generated.SemaphoreAddPermitsArgs{Delta: int64(n), LatchMS: s.c.env.latchMS, Publish: s.c.env.publish})
		return err
	})
	s.c.dropLatch(err, req)
	return int(v), wrapErr(verbAddPermits, s.name, err)
}

// AvailablePermits returns the number of available permits: 0 when the
// semaphore does not exist, below 0 after AddPermits took more than there
// were. It returns ErrInvalid, ErrClosed, ctx's error or the Redis error.
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, wrapErr(verbAvailable, s.name, err)
	}
	var v int64
	err := s.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.SemaphoreAvailable(ctx, s.c.env.calls, generated.SemaphoreAvailableKeys{Sem: s.name})
		return err
	})
	return int(v), wrapErr(verbAvailable, s.name, err)
}

// DrainPermits takes every available permit and returns how many it took
// (a negative count is returned as it is and reset to 0, as Redisson
// does). A key that is not a semaphore's count (another type, or a string
// that is not a whole number) is left as it is, with ErrWrongType. It
// returns ErrWrongType, ErrInvalid, ErrClosed, ctx's error or the Redis
// error.
func (s *Semaphore) DrainPermits(ctx context.Context) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, wrapErr(verbDrain, s.name, err)
	}
	req, _ := newRequest(s.name)
	var v int64
	err := s.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.SemaphoreDrain(ctx, s.c.env.calls,
			generated.SemaphoreDrainKeys{Sem: s.name, Request: req},
			generated.SemaphoreDrainArgs{LatchMS: s.c.env.latchMS})
		return err
	})
	s.c.dropLatch(err, req)
	return int(v), wrapErr(verbDrain, s.name, wrongType(err))
}

// Acquire blocks until it has taken n permits or ctx ends. A semaphore
// that does not exist grants nothing: Acquire waits until someone sets or
// releases permits. It returns ErrInvalid for n < 1, n ≥ 10^15 or a bad
// name, ErrClosed, an error wrapping ctx's error, or a non-transient Redis
// error; transient errors are retried until ctx ends.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	return s.acquire(ctx, n, -1)
}

// TryAcquire is Acquire that gives up after wait, returning ErrNotObtained
// (ErrUnavailable when Redis never answered). A wait of 0 makes one
// attempt, which never claims; a negative wait returns ErrInvalid.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) error {
	if wait < 0 {
		return wrapErr(verbAcquire, s.name, fmt.Errorf("%w: wait %v, want >= 0", ErrInvalid, wait))
	}
	return s.acquire(ctx, n, wait)
}

func (s *Semaphore) acquire(ctx context.Context, n int, wait time.Duration) (err error) {
	start := time.Now()
	defer func() { s.c.acquired(ctx, subject{kind: KindSemaphore, name: s.name}, start, wait, false, err) }()
	return s.take(ctx, n, wait)
}

// maxPermits is the most permits one acquisition or release names: the
// scripts hand the count on to DECRBY or INCRBY as sent, and take only
// what fits in 15 digits (lua/include/whole.lua).
const maxPermits = 999_999_999_999_999

// checkPermits returns ErrInvalid unless n is from 1 to maxPermits.
func checkPermits(n int) error {
	if err := checkCount("permits", int64(n), 1); err != nil {
		return err
	}
	if int64(n) > maxPermits {
		return fmt.Errorf("%w: permits %d, want at most %d", ErrInvalid, n, int64(maxPermits))
	}
	return nil
}

// take is acquire without the event.
func (s *Semaphore) take(ctx context.Context, n int, wait time.Duration) error {
	if err := s.usable(ctx); err != nil {
		return wrapErr(verbAcquire, s.name, err)
	}
	if err := checkPermits(n); err != nil {
		return wrapErr(verbAcquire, s.name, err)
	}
	// One request id for the whole call: a refused attempt leaves no
	// latch, and a resend of a successful one replays it.
	req, waiter := newRequest(s.name)
	cl := newClaim(s.c, s.claim, waiter, wait)
	attempt := func(ctx context.Context, w string, claimMS int64) (int64, error) {
		return generated.SemaphoreAcquire(ctx, s.c.env.scripts,
			generated.SemaphoreAcquireKeys{Sem: s.name, Request: req, Claim: s.claim},
			generated.SemaphoreAcquireArgs{Permits: int64(n), LatchMS: s.c.env.latchMS, Waiter: w, ClaimMS: claimMS})
	}
	_, err := s.c.acquire(ctx, &waitFuncs{
		ch:       s.channel,
		maxTimer: s.c.cfg.MaxWaitTimer,
		attempt: func(ctx context.Context) outcome {
			switch v, err := attempt(ctx, waiter, cl.ms); {
			case err != nil:
				return cl.failed(err)
			case v == 1:
				return outcome{acquired: true}
			default:
				return cl.refused(v == 2, -1) // 2: refused, this waiter holds the claim
			}
		},
		clean: func(ctx context.Context, g leftover) error {
			if g.unknown {
				// Give back what an attempt with a lost reply may have
				// taken: its resend replays it, or takes the permits now;
				// either way they are released.
				v, err := attempt(ctx, "", 0)
				if err == nil && v == 1 {
					if err = s.release(ctx, n); err == nil {
						// A later attempt of the call (after a revoke,
						// engine.go) must not replay the one given back.
						s.c.dropLatch(nil, req)
						req, _ = newRequest(s.name)
					}
				}
				if err != nil {
					return err
				}
			}
			if g.queued {
				return cl.drop(ctx)
			}
			return nil
		},
	}, wait, 0)
	if err == nil {
		s.c.dropLatch(nil, req)
		return nil
	}
	return wrapErr(verbAcquire, s.name, err)
}

// Release gives n permits back and wakes waiters. Anyone may release, and
// permits that were never taken are added: the semaphore has no upper
// bound (as Redisson's). A release whose reply was lost is sent again
// under its unlock latch, so it counts once. It returns ErrInvalid for
// n < 1, n ≥ 10^15 or a bad name, ErrClosed, ctx's error or the Redis
// error.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if err := s.usable(ctx); err != nil {
		return wrapErr(verbRelease, s.name, err)
	}
	if err := checkPermits(n); err != nil {
		return wrapErr(verbRelease, s.name, err)
	}
	return wrapErr(verbRelease, s.name, s.release(ctx, n))
}

func (s *Semaphore) release(ctx context.Context, n int) error {
	req, _ := newRequest(s.name)
	err := s.c.call(ctx, func(ctx context.Context) error {
		_, err := generated.SemaphoreRelease(ctx, s.c.env.calls,
			generated.SemaphoreReleaseKeys{Sem: s.name, Channel: s.channel, Request: req},
			generated.SemaphoreReleaseArgs{Permits: int64(n), LatchMS: s.c.env.latchMS, Publish: s.c.env.publish})
		return err
	})
	s.c.dropLatch(err, req)
	return err
}
