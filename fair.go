package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/wake"
)

// fairMinRetry is the fallback timer of a fair waiter told "wait 0" (the
// scripts answer 1ms: the one ahead is dead but not purged yet, or the lock
// has no expiry). A queued waiter is woken by its own message when it
// reaches the head; its timer only covers lost messages and dead waiters
// ahead, which the scripts purge by their deadline. Told "wait 0" it
// retries at most this often.
const fairMinRetry = 250 * time.Millisecond

// fairMinWait is the shortest timer for any other wait a script tells: such
// a wait ends at an event (a deadline, the lock's expiry), after which the
// answer differs.
const fairMinWait = 10 * time.Millisecond

// NewFairLock returns a handle on the fair lock name, compatible with
// Redisson's RedissonFairLock: waiters get the lock in the order they first
// asked for it, across processes. It has the reentrant lock's methods and
// semantics (see NewLock), plus a queue:
//
//   - A waiter that gives up (its wait time ran out, its context ended, an
//     error, Client.Close) leaves the queue (from its middle as a
//     tombstone, which the queue pops when it reaches the head: every fair
//     script costs Redis O(log N) in the queue's length, see
//     docs/PROTOCOL.md). When Redis answered its last attempt, that is
//     done before the call returns (unless Redis then takes over a second
//     to answer); otherwise it is done in the background (Close waits for
//     it), and the handle's next call waits for it too.
//   - Each waiter has a wait budget (Options.FairWait, default 5 minutes, or
//     the one given to NewFairLockWait): a
//     waiter that has not asked again within its budget counts as gone and
//     is purged from the queue by the next script call, so a waiter whose
//     process died delays the others by one budget at most. Live waiters ask
//     again at least every half budget (FairWait/2), which renews their
//     deadline; they are never purged while they wait (unlike Redisson, see
//     Redisson #3004), however long the lock is held. A waiter that was
//     purged anyway (its process paused past its budget) and asks again
//     joins the back of the queue.
//   - On release only the head of the queue is woken, on its own channel.
//   - The handle is the waiter: calls of one handle from several goroutines
//     share its place in the queue, and one of them giving up does not take
//     the others out of it.
func (c *Client) NewFairLock(name string) *Lock {
	return c.newLock(name, c.newFair(name, c.cfg.FairWait))
}

// NewFairLockWait is NewFairLock with the wait budget of this lock instead
// of Options.FairWait, as Redisson's RedissonFairLock takes its
// threadWaitTime per lock. Every client of one fair lock, in any process,
// must use the same budget for it: a Redisson handoff takes its budget off
// every waiter's deadline, and lualock's waiters count theirs. A budget
// under 500ms makes the handle's
// methods return ErrInvalid.
func (c *Client) NewFairLockWait(name string, wait time.Duration) *Lock {
	l := c.newLock(name, c.newFair(name, wait))
	if wait < 2*fairMinRetry && l.invalid == nil {
		l.invalid = fmt.Errorf("%w: fair wait budget %v, want at least %v", ErrInvalid, wait, 2*fairMinRetry)
	}
	return l
}

// newFair is the protocol of Redisson's RedissonFairLock: the reentrant
// lock's hash, plus a queue of waiters and their deadlines; a release
// wakes the head of the queue on its own channel, and a waiter that gives
// up leaves the queue.
//
// Its fallback timer: told "wait 0" (as 1ms) fairMinRetry, any other wait
// from fairMinWait, so that a waiter follows a real wait and is not late
// for the deadline it waits for; capped at half the wait budget, so that
// a live waiter asks again (renewing its deadline) well before the others
// would purge it. A fair waiter needs no shorter cap: the scripts tell it
// on its own channel when it becomes the head of the queue (it then waits
// for the lock's remaining lease), a reconnect wakes every waiter, and a
// dead waiter ahead is purged at its deadline, which the timer follows.
// With the default budget, 10 000 idle waiters cost about 67 calls a
// second.
func (c *Client) newFair(name string, wait time.Duration) *protocol {
	f := fair{env: c.env, k: keys.Of(name), wait: wait}
	return &protocol{
		lockCalls: f,
		kind:      KindFair,
		channel:   f.k.Channel,
		perWaiter: true,
		mode:      wake.WakeOne,
		floor:     fairMinWait,
		zeroFloor: fairMinRetry,
		ceil:      wait / 2,
		renewal:   lockRenewal,
		leave:     f.leave,
	}
}

// fair is the calls of Redisson's RedissonFairLock.
type fair struct {
	env  *scriptEnv
	k    keys.Lock
	wait time.Duration // the wait budget of each waiter
}

func (p fair) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	return waited(generated.FairAcquire(ctx, p.env.scripts,
		generated.FairAcquireKeys{Lock: p.k.Name, Queue: p.k.Queue, Timeouts: p.k.Timeouts, Channel: p.k.Channel},
		generated.FairAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, WaitMS: p.wait.Milliseconds(),
			Holds: int64(a.holds), Publish: p.env.publish}))
}

func (p fair) release(ctx context.Context, a releaseArgs) (releaseOutcome, error) {
	return releaseOf(generated.FairRelease(ctx, p.env.calls,
		generated.FairReleaseKeys{Lock: p.k.Name, Queue: p.k.Queue, Timeouts: p.k.Timeouts, Channel: p.k.Channel,
			Latch: a.latch},
		generated.FairReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field,
			LatchMS: p.env.latchMS, WaitMS: p.wait.Milliseconds(), Publish: p.env.publish,
			Holds: int64(a.holds)}))
}

func (p fair) forceRelease(ctx context.Context, latch string) (bool, error) {
	return generated.FairForceRelease(ctx, p.env.calls,
		generated.FairForceReleaseKeys{Lock: p.k.Name, Queue: p.k.Queue, Timeouts: p.k.Timeouts, Channel: p.k.Channel, Latch: latch},
		generated.FairForceReleaseArgs{LatchMS: p.env.latchMS, WaitMS: p.wait.Milliseconds(), Publish: p.env.publish})
}

func (p fair) status(ctx context.Context, field string) (Status, error) {
	return lockStatus(ctx, p.env, p.k.Name, field)
}

// leave takes field out of the queue after a wait that did not get the
// lock, correcting the deadlines of those behind it.
func (p fair) leave(ctx context.Context, field string) error {
	_, err := generated.FairLeave(ctx, p.env.calls,
		generated.FairLeaveKeys{Lock: p.k.Name, Queue: p.k.Queue, Timeouts: p.k.Timeouts, Channel: p.k.Channel},
		generated.FairLeaveArgs{Field: field, WaitMS: p.wait.Milliseconds(), Publish: p.env.publish})
	return err
}
