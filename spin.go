package lualock

import (
	"context"
	"time"

	"github.com/lualock/lualock/generated"
)

// Bounds of the spin lock's back-off between attempts: Redisson's RSpinLock
// starts at 1 ms and doubles up to 128 ms; the engine's backoff jitters
// each pause within [d/2, d].
const (
	spinFirst = 2 * time.Millisecond
	spinMax   = 128 * time.Millisecond
)

// NewSpinLock returns a handle on the spin lock name, compatible with
// Redisson's RSpinLock: the reentrant lock's layout and semantics, without
// pub/sub. Nothing is published on release, and waiters poll with a
// jittered exponential back-off (from 1-2 ms, doubling, at most 128 ms
// between attempts) instead of subscribing.
//
// Choose it where pub/sub is unavailable or refused: managed Redis offerings
// without it, ACL users denied SUBSCRIBE and PUBLISH. It costs latency (a
// waiter notices a release within its current back-off, up to 128 ms) and
// load (every waiter polls). A spin lock and a reentrant lock on one name
// exclude each other, but a spin release wakes no reentrant waiter: it
// sleeps until its fallback timer.
func (c *Client) NewSpinLock(name string) *Lock {
	return c.newLock(name, KindSpin, &spin{reentrant: newReentrant(c.env, name, c.cfg.MaxWaitTimer)})
}

// spin is the protocol of Redisson's RSpinLock: the reentrant lock's
// scripts, publishing nothing, with no channel to wait on.
type spin struct{ *reentrant }

func (p *spin) release(ctx context.Context, a releaseArgs) (*int64, error) {
	return generated.LockRelease(ctx, p.env.calls,
		generated.LockReleaseKeys{Lock: p.name, Channel: p.ch, Latch: a.latch},
		generated.LockReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, LatchMS: p.env.latchMS,
			Publish: "none", Holds: int64(a.holds)})
}

func (p *spin) forceRelease(ctx context.Context, latch string) (bool, error) {
	return generated.LockForceRelease(ctx, p.env.calls,
		generated.LockForceReleaseKeys{Lock: p.name, Channel: p.ch, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: p.env.latchMS, Publish: "none"})
}

func (p *spin) channel(string) string { return "" }

func (p *spin) spinBackoff() (first, max time.Duration) { return spinFirst, spinMax }
