package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Scenario 7: Unlock by a handle that does not hold the lock fails with
// ErrNotHeld and changes nothing: hold count, hash and lease stay.
func testUnlockNotOwner(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	c := backends.NewClient(t, rdb, lualock.Options{})
	c2 := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	owner := c.NewLock(name)
	backends.UnlockLater(t, owner)
	for range 2 {
		if err := owner.LockLease(ctx, 20*time.Second); err != nil {
			t.Fatalf("LockLease: %v", err)
		}
	}
	before, err := rdb.HGetAll(ctx, name).Result()
	if err != nil {
		t.Fatal(err)
	}
	pttl := rdb.PTTL(ctx, name).Val()
	measured := time.Now()

	for _, l := range []*lualock.Lock{c.NewLock(name), c2.NewLock(name)} {
		if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("Unlock by a non-owner = %v, want ErrNotHeld", err)
		}
		// A failed try leaves the handle a non-owner as well.
		if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("TryLock = %v, want ErrNotObtained", err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("Unlock by a non-owner after a failed TryLock = %v, want ErrNotHeld", err)
		}
	}
	after, err := rdb.HGetAll(ctx, name).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("lock hash changed: %v -> %v", before, after)
	}
	if n := backends.Holds(t, ctx, owner); n != 2 {
		t.Errorf("owner's hold count = %d, want 2", n)
	}
	now := rdb.PTTL(ctx, name).Val()
	if drift := pttl - now - time.Since(measured); drift < -50*time.Millisecond || drift > 50*time.Millisecond {
		t.Errorf("PTTL went from %v to %v in %v: the lease was touched", pttl, now, time.Since(measured))
	}
	if left := backends.KeysLeft(t, rdb, name, true); len(left) != 1 || left[0] != name {
		t.Errorf("keys = %q, want only the lock (no unlock latch)", left)
	}
	for range 2 {
		if err := owner.Unlock(ctx); err != nil {
			t.Fatalf("owner's Unlock: %v", err)
		}
	}
	backends.NoKeys(t, rdb, name)
}

// Scenario 8: TryLock with a 3s wait on a held lock gives up after 3s ±10%.
func testTryLockTimeout(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const wait = 3 * time.Second
	c := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	holder, l := c.NewLock(name), c.NewLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	backends.UnlockLater(t, holder)
	start := time.Now()
	err := l.TryLock(ctx, wait)
	elapsed := time.Since(start)
	t.Logf("TryLock(%v) returned after %v: %v", wait, elapsed, err)
	if !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock = %v, want ErrNotObtained", err)
	}
	if elapsed < wait*9/10 || elapsed > wait*11/10 {
		t.Errorf("TryLock gave up after %v, want %v ± 10%%", elapsed, wait)
	}
	if s := c.Stats(); s.Waiters != 0 || s.Subscriptions != 0 {
		t.Errorf("Stats after the wait = %+v, want no waiter and no subscription", s)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// Scenario 9: cancelling the context of a waiting Lock returns promptly with
// context.Canceled and leaves no waiter nor subscription, in the client and
// on the server. Deadlines and causes come through as well.
func testContextCancel(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	c := backends.NewClient(t, rdb, lualock.Options{})
	wc := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	holder := c.NewLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	backends.UnlockLater(t, holder)
	channel := backends.Channel(name)
	pattern := backends.Glob(channel)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		at  time.Time
		err error
	}
	res := make(chan result, 1)
	go func() {
		err := wc.NewLock(name).Lock(cctx)
		res <- result{time.Now(), err}
	}()
	if !backends.Eventually(2*time.Second, func() bool { return wc.Stats().Waiters == 1 }) {
		t.Fatal("Lock did not start waiting")
	}
	if !backends.Eventually(2*time.Second, func() bool { return len(backends.Channels(t, rdb, pattern)) == 1 }) {
		t.Fatal("the lock's channel was not subscribed")
	}
	time.Sleep(50 * time.Millisecond) // let it go to sleep
	cancelled := time.Now()
	cancel()
	r := <-res
	err, returned := r.err, r.at
	took := returned.Sub(cancelled)
	t.Logf("Lock returned %v after cancel: %v", took, err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Lock after cancel = %v, want context.Canceled", err)
	}
	if took > 100*time.Millisecond {
		t.Errorf("Lock returned %v after cancel, want < 100ms", took)
	}
	if s := wc.Stats(); s.Waiters != 0 || s.Subscriptions != 0 {
		t.Errorf("Stats after the cancelled wait = %+v, want no waiter and no subscription", s)
	}
	if !backends.Eventually(time.Second, func() bool { return len(backends.Channels(t, rdb, pattern)) == 0 }) {
		t.Errorf("PUBSUB CHANNELS still lists %q a second after the cancelled wait", channel)
	}

	// A deadline reads as context.DeadlineExceeded.
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	start := time.Now()
	err = wc.NewLock(name).Lock(dctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock past its deadline = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("Lock with a 200ms deadline returned after %v", took)
	}

	// A cause given to the context is kept.
	errMine := errors.New("shutting down")
	cctx2, cancel2 := context.WithCancelCause(ctx)
	time.AfterFunc(100*time.Millisecond, func() { cancel2(errMine) })
	err = wc.NewLock(name).Lock(cctx2)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errMine) {
		t.Errorf("Lock cancelled with a cause = %v, want context.Canceled and the cause", err)
	}
	// A context that ended before the call sends nothing.
	if err := wc.NewLock(name).Lock(cctx2); !errors.Is(err, context.Canceled) {
		t.Errorf("Lock with an ended context = %v, want context.Canceled", err)
	}
	if s := wc.Stats(); s.Waiters != 0 || s.Subscriptions != 0 {
		t.Errorf("Stats after the ended waits = %+v, want no waiter and no subscription", s)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
