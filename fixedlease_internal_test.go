package lualock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/harness"
)

// TestFixedLease_trackerAfterLateTimer: when Redis lets a fixed lease go
// and the hold tracker hears of it before the lease's own timer has fired
// (a busy machine runs it late; here it is made an hour late), the hold
// ends as its lease running out (ErrNotHeld), not as a loss, for every
// lock kind. A key deleted before the lease's end is still a loss.
func TestFixedLease_trackerAfterLateTimer(t *testing.T) {
	c, rdb := lateTimerClient(t)
	ctx := context.Background()
	kinds := []struct {
		name string
		mk   func(name string) *Lock
	}{
		{"reentrant", c.NewLock},
		{"read", func(n string) *Lock { return c.NewReadWriteLock(n).ReadLock() }},
		{"write", func(n string) *Lock { return c.NewReadWriteLock(n).WriteLock() }},
		{"fair", c.NewFairLock},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			name := "fixedlease-late-" + k.name
			l := k.mk(name)
			if err := l.LockLease(ctx, 200*time.Millisecond); err != nil {
				t.Fatalf("LockLease: %v", err)
			}
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the hold did not end after Redis let its lease go")
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, ErrNotHeld) || errors.Is(cause, ErrLockLost) {
				t.Errorf("cause = %v, want ErrNotHeld (the lease ran out)", cause)
			}
			if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
				t.Errorf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
			}

			// Deleted well before its lease's end: a loss.
			if err := l.LockLease(ctx, time.Minute); err != nil {
				t.Fatalf("LockLease: %v", err)
			}
			if err := rdb.Del(ctx, name).Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the hold did not end after its key was deleted")
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLockLost) {
				t.Errorf("cause after a DEL = %v, want ErrLockLost", cause)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestFixedLease_permitUpdatedLease: a permit's fixed lease set by
// UpdateLease, not the one it was taken with, decides whether a tracker
// finding is its lease's end: a watchdog permit given a 200 ms lease ends
// with ErrNotHeld when Redis lets it go, though its timer is an hour late.
func TestFixedLease_permitUpdatedLease(t *testing.T) {
	c, _ := lateTimerClient(t)
	ctx := context.Background()
	s := c.NewPermitExpirableSemaphore("fixedlease-permit")
	if ok, err := s.TrySetPermits(ctx, 1); err != nil || !ok {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	p, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := p.UpdateLease(ctx, 200*time.Millisecond); err != nil {
		t.Fatalf("UpdateLease: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the permit did not end after Redis let its lease go")
	}
	if cause := context.Cause(p.Context()); !errors.Is(cause, ErrNotHeld) || errors.Is(cause, ErrLockLost) {
		t.Errorf("cause = %v, want ErrNotHeld (the lease ran out)", cause)
	}
}

// lateTimerClient returns a client on a server of the test's own whose
// fixed-lease timers fire an hour late, as a starved machine's might, and
// a redis client on that server; both closed by the test's cleanup.
func lateTimerClient(t *testing.T) (*Client, *redis.Client) {
	t.Helper()
	rdb := harness.StartStandalone(t).Client()
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.cfg.afterFunc = func(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d+time.Hour, f) }
	return c, rdb
}
