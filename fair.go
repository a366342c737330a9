package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/lualock/lualock/generated"
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

// fairMaxTimer caps a fair waiter's fallback timer at half the wait
// budget, so that a live waiter asks again (renewing its deadline) well
// before the others would purge it. A fair waiter needs no shorter cap: the
// scripts tell it on its own channel when it becomes the head of the queue
// (it then waits for the lock's remaining lease), a reconnect wakes every
// waiter, and a dead waiter ahead is purged at its deadline, which the timer
// follows. With the default budget, 10 000 idle waiters cost about 67 calls
// a second.
func (l *Lock) fairMaxTimer() time.Duration {
	return l.fairWait / 2
}

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
//     done before the call returns; otherwise it is done in the background
//     (Close waits for it), and the handle's next call waits for it too.
//   - Each waiter has a wait budget (Options.FairWait, default 5 minutes, or
//     the one given to NewFairLockWait): a
//     waiter that has not asked again within its budget counts as gone and
//     is purged from the queue by the next script call, so a waiter whose
//     process died delays the others by one budget at most. Live waiters ask
//     again at least every half budget (FairWait/2), which renews their
//     deadline; they are never purged while they wait (unlike Redisson, see
//     its issue 3004), however long the lock is held. A waiter that was
//     purged anyway (its process paused past its budget) and asks again
//     joins the back of the queue.
//   - On release only the head of the queue is woken, on its own channel.
//   - The handle is the waiter: calls of one handle from several goroutines
//     share its place in the queue, and one of them giving up does not take
//     the others out of it.
func (c *Client) NewFairLock(name string) *Lock {
	return c.newLock(name, fair)
}

// NewFairLockWait is NewFairLock with the wait budget of this lock instead
// of Options.FairWait, as Redisson's RedissonFairLock takes its
// threadWaitTime per lock. Every client of one fair lock, in any process,
// must use the same budget for it: a Redisson handoff takes its budget off
// every waiter's deadline, and lualock's waiters count theirs. A budget
// under 500ms makes the handle's
// methods return ErrInvalid.
func (c *Client) NewFairLockWait(name string, wait time.Duration) *Lock {
	l := c.newLock(name, fair)
	l.fairWait = wait
	if wait < 2*fairMinRetry && l.invalid == nil {
		l.invalid = fmt.Errorf("%w: fair wait budget %v, want at least %v", ErrInvalid, wait, 2*fairMinRetry)
	}
	return l
}

func (l *Lock) fairKeys() (queue, timeouts string) {
	return tag(queuePrefix, l.name), tag(timeoutPrefix, l.name)
}

// waiterChannel is the channel on which the fair lock wakes this handle.
func (l *Lock) waiterChannel() string { return l.channel + ":" + l.field }

func (l *Lock) runFairAcquire(ctx context.Context, lease time.Duration, want int, w *waiting) (int64, error) {
	if want == 1 {
		w.queued = true // from now on the waiter may stand in the queue
	}
	queue, timeouts := l.fairKeys()
	return generated.FairAcquire(ctx, l.c.scripts,
		generated.FairAcquireKeys{Lock: l.name, Queue: queue, Timeouts: timeouts, Channel: l.channel},
		generated.FairAcquireArgs{LeaseMS: lease.Milliseconds(), Field: l.field, WaitMS: l.fairWait.Milliseconds(),
			Holds: int64(want), Publish: l.c.cfg.publish})
}

func (l *Lock) runFairRelease(ctx context.Context, lease time.Duration, latch string, holds int) (*int64, error) {
	queue, timeouts := l.fairKeys()
	return generated.FairRelease(ctx, l.c.scripts,
		generated.FairReleaseKeys{Lock: l.name, Queue: queue, Timeouts: timeouts, Channel: l.channel,
			Latch: latch},
		generated.FairReleaseArgs{LeaseMS: lease.Milliseconds(), Field: l.field,
			LatchMS: l.c.cfg.UnlockLatch.Milliseconds(), WaitMS: l.fairWait.Milliseconds(), Publish: l.c.cfg.publish,
			Holds: int64(holds)})
}

func (l *Lock) runFairForceRelease(ctx context.Context, latch string) (bool, error) {
	queue, timeouts := l.fairKeys()
	return generated.FairForceRelease(ctx, l.c.scripts,
		generated.FairForceReleaseKeys{Lock: l.name, Queue: queue, Timeouts: timeouts, Channel: l.channel, Latch: latch},
		generated.FairForceReleaseArgs{LatchMS: l.c.cfg.UnlockLatch.Milliseconds(), WaitMS: l.fairWait.Milliseconds(),
			Publish: l.c.cfg.publish})
}

// leaveQueue takes the handle out of the fair queue after a wait that did
// not get the lock.
func (l *Lock) leaveQueue(ctx context.Context) error {
	queue, timeouts := l.fairKeys()
	_, err := generated.FairLeave(ctx, l.c.scripts,
		generated.FairLeaveKeys{Lock: l.name, Queue: queue, Timeouts: timeouts, Channel: l.channel},
		generated.FairLeaveArgs{Field: l.field, WaitMS: l.fairWait.Milliseconds(), Publish: l.c.cfg.publish})
	return err
}
