package lualock

import (
	"context"
	"time"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
)

// reentrant is the protocol of Redisson's RLock: a hash of owner fields
// and hold counts, released on one channel that wakes one waiter.
type reentrant struct {
	env      *scriptEnv
	name     string
	ch       string        // the lock's channel
	maxTimer time.Duration // Options.MaxWaitTimer
}

func newReentrant(env *scriptEnv, name string, maxTimer time.Duration) *reentrant {
	return &reentrant{env: env, name: name, ch: keys.Tag(keys.ChannelPrefix, name), maxTimer: maxTimer}
}

func (p *reentrant) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	wait, err := generated.LockAcquire(ctx, p.env.scripts,
		generated.LockAcquireKeys{Lock: p.name},
		generated.LockAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)})
	return attemptResult{acquired: err == nil && wait == 0, wait: time.Duration(wait) * time.Millisecond}, err
}

func (p *reentrant) release(ctx context.Context, a releaseArgs) (*int64, error) {
	return generated.LockRelease(ctx, p.env.calls,
		generated.LockReleaseKeys{Lock: p.name, Channel: p.ch, Latch: a.latch},
		generated.LockReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, LatchMS: p.env.latchMS,
			Publish: p.env.publish, Holds: int64(a.holds)})
}

func (p *reentrant) forceRelease(ctx context.Context, latch string) (bool, error) {
	return generated.LockForceRelease(ctx, p.env.calls,
		generated.LockForceReleaseKeys{Lock: p.name, Channel: p.ch, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: p.env.latchMS, Publish: p.env.publish})
}

func (p *reentrant) status(ctx context.Context, field string) ([]int64, error) {
	return lockStatus(ctx, p.env, p.name, field)
}

// lockStatus reads a lock's hash (both protocols keep the same one).
func lockStatus(ctx context.Context, env *scriptEnv, name, field string) ([]int64, error) {
	return generated.LockStatus(ctx, env.calls, generated.LockStatusKeys{Lock: name}, generated.LockStatusArgs{Field: field})
}

func (p *reentrant) leave(context.Context, string) error { return nil }
func (p *reentrant) queues() bool                        { return false }
func (p *reentrant) channel(string) string               { return p.ch }

// timer: any wait the script tells, from 1ms, capped by
// Options.MaxWaitTimer so that a lost release message never hangs a waiter.
func (p *reentrant) timer(time.Duration) (floor, ceil time.Duration) {
	return time.Millisecond, p.maxTimer
}

// renewal: the lock's hash, with lua/lock_renew.lua.
func (p *reentrant) renewal() *renew.Spec { return lockRenewal }
