package fair_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 1: FIFO order, one client and one client per goroutine.

// TestFairLock_Lock_fifoOrder: waiters that arrive one after the other
// while the lock is held get it in their order of arrival. 2×NumCPU
// goroutines (at least 8) start 10ms apart, each once the one before is
// queued, each with its own handle on one shared client. Redisson's test
// holds for 1s; here each holder holds 50ms.
func TestFairLock_Lock_fifoOrder(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		checkOrdering(t, rdb, false)
	})
}

// TestFairLock_Lock_fifoOrderMultiInstance is fifoOrder with one Client
// per goroutine, as separate processes would have.
func TestFairLock_Lock_fifoOrderMultiInstance(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		checkOrdering(t, rdb, true)
	})
}

func checkOrdering(t *testing.T, rdb redis.UniversalClient, clientEach bool) {
	n := max(2*runtime.NumCPU(), 8)
	const hold = 50 * time.Millisecond
	name := backends.UniqueName(t)
	k := keysOf(name)
	base := newClient(t, rdb, lualock.Options{})
	clients := []*lualock.Client{base}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	first := base.NewFairLock(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatalf("first Lock: %v", err)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		order  []int
		inside atomic.Bool
		errs   errList
	)
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		c := base
		if clientEach {
			c = newClient(t, rdb, lualock.Options{})
			clients = append(clients, c)
		}
		l := c.NewFairLock(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Lock(ctx); err != nil {
				errs.add("waiter %d: Lock: %w", i, err)
				return
			}
			if !inside.CompareAndSwap(false, true) {
				errs.add("waiter %d: got the lock while another goroutine held it", i)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(hold)
			inside.Store(false)
			if err := l.Unlock(context.Background()); err != nil {
				errs.add("waiter %d: Unlock: %w", i, err)
			}
		}()
		waitQueued(t, rdb, k, i+1) // waiter i has arrived
		time.Sleep(10 * time.Millisecond)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatalf("first Unlock: %v", err)
	}
	wg.Wait()
	errs.report(t)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(order, want) {
		t.Errorf("acquisition order %v, want the order of arrival %v", order, want)
	}
	checkClean(t, rdb, name, time.Second, clients...)
}

// ---------------------------------------------------------------------------
// Scenario 2: waiters that never unlock get the lock in order as the
// leases run out (Redisson's testLeaseTimeout, with its 1s lease).

// TestFairLock_TryLockLease_leaseExpiryOrder: 8 waiters arrive one after
// the other (each once the one before holds the lock or is queued, and at
// least 100ms apart), each TryLockLease(10s wait, 1s lease) without ever
// unlocking. Nobody announces a lease that runs out, so each new head must
// find out by its timer; all 8 must get the lock, in order, within their
// 10s wait, and none within its predecessor's lease. That gap is read from
// the waiters' clocks after Lock returned, so a predecessor whose return
// came late shortens it: the 50ms allowance grows by a wake-up and a round
// trip to Redis as a canary measured them in the same test.
func TestFairLock_TryLockLease_leaseExpiryOrder(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		const (
			n     = 8
			lease = time.Second
			wait  = 10 * time.Second
		)
		name := backends.UniqueName(t)
		c := newClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			order []int
			at    []time.Duration
			errs  errList
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
		k := keysOf(name)
		start := time.Now()
		for i := range n {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.TryLockLease(ctx, wait, lease); err != nil {
					errs.add("waiter %d: TryLockLease after %v: %w", i, time.Since(start).Round(time.Millisecond), err)
					return
				}
				mu.Lock()
				order = append(order, i)
				at = append(at, time.Since(start).Round(time.Millisecond))
				mu.Unlock()
			}()
			// The next waiter arrives once this one holds the lock or is
			// queued (read the holders first: one that got the lock has
			// left the queue by then, so none is counted twice).
			arrived := time.Now()
			backends.WaitFor(t, fmt.Sprintf("waiter %d holds the lock or is queued", i), wait, func() bool {
				mu.Lock()
				in := len(order)
				mu.Unlock()
				q, err := rdb.LLen(context.Background(), k.queue).Result()
				return err == nil && in+int(q) == i+1
			})
			time.Sleep(100*time.Millisecond - time.Since(arrived))
		}
		wg.Wait()
		errs.report(t)
		late := canary.Allowance(1, 1)
		t.Logf("acquired %v at %v; %v", order, at, canary)
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
			t.Errorf("acquisition order %v, want %v", order, want)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < lease-50*time.Millisecond-late {
				t.Errorf("acquisition %d came %v after the one before, within its %v lease (allowance 50ms + %v for the load)", i, gap, lease, late)
			}
		}
		checkClean(t, rdb, name, 2*lease, c)
	})
}

// ---------------------------------------------------------------------------
// Scenario 3: many goroutines (Redisson's testMultipleLocks).

// TestFairLock_LockLease_manyWaiters: 500 goroutines, each with its own
// handle, LockLease(5s), hold 2ms (Redisson: 200ms) and unlock. All succeed
// and none overlaps: the counter is read, then written after the hold, so
// two holders at once would lose an increment (atomic loads and stores keep
// the race detector quiet: it cannot see the ordering that Redis gives).
//
// On miniredis 200 goroutines: every handoff rewrites every waiter's
// deadline, and miniredis runs that Lua (gopher-lua, under -race) so slowly
// that 500 waiters take 10-20s and its replies can pass go-redis's 3s read
// timeout.
// -short: 100 goroutines (miniredis: 50).
func TestFairLock_LockLease_manyWaiters(t *testing.T) {
	backends.ShortParallel(t)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		const hold = 2 * time.Millisecond
		n := backends.Scale(500, 100)
		if b.Name == "miniredis" {
			n = backends.Scale(200, 50)
		}
		name := backends.UniqueName(t)
		c := newClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var (
			wg       sync.WaitGroup
			counter  atomic.Int64
			inside   atomic.Bool
			overlaps atomic.Int64
			errs     errList
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		start := time.Now()
		for i := range n {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.LockLease(ctx, 5*time.Second); err != nil {
					errs.add("goroutine %d: LockLease: %w", i, err)
					return
				}
				if !inside.CompareAndSwap(false, true) {
					overlaps.Add(1)
				}
				got := time.Now()
				v := counter.Load()
				time.Sleep(hold)
				counter.Store(v + 1)
				inside.Store(false)
				if err := l.Unlock(context.Background()); err != nil {
					errs.add("goroutine %d: Unlock %v after it got the lock (%v after the start): %w",
						i, time.Since(got).Round(time.Millisecond), got.Sub(start).Round(time.Millisecond), err)
				}
			}()
		}
		wg.Wait()
		t.Logf("%d goroutines done in %v", n, time.Since(start).Round(time.Millisecond))
		errs.report(t)
		if got := overlaps.Load(); got != 0 {
			t.Errorf("%d acquisitions while another goroutine held the lock", got)
		}
		if got := counter.Load(); got != int64(n) {
			t.Errorf("counter = %d, want %d", got, n)
		}
		checkClean(t, rdb, name, time.Second, c)
	})
}
