package lualock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/wake"
)

// A toy lock kind, added by docs/ARCHITECTURE.md's recipe ("How new
// primitives plug in", steps 2 and 3; it reuses lock_acquire and
// lock_release as its scripts and has no CLI flag): its calls, its kind,
// a constructor filling a protocol. The engine, the hold and the watchdog
// take it unchanged.

const kindToy Kind = 100

// toyCalls are the toy kind's Redis calls.
type toyCalls struct {
	env  *scriptEnv
	name string
	ch   string
}

func (p toyCalls) acquire(ctx context.Context, a attemptArgs) (attemptResult, error) {
	return waited(generated.LockAcquire(ctx, p.env.scripts, generated.LockAcquireKeys{Lock: p.name},
		generated.LockAcquireArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, Holds: int64(a.holds)}))
}

func (p toyCalls) release(ctx context.Context, a releaseArgs) (releaseOutcome, error) {
	return releaseOf(generated.LockRelease(ctx, p.env.calls,
		generated.LockReleaseKeys{Lock: p.name, Channel: p.ch, Latch: a.latch},
		generated.LockReleaseArgs{LeaseMS: a.lease.Milliseconds(), Field: a.field, LatchMS: p.env.latchMS,
			Publish: p.env.publish, Holds: int64(a.holds)}))
}

func (p toyCalls) forceRelease(ctx context.Context, latch string) (bool, error) {
	return generated.LockForceRelease(ctx, p.env.calls,
		generated.LockForceReleaseKeys{Lock: p.name, Channel: p.ch, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: p.env.latchMS, Publish: p.env.publish})
}

func (p toyCalls) status(ctx context.Context, field string) (Status, error) {
	return lockStatus(ctx, p.env, p.name, field)
}

// newToy is the toy kind's constructor: its own channel, every waiter
// woken per message, timers from 1ms to MaxWaitTimer, the lock hash's
// renewal.
func (c *Client) newToy(name string) *Lock {
	ch := "toy_channel:{" + name + "}"
	return c.newLock(name, &protocol{
		lockCalls: toyCalls{env: c.env, name: name, ch: ch},
		kind:      kindToy,
		channel:   ch,
		mode:      wake.WakeAll,
		floor:     time.Millisecond,
		ceil:      c.cfg.MaxWaitTimer,
		renewal:   lockRenewal,
	})
}

// TestProtocol_toyKind: the toy kind locks, excludes, reports its status,
// wakes a waiter on its own channel and unlocks.
func TestProtocol_toyKind(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, Options{MaxWaitTimer: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	a, b := c.newToy("toy"), c.newToy("toy")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx, 0); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("b.TryLock beside a = %v, want ErrNotObtained", err)
	}
	if s, err := a.Status(ctx); err != nil || !s.Locked || s.Holds != 1 {
		t.Fatalf("a.Status = %+v, %v; want locked with 1 hold", s, err)
	}
	done := make(chan error, 1)
	go func() { done <- b.TryLock(ctx, 20*time.Second) }()
	for c.Stats().Waiters == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil { // MaxWaitTimer is an hour: the release's message woke it
		t.Fatalf("b after a's release: %v", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
