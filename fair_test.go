package lualock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// fairMini starts a miniredis and a redis client on it for one test.
func fairMini(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// fairNew returns a client that the test's cleanup closes.
func fairNew(t *testing.T, rdb redis.UniversalClient) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fairCalls runs every method of a fair lock handle that reaches Redis and
// returns their errors by name.
func fairCalls(ctx context.Context, l *lualock.Lock) map[string]error {
	errs := map[string]error{}
	errs["Lock"] = l.Lock(ctx)
	errs["LockLease"] = l.LockLease(ctx, time.Second)
	errs["TryLock"] = l.TryLock(ctx, 0)
	errs["TryLockLease"] = l.TryLockLease(ctx, time.Second, time.Second)
	errs["Unlock"] = l.Unlock(ctx)
	_, errs["ForceUnlock"] = l.ForceUnlock(ctx)
	_, errs["Status"] = l.Status(ctx)
	_, errs["IsLocked"] = l.IsLocked(ctx)
	_, errs["IsHeld"] = l.IsHeld(ctx)
	_, errs["HoldCount"] = l.HoldCount(ctx)
	_, errs["RemainingLease"] = l.RemainingLease(ctx)
	return errs
}

// TestFairLock_Lock_invalidArguments: a bad name, lease or wait is
// ErrInvalid and nothing reaches Redis.
func TestFairLock_Lock_invalidArguments(t *testing.T) {
	t.Parallel()
	mr, rdb := fairMini(t)
	ctx := context.Background()
	if _, err := lualock.New(nil, lualock.Options{}); !errors.Is(err, lualock.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	if _, err := lualock.New(rdb, lualock.Options{FairWait: -time.Second}); !errors.Is(err, lualock.ErrInvalid) {
		t.Errorf("New with a negative FairWait = %v, want ErrInvalid", err)
	}
	c := fairNew(t, rdb)
	for _, name := range []string{"", strings.Repeat("n", 64<<10+1)} {
		for method, err := range fairCalls(ctx, c.NewFairLock(name)) {
			if !errors.Is(err, lualock.ErrInvalid) {
				t.Errorf("name of %d bytes: %s = %v, want ErrInvalid", len(name), method, err)
			}
		}
	}
	l := c.NewFairLock("fair-invalid")
	for what, err := range map[string]error{
		"LockLease(0)":             l.LockLease(ctx, 0),
		"LockLease(-1s)":           l.LockLease(ctx, -time.Second),
		"TryLock(-1s)":             l.TryLock(ctx, -time.Second),
		"TryLockLease(-1s, 1s)":    l.TryLockLease(ctx, -time.Second, time.Second),
		"TryLockLease(1s, 0)":      l.TryLockLease(ctx, time.Second, 0),
		"TryLockLease(1s, 0.5ms)":  l.TryLockLease(ctx, time.Second, 500*time.Microsecond),
		"TryLockLease(0, -1s)":     l.TryLockLease(ctx, 0, -time.Second),
		"LockLease(-1ns)":          l.LockLease(ctx, -1),
		"TryLockLease(-1ns, -1ns)": l.TryLockLease(ctx, -1, -1),
	} {
		if !errors.Is(err, lualock.ErrInvalid) {
			t.Errorf("%s = %v, want ErrInvalid", what, err)
		}
	}
	if n := mr.CommandCount(); n != 0 {
		t.Errorf("%d commands reached Redis, want none", n)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Errorf("keys in Redis: %q, want none", keys)
	}
}

// TestFairLock_Lock_afterClose: every call after Client.Close returns
// ErrClosed, for handles made before and after it, and sends nothing.
func TestFairLock_Lock_afterClose(t *testing.T) {
	t.Parallel()
	mr, rdb := fairMini(t)
	ctx := context.Background()
	c, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	before := c.NewFairLock("fair-closed")
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	for _, l := range []*lualock.Lock{before, c.NewFairLock("fair-closed")} {
		for method, err := range fairCalls(ctx, l) {
			if !errors.Is(err, lualock.ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", method, err)
			}
		}
	}
	if n := mr.CommandCount(); n != 0 {
		t.Errorf("%d commands reached Redis after Close, want none", n)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Errorf("keys in Redis: %q, want none", keys)
	}
}

// fairWaitQueue waits until the fair queue of name holds n waiters.
func fairWaitQueue(t *testing.T, rdb redis.UniversalClient, name string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := rdb.LRange(context.Background(), "redisson_lock_queue:{"+name+"}", 0, -1).Result()
		if err != nil {
			t.Fatalf("LRANGE: %v", err)
		}
		if len(q) == n {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %s is %q, want %d waiters", name, q, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fairClosed is what fairCloseWhileWaiting saw.
type fairClosed struct {
	err             error    // the waiter's Lock
	queue, timeouts []string // right after Lock returned
	field           string   // the waiter's owner field
	client          *lualock.Client
}

// fairCloseWhileWaiting queues a waiter of its own client behind a holder
// and closes the waiter's client while it waits.
func fairCloseWhileWaiting(t *testing.T, rdb redis.UniversalClient, name string) fairClosed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	holderC := fairNew(t, rdb)
	holder := holderC.NewFairLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("holder Lock: %v", err)
	}
	t.Cleanup(func() { _ = holder.Unlock(context.Background()) })
	wc, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = wc.Close() })
	type result struct {
		err             error
		queue, timeouts []string
	}
	res := make(chan result, 1)
	go func() {
		err := wc.NewFairLock(name).Lock(ctx)
		bg := context.Background()
		q, _ := rdb.LRange(bg, "redisson_lock_queue:{"+name+"}", 0, -1).Result()
		z, _ := rdb.ZRange(bg, "redisson_lock_timeout:{"+name+"}", 0, -1).Result()
		res <- result{err, q, z}
	}()
	field := fairWaitQueue(t, rdb, name, 1)[0]
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- wc.Close() }()
	var r result
	select {
	case r = <-res:
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter did not return within 5s of Close")
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	return fairClosed{err: r.err, queue: r.queue, timeouts: r.timeouts, field: field, client: wc}
}

// TestFairLock_Lock_clientClosed: closing the client of a waiting fair lock
// makes the wait return ErrClosed, out of the queue and the deadline set.
func TestFairLock_Lock_clientClosed(t *testing.T) {
	t.Parallel()
	_, rdb := fairMini(t)
	name := "fair-close-waiter"
	r := fairCloseWhileWaiting(t, rdb, name)
	if !errors.Is(r.err, lualock.ErrClosed) {
		t.Errorf("Lock = %v, want ErrClosed", r.err)
	}
	if slices.Contains(r.queue, r.field) || slices.Contains(r.timeouts, r.field) {
		t.Errorf("waiter %s still queued after Close: queue %q, deadlines %q", r.field, r.queue, r.timeouts)
	}
}

// TestFairLock_Lock_clientClosedStats: once Close has returned, its
// client reports no waiter, no subscription and no pub/sub connection.
func TestFairLock_Lock_clientClosedStats(t *testing.T) {
	t.Parallel()
	_, rdb := fairMini(t)
	r := fairCloseWhileWaiting(t, rdb, "fair-close-stats")
	if s := r.client.Stats(); s != (lualock.Stats{}) {
		t.Errorf("Stats() after Close = %+v, want all zero", s)
	}
}

// TestClient_NewFairLockWait_budget: a fair lock made with its own wait
// budget queues its waiters with that budget (the deadline is the lock's
// remaining lease plus the budget), not Options.FairWait; a budget under
// 500ms is ErrInvalid and sends nothing to Redis.
func TestClient_NewFairLockWait_budget(t *testing.T) {
	ctx := t.Context()
	mr, rdb := fairMini(t)
	c := fairNew(t, rdb) // Options.FairWait: the default 5 minutes
	const name = "own-budget"
	holder := c.NewFairLockWait(name, 2*time.Second)
	if err := holder.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	waiter := c.NewFairLockWait(name, 2*time.Second)
	done := make(chan error, 1)
	go func() { done <- waiter.TryLock(ctx, 300*time.Millisecond) }()
	q := fairWaitQueue(t, rdb, name, 1)
	score, err := rdb.ZScore(ctx, "redisson_lock_timeout:{"+name+"}", q[0]).Result()
	if err != nil {
		t.Fatalf("ZSCORE: %v", err)
	}
	now := time.Now().UnixMilli()
	if d := int64(score) - now; d < 11_000 || d > 12_100 {
		t.Errorf("waiter's deadline is %dms from now, want the lease (10s) + its budget (2s)", d)
	}
	if err := <-done; !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock = %v, want ErrNotObtained", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	lkSettled(t, mr)
	before := mr.CommandCount()
	bad := c.NewFairLockWait(name, 100*time.Millisecond)
	for what, err := range lkCalls(ctx, bad) {
		if !errors.Is(err, lualock.ErrInvalid) {
			t.Errorf("%s with a 100ms budget = %v, want ErrInvalid", what, err)
		}
	}
	if n := mr.CommandCount() - before; n != 0 {
		t.Errorf("%d commands reached Redis for a handle with a bad budget", n)
	}
}

// Two calls of one fair handle wait as one owner in one place of the queue:
// when one gives up, the other keeps that place and is served before the
// waiters that queued after the handle.
func TestFairLock_TryLock_sharedHandleKeepsPlace(t *testing.T) {
	ctx := t.Context()
	_, rdb := fairMini(t)
	c := fairNew(t, rdb)
	const name = "shared-handle"
	holder := c.NewFairLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("holder Lock: %v", err)
	}
	shared, later := c.NewFairLock(name), c.NewFairLock(name)
	first := make(chan error, 1)
	go func() { first <- shared.Lock(ctx) }()
	fairWaitQueue(t, rdb, name, 1)
	laterDone := make(chan error, 1)
	go func() { laterDone <- later.Lock(ctx) }()
	q := fairWaitQueue(t, rdb, name, 2)

	// A second call of the shared handle gives up. Its wait is long enough
	// for the attempt's reply on a loaded machine (miniredis under -race):
	// a wait that ends before the reply reports that Redis did not answer.
	if err := shared.TryLock(ctx, time.Second); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("second call of the shared handle: %v, want ErrNotObtained", err)
	}
	if now := fairWaitQueue(t, rdb, name, 2); now[0] != q[0] || now[1] != q[1] {
		t.Fatalf("queue after the shared handle's second call gave up: %q, want %q", now, q)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("holder Unlock: %v", err)
	}
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("shared handle's first call: %v", err)
		}
	case err := <-laterDone:
		t.Fatalf("the waiter queued after the shared handle got the lock first (%v)", err)
	case <-time.After(5 * time.Second):
		t.Fatal("nobody got the lock within 5s of the release")
	}
	if err := shared.Unlock(ctx); err != nil {
		t.Fatalf("shared Unlock: %v", err)
	}
	if err := <-laterDone; err != nil {
		t.Fatalf("later Lock: %v", err)
	}
	if err := later.Unlock(ctx); err != nil {
		t.Fatalf("later Unlock: %v", err)
	}
}
