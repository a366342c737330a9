package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// heldReplies is a go-redis hook that, while armed, holds back the reply
// of one script's EVALSHA that ran (not a NOSCRIPT nor another error)
// until until() holds (it polls it), or for at most limit.
type heldReplies struct {
	backends.PassHook
	sha      string
	until    func() bool
	limit    time.Duration
	armed    atomic.Bool
	timedOut atomic.Bool // a reply was let go at limit, until() still false
}

func (h *heldReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err == nil && h.armed.Load() && len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && args[1] == h.sha {
			if !backends.Eventually(h.limit, h.until) {
				h.timedOut.Store(true)
			}
		}
		return err
	}
}

// An Unlock racing the watchdog (Redisson #7272): the release has deleted
// the lock but its reply is still on the way when a renewal finds the lock
// gone. That is a normal Unlock, not a loss: Unlock returns nil, the hold
// ends with ErrNotHeld, and the handle can lock again.
//
// The release's reply is held back until the watchdog has dropped the
// lock, which during a release only a renewal finding it gone does: the
// race happens in every round by construction, not by timing. The lease
// is long (a renewal every second) so that the renewal that finds the lock
// gone lands long before the lease, counted from the last renewal that
// found it held, runs out by the client's clock: that Expired would end
// the hold with a loss whatever the release's reply, and on a loaded
// machine a 150ms lease left only tens of milliseconds for it.
func testUnlockRacesRenewal(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const lease = 3 * time.Second
	var c *lualock.Client
	var renewals atomic.Int64 // renewal calls answered, errors apart
	held := &heldReplies{
		sha:   generated.LockReleaseSHA1,
		until: func() bool { return c.Stats().Watched == 0 },
		limit: 5 * lease,
	}
	c = backends.NewClient(t, backends.Hooked(t, rdb, held), lualock.Options{
		WatchdogLease: lease,
		Observer: lualock.Observer{Renew: func(e lualock.RenewEvent) {
			if e.Err == nil {
				renewals.Add(1)
			}
		}},
	})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	backends.UnlockLater(t, l)
	for round := 1; round <= 3; round++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("round %d: Lock after a normal Unlock: %v", round, err)
		}
		hold := l.Context()
		before := renewals.Load()
		held.armed.Store(true)
		err := l.Unlock(ctx) // the reply comes back once a renewal found the lock gone
		held.armed.Store(false)
		if err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		if held.timedOut.Load() {
			t.Fatalf("round %d: the watchdog still renewed the lock %v after its release ran", round, held.limit)
		}
		if n := renewals.Load() - before; n < 1 {
			t.Fatalf("round %d: %d renewal calls answered during the release, want at least 1 (the one that found the lock gone)", round, n)
		}
		if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) {
			t.Errorf("round %d: cause after a normal Unlock = %v, want ErrNotHeld", round, cause)
		}
		if w := c.Stats().Watched; w != 0 {
			t.Errorf("round %d: Stats.Watched after Unlock = %d, want 0", round, w)
		}
	}
	backends.NoKeys(t, rdb, name)
}

// Scenario 18: a release or an acquisition that ran but whose reply was
// lost, sent again (by the script runner's retry or by the caller), must
// not release twice nor count a re-entry twice.
func testLostReplies(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	name := backends.UniqueName(t)
	release := &backends.LoseReplies{SHA: generated.LockReleaseSHA1}
	acquire := &backends.LoseReplies{SHA: generated.LockAcquireSHA1}
	hooked := backends.Hooked(t, rdb, release)
	hooked.AddHook(acquire)
	c := backends.NewClient(t, hooked, lualock.Options{})
	l := c.NewLock(name)
	backends.UnlockLater(t, l)
	other := backends.NewClient(t, rdb, lualock.Options{}).NewLock(name)

	// First acquisition and a re-entry, each with its first reply lost.
	for want := 1; want <= 2; want++ {
		acquire.Left.Store(1)
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock %d with a lost reply: %v", want, err)
		}
		if acquire.Lost.Load() != int32(want) {
			t.Fatalf("the hook lost %d replies, want %d", acquire.Lost.Load(), want)
		}
		if n := backends.Holds(t, ctx, l); n != want {
			t.Fatalf("hold count after acquisition %d with a lost reply = %d, want %d", want, n, want)
		}
	}

	// A release whose first reply is lost: the runner sends it again.
	release.Left.Store(1)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a lost reply: %v", err)
	}
	if release.Lost.Load() != 1 {
		t.Fatalf("the hook lost %d replies, want 1", release.Lost.Load())
	}
	if n := backends.Holds(t, ctx, l); n != 1 {
		t.Fatalf("hold count after one Unlock with a lost reply = %d, want 1 (released twice?)", n)
	}
	if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock by another owner = %v, want ErrNotObtained", err)
	}

	// Every reply of one Unlock lost: the caller sees the error and calls
	// Unlock again, which replays the outcome instead of releasing again.
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	release.Left.Store(100)
	err := l.Unlock(ctx)
	lost := release.Lost.Load() - 1
	release.Left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
	}
	t.Logf("one Unlock sent the release %d times, each reply lost", lost)
	if n := backends.Holds(t, ctx, l); n != 1 {
		t.Fatalf("hold count after an Unlock sent %d times = %d, want 1", lost, n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock sent again: %v", err)
	}
	if n := backends.Holds(t, ctx, l); n != 1 {
		t.Fatalf("hold count after the replayed Unlock = %d, want 1", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("last Unlock: %v", err)
	}
	if n := backends.Holds(t, ctx, l); n != 0 {
		t.Fatalf("hold count after the last Unlock = %d, want 0", n)
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock after the last Unlock: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// A first acquisition with every reply lost: nothing may stay locked.
	acquire.Left.Store(100)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.Lock(actx)
	cancel()
	acquire.Left.Store(0)
	if err == nil {
		t.Fatal("Lock with every reply lost succeeded")
	}
	if !backends.Eventually(time.Second, func() bool { return backends.Holds(t, ctx, l) == 0 }) {
		t.Errorf("hold count after a failed Lock = %d, want 0", backends.Holds(t, ctx, l))
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock after a failed Lock = %v, want ErrNotHeld", err)
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock after a failed Lock of another handle: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// An Unlock with every reply lost, then a re-entry instead of another
	// Unlock: the re-entry settles the pending release first (it did
	// happen), so it is counted from the right hold count.
	for want := 1; want <= 2; want++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock %d: %v", want, err)
		}
	}
	release.Left.Store(100)
	err = l.Unlock(ctx)
	release.Left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("re-entry after an Unlock with an unknown outcome: %v", err)
	}
	if n := backends.Holds(t, ctx, l); n != 2 {
		t.Fatalf("hold count after the re-entry = %d, want 2 (1 left by the lost Unlock, +1)", n)
	}
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Fatalf("Unlock past the last hold = %v, want ErrNotHeld", err)
	}
	backends.NoKeys(t, rdb, name)
}

// testSettlesUnlockPastLatch: an Unlock of one of two holds runs
// in Redis but every reply is lost; the caller stays in its outer hold
// longer than the unlock latch lives, then re-enters. The re-entry settles
// the pending release without releasing a second hold (the release script
// checks the hold count past the latch): the lock stays held with 2 holds
// and no other owner gets in.
func testSettlesUnlockPastLatch(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	ctx := t.Context()
	lose := &backends.LoseReplies{SHA: generated.LockReleaseSHA1}
	c := backends.NewClient(t, backends.Hooked(t, rdb, lose), lualock.Options{UnlockLatch: 100 * time.Millisecond})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	other := backends.NewClient(t, rdb, lualock.Options{}).NewLock(name)
	for range 2 {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
	}
	lose.Left.Store(1000)
	err := l.Unlock(ctx)
	lose.Left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
	}
	// Inside the outer hold, past the latch: its key is gone.
	backends.WaitFor(t, "condition", 2*time.Second, func() bool { return slices.Equal(backends.KeysLeft(t, rdb, name, true), []string{name}) })
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("re-entry after the lost Unlock: %v", err)
	}
	if n := backends.Holds(t, ctx, l); n != 2 {
		t.Fatalf("hold count after the re-entry = %d, want 2 (the pending release counted once)", n)
	}
	if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("another owner's TryLock = %v, want ErrNotObtained", err)
	}
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock after the last Unlock: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}

// testReentryIntoLostHold: with two holds, an Unlock fails before
// reaching Redis and the lock is then deleted from outside. The re-entry
// settles the pending Unlock, finds the hold lost and returns ErrLockLost,
// as a re-entry without a pending Unlock does; the remaining hold's Unlock
// returns ErrLockLost too, and only then ErrNotHeld.
func testReentryIntoLostHold(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	ctx := t.Context()
	drop := &backends.FailScript{SHA: generated.LockReleaseSHA1, Err: io.EOF}
	c := backends.NewClient(t, backends.Hooked(t, rdb, drop), lualock.Options{})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	for range 2 {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
	}
	hold := l.Context()
	drop.Armed.Store(true)
	err := l.Unlock(ctx)
	drop.Armed.Store(false)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock that never reached Redis = %v, want io.EOF", err)
	}
	if err := rdb.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Lock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Fatalf("re-entry into the deleted hold = %v, want ErrLockLost", err)
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("hold's cause = %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock of the remaining hold = %v, want ErrLockLost", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock past the holds = %v, want ErrNotHeld", err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock afresh: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}
