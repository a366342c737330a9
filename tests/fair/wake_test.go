package fair_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 7: no hot loop behind a dead waiter.

// acquireCalls counts the acquire script calls of one client's owner
// fields (prefix).
func acquireCalls(prefix string) *backends.CountCalls {
	return &backends.CountCalls{Match: func(a []any) bool {
		// EVALSHA sha 4 lock queue timeouts channel lease field ...
		return len(a) > 8 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") && fmt.Sprint(a[1]) == generated.FairAcquireSHA1 &&
			strings.HasPrefix(fmt.Sprint(a[8]), prefix)
	}}
}

// newClientID returns a client id of the test's own, to set in Options
// before the client exists.
func newClientID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// TestFairLock_Lock_noPollBehindStaleWaiter: a live waiter queued behind a
// stale waiter that is not the head (so nobody purges it yet) while the
// lock stays held waits for the lock's remaining lease between its calls,
// about one call per lease; it used to be told 1ms and poll four times a
// second. The holder's watchdog lease is 5s: with 1s, and then 2s, a
// loaded machine lost the holder's lock on miniredis (whose Lua runs in
// the test's process, so a starved process renews late). The bound is two
// calls per lease over a window longer than the lease: at most 2 calls,
// where the old polling made about 24.
func TestFairLock_Lock_noPollBehindStaleWaiter(t *testing.T) {
	t.Parallel()
	const (
		window = 6 * time.Second
		lease  = 5 * time.Second // the holder's
	)
	maxRate := 2 / lease.Seconds() // calls per second: two per lease
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := backends.UniqueName(t)
		k := keysOf(name)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// Added before the clients: the hooks added after a client do not
		// see its script calls (they go on its pipelined connection).
		liveID := newClientID(t)
		hook := acquireCalls(liveID + ":")
		rdb.AddHook(hook)
		others := newClient(t, rdb, lualock.Options{WatchdogLease: lease})
		liveC := newClient(t, rdb, lualock.Options{ClientID: liveID})

		holder, head := others.NewFairLock(name), others.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		headDone := make(chan error, 1)
		go func() { headDone <- head.Lock(ctx) }()
		waitQueued(t, rdb, k, 1)
		if r, err := fairAcquire(ctx, rdb, k, "stale:1", time.Second.Milliseconds(), lualock.Options{}.FairWait.Milliseconds()+300_000); err != nil || r == nil {
			t.Fatalf("stale waiter queues = %v, %v", ptrString(r), err)
		}
		live := liveC.NewFairLock(name)
		done := make(chan error, 1)
		go func() { done <- live.Lock(ctx) }()
		waitQueued(t, rdb, k, 3)
		// The stale one goes stale once the live one is queued behind it (a
		// stale waiter at the back is trimmed off when a newcomer joins).
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "stale:1"}).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the first attempts
		before := hook.N.Load()
		if before == 0 {
			t.Fatal("the hook saw none of the live waiter's calls")
		}
		time.Sleep(window)
		calls := hook.N.Load() - before
		t.Logf("live waiter behind a stale one: %d acquire calls in %v", calls, window)
		if rate := float64(calls) / window.Seconds(); rate > maxRate {
			t.Errorf("live waiter called the acquire script %d times in %v (%.1f/s), want at most %.1f/s (two per lease)", calls, window, rate, maxRate)
		}
		// Hand on: head, then (the stale one purged) live.
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		if err := <-headDone; err != nil {
			t.Fatalf("head Lock: %v", err)
		}
		if err := head.Unlock(ctx); err != nil {
			t.Fatalf("head Unlock: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("live Lock: %v", err)
		}
		if err := live.Unlock(ctx); err != nil {
			t.Errorf("live Unlock: %v", err)
		}
		checkClean(t, rdb, name, time.Second, others, liveC)
	})
}

// TestFairLock_Lock_noSpinBehindDeadWaiter: a live waiter queued behind a
// dead one, with the lock free, calls the acquire script a handful of times
// per second at most while it waits for the dead one's deadline; and so
// does a head that is told "wait 0" (the lock held by a foreign owner
// without an expiry).
func TestFairLock_Lock_noSpinBehindDeadWaiter(t *testing.T) {
	t.Parallel()
	const (
		window  = 2 * time.Second
		maxRate = 5 // calls per second
	)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		for _, noExpiry := range []bool{false, true} {
			sub := "deadHead"
			if noExpiry {
				sub = "lockWithoutExpiry"
			}
			t.Run(sub, func(t *testing.T) {
				name := backends.UniqueName(t)
				k := keysOf(name)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				liveID := newClientID(t)
				hook := acquireCalls(liveID + ":")
				rdb.AddHook(hook) // before the client, which then sees its calls
				other := newClient(t, rdb, lualock.Options{WatchdogLease: time.Second})
				liveC := newClient(t, rdb, lualock.Options{ClientID: liveID})

				holder := other.NewFairLock(name)
				if noExpiry {
					// A foreign owner holds the lock with no expiry: the head is told to wait 0.
					if err := rdb.HSet(ctx, name, "foreign:1", 1).Err(); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := holder.Lock(ctx); err != nil {
						t.Fatalf("holder Lock: %v", err)
					}
					// The dead waiter's deadline: about 1s (the holder's lease) + 2.5s from now.
					if r, err := fairAcquire(ctx, rdb, k, "dead:1", time.Second.Milliseconds(), 2500); err != nil || r == nil {
						t.Fatalf("dead waiter acquire = %v, %v; want a wait", ptrString(r), err)
					}
				}
				live := liveC.NewFairLock(name)
				done := make(chan error, 1)
				go func() { done <- live.Lock(ctx) }()
				want := 2
				if noExpiry {
					want = 1
				}
				waitQueued(t, rdb, k, want)
				if !noExpiry {
					if err := holder.Unlock(ctx); err != nil {
						t.Fatalf("holder Unlock: %v", err)
					}
				}
				time.Sleep(50 * time.Millisecond) // let the calls of the first attempts pass
				before := hook.N.Load()
				if before == 0 {
					t.Fatal("the hook saw none of the live waiter's calls")
				}
				time.Sleep(window)
				calls := hook.N.Load() - before
				rate := float64(calls) / window.Seconds()
				t.Logf("live waiter: %d acquire calls in %v", calls, window)
				if rate > maxRate {
					t.Errorf("live waiter called the acquire script %d times in %v (%.1f/s), want at most %d/s", calls, window, rate, maxRate)
				}
				select {
				case err := <-done:
					t.Fatalf("live waiter returned early: %v", err)
				default:
				}
				if noExpiry {
					// Force unlock wakes the head.
					if _, err := holder.ForceUnlock(ctx); err != nil {
						t.Fatalf("ForceUnlock: %v", err)
					}
				}
				if err := <-done; err != nil {
					t.Fatalf("live waiter Lock: %v", err)
				}
				if err := live.Unlock(ctx); err != nil {
					t.Errorf("live Unlock: %v", err)
				}
				checkClean(t, rdb, name, time.Second, other, liveC)
			})
		}
	})
}

// ---------------------------------------------------------------------------
// Scenario 8: only the head is woken.

// TestFairLock_Unlock_wakesOnlyHead: with three waiters queued, each
// release publishes on the channel of the queue's head only.
func TestFairLock_Unlock_wakesOnlyHead(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		const n = 3
		name := backends.UniqueName(t)
		k := keysOf(name)
		c := newClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		var (
			wg       sync.WaitGroup
			errs     errList
			acquired = make(chan int, n)
			release  [n]chan struct{}
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		for i := range n {
			release[i] = make(chan struct{})
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Lock(ctx); err != nil {
					errs.add("waiter %d: Lock: %w", i, err)
					return
				}
				acquired <- i
				select {
				case <-release[i]:
				case <-ctx.Done():
				}
				if err := l.Unlock(context.Background()); err != nil {
					errs.add("waiter %d: Unlock: %w", i, err)
				}
			}()
			waitQueued(t, rdb, k, i+1)
		}
		fields := waitQueued(t, rdb, k, n)
		chans := make([]string, n)
		for i, f := range fields {
			chans[i] = k.waiterChannel(f)
		}
		subscribe := rdb.Subscribe
		if b.Cluster {
			// The default on a cluster is sharded pub/sub (as Redisson
			// 3.22+); the channels of one lock share its slot.
			subscribe = rdb.SSubscribe
		}
		ps := subscribe(ctx, chans...)
		defer ps.Close()
		for range n {
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatalf("subscribe: %v", err)
			}
		}
		var mu sync.Mutex
		counts := map[string]int{}
		msgs := ps.Channel()
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			for m := range msgs {
				mu.Lock()
				counts[m.Channel]++
				mu.Unlock()
			}
		}()
		snapshot := func() []int {
			mu.Lock()
			defer mu.Unlock()
			out := make([]int, n)
			for i, ch := range chans {
				out[i] = counts[ch]
			}
			return out
		}

		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		for i := range n {
			select {
			case got := <-acquired:
				if got != i {
					t.Errorf("waiter %d got the lock, want waiter %d", got, i)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("waiter %d did not get the lock within 5s", i)
			}
			time.Sleep(100 * time.Millisecond) // messages to others would have arrived by now
			// Messages only ever go to the head of the queue: the release
			// to the head, and, when the head takes the lock, "you are
			// next" to the new head. So waiter 0 has had the release, each
			// later waiter that got the lock has had both, the next in line
			// has been told it is next, and the rest nothing.
			want := make([]int, n)
			for j := 0; j <= i; j++ {
				want[j] = min(j, 1) + 1
			}
			if i+1 < n {
				want[i+1] = 1
			}
			if got := snapshot(); !slices.Equal(got, want) {
				t.Errorf("after %d releases, messages per waiter channel %v, want %v (only ever the head's)", i+1, got, want)
			}
			close(release[i])
		}
		wg.Wait()
		errs.report(t)
		_ = ps.Close()
		<-readDone
		checkClean(t, rdb, name, time.Second, c)
	})
}
