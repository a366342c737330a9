package lualock

import "time"

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
	// The reentrant lock's protocol, publishing nothing, with no channel
	// to wait on and back-off bounds of its own.
	r := c.reentrantCalls(name)
	r.publish = "none"
	p := c.newReentrant(name)
	p.lockCalls, p.kind = r, KindSpin
	p.channel = ""
	p.spinFirst, p.spinMax = spinFirst, spinMax
	return c.newLock(name, p)
}
