package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestLock_Done_beforeSuccessor (watchdog): the holder's connection goes through a
// loopback proxy that blackholes it at a random point of the renewal
// period; a waiter on its own direct connection is ready to take the lock
// as soon as Redis lets it go. In every trial the holder's Done must fire
// before the waiter holds the lock: the loss is reported a margin (1% of
// the lease + 2ms) before the lease runs out by the client's clock. Before
// that margin, 4 to 8 of 80 trials were late.
//
// One trial in four takes a fixed lease instead (LockLease, no cut): its
// Context must end before Redis lets the waiter in, too.
//
// A signal can only be as timely as the process lets its timers run: on a
// machine starved of CPU, a Go timer fires tens of milliseconds late, and
// no margin covers that (the package doc says so). Each trial therefore
// runs a canary timer due a margin before the lease's end in Redis (read
// with PTTL), and a canary that wakes every millisecond from the cut to
// the waiter's lock: a late trial during which either was more than half
// a margin late says the machine stalled, not the library; it is reported
// apart and run again, up to as many extra trials as the test has. The
// test fails on any other late trial, and when the extra trials run out
// before every trial could be judged.
//
// A cluster is left out: a proxy in front of one node cannot carry the
// cluster's redirects to the nodes' own addresses.
func TestLock_Done_beforeSuccessor(t *testing.T) {
	backends.ShortParallel(t)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		if b.Cluster {
			t.Skip("a single-address proxy cannot carry a cluster client")
		}
		const (
			parallel = 2
			lease    = 500 * time.Millisecond
		)
		trials := backends.Scale(80, 12) // -short: the quick loop
		waiters := backends.NewClient(t, rdb, lualock.Options{})
		type result struct {
			lead  time.Duration // how long before the waiter got the lock Done fired
			stall time.Duration // how late the canary timer fired
			err   error
		}
		margin := lease/100 + 2*time.Millisecond
		late, stalled, judged, minLead := 0, 0, 0, time.Duration(1<<62)
		// Rounds of trials: the first runs them all, each next one again
		// those that a stall left unjudged, while extra trials are left.
		for todo, extra := trials, trials; todo > 0; {
			results := make([]result, todo)
			var wg sync.WaitGroup
			sem := make(chan struct{}, parallel)
			for i := range todo {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					lead, stall, err := marginTrial(t, rdb, waiters, backends.UniqueName(t), lease, i%4 == 3)
					results[i] = result{lead, stall, err}
				}()
			}
			wg.Wait()
			again := 0
			for i, r := range results {
				if r.err != nil {
					t.Errorf("trial %d: %v", i, r.err)
					continue
				}
				if r.lead <= 0 {
					if r.stall > margin/2 {
						stalled++
						again++
						t.Logf("trial %d (fixed lease: %v): Done %v after the waiter got the lock, but a canary was %v late: the machine stalled", i, i%4 == 3, -r.lead, r.stall)
						continue
					}
					late++
					t.Logf("trial %d (fixed lease: %v): Done %v after the waiter got the lock (canaries at most %v late)", i, i%4 == 3, -r.lead, r.stall)
				}
				judged++
				minLead = min(minLead, r.lead)
			}
			todo = min(again, extra)
			extra -= todo
		}
		t.Logf("%d trials judged, lease %v, margin %v: %d with Done after the successor got the lock; %d more late during a stall of the machine (run again); smallest lead otherwise %v",
			judged, lease, margin, late, stalled, minLead)
		if late > 0 {
			t.Errorf("%d of %d trials: the holder's Done fired after the waiter held the lock (smallest lead %v)", late, judged, minLead)
		}
		if judged < trials {
			t.Errorf("%d of %d trials judged: the machine stalled past the margin in %d, more than the %d extra trials", judged, trials, stalled, trials)
		}
	})
}

// marginTrial runs one trial of TestLock_Done_beforeSuccessor on lock name:
// it returns how long before the waiter got the lock the holder's Done
// fired (negative when it fired after). With fixed, the holder takes a
// fixed lease (LockLease) instead and is not cut off: its Context must end
// before the lease in Redis does.
//
// It also returns how late a canary timer fired that was due a margin
// before the lease's end in Redis, or a canary that wakes every
// millisecond from the cut to the waiter's lock, whichever was later.
func marginTrial(t *testing.T, rdb redis.UniversalClient, waiters *lualock.Client, name string, lease time.Duration, fixed bool) (lead, stall time.Duration, err error) {
	ctx := context.Background()
	proxy, err := harness.StartProxy(rdb.(*redis.Client).Options().Addr)
	if err != nil {
		return 0, 0, err
	}
	defer proxy.Close()
	hrdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	defer hrdb.Close()
	hc, err := lualock.New(hrdb, lualock.Options{WatchdogLease: lease})
	if err != nil {
		return 0, 0, err
	}
	defer hc.Close()
	holder := hc.NewLock(name)
	lock, want := holder.Lock, lualock.ErrLockLost
	if fixed {
		lock = func(ctx context.Context) error { return holder.LockLease(ctx, lease) }
		want = lualock.ErrNotHeld
	}
	if err := lock(ctx); err != nil {
		return 0, 0, err
	}
	doneAt := make(chan time.Time, 1)
	go func() {
		<-holder.Done()
		doneAt <- time.Now()
	}()
	waiter := waiters.NewLock(name)
	type got struct {
		at  time.Time
		err error
	}
	watch := backends.StartCanary(t, time.Millisecond, nil)
	defer watch.Stop()
	acquired := make(chan got, 1)
	go func() {
		err := waiter.TryLock(ctx, 4*lease)
		acquired <- got{time.Now(), err}
	}()
	// Cut the holder off at a random point of its renewal period.
	if !fixed {
		time.Sleep(lease/10 + rand.N(lease/3))
		proxy.Blackhole()
		time.Sleep(20 * time.Millisecond) // a renewal on its way lands
	}
	// The canary: a timer due a margin before the lease ends in Redis.
	asked := time.Now()
	pttl, err := rdb.PTTL(ctx, name).Result()
	if err != nil {
		return 0, 0, err
	}
	due := asked.Add(pttl - (lease/100 + 2*time.Millisecond))
	canary := make(chan time.Duration, 1)
	ct := time.AfterFunc(time.Until(due), func() { canary <- time.Since(due) })
	defer ct.Stop()
	g := <-acquired
	if g.err != nil {
		return 0, 0, g.err
	}
	watch.Stop()
	select {
	case stall = <-canary:
	default:
		stall = time.Since(due) // not fired yet
	}
	stall = max(stall, watch.Late())
	defer waiter.Unlock(ctx) //nolint:errcheck // best effort
	select {
	case d := <-doneAt:
		if cause := context.Cause(holder.Context()); !errors.Is(cause, want) {
			return 0, 0, fmt.Errorf("the holder's cause is %v, want %v", cause, want)
		}
		return g.at.Sub(d), stall, nil
	case <-time.After(lease):
		return -lease, stall, nil // never fired: as late as can be
	}
}
