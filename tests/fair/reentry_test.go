package fair_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 11: re-entry, hold count, force unlock, TryLock timeout.

// TestFairLock_Lock_reentry: the holder may lock again without queueing;
// the hold count follows, and the lock is free after as many unlocks.
func TestFairLock_Lock_reentry(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{})
		ctx := context.Background()
		l := c.NewFairLock(name)
		other := c.NewFairLock(name)
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := l.TryLockLease(ctx, 0, 10*time.Second); err != nil {
			t.Fatalf("re-entry TryLockLease: %v", err)
		}
		if err := l.LockLease(ctx, 20*time.Second); err != nil {
			t.Fatalf("re-entry LockLease: %v", err)
		}
		if n, err := l.HoldCount(ctx); err != nil || n != 3 {
			t.Errorf("HoldCount = %d, %v; want 3", n, err)
		}
		if lease, err := l.RemainingLease(ctx); err != nil || lease <= 10*time.Second || lease > 20*time.Second {
			t.Errorf("RemainingLease = %v, %v; want the last re-entry's 20s lease", lease, err)
		}
		if s := mustSnapshot(t, rdb, k); len(s.queue) != 0 || len(s.scores) != 0 {
			t.Errorf("re-entry queued: queue %q, deadlines %v", s.queue, s.scores)
		}
		if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Errorf("other TryLock(0) = %v, want ErrNotObtained", err)
		}
		for want := 2; want >= 0; want-- {
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if n, err := other.HoldCount(ctx); err != nil || n != 0 {
				t.Errorf("other HoldCount = %d, %v; want 0", n, err)
			}
			held, err := l.IsHeld(ctx)
			if err != nil || held != (want > 0) {
				t.Errorf("after an Unlock: IsHeld = %v, %v; want %v", held, err, want > 0)
			}
			if n, err := l.HoldCount(ctx); err != nil || n != want {
				t.Errorf("HoldCount = %d, %v; want %d", n, err, want)
			}
		}
		if locked, err := l.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked = %v, %v after the last Unlock; want false", locked, err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("extra Unlock = %v, want ErrNotHeld", err)
		}
		select {
		case <-l.Done():
		default:
			t.Errorf("Done not closed after the last Unlock")
		}
		if err := context.Cause(l.Context()); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("Context cause = %v, want ErrNotHeld", err)
		}
		checkClean(t, rdb, name, time.Second, c)
	})
}

// TestFairLock_ForceUnlock_wakesHead: force unlock deletes the lock and
// wakes the queue's head at once, long before its fallback timer; the old
// holder's hold is gone.
func TestFairLock_ForceUnlock_wakesHead(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		w := c.NewFairLock(name)
		got := make(chan time.Time, 1)
		var lockErr error
		go func() {
			if lockErr = w.Lock(ctx); lockErr == nil {
				got <- time.Now()
			}
			close(got)
		}()
		waitQueued(t, rdb, k, 1)
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		deleted, err := c.NewFairLock(name).ForceUnlock(ctx)
		if err != nil || !deleted {
			t.Fatalf("ForceUnlock = %v, %v; want true", deleted, err)
		}
		at, ok := <-got
		if !ok {
			t.Fatalf("waiter Lock: %v", lockErr)
		}
		if lat := at.Sub(start); lat > 500*time.Millisecond {
			t.Errorf("head got the lock %v after ForceUnlock, want it woken at once", lat)
		}
		if held, err := holder.IsHeld(ctx); err != nil || held {
			t.Errorf("old holder IsHeld = %v, %v; want false", held, err)
		}
		if err := holder.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) && !errors.Is(err, lualock.ErrLockLost) {
			t.Errorf("old holder Unlock = %v, want ErrNotHeld or ErrLockLost", err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Errorf("waiter Unlock: %v", err)
		}
		if deleted, err := w.ForceUnlock(ctx); err != nil || deleted {
			t.Errorf("ForceUnlock of a free lock = %v, %v; want false", deleted, err)
		}
		checkClean(t, rdb, name, time.Second, c)
	})
}

// TestFairLock_TryLock_timeoutLeavesQueue: a TryLock whose wait runs out
// returns ErrNotObtained, no sooner than its wait, and leaves the queue;
// the waiter behind it moves up one budget.
func TestFairLock_TryLock_timeoutLeavesQueue(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		const wait = 300 * time.Millisecond
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{FairWait: 10 * time.Second})
		ctx := context.Background()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		w := c.NewFairLock(name)
		type result struct {
			err     error
			elapsed time.Duration
			snap    queueSnap
		}
		res := make(chan result, 1)
		start := time.Now()
		go func() {
			err := w.TryLock(ctx, wait)
			el := time.Since(start)
			s, _ := takeSnapshot(ctx, rdb, k)
			res <- result{err, el, s}
		}()
		q := waitQueued(t, rdb, k, 1)
		field := q[0]
		// A fake waiter queues behind it.
		if r, err := fairAcquire(ctx, rdb, k, "fake:behind", 30_000, 10_000); err != nil || r == nil {
			t.Fatalf("fake acquire = %v, %v; want a wait", ptrString(r), err)
		}
		before := mustSnapshot(t, rdb, k).scores["fake:behind"]
		r := <-res
		if !errors.Is(r.err, lualock.ErrNotObtained) {
			t.Errorf("TryLock = %v, want ErrNotObtained", r.err)
		}
		if r.elapsed < wait {
			t.Errorf("TryLock gave up after %v, before its %v wait", r.elapsed, wait)
		}
		if slices.Contains(r.snap.queue, field) {
			t.Errorf("waiter still queued after TryLock returned: %q", r.snap.queue)
		}
		if _, ok := r.snap.scores[field]; ok {
			t.Errorf("waiter still has a deadline after TryLock returned")
		}
		// The waiter behind is the head now: its deadline is cut to one
		// budget past the lock's expiry (the watchdog lease, 30s, at most).
		if got := r.snap.scores["fake:behind"]; got > before || got < r.snap.now+10_000 || got > r.snap.now+30_000+10_000 {
			t.Errorf("the waiter behind, the head now, has its deadline at now%+d ms (it was now%+d), want at most the lock's PTTL + one budget (10000)",
				got-r.snap.now, before-r.snap.now)
		}
		if ok, err := fairLeave(ctx, rdb, k, "fake:behind", 10_000); err != nil || !ok {
			t.Errorf("fake leave = %v, %v; want true", ok, err)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("holder Unlock: %v", err)
		}
		checkClean(t, rdb, name, time.Second, c)
	})
}
