package fair_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 5: a dead waiter delays the queue by one wait budget at most.

// queueSampler reads the queue and the deadlines every few ms and records each
// deadline that lies beyond now + lease + budget × position (position
// 1-based in the queue).
type queueSampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	bad     []string
	samples int
}

func startSampler(rdb redis.UniversalClient, k fairKeys, lease, budget time.Duration) *queueSampler {
	s := &queueSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		const slack = 20 // ms: miniredis's clock lags real time by a pump tick
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			snap, err := takeSnapshot(context.Background(), rdb, k)
			now := time.Now().UnixMilli() // after the read: no score written later counts
			s.mu.Lock()
			if err != nil {
				s.bad = append(s.bad, "snapshot: "+err.Error())
			} else {
				s.samples++
				for i, f := range snap.queue {
					limit := now + lease.Milliseconds() + budget.Milliseconds()*int64(i+1) + slack
					if sc, ok := snap.scores[f]; ok && sc > limit {
						s.bad = append(s.bad, fmt.Sprintf("%s at position %d: deadline now%+dms, limit now%+dms",
							f, i+1, sc-now, limit-now))
					}
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *queueSampler) check(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		t.Errorf("the sampler read no sample")
	}
	for i, b := range s.bad {
		if i == 5 {
			t.Errorf("... %d more", len(s.bad)-5)
			break
		}
		t.Errorf("deadline too far: %s", b)
	}
}

// TestFairLock_Lock_deadWaiterBoundedDelay: a waiter whose process died
// while it waited (a fake owner that queued through the script and never
// asks again) delays the live waiter behind it by its wait budget (500ms)
// at most once the lock is free, whether the holder's lease runs out or the
// holder unlocks early. Meanwhile no deadline in the queue ever lies beyond
// now + lease + budget × position.
//
// The delay is read on the client's clock, after the live waiter learnt
// the dead waiter's deadline (a reply), its timer fired, its acquisition's
// reply came and its goroutine ran: the 150ms slack grows by three
// wake-ups and two round trips as a canary measured them in the same test
// (on an idle machine a few milliseconds in all), so that a machine
// starved of CPU does not pass for a waiter delayed past the budget.
func TestFairLock_Lock_deadWaiterBoundedDelay(t *testing.T) {
	t.Parallel()
	const (
		budget = 500 * time.Millisecond
		slack  = 150 * time.Millisecond
	)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		for _, early := range []bool{false, true} {
			sub := "leaseRunsOut"
			if early {
				sub = "unlockedEarly"
			}
			t.Run(sub, func(t *testing.T) {
				lease := 600 * time.Millisecond // the holder's fixed lease
				if early {
					lease = 2 * time.Second // the holder's watchdog lease
				}
				name := backends.UniqueName(t)
				k := keysOf(name)
				// Every client of one fair lock uses the same budget.
				holderC := newClient(t, rdb, lualock.Options{WatchdogLease: lease, FairWait: budget})
				liveC := newClient(t, rdb, lualock.Options{FairWait: budget})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
				samp := startSampler(rdb, k, lease, budget)
				defer func() {
					if samp != nil {
						samp.check(t)
					}
				}()

				holder := holderC.NewFairLock(name)
				var err error
				if early {
					err = holder.Lock(ctx)
				} else {
					err = holder.LockLease(ctx, lease)
				}
				if err != nil {
					t.Fatalf("holder: %v", err)
				}
				leaseEnd := time.Now().Add(lease)
				if r, err := fairAcquire(ctx, rdb, k, "dead:1", lease.Milliseconds(), budget.Milliseconds()); err != nil || r == nil {
					t.Fatalf("dead waiter acquire = %v, %v; want a wait", ptrString(r), err)
				}
				live := liveC.NewFairLock(name)
				got := make(chan time.Time, 1)
				var lockErr error
				var wg sync.WaitGroup
				wg.Add(1)
				t.Cleanup(func() { cancel(); wg.Wait() })
				go func() {
					defer wg.Done()
					if lockErr = live.Lock(ctx); lockErr == nil {
						got <- time.Now()
					}
					close(got)
				}()
				waitQueued(t, rdb, k, 2)
				time.Sleep(100 * time.Millisecond)
				freed := leaseEnd
				if early {
					freed = time.Now()
					if err := holder.Unlock(ctx); err != nil {
						t.Fatalf("holder Unlock: %v", err)
					}
				}
				at, ok := <-got
				wg.Wait()
				if !ok {
					t.Fatalf("live waiter Lock: %v", lockErr)
				}
				delay := at.Sub(freed)
				load := canary.Allowance(3, 2)
				t.Logf("live waiter got the lock %v after it was freed; %v", delay.Round(time.Millisecond), canary)
				if delay > budget+slack+load {
					t.Errorf("live waiter got the lock %v after the lock was freed, want at most the dead waiter's budget %v (+%v slack, +%v for the load; %v)",
						delay.Round(time.Millisecond), budget, slack, load, canary)
				}
				if err := live.Unlock(ctx); err != nil {
					t.Errorf("live Unlock: %v", err)
				}
				samp.check(t)
				samp = nil
				checkClean(t, rdb, name, time.Second, holderC, liveC)
			})
		}
	})
}

// TestFairLock_Lock_shortBudgetKeepsOrder: with a short wait budget
// (FairWait 500ms, which Options allows), live waiters keep their places:
// none is purged and queued again at the back while it waits, and they get
// the lock in their order of arrival (the runtime's promise: live waiters
// are never purged, Redisson #3004).
func TestFairLock_Lock_shortBudgetKeepsOrder(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		const (
			n      = 3
			budget = 500 * time.Millisecond
			hold   = 2 * time.Second
		)
		name := backends.UniqueName(t)
		k := keysOf(name)
		hc := newClient(t, rdb, lualock.Options{})
		c := newClient(t, rdb, lualock.Options{FairWait: budget})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder := hc.NewFairLock(name)
		if err := holder.LockLease(ctx, time.Second); err != nil {
			t.Fatalf("holder LockLease: %v", err)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			order []int
			errs  errList
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		var fields []string
		for i := range n {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Lock(ctx); err != nil {
					errs.add("waiter %d: Lock: %w", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(hold)
				if err := l.Unlock(context.Background()); err != nil {
					errs.add("waiter %d: Unlock: %w", i, err)
				}
			}()
			fields = waitQueued(t, rdb, k, i+1)
		}
		// Sample the queue: it must always be the arrivals in their order,
		// some gone from the front.
		stop, sampled := make(chan struct{}), make(chan []string, 1)
		go func() {
			var bad []string
			defer func() { sampled <- bad }()
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				q, err := rdb.LRange(context.Background(), k.queue, 0, -1).Result()
				if err != nil {
					bad = append(bad, err.Error())
					continue
				}
				if len(q) > len(fields) || !slices.Equal(q, fields[len(fields)-len(q):]) {
					bad = append(bad, fmt.Sprintf("queue %q, arrivals %q", q, fields))
				}
			}
		}()
		time.Sleep(200 * time.Millisecond)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		wg.Wait()
		close(stop)
		if bad := <-sampled; len(bad) > 0 {
			t.Errorf("a live waiter lost its place in %d samples, first: %s", len(bad), bad[0])
		}
		errs.report(t)
		if want := []int{0, 1, 2}; !slices.Equal(order, want) {
			t.Errorf("acquisition order %v, want the order of arrival %v", order, want)
		}
		checkClean(t, rdb, name, time.Second, hc, c)
	})
}
