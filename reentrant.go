package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/wake"
)

// newReentrant is the protocol of Redisson's RLock: a hash of owner
// fields and hold counts, released on one channel that wakes one waiter;
// any wait the script tells is a fallback timer from 1ms, capped by
// Options.MaxWaitTimer so that a lost release message never hangs a
// waiter. The watchdog renews the hash with lua/lock_renew.lua.
func (c *Client) newReentrant(name string) *protocol {
	r := c.reentrantCalls(name)
	return &protocol{
		lockCalls: r,
		kind:      KindReentrant,
		channel:   r.ch,
		mode:      wake.WakeOne,
		floor:     time.Millisecond,
		ceil:      c.cfg.MaxWaitTimer,
		renewal:   lockRenewal,
	}
}

// reentrantCalls returns the reentrant lock's calls on name.
func (c *Client) reentrantCalls(name string) reentrant {
	return reentrant{env: c.env, name: name, ch: keys.Tag(keys.ChannelPrefix, name), publish: c.env.publish}
}

// reentrant is the calls of Redisson's RLock, shared by the fenced and
// the spin lock (which publishes nothing: publish "none").
type reentrant struct {
	env     *scriptEnv
	name    string
	ch      string // the lock's channel
	publish string // the release scripts' publish argument
}

func (p reentrant) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	wait, err := generated.LockAcquire(ctx, p.env.scripts,
		generated.LockAcquireKeys{Lock: p.name},
		generated.LockAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)})
	return waited(wait, err)
}

// waited reads an acquire script's reply: 0 acquired, else the holder's
// remaining lease in ms.
func waited(wait int64, err error) (attemptResult, error) {
	return attemptResult{acquired: err == nil && wait == 0, wait: time.Duration(wait) * time.Millisecond}, err
}

func (p reentrant) release(ctx context.Context, a releaseArgs) (releaseOutcome, error) {
	return releaseOf(generated.LockRelease(ctx, p.env.calls,
		generated.LockReleaseKeys{Lock: p.name, Channel: p.ch, Latch: a.latch},
		generated.LockReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, LatchMS: p.env.latchMS,
			Publish: p.publish, Holds: int64(a.holds)}))
}

func (p reentrant) forceRelease(ctx context.Context, latch string) (bool, error) {
	return generated.LockForceRelease(ctx, p.env.calls,
		generated.LockForceReleaseKeys{Lock: p.name, Channel: p.ch, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: p.env.latchMS, Publish: p.publish})
}

func (p reentrant) status(ctx context.Context, field string) (Status, error) {
	return lockStatus(ctx, p.env, p.name, field)
}

// lockStatus reads a lock's hash (the reentrant, fair, fenced and spin
// locks keep the same one): {locked, holds, PTTL}.
func lockStatus(ctx context.Context, env *scriptEnv, name, field string) (Status, error) {
	st, err := generated.LockStatus(ctx, env.calls, generated.LockStatusKeys{Lock: name}, generated.LockStatusArgs{Field: field})
	if err != nil {
		return Status{}, err
	}
	if len(st) != 3 {
		return Status{}, fmt.Errorf("lock_status reply has %d elements, want 3", len(st))
	}
	return statusOf(st[0] == 1, st[1], st[2]), nil
}
