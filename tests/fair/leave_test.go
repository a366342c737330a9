package fair_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 6: a cancelled waiter leaves the queue before Lock returns.

// TestFairLock_Lock_cancelLeavesQueue: when the context of a waiting Lock
// ends (cancelled, or its deadline passed), the waiter is out of the queue
// and the deadline set as soon as Lock returns, with no polling.
func TestFairLock_Lock_cancelLeavesQueue(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{})
		ctx := context.Background()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		type result struct {
			err   error
			snap  queueSnap
			serr  error
			stats lualock.Stats
		}
		// The waiters that give up have a client of their own, so that its
		// Stats show their subscriptions only.
		wc := newClient(t, rdb, lualock.Options{})
		// behind stays queued behind the waiters that give up.
		behind := c.NewFairLock(name)
		behindCtx, cancelBehind := context.WithCancel(ctx)
		defer cancelBehind()
		behindErr := make(chan error, 1)
		go func() { behindErr <- behind.Lock(behindCtx) }()
		waitQueued(t, rdb, k, 1)

		for _, how := range []string{"cancel", "deadline"} {
			var wctx context.Context
			var cancel context.CancelFunc
			if how == "deadline" {
				wctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			} else {
				wctx, cancel = context.WithCancel(ctx)
			}
			w := wc.NewFairLock(name)
			res := make(chan result, 1)
			go func() {
				err := w.Lock(wctx)
				s, serr := takeSnapshot(context.Background(), rdb, k) // right after the return
				res <- result{err, s, serr, wc.Stats()}
			}()
			q := waitQueued(t, rdb, k, 2)
			field := q[1]
			if how == "cancel" {
				time.Sleep(100 * time.Millisecond)
				cancel()
			}
			r := <-res
			cancel()
			want := context.Canceled
			if how == "deadline" {
				want = context.DeadlineExceeded
			}
			if !errors.Is(r.err, want) {
				t.Errorf("%s: Lock = %v, want %v", how, r.err, want)
			}
			if r.serr != nil {
				t.Fatalf("%s: snapshot: %v", how, r.serr)
			}
			if slices.Contains(r.snap.queue, field) {
				t.Errorf("%s: waiter %s still in the queue %q when Lock returned", how, field, r.snap.queue)
			}
			if _, ok := r.snap.scores[field]; ok {
				t.Errorf("%s: waiter %s still has a deadline when Lock returned", how, field)
			}
			if r.stats.Subscriptions != 0 || r.stats.Waiters != 0 {
				t.Errorf("%s: Stats() = %+v when Lock returned, want no waiter and no subscription", how, r.stats)
			}
			if len(r.snap.queue) != 1 || len(r.snap.scores) != 1 {
				t.Errorf("%s: queue %q, deadlines %v; want the other waiter only", how, r.snap.queue, r.snap.scores)
			}
		}
		cancelBehind()
		if err := <-behindErr; !errors.Is(err, context.Canceled) {
			t.Errorf("behind: Lock = %v, want context.Canceled", err)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("holder Unlock: %v", err)
		}
		checkClean(t, rdb, name, time.Second, c, wc)
	})
}

// TestFairLock_Lock_closeLeavesQueue: Client.Close wakes a waiting fair
// Lock with ErrClosed, and once Close has returned the waiter is out of the
// queue and the deadline set (the give-up runs before Close returns).
func TestFairLock_Lock_closeLeavesQueue(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{})
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		wc, err := lualock.New(rdb, lualock.Options{UnlockLatch: testLatch})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		waitErr := make(chan error, 1)
		go func() { waitErr <- wc.NewFairLock(name).Lock(ctx) }()
		field := waitQueued(t, rdb, k, 1)[0]
		if err := wc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		snap := mustSnapshot(t, rdb, k)
		if len(snap.queue) != 0 || len(snap.scores) != 0 {
			t.Errorf("after Close: queue %q, deadlines %v; want waiter %s gone from both", snap.queue, snap.scores, field)
		}
		select {
		case err := <-waitErr:
			if !errors.Is(err, lualock.ErrClosed) {
				t.Errorf("waiting Lock = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting Lock did not return after Close")
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		checkClean(t, rdb, name, time.Second, c)
	})
}

// TestFairLock_Lock_errorLeavesQueue: a queued waiter whose next attempt
// fails with a Redis error that is not transient returns that error, and
// it is out of the queue and the deadline set when Lock returns; the
// waiter behind it moves up one place and later gets the lock.
func TestFairLock_Lock_errorLeavesQueue(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{FairWait: 10 * time.Second})
		holder := c.NewFairLock(name)
		// A fixed lease: a watchdog renewal between the waiters' calls
		// would move the deadlines this test compares.
		if err := holder.LockLease(ctx, time.Minute); err != nil {
			t.Fatalf("holder LockLease: %v", err)
		}
		hook := &backends.FailScript{SHA: generated.FairAcquireSHA1, Err: backends.RedisErr("ERR injected: the server refused the call")}
		fc := newClient(t, backends.Hooked(t, rdb, hook), lualock.Options{FairWait: 10 * time.Second})
		failing := fc.NewFairLock(name)
		failed := make(chan error, 1)
		go func() { failed <- failing.Lock(ctx) }()
		q := waitQueued(t, rdb, k, 1)
		hook.Field = q[0]
		behind := c.NewFairLock(name)
		behindErr := make(chan error, 1)
		go func() { behindErr <- behind.Lock(ctx) }()
		waitQueued(t, rdb, k, 2)
		before := mustSnapshot(t, rdb, k)

		// Arm, then wake the failing waiter: its next attempt fails. A
		// cluster client listens on sharded channels (PubSubAuto), which a
		// plain PUBLISH does not reach: the waiter would only try again at
		// its fallback timer, about as late as this test waits.
		hook.Armed.Store(true)
		publish := rdb.Publish
		if b.Cluster {
			publish = rdb.SPublish
		}
		if err := publish(ctx, k.waiterChannel(hook.Field), "0").Err(); err != nil {
			t.Fatalf("PUBLISH: %v", err)
		}
		var err error
		select {
		case err = <-failed:
		case <-time.After(5 * time.Second):
			t.Fatal("the failing waiter's Lock did not return")
		}
		snap := mustSnapshot(t, rdb, k)
		if !strings.Contains(fmt.Sprint(err), "injected") || hook.Hits.Load() == 0 {
			t.Errorf("Lock = %v after %d injected errors, want the injected error", err, hook.Hits.Load())
		}
		if slices.Contains(snap.queue, hook.Field) {
			t.Errorf("queue %q still holds the waiter whose Lock failed", snap.queue)
		}
		if _, ok := snap.scores[hook.Field]; ok {
			t.Errorf("deadlines %v still hold the waiter whose Lock failed", snap.scores)
		}
		// The waiter behind became the head, so fair_leave woke it, and it
		// may have asked again before the snapshot: that renews its deadline
		// to now + PTTL + budget, the same instant up to the millisecond
		// rounding of TIME and PTTL (CI saw 1 ms either way).
		other := before.queue[1]
		tol := int64(roundingMs)
		if b.Mini() {
			tol = miniClockMs
		}
		if got, want := snap.scores[other], before.scores[other]-10_000; got < want-tol || got > want+tol {
			t.Errorf("the waiter behind: deadline %d after the other left, want %d ± %d ms (one budget sooner)", got, want, tol)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		if err := <-behindErr; err != nil {
			t.Fatalf("the waiter behind: %v", err)
		}
		if err := behind.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		checkClean(t, rdb, name, time.Second, c, fc)
	})
}
