package reentrant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Scenario 5: RemainingLease after LockLease, after Unlock, with the
// watchdog's default lease, and after re-entries and partial unlocks.
func testRemainingLease(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	c := backends.NewClient(t, rdb, lualock.Options{}) // WatchdogLease: the default, 30s
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	other := c.NewLock(name)
	backends.UnlockLater(t, l)

	within := func(what string, lo, hi time.Duration) {
		t.Helper()
		for _, h := range []*lualock.Lock{l, other} { // whoever asks
			d, err := h.RemainingLease(ctx)
			if err != nil {
				t.Fatalf("%s: RemainingLease: %v", what, err)
			}
			if d < lo || d > hi {
				t.Errorf("%s: RemainingLease = %v, want in [%v, %v]", what, d, lo, hi)
			}
		}
	}
	if err := l.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	within("LockLease 10s", 9500*time.Millisecond, 10*time.Second)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if d, err := l.RemainingLease(ctx); !errors.Is(err, lualock.ErrNotLocked) {
		t.Errorf("RemainingLease after Unlock = %v, %v; want ErrNotLocked", d, err)
	}
	if st, err := l.Status(ctx); err != nil || st != (lualock.Status{}) {
		t.Errorf("Status after Unlock = %+v, %v; want the zero Status", st, err)
	}

	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	within("Lock with the default watchdog lease", 29500*time.Millisecond, 30*time.Second)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	for i := range 3 {
		if err := l.LockLease(ctx, 10*time.Second); err != nil {
			t.Fatalf("LockLease %d: %v", i+1, err)
		}
	}
	for i := range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %d: %v", i+1, err)
		}
	}
	within("three 10s holds, two unlocked", 9*time.Second, 10*time.Second)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}

// Scenario 6: a lease that runs out hands the lock over to a waiter within
// lease + slack, and the old holder's Unlock returns ErrNotHeld.
//
// The handover is read on the client's clock after the waiter learnt the
// lease left (a reply), its timer fired, its acquisition's reply came and
// its goroutine ran: slack grows by three wake-ups and two round trips as
// a canary measured them in the same test (a few milliseconds on an idle
// machine), so that a machine starved of CPU does not pass for a late
// handover. The lease's end in Redis is taken at the latest it can be
// (PTTL's reply + PTTL), so that PTTL's own round trip is not charged to
// the waiter.
func testLeaseHandover(t *testing.T, rdb redis.UniversalClient, slack time.Duration) {
	ctx := t.Context()
	const lease = 300 * time.Millisecond
	canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
	c := backends.NewClient(t, rdb, lualock.Options{})
	c2 := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	holder, waiter := c.NewLock(name), c2.NewLock(name)
	backends.UnlockLater(t, waiter)

	start := time.Now()
	if err := holder.LockLease(ctx, lease); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	// The lease runs out in Redis no later than PTTL's reply + PTTL: the
	// handover is timed from there, not charged with LockLease's nor
	// PTTL's round trip.
	pttl, err := rdb.PTTL(ctx, name).Result()
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL of the held lock = %v, %v", pttl, err)
	}
	expiry := time.Now().Add(pttl)
	if err := waiter.Lock(ctx); err != nil {
		t.Fatalf("waiter's Lock: %v", err)
	}
	got := time.Now()
	handover, late := got.Sub(start), got.Sub(expiry)
	load := canary.Allowance(3, 2)
	t.Logf("waiter acquired %v after the holder's LockLease(%v) began, %v after the lease ran out in Redis; %v", handover, lease, late, canary)
	if handover < lease-10*time.Millisecond {
		t.Errorf("waiter acquired after %v, before the %v lease ran out", handover, lease)
	}
	if late > slack+load {
		t.Errorf("waiter acquired %v after the lease ran out (%v after LockLease began), want within %v (+%v for the load; %v)", late, handover, slack, load, canary)
	}
	select {
	case <-holder.Done():
		if cause := context.Cause(holder.Context()); !errors.Is(cause, lualock.ErrNotHeld) {
			t.Errorf("holder's cause = %v, want ErrNotHeld (lease ran out)", cause)
		}
	case <-time.After(time.Second):
		t.Error("holder's Done did not fire when its lease ran out")
	}
	if err := holder.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("old holder's Unlock = %v, want ErrNotHeld", err)
	}
	if n := backends.Holds(t, ctx, waiter); n != 1 {
		t.Errorf("waiter's hold count after the old holder's Unlock = %d, want 1", n)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatalf("waiter's Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}

func TestLock_Lock_watchdogRenews(t *testing.T) {
	backends.ShortParallel(t)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		testWatchdogKeeps(t, rdb)
	})
}

// Scenario 13: the watchdog keeps a lock past three leases.
//
// The lease is 900ms and the hold lasts 3 leases and a tenth: each renewal
// has 300ms to land before the next, and 600ms of the lease left. With a
// 300ms lease (100ms per renewal) a loaded machine lost the lock on
// miniredis, which runs the Lua in the test's process.
func testWatchdogKeeps(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const lease = 900 * time.Millisecond
	const kept = 3*lease + lease/10
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	backends.UnlockLater(t, l)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if w := c.Stats().Watched; w != 1 {
		t.Errorf("Stats.Watched = %d while held, want 1", w)
	}
	time.Sleep(kept)
	select {
	case <-l.Done():
		t.Fatalf("Done fired while the watchdog should keep the lock: %v", context.Cause(l.Context()))
	default:
	}
	if held, err := l.IsHeld(ctx); err != nil || !held {
		t.Fatalf("IsHeld after %v = %v, %v; want true", kept, held, err)
	}
	pttl, err := rdb.PTTL(ctx, name).Result()
	if err != nil || pttl <= 0 || pttl > lease {
		t.Errorf("PTTL after %v = %v, %v; want in (0, %v]", kept, pttl, err, lease)
	}
	if err := c.NewLock(name).TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock by another owner = %v, want ErrNotObtained", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if w := c.Stats().Watched; w != 0 {
		t.Errorf("Stats.Watched after Unlock = %d, want 0", w)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrNotHeld) {
		t.Errorf("cause after Unlock = %v, want ErrNotHeld", cause)
	}
	backends.NoKeys(t, rdb, name)
}

// Scenario 14: deleting the key from outside ends the hold with
// ErrLockLost within one renewal period + slack.
func testDeletedIsLost(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const lease = 300 * time.Millisecond
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	deleted := time.Now()
	if err := rdb.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
	backends.WaitDone(t, hold, 2*time.Second, "deleted key")
	elapsed := time.Since(deleted)
	t.Logf("Done fired %v after DEL (renewal period %v)", elapsed, lease/3)
	if limit := lease/3 + 100*time.Millisecond; elapsed > limit {
		t.Errorf("Done fired %v after DEL, want within %v", elapsed, limit)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("context.Cause = %v, want ErrLockLost", cause)
	}
	if w := c.Stats().Watched; w != 0 {
		t.Errorf("Stats.Watched after the loss = %d, want 0", w)
	}
	// Re-entry on a lost hold is refused, then Unlock reports the loss.
	if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("re-entry on a lost hold = %v, want ErrLockLost", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock of a lost hold = %v, want ErrLockLost", err)
	}
	// The handle starts afresh.
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock after the loss: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}
