package reentrant_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Scenario 1: the owner locks twice; another handle, of the same client or
// of another one, is refused until the owner's last Unlock.
func testReentrant(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	c := backends.NewClient(t, rdb, lualock.Options{})
	c2 := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	owner, other, remote := c.NewLock(name), c.NewLock(name), c2.NewLock(name)
	backends.UnlockLater(t, owner)
	backends.UnlockLater(t, other)

	if err := owner.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := owner.TryLock(ctx, 0); err != nil {
		t.Fatalf("re-entry TryLock: %v", err)
	}
	if err := owner.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("re-entry LockLease: %v", err)
	}
	if n := backends.Holds(t, ctx, owner); n != 3 {
		t.Fatalf("hold count after three acquisitions = %d, want 3", n)
	}
	for _, l := range []*lualock.Lock{other, remote} {
		if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("TryLock by another owner = %v, want ErrNotObtained", err)
		}
		if err := l.TryLockLease(ctx, 0, time.Second); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("TryLockLease by another owner = %v, want ErrNotObtained", err)
		}
	}
	for i := range 3 {
		if err := owner.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %d: %v", i+1, err)
		}
		if i < 2 {
			if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
				t.Fatalf("TryLock by another owner after %d unlocks = %v, want ErrNotObtained", i+1, err)
			}
		}
	}
	if err := owner.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Fatalf("fourth Unlock = %v, want ErrNotHeld", err)
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock by another owner after the last unlock: %v", err)
	}
	if err := owner.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock by the former owner = %v, want ErrNotObtained", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}

// Scenario 2: every handle sees the lock locked; only the owner holds it.
func testVisibility(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	c := backends.NewClient(t, rdb, lualock.Options{})
	c2 := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	owner, other, remote := c.NewLock(name), c.NewLock(name), c2.NewLock(name)
	backends.UnlockLater(t, owner)

	check := func(when string, locked, ownerHeld bool) {
		t.Helper()
		for _, h := range []struct {
			who  string
			l    *lualock.Lock
			held bool
		}{{"owner", owner, ownerHeld}, {"other handle", other, false}, {"other client", remote, false}} {
			gotLocked, err := h.l.IsLocked(ctx)
			if err != nil {
				t.Fatalf("%s: IsLocked: %v", when, err)
			}
			gotHeld, err := h.l.IsHeld(ctx)
			if err != nil {
				t.Fatalf("%s: IsHeld: %v", when, err)
			}
			if gotLocked != locked || gotHeld != h.held {
				t.Errorf("%s, %s: IsLocked=%v IsHeld=%v, want %v %v", when, h.who, gotLocked, gotHeld, locked, h.held)
			}
		}
	}
	check("before Lock", false, false)
	if err := owner.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	check("while held", true, true)
	if err := owner.Lock(ctx); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	check("while held twice", true, true)
	for range 2 {
		if err := owner.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	check("after Unlock", false, false)
}

// Scenario 3: the hold count goes 0, 1, 2, 1, 0, in Redis (one hash field
// C:H of the client's id) and as Status reports it.
func testHoldCount(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	c := backends.NewClient(t, rdb, lualock.Options{})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	backends.UnlockLater(t, l)
	other := c.NewLock(name)

	expect := func(want int) {
		t.Helper()
		st, err := l.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.Holds != want || st.Locked != (want > 0) {
			t.Fatalf("Status = %+v, want Holds %d, Locked %v", st, want, want > 0)
		}
		if n := backends.Holds(t, ctx, other); n != 0 {
			t.Fatalf("another handle's hold count = %d, want 0", n)
		}
		h, err := rdb.HGetAll(ctx, name).Result()
		if err != nil {
			t.Fatalf("HGETALL: %v", err)
		}
		if want == 0 {
			if len(h) != 0 {
				t.Fatalf("lock hash = %v, want no key", h)
			}
			return
		}
		if len(h) != 1 {
			t.Fatalf("lock hash = %v, want one owner field", h)
		}
		for f, v := range h {
			prefix := c.ID() + ":"
			if !strings.HasPrefix(f, prefix) {
				t.Errorf("owner field %q, want %q + holder id", f, prefix)
			} else if _, err := strconv.ParseInt(f[len(prefix):], 10, 64); err != nil {
				t.Errorf("owner field %q: holder id is not a decimal int64", f)
			}
			if v != strconv.Itoa(want) {
				t.Errorf("hold count in Redis = %s, want %d", v, want)
			}
		}
	}
	expect(0)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	expect(1)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	expect(2)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	expect(1)
	select {
	case <-l.Done():
		t.Fatal("Done fired while a hold remains")
	default:
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	expect(0)
	if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrNotHeld) {
		t.Fatalf("cause after the last Unlock = %v, want ErrNotHeld", cause)
	}
}

// Scenario 4: another handle force-unlocks; the owner's Done fires within
// a renewal period with ErrLockLost and its Unlock returns ErrLockLost; a
// waiter of another client is woken by the release message.
func testForceUnlock(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const lease = 300 * time.Millisecond
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	c2 := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	name := backends.UniqueName(t)
	owner, other, waiter := c.NewLock(name), c.NewLock(name), c2.NewLock(name)
	backends.UnlockLater(t, waiter)

	if err := owner.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := owner.Context()
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := waiter.Lock(ctx)
		got <- time.Now()
		errc <- err
	}()
	if !backends.Eventually(2*time.Second, func() bool { return c2.Stats().Waiters == 1 }) {
		t.Fatal("the waiter did not start waiting")
	}
	time.Sleep(50 * time.Millisecond) // let it go to sleep on its subscription

	forced := time.Now()
	ok, err := other.ForceUnlock(ctx)
	if err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
	}
	backends.WaitDone(t, hold, 2*time.Second, "force unlock")
	elapsed := time.Since(forced)
	t.Logf("owner's Done fired %v after the force unlock (renewal period %v)", elapsed, lease/3)
	if limit := lease/3 + 150*time.Millisecond; elapsed > limit {
		t.Errorf("owner's Done fired %v after the force unlock, want within a renewal period + slack (%v)", elapsed, limit)
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrLockLost", cause)
	}

	select {
	case at := <-got:
		if err := <-errc; err != nil {
			t.Fatalf("waiter's Lock: %v", err)
		}
		wake := at.Sub(forced)
		t.Logf("waiter acquired %v after the force unlock", wake)
		if wake > 200*time.Millisecond {
			t.Errorf("waiter acquired %v after the force unlock, want a prompt wake-up by the release message", wake)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the force unlock")
	}

	if err := owner.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("owner's Unlock after the force unlock = %v, want ErrLockLost", err)
	}
	if err := owner.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("owner's second Unlock = %v, want ErrNotHeld", err)
	}
	if n := backends.Holds(t, ctx, waiter); n != 1 {
		t.Errorf("waiter's hold count = %d, want 1: the owner's calls must not touch it", n)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatalf("waiter's Unlock: %v", err)
	}
	if ok, err := other.ForceUnlock(ctx); err != nil || ok {
		t.Errorf("ForceUnlock of a free lock = %v, %v; want false, nil", ok, err)
	}
	backends.NoKeys(t, rdb, name)
}
