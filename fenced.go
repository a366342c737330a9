package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
)

// FencedLock is a reentrant lock whose every acquisition takes a fencing
// token, compatible with Redisson 4.x's RFencedLock: the token counter of
// the lock's name grows by one on each acquisition by anyone, re-entries
// included, Java's and Go's alike, and is never reset by this package.
//
// A token is the answer to a holder paused past its lease (a long GC, a
// stopped VM): another owner takes the lock meanwhile with a larger token,
// and the resource the lock protects, which remembers the largest token it
// has accepted, refuses the late holder's smaller one. The resource must do
// that check itself: the lock cannot stop a write it no longer sees.
//
// It has every method of Lock (Lock, TryLock, Unlock, Context, ...), and
// LockToken and TryLockToken, which are Lock and TryLock that return the
// hold's token, and Token, which reads it. Release, renewal and waiting are
// the reentrant lock's: the same hash, the same channel, the same message.
type FencedLock struct {
	*lockHandle
}

// lockHandle is Lock, embedded in FencedLock under a name of its own so
// that the embedded field does not hide the Lock method.
type lockHandle = Lock

// NewFencedLock returns a handle on the fenced lock name, a new owner. An
// invalid name is reported by its methods as ErrInvalid.
func (c *Client) NewFencedLock(name string) *FencedLock {
	p := c.newReentrant(name)
	p.lockCalls, p.kind = fenced{reentrant: c.reentrantCalls(name), token: keys.Tag(keys.TokenPrefix, name)}, KindFenced
	return &FencedLock{c.newLock(name, p)}
}

// Handle returns the fenced lock as a *Lock, for code written for any
// Lock: its acquisitions still take tokens, which Token reads.
func (f *FencedLock) Handle() *Lock { return f.lockHandle }

// LockToken is Lock (blocks until the handle holds the lock, under the
// watchdog) that returns the token of this acquisition. It returns the
// errors of Lock.
func (f *FencedLock) LockToken(ctx context.Context) (int64, error) {
	if err := f.lockHandle.Lock(ctx); err != nil {
		return 0, err
	}
	return f.token.Load(), nil
}

// TryLockToken is TryLock that returns the token of this acquisition. It
// returns the errors of TryLock, ErrNotObtained among them.
func (f *FencedLock) TryLockToken(ctx context.Context, wait time.Duration) (int64, error) {
	if err := f.lockHandle.TryLock(ctx, wait); err != nil {
		return 0, err
	}
	return f.token.Load(), nil
}

// Token returns the token of the handle's latest acquisition while it holds
// the lock (after a re-entry, the re-entry's, which is larger), and 0 when
// it holds nothing. It reads no Redis.
func (f *FencedLock) Token() int64 {
	if s := f.h.snapshot(); s.holds == 0 || s.state == free || s.state == lost {
		return 0
	}
	return f.token.Load()
}

// fenced is the protocol of Redisson's RFencedLock: the reentrant lock,
// whose acquisitions also draw a token from the counter of the name.
type fenced struct {
	reentrant
	token string // tag("redisson_lock_token", N)
}

func (p fenced) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	r, err := generated.FencedAcquire(ctx, p.env.scripts,
		generated.FencedAcquireKeys{Lock: p.name, Token: p.token},
		generated.FencedAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)})
	if err != nil {
		return attemptResult{}, err
	}
	if len(r) != 2 {
		return attemptResult{}, fmt.Errorf("fenced_acquire reply has %d elements, want 2", len(r))
	}
	if r[0] != 0 {
		return attemptResult{wait: time.Duration(r[0]) * time.Millisecond}, nil
	}
	return attemptResult{acquired: true, token: r[1]}, nil
}
