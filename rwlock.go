package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
	"github.com/lualock/lualock/internal/wake"
)

// ReadWriteLock is a handle on a read-write lock, compatible with
// Redisson's RReadWriteLock: many readers at once, or one writer. Its read
// and write locks are *Lock handles of one owner, so that the writer may
// take the read lock too (a downgrade: lock the write lock, lock the read
// lock, unlock the write lock; the owner keeps reading). Both are
// reentrant, renewed by the watchdog when taken without a lease, and
// report a lost hold on their Context as every Lock does.
//
// Each read hold has its own lease in Redis (a timeout key of its own, as
// Redisson keeps it); a reader whose holds all timed out no longer counts,
// and the last live reader's release frees the lock. The watchdog renews
// only this client's read holds (Redisson 4.x's way; 3.16 renews every
// reader's, keeping dead ones alive).
//
// There is no upgrade: the write lock of an owner that holds read holds
// returns ErrUpgrade (Redisson's would wait forever). The lock is not fair:
// readers keep entering while it is in read mode, so a steady stream of
// readers can keep a writer waiting.
//
// On these handles IsLocked, Status and HoldCount speak of their own side:
// the read lock is locked in read mode, or in write mode when the writer
// holds read holds too (Redisson 4.x's isLocked); the write lock in write
// mode; the hold count is this owner's read or write holds. ForceUnlock
// deletes the lock only when it is in the handle's mode (the read lock's in
// read mode, the write lock's in write mode), as Redisson's forceUnlock.
//
// A ReadWriteLock, like a Lock, is one owner: goroutines that must exclude
// each other need a ReadWriteLock each.
type ReadWriteLock struct {
	name  string
	read  *Lock
	write *Lock
}

// NewReadWriteLock returns a handle on the read-write lock name, a new
// owner. An invalid name is reported by its locks' methods as ErrInvalid.
func (c *Client) NewReadWriteLock(name string) *ReadWriteLock {
	env := rwEnv{env: c.env, name: name, prefix: keys.RWTimeoutPrefix(name), ch: keys.Tag(keys.RWLockPrefix, name)}
	r := c.newLock(name, c.rwProtocol(KindRead, rwRead{env}, env.ch, wake.WakeShared, "", rwReadRenewal))
	w := c.newLock(name, c.rwProtocol(KindWrite, rwWrite{env}, env.ch, wake.WakeOne, ":write", lockRenewal))
	w.field = r.field // one owner: the writer may read
	return &ReadWriteLock{name: name, read: r, write: w}
}

// Name returns the lock's name, its key in Redis.
func (rw *ReadWriteLock) Name() string { return rw.name }

// ReadLock returns the read lock: shared with other readers, excluded by a
// writer other than this owner. Its Lock calls wait while another owner
// writes.
func (rw *ReadWriteLock) ReadLock() *Lock { return rw.read }

// WriteLock returns the write lock: excluded by every other owner's read
// and write holds. Its Lock calls return ErrUpgrade while this owner holds
// read holds, and wait while others read or write.
func (rw *ReadWriteLock) WriteLock() *Lock { return rw.write }

// rwProtocol is the protocol of one side of a read-write lock: both
// share the hash (its mode field) and the channel. A writer waits for one
// release at a time (WakeOne); a write release lets in every reader, so
// every message wakes every reader of the client (WakeShared), as
// Redisson's readers all wake on it, and a reader that gets in wakes the
// others: its acquisition publishes nothing, and what let it in (a
// Redisson downgrade, which publishes nothing, among them) lets them in;
// and every change of the hash wakes them through the hold tracker
// (watchKey), so that the first of them finds such a downgrade at once.
// A reader's holds are counted in its owner field and renewed with their
// timeout keys (lua/rwlock_read_renew.lua, Redisson 4.x's renewal: its
// own holds only); a writer's are counted in C:H:write and renewed as the
// reentrant lock's. Timers are the reentrant lock's (any wait from 1ms,
// capped by Options.MaxWaitTimer).
func (c *Client) rwProtocol(k Kind, calls lockCalls, ch string, mode wake.Mode, count string, renewal *renew.Spec) *protocol {
	return &protocol{
		lockCalls:   calls,
		kind:        k,
		channel:     ch,
		mode:        mode,
		watchKey:    k == KindRead,
		floor:       time.Millisecond,
		ceil:        c.cfg.MaxWaitTimer,
		countSuffix: count,
		renewal:     renewal,
	}
}

// rwEnv is what both sides of a read-write lock's calls share: the
// lock's hash, the timeout prefix and the channel.
type rwEnv struct {
	env    *scriptEnv
	name   string
	prefix string
	ch     string // tag("redisson_rwlock", N): "0" when the last reader leaves, "1" when a writer does
}

func (p rwEnv) forceRelease(ctx context.Context, latch, mode string) (bool, error) {
	return generated.RwlockForceRelease(ctx, p.env.calls,
		generated.RwlockForceReleaseKeys{Lock: p.name, Channel: p.ch, Latch: latch},
		generated.RwlockForceReleaseArgs{Mode: mode, LatchMS: p.env.latchMS, Publish: p.env.publish})
}

// status reads the lock as field sees it: locked by the side's own rule
// (Redisson 4.x's isLocked), holds of the side's own field.
func (p rwEnv) status(ctx context.Context, field string, write bool) (Status, error) {
	st, err := generated.RwlockStatus(ctx, p.env.calls, generated.RwlockStatusKeys{Lock: p.name}, generated.RwlockStatusArgs{Field: field})
	if err != nil {
		return Status{}, err
	}
	if len(st) != 5 {
		return Status{}, fmt.Errorf("rwlock_status reply has %d elements, want 5", len(st))
	}
	mode, reads, writes, pttl, fields := st[0], st[1], st[2], st[3], st[4]
	if write {
		return statusOf(mode == 2, writes, pttl), nil
	}
	// A read lock is held in read mode, or in write mode when the writer
	// holds read holds too (mode, its write field and its read field).
	return statusOf(mode == 1 || mode == 2 && fields > 2, reads, pttl), nil
}

// rwRead is the calls of the read lock.
type rwRead struct{ rwEnv }

func (p rwRead) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	return waited(generated.RwlockReadAcquire(ctx, p.env.scripts,
		generated.RwlockReadAcquireKeys{Lock: p.name, Prefix: p.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)}))
}

func (p rwRead) release(ctx context.Context, a releaseArgs) (releaseOutcome, error) {
	return releaseOf(generated.RwlockReadRelease(ctx, p.env.calls,
		generated.RwlockReadReleaseKeys{Lock: p.name, Prefix: p.prefix, Channel: p.ch, Latch: a.latch},
		generated.RwlockReadReleaseArgs{Field: a.field, LatchMS: p.env.latchMS, Publish: p.env.publish, Holds: int64(a.holds)}))
}

func (p rwRead) forceRelease(ctx context.Context, latch string) (bool, error) {
	return p.rwEnv.forceRelease(ctx, latch, "read")
}

func (p rwRead) status(ctx context.Context, field string) (Status, error) {
	return p.rwEnv.status(ctx, field, false)
}

// rwReadRenewal renews read holds: many locks of one slot per call, each
// lock's KEYS the hash N and its timeout prefix P.
var rwReadRenewal = &renew.Spec{
	Name:   "rwlock_read_renew",
	Script: generated.RwlockReadRenewScript,
	Cmd: func(ctx context.Context, p redis.Pipeliner, names, fields []string, lease time.Duration, rearm bool) *redis.Cmd {
		ks := make([]string, 0, 2*len(names))
		for _, n := range names {
			ks = append(ks, n, keys.RWTimeoutPrefix(n))
		}
		return generated.RwlockReadRenewCmd(ctx, p, generated.RwlockReadRenewKeys{Keys: ks},
			generated.RwlockReadRenewArgs{LeaseMS: lease.Milliseconds(), Rearm: rearm, Fields: fields})
	},
	Result: generated.RwlockReadRenewResult,
}

// rwWrite is the calls of the write lock.
type rwWrite struct{ rwEnv }

func (p rwWrite) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	wait, err := generated.RwlockWriteAcquire(ctx, p.env.scripts,
		generated.RwlockWriteAcquireKeys{Lock: p.name},
		generated.RwlockWriteAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)})
	if redis.HasErrorPrefix(err, "UPGRADE") {
		// The script's reply says what ErrUpgrade says: print it once.
		err = fmt.Errorf("%w: owner %s holds read holds; release them first", ErrUpgrade, a.field)
	}
	return waited(wait, err)
}

func (p rwWrite) release(ctx context.Context, a releaseArgs) (releaseOutcome, error) {
	return releaseOf(generated.RwlockWriteRelease(ctx, p.env.calls,
		generated.RwlockWriteReleaseKeys{Lock: p.name, Channel: p.ch, Latch: a.latch},
		generated.RwlockWriteReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, LatchMS: p.env.latchMS,
			Publish: p.env.publish, Holds: int64(a.holds)}))
}

func (p rwWrite) forceRelease(ctx context.Context, latch string) (bool, error) {
	return p.rwEnv.forceRelease(ctx, latch, "write")
}

func (p rwWrite) status(ctx context.Context, field string) (Status, error) {
	return p.rwEnv.status(ctx, field, true)
}
