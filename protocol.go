package lualock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/renew"
	"github.com/lualock/lualock/internal/wake"
)

// protocol is what one lock kind does in Redis: a settings value (its
// kind, channels, timer and spin bounds, the field counting holds, the
// renewal spec) and the few Redis calls it has (lockCalls, plus leave for
// a kind with a queue). A protocol value holds the keys of one name and
// the client's settings it needs; it has no goroutines and no mutable
// state, so a handle shares it with every call. The acquisition engine
// (engine.go) and the hold (hold.go) are the same for every kind.
type protocol struct {
	lockCalls
	kind Kind // the lock kind, for the events
	// channel is where a waiter is woken ("": no pub/sub; the engine then
	// backs off between attempts, within spinFirst and spinMax when set).
	channel string
	// perWaiter: each waiter has its own channel, channel + ":" + field
	// (the fair lock's: a release wakes the head of the queue only).
	perWaiter bool
	// mode is how a release message wakes this kind's waiters of a
	// client: one per message, or all of them (the read lock's).
	mode wake.Mode
	// watchKey: every change of the lock's key wakes the waiters too,
	// through the hold tracker (the read lock's: a downgrade by another
	// client may publish nothing; see holdwatch.go).
	watchKey bool
	// floor and ceil bound the fallback timer of a waiter told to wait;
	// zeroFloor replaces floor when told "wait 0" (1ms).
	floor, zeroFloor, ceil time.Duration
	// spinFirst and spinMax bound the back-off of a kind without a
	// channel; 0: Options.RetryMin and RetryMax.
	spinFirst, spinMax time.Duration
	// countSuffix is appended to the owner field to name the hash field
	// that counts the holds ("" : the owner field itself).
	countSuffix string
	// renewal is how the watchdog renews a hold taken without a lease.
	renewal *renew.Spec
	// leave undoes what a first acquisition that did not succeed may have
	// left for field (the fair lock's place in the queue); nil for a kind
	// without a queue.
	leave func(ctx context.Context, field string) error
}

// lockCalls are the Redis calls of a lock kind.
type lockCalls interface {
	// acquire runs the acquire script once for a.field, which would then
	// hold a.holds holds (the script refuses to apply the same count twice).
	acquire(ctx context.Context, a attemptArgs) (attemptResult, error)
	// release releases one of a.holds holds, latched by a.latch: the reply
	// of the first send of a request is replayed to a resend.
	release(ctx context.Context, a releaseArgs) (releaseOutcome, error)
	// forceRelease deletes the lock whoever holds it, latched by latch.
	forceRelease(ctx context.Context, latch string) (bool, error)
	// status reads the lock's state as field sees it.
	status(ctx context.Context, field string) (Status, error)
}

// waitChannel is where a waiter of field is woken.
func (p *protocol) waitChannel(field string) string {
	if p.perWaiter && p.channel != "" {
		return p.channel + ":" + field
	}
	return p.channel
}

// timer bounds the fallback timer of a waiter told to wait ttl.
func (p *protocol) timer(ttl time.Duration) (floor, ceil time.Duration) {
	if ttl <= time.Millisecond && p.zeroFloor > 0 {
		return p.zeroFloor, p.ceil
	}
	return p.floor, p.ceil
}

// releaseOutcome is what a release did.
type releaseOutcome uint8

const (
	releaseNotHeld releaseOutcome = iota // the owner held nothing
	releasePartial                       // one hold released, holds remain
	releaseFreed                         // the last hold released: the lock is free
)

// releaseOf reads a release script's reply: nil when the owner held
// nothing, 0 when holds remain, 1 when the lock was freed.
func releaseOf(res *int64, err error) (releaseOutcome, error) {
	switch {
	case err != nil || res == nil:
		return releaseNotHeld, err
	case *res == 0:
		return releasePartial, nil
	}
	return releaseFreed, nil
}

// statusOf reads a lock's state: locked, the owner's holds and the
// lock's PTTL in ms (-1: no expiry, -2: no key).
func statusOf(locked bool, holds, pttl int64) Status {
	s := Status{Locked: locked, Holds: int(holds)}
	switch {
	case pttl >= 0:
		s.Lease = time.Duration(pttl) * time.Millisecond
	case pttl == -1:
		s.Lease = NoExpiry
	}
	return s
}

// attemptArgs are the inputs of one acquisition attempt.
type attemptArgs struct {
	field string        // the owner field C:H
	lease time.Duration // the lease to set
	holds int           // the hold count the owner has after it
}

// attemptResult is what one attempt's script told; the fenced lock's adds
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
