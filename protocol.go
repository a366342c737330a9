package lualock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/renew"
)

// protocol is what one primitive does in Redis: its scripts, its keys and
// channels, the bounds of its waiters' fallback timers. A protocol value
// holds the keys of one name and the client's settings it needs; it has no
// goroutines and no mutable state, so a handle shares it with every call.
// The acquisition engine (engine.go) and the hold (hold.go) are the same
// for every protocol.
type protocol interface {
	// acquire runs the acquire script once for a.field, which would then
	// hold a.holds holds (the script refuses to apply the same count twice).
	acquire(ctx context.Context, a attemptArgs) (attemptResult, error)
	// release releases one of a.holds holds, latched by a.latch: the reply
	// of the first send of a request is replayed to a resend. It returns
	// nil when the owner held nothing, 0 when holds remain, 1 when the
	// lock was freed.
	release(ctx context.Context, a releaseArgs) (*int64, error)
	// forceRelease deletes the lock whoever holds it, latched by latch.
	forceRelease(ctx context.Context, latch string) (bool, error)
	// status reads the lock's state as field sees it.
	status(ctx context.Context, field string) ([]int64, error)
	// leave undoes what a first acquisition that did not succeed may have
	// left for field (the fair lock's place in the queue). Only called
	// when queues is true.
	leave(ctx context.Context, field string) error
	// queues reports whether an attempt for a first hold may leave state
	// behind that leave must clear when the call gives up.
	queues() bool
	// channel is where a waiter of field is woken ("" : no pub/sub; the
	// engine then backs off between attempts).
	channel(field string) string
	// timer bounds the fallback timer of a waiter told to wait ttl.
	timer(ttl time.Duration) (floor, ceil time.Duration)
	// renewal is how the watchdog renews a hold taken without a lease.
	renewal() *renew.Spec
}

// attemptArgs are the inputs of one acquisition attempt.
type attemptArgs struct {
	field string        // the owner field C:H
	lease time.Duration // the lease to set
	holds int           // the hold count the owner has after it
}

// attemptResult is what one attempt of a lock told; the fenced lock's adds
// the token its script returns.
type attemptResult struct {
	acquired bool
	// wait is how long the script says the caller should wait (the
	// holder's remaining lease), the hint for the fallback timer.
	wait time.Duration
	// token is the fencing token the acquisition took (the fenced lock);
	// 0 for the others.
	token int64
}

// releaseArgs are the inputs of one release.
type releaseArgs struct {
	field string
	lease time.Duration // the lease a partial release sets again
	latch string        // the release's unlock latch
	holds int           // the hold count the owner has before it
}

// scriptEnv is the client's settings every protocol sends with its
// scripts, made once per client.
type scriptEnv struct {
	scripts redis.Scripter // runs the acquire scripts, which the engine retries: Options.Scripter or the redis client
	calls   redis.Scripter // runs the others (release, force release, leave, status), which nothing else retries
	publish string         // the release scripts' publish argument
	latchMS int64          // Options.UnlockLatch in ms
}
