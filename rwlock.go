package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
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
	env := rwEnv{env: c.env, name: name, prefix: keys.RWTimeoutPrefix(name), ch: keys.Tag(keys.RWLockPrefix, name), maxTimer: c.cfg.MaxWaitTimer}
	r := c.newLock(name, KindRead, &rwRead{env})
	w := c.newLock(name, KindWrite, &rwWrite{env})
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

// rwEnv is what both sides of a read-write lock's protocol share: the
// lock's hash, the timeout prefix and the channel.
type rwEnv struct {
	env      *scriptEnv
	name     string
	prefix   string
	ch       string // tag("redisson_rwlock", N): "0" when the last reader leaves, "1" when a writer does
	maxTimer time.Duration
}

func (p rwEnv) forceRelease(ctx context.Context, latch, mode string) (bool, error) {
	return generated.RwlockForceRelease(ctx, p.env.calls,
		generated.RwlockForceReleaseKeys{Lock: p.name, Channel: p.ch, Latch: latch},
		generated.RwlockForceReleaseArgs{Mode: mode, LatchMS: p.env.latchMS, Publish: p.env.publish})
}

// status reads the lock as field sees it, as the reentrant status's
// {locked, holds, PTTL}: locked by the side's own rule (Redisson 4.x's
// isLocked), holds of the side's own field.
func (p rwEnv) status(ctx context.Context, field string, write bool) ([]int64, error) {
	st, err := generated.RwlockStatus(ctx, p.env.calls, generated.RwlockStatusKeys{Lock: p.name}, generated.RwlockStatusArgs{Field: field})
	if err != nil {
		return nil, err
	}
	if len(st) != 5 {
		return nil, fmt.Errorf("rwlock_status reply has %d elements, want 5", len(st))
	}
	mode, reads, writes, pttl, fields := st[0], st[1], st[2], st[3], st[4]
	if write {
		return []int64{b2i(mode == 2), writes, pttl}, nil
	}
	// A read lock is held in read mode, or in write mode when the writer
	// holds read holds too (mode, its write field and its read field).
	return []int64{b2i(mode == 1 || mode == 2 && fields > 2), reads, pttl}, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (p rwEnv) leave(context.Context, string) error { return nil }
func (p rwEnv) queues() bool                        { return false }
func (p rwEnv) channel(string) string               { return p.ch }

// timer: as the reentrant lock's (any wait from 1ms, capped by
// Options.MaxWaitTimer).
func (p rwEnv) timer(time.Duration) (floor, ceil time.Duration) { return time.Millisecond, p.maxTimer }

// rwRead is the protocol of the read lock.
type rwRead struct{ rwEnv }

func (p *rwRead) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	wait, err := generated.RwlockReadAcquire(ctx, p.env.scripts,
		generated.RwlockReadAcquireKeys{Lock: p.name, Prefix: p.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)})
	return attemptResult{acquired: err == nil && wait == 0, wait: time.Duration(wait) * time.Millisecond}, err
}

func (p *rwRead) release(ctx context.Context, a releaseArgs) (*int64, error) {
	return generated.RwlockReadRelease(ctx, p.env.calls,
		generated.RwlockReadReleaseKeys{Lock: p.name, Prefix: p.prefix, Channel: p.ch, Latch: a.latch},
		generated.RwlockReadReleaseArgs{Field: a.field, LatchMS: p.env.latchMS, Publish: p.env.publish, Holds: int64(a.holds)})
}

func (p *rwRead) forceRelease(ctx context.Context, latch string) (bool, error) {
	return p.rwEnv.forceRelease(ctx, latch, "read")
}

func (p *rwRead) status(ctx context.Context, field string) ([]int64, error) {
	return p.rwEnv.status(ctx, field, false)
}

// countField: a reader's holds are counted in its owner field.
func (p *rwRead) countField(field string) string { return field }

// renewal: the owner's read holds' timeout keys and the lock's hash, with
// lua/rwlock_read_renew.lua (Redisson 4.x's renewal: its own holds only).
func (p *rwRead) renewal() *renew.Spec { return rwReadRenewal }

// rwReadRenewal renews read holds: many locks of one slot per call, each
// lock's KEYS the hash N and its timeout prefix P.
var rwReadRenewal = &renew.Spec{
	Name:   "rwlock_read_renew",
	Script: generated.RwlockReadRenewScript,
	Cmd: func(ctx context.Context, p redis.Pipeliner, names, fields []string, lease time.Duration) *redis.Cmd {
		ks := make([]string, 0, 2*len(names))
		for _, n := range names {
			ks = append(ks, n, keys.RWTimeoutPrefix(n))
		}
		return generated.RwlockReadRenewCmd(ctx, p, generated.RwlockReadRenewKeys{Keys: ks},
			generated.RwlockReadRenewArgs{LeaseMS: lease.Milliseconds(), Fields: fields})
	},
	Result: generated.RwlockReadRenewResult,
}

// rwWrite is the protocol of the write lock.
type rwWrite struct{ rwEnv }

func (p *rwWrite) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	wait, err := generated.RwlockWriteAcquire(ctx, p.env.scripts,
		generated.RwlockWriteAcquireKeys{Lock: p.name},
		generated.RwlockWriteAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)})
	if redis.HasErrorPrefix(err, "UPGRADE") {
		// The script's reply says what ErrUpgrade says: print it once.
		err = fmt.Errorf("%w: owner %s holds read holds; release them first", ErrUpgrade, a.field)
	}
	return attemptResult{acquired: err == nil && wait == 0, wait: time.Duration(wait) * time.Millisecond}, err
}

func (p *rwWrite) release(ctx context.Context, a releaseArgs) (*int64, error) {
	return generated.RwlockWriteRelease(ctx, p.env.calls,
		generated.RwlockWriteReleaseKeys{Lock: p.name, Channel: p.ch, Latch: a.latch},
		generated.RwlockWriteReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, LatchMS: p.env.latchMS,
			Publish: p.env.publish, Holds: int64(a.holds)})
}

func (p *rwWrite) forceRelease(ctx context.Context, latch string) (bool, error) {
	return p.rwEnv.forceRelease(ctx, latch, "write")
}

func (p *rwWrite) status(ctx context.Context, field string) ([]int64, error) {
	return p.rwEnv.status(ctx, field, true)
}

// countField: a writer's holds are counted in C:H:write.
func (p *rwWrite) countField(field string) string { return field + ":write" }

// renewal: write holds are renewed as the reentrant lock's (lock_renew),
// on the field C:H:write.
func (p *rwWrite) renewal() *renew.Spec { return lockRenewal }
